"""The simulated cluster components together: node lifecycle, JobSet and Job controllers, scheduler,
kubelet and pod GC on one clock.

`Components(api).start()` follows the store; `settle()` runs them until nothing changes (tests),
`advance(seconds)` moves a `ManualClock` in steps so timed transitions happen in order, and
`run(interval)` is the real-time loop `tasq dev` uses. All run on the API server's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from devcluster.server.apiserver import ApiServer
from devcluster.simulated.jobs import JobController
from devcluster.simulated.jobsets import JobSetController
from devcluster.simulated.kubelet import EVICTION_SECONDS, Kubelet
from devcluster.simulated.nodelifecycle import NodeLifecycle
from devcluster.simulated.podgc import PodGC
from devcluster.simulated.scheduling import Scheduler

ROUND_INTERVAL = 0.2  # seconds between real-time rounds (`tasq dev`)


class ManualClock:
    """A clock tests move by hand; pass it as `DevCluster(now=clock)` so the API server shares it."""

    def __init__(self, start: datetime | None = None) -> None:
        self.moment = start or datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, seconds: float) -> None:
        self.moment += timedelta(seconds=seconds)


class SettleError(Exception):
    """The components kept writing for `rounds` rounds: a feedback loop (a bug), not an outcome."""

    def __init__(self, rounds: int) -> None:
        super().__init__(f"components still busy after {rounds} rounds")
        self.rounds = rounds


class Components:
    """Node lifecycle -> JobSet controller -> Job controller -> scheduler -> kubelet -> pod GC, each cycle in
    that order (the order a real cluster's watches would usually deliver work in). The JobSet controller
    has nothing to do until the JobSet CRD (`jobsets.jobset_crd()`) is created and JobSets with it."""

    def __init__(self, api: ApiServer, *, eviction_seconds: float = EVICTION_SECONDS) -> None:
        self.api = api
        self.jobsets = JobSetController(api)
        self.jobs = JobController(api)
        self.scheduler = Scheduler(api)
        self.kubelet = Kubelet(api, eviction_seconds)
        self.podgc = PodGC(api)
        self.nodes = NodeLifecycle(api)
        # the order of every round
        self._cycle = (self.nodes, self.jobsets, self.jobs, self.scheduler, self.kubelet, self.podgc)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> Components:
        for component in self._cycle:
            component.start()
        return self

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for component in self._cycle:
            component.close()

    async def step(self) -> int:
        """One round of every component; the number of writes they made."""
        writes = 0
        for component in self._cycle:
            writes += await component.sync()
        return writes

    async def settle(self, rounds: int = 200) -> int:
        """Run rounds until one makes no write with nothing queued, or two in a row make none (what is
        queued keeps failing, e.g. under an injected fault); total writes."""
        total = 0
        idle = 0
        for _ in range(rounds):
            writes = await self.step()
            total += writes
            idle = idle + 1 if writes == 0 else 0
            if idle >= 2 or (idle and not any(component.has_work for component in self._cycle)):
                return total
        raise SettleError(rounds)

    async def advance(self, clock: ManualClock, seconds: float) -> int:
        """Move simulated time by `seconds`, stopping at each component's deadline on the way and settling."""
        target = clock.moment + timedelta(seconds=seconds)
        total = await self.settle()
        while True:
            due = min((d for d in (c.next_deadline(after=clock.moment) for c in self._cycle) if d is not None),
                      default=None)
            if due is None or due > target:
                break
            clock.moment = due
            total += await self.settle()
        clock.moment = target
        return total + await self.settle()

    async def run(self, interval: float = ROUND_INTERVAL) -> None:
        """Real time: a round every `interval` seconds until cancelled (`tasq dev`)."""
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:  # a component bug must not stop the cluster; the next round retries
                logging.getLogger(__name__).exception("devcluster components round failed")
            await asyncio.sleep(interval)

    def run_in_background(self, interval: float = ROUND_INTERVAL) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run(interval))
        return self._task
