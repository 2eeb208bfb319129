"""The TopologyUngater: releases an admitted Workload's gated pods into their topology slices.

The operator's EventRouter calls `notify(namespace, workload)` on every change of a Workload or of
one of its pods; `run()` gathers those for
`batch_seconds` per Workload, asks `source` for an `UngatingInput`, plans with the pure
`plan_ungating` and sends one strategic-merge patch per pod (remove only our gate, add the slice's
nodeSelector) with at most `parallelism` in flight, as prepared JSON bytes through the door's
`KubeApi.patch_raw`. Only runs while the leader gate is set. Built by controller.kube.operating.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from controller.api import constants as c
from controller.core.ungating import Ungate, UngatingInput, plan_ungating
from controller.kube.api import PODS, ApiError
from controller.kube.metrics import Metrics
from controller.kube.requeuing import log_failure

log = logging.getLogger(__name__)

WorkloadKey = tuple[str, str]  # (namespace, workload name)
Source = Callable[[str, str], UngatingInput | None]

def ungate_patch(ungate: Ungate) -> dict[str, Any]:
    """The one patch that releases a pod: our gate removed (other gates kept), the slice's labels added.

    The uid makes the patch apply only to the pod that was planned, not a namesake created since.
    """
    return {
        "metadata": {"uid": ungate.uid},
        "spec": {
            "schedulingGates": [{"name": c.SCHEDULING_GATE_TOPOLOGY, "$patch": "delete"}],
            "nodeSelector": dict(ungate.node_selector),
        },
    }


class PatchBodies:
    """`ungate_patch` as JSON bytes, the slice's part encoded once per slice and reused for its pods.

    Equal to `json.dumps(ungate_patch(u))` byte for byte (tests check it); per pod only the uid is encoded.
    """

    def __init__(self) -> None:
        self._spec: dict[tuple[tuple[str, str], ...], bytes] = {}

    def body(self, ungate: Ungate) -> bytes:
        key = tuple(ungate.node_selector.items())
        spec = self._spec.get(key)
        if spec is None:
            whole = json.dumps(ungate_patch(ungate)).encode()
            spec = self._spec[key] = whole[whole.index(b', "spec": '):]
        return b'{"metadata": {"uid": ' + json.dumps(ungate.uid).encode() + b"}" + spec


class PodPatching(Protocol):
    """Where ungate patches go: the door (`controller.kube.api.KubeApi`) in the operator, a fake in unit tests."""

    async def refresh_raw_headers(self) -> None:
        """Called once before each batch of patches (credentials may have rotated)."""

    async def patch_raw(self, resource: tuple[str, str], namespace: str | None, name: str, body: bytes) -> None:
        """One strategic-merge PATCH of a pod; ApiError when it fails (a dropped connection too)."""

    async def close_raw(self) -> None:
        """Release the patch session (not the ApiClient's connections); patching may resume after."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class TopologyUngater:
    """Batches pod events per Workload and ungates its pods; see the module docstring.

    `expectations[(namespace, workload)][uid]` holds the node selector of each pod patched but not
    yet seen ungated in the cache: the planner counts those slots as taken, so a lagging cache
    never causes a second ungate. An entry goes when the cache shows the pod ungated, terminated or
    gone, or when its patch fails. `patches` and `failures` count the API calls made (benchmarks).
    """

    def __init__(self, api: PodPatching, source: Source, metrics: Metrics | None = None,
                 batch_seconds: float = 1.0, parallelism: int = 16, *, leader: asyncio.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], datetime] = _utc_now) -> None:
        self.patcher = api
        self.source, self.metrics = source, metrics
        self.batch_seconds = batch_seconds
        self.leader = leader
        self.clock, self.wall_clock = clock, wall_clock
        self.expectations: dict[WorkloadKey, dict[str, Mapping[str, str]]] = {}
        self.patches = 0
        self.failures = 0
        self._semaphore = asyncio.Semaphore(parallelism)
        self._due: dict[WorkloadKey, float] = {}
        self._syncing: set[WorkloadKey] = set()
        self._heap: list[tuple[float, WorkloadKey]] = []
        self._wake = asyncio.Event()
        self._active = asyncio.Event()
        self._active.set()

    def notify(self, namespace: str, workload: str) -> None:
        """Something about this Workload or its pods changed: look at it once the batch window closes."""
        key = (namespace, workload)
        if key in self._due:
            return
        due = self.clock() + self.batch_seconds
        self._due[key] = due
        heapq.heappush(self._heap, (due, key))
        self._wake.set()

    def pause(self) -> None:
        """Stop ungating (notifications are still gathered) until `resume()`."""
        self._active.clear()

    def resume(self) -> None:
        self._active.set()

    async def run(self) -> None:
        """Until cancelled: wait for due Workloads (and the leader gate) and start a sync for each.

        Syncs of different Workloads overlap (the semaphore bounds their patches together); a
        Workload whose previous sync is still running is looked at again one batch window later.
        """
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                await self._wait_until_allowed()
                for key in self._pop_due():
                    if key in self._syncing:
                        self.notify(*key)
                        continue
                    task = asyncio.create_task(self._sync_logged(key))
                    running.add(task)
                    task.add_done_callback(running.discard)
                self._wake.clear()
                timeout = self._heap[0][0] - self.clock() if self._heap else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await self.close()

    async def close(self) -> None:
        """Close the patcher's session (`run` does on its way out; a caller of `sync` alone calls it)."""
        await self.patcher.close_raw()

    async def _sync_logged(self, key: WorkloadKey) -> None:
        """`sync` for `run`: an unexpected error is logged and the Workload retried, never fatal."""
        self._syncing.add(key)
        try:
            await self.sync(*key)
        except Exception as e:  # an API failure is a warning, a bug gets its traceback (requeuing)
            log_failure(log, f"ungating Workload {key[0]}/{key[1]}", e, self.batch_seconds)
            self.notify(*key)
        finally:
            self._syncing.discard(key)

    async def _wait_until_allowed(self) -> None:
        """Return once not paused and (with a leader gate) leading; either may flip while waiting."""
        while not (self._active.is_set() and (self.leader is None or self.leader.is_set())):
            await self._active.wait()
            if self.leader is not None:
                await self.leader.wait()

    def _pop_due(self) -> list[WorkloadKey]:
        """The Workloads whose batch window has closed, removed from the queue."""
        now = self.clock()
        keys = []
        while self._heap and self._heap[0][0] <= now:
            _, key = heapq.heappop(self._heap)
            self._due.pop(key, None)
            keys.append(key)
        return keys

    async def sync(self, namespace: str, workload: str) -> int:
        """Plan and patch one Workload now; returns how many pods were ungated."""
        key = (namespace, workload)
        inp = self.source(namespace, workload)
        if inp is None:
            self.expectations.pop(key, None)
            return 0
        expected = self._observe(key, inp)
        plan = plan_ungating(inp, expected)
        if not plan.ungate:
            if not expected:
                del self.expectations[key]  # nothing in flight: keep no entry per Workload ever seen
            return 0
        created = {p.uid: p.created for p in inp.pods}
        for u in plan.ungate:
            expected[u.uid] = u.node_selector
        bodies = PatchBodies()
        await self.patcher.refresh_raw_headers()
        results = await asyncio.gather(*(self._patch(namespace, key, u, created[u.uid], bodies.body(u))
                                         for u in plan.ungate))
        if any(r is None for r in results):
            self.notify(namespace, workload)
        return sum(1 for r in results if r)

    def _observe(self, key: WorkloadKey, inp: UngatingInput) -> dict[str, Mapping[str, str]]:
        """Drop the expectations the cache has caught up with (pod ungated, terminated or gone)."""
        expected = self.expectations.setdefault(key, {})
        if expected:
            still_gated = {p.uid for p in inp.pods if p.gated and not p.terminated}
            for uid in [u for u in expected if u not in still_gated]:
                del expected[uid]
        return expected

    async def _patch(self, namespace: str, key: WorkloadKey, u: Ungate, created: str, body: bytes) -> bool | None:
        """Send one ungate patch. True: sent; False: failed for good (404, 422...); None: worth a retry
        (a conflict, or a transient error: throttled, server trouble, no answer).

        A failed patch changed nothing on the pod (one patch is atomic), so its expectation goes.
        """
        async with self._semaphore:
            if self.leader is not None and not self.leader.is_set():
                # Leadership was lost during the batch: the new leader plans this pod itself.
                self.expectations.get(key, {}).pop(u.uid, None)
                return False
            self.patches += 1
            try:
                await self.patcher.patch_raw(PODS, namespace, u.pod, body)
            except ApiError as e:
                return self._failed(key, u, e)
        if self.metrics is not None:
            self.metrics.gate_removed(self._age_seconds(created))
        return True

    def _failed(self, key: WorkloadKey, u: Ungate, error: ApiError) -> bool | None:
        self.failures += 1
        self.expectations.get(key, {}).pop(u.uid, None)
        retriable = error.conflict or error.transient  # the same plan may succeed on a fresh look
        log.log(logging.INFO if retriable else logging.WARNING,
                "ungating pod %s/%s of Workload %s failed: %s", key[0], u.pod, key[1], error)
        return None if retriable else False

    def _age_seconds(self, created: str) -> float:
        try:
            born = datetime.fromisoformat(created)
        except ValueError:
            return 0.0
        return (self.wall_clock() - born).total_seconds()
