"""The admission loop: on a change, debounce, run one admission cycle over the cache, write results.

Only while leading. A cycle runs the pure core's rounds (`rounds`) on `ClusterCache.admission_state`
(so admissions are reserved in the cache at once; a long cycle lets the event loop run between
rounds), then writes every decision as a Workload status
patch (resourceVersion-checked, retried; a reason the status already holds is not written again),
posts Events (Admitted; a cause the scheduling found once per new cause, none for a Workload that
cannot be queued, as Kueue), starts the eviction of every victim of a `Preempt` decision and of every admitted Workload
of a queue stopped with HoldAndDrain (controller.kube.evicting; the Job reconciler carries it on),
requeues what such a drain released once its queue runs again, and refreshes the ClusterQueue,
LocalQueue and Cohort statuses. One cycle at a time; its writes run beside the next cycles (at most
one in flight per Workload), each written Workload handed to the operator's EventRouter. A failed
cycle or write is tried again with backoff (controller.kube.requeuing); an admission whose write failed is given back in the cache before the
next cycle, and one whose answer was lost is read back first. Started by controller.kube.operating.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Coroutine, Iterable
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.workload import Admission, Workload, admission_of
from controller.cache.cluster import ClusterCache, WorkloadEntry
from controller.core.admission.conditions import (
    DRAIN_REASONS,
    is_evicted,
    is_terminating,
    mark_admitted,
    mark_pending,
    mark_queue_restarted,
    quota_reserved_message,
    released_by_drain,
    says_pending,
)
from controller.core.admission.cycle import AdmissionState, Admit, Decision, Pending, Preempt, explain, rounds
from controller.core.admission.draining import Drain, QueueStops, Restart, StandingWorkload, drains, restarts
from controller.core.admission.pods_ready import (
    holds_admission,
    mark_requeued,
    readiness_deadline,
    requeue_at,
    requeue_due,
)
from controller.core.admission.queue_status import (
    QueuedWorkload,
    QueueInputs,
    cohort_statuses,
    queue_statuses,
    stamp_conditions,
)
from controller.core.admission.workloads import workload_info
from controller.kube.api import TRANSPORT_ERRORS, WORKLOADS, ApiError, KubeApi
from controller.kube.arrivals import Arrivals
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor, Preemption
from controller.kube.finalizing import write_finalizers
from controller.kube.metrics import Metrics, fragmentation, priority_class_of, queue_figures, queued_seconds
from controller.kube.requeuing import Backoff, log_failure
from controller.kube.routing import Applied
from controller.kube.statuses import write_cohort_status, write_queue_status, write_workload_status

log = logging.getLogger(__name__)

_CYCLE = "<cycle>"
"""The Backoff key of the cycle itself (no Workload key looks like it)."""
DEBOUNCE_S = 0.05
"""While cycles keep coming, changes arriving within this window after a cycle are taken by the next
one; a change after a quiet spell is decided at once."""
QUEUE_STATUS_INTERVAL_S = 1.0
"""The shortest time between two writes of the queue statuses while admissions go on."""
PARALLEL_WRITES = 128
"""Status writes in flight at once: in a burst, a busy API server answers each in 100-300 ms, and
the Admitted writes must keep pace with the Workloads' creation (controller.kube.job_reconciling runs as many reconciles at once)."""
STARTED_WRITES = 4 * PARALLEL_WRITES
"""Status writes that exist as tasks at once (each waits for one of `PARALLEL_WRITES` slots)."""
STEP_BUDGET_S = 0.02
"""How long a cycle holds the event loop before it lets it run (between two rounds, two reasons)."""
ADMITTED_AT_KEPT = 20_000
"""Admission times kept for benchmarks (`AdmissionLoop.admitted_at`), the oldest forgotten first:
one per admission ever written would grow for as long as the operator runs."""


class AdmissionLoop:
    """See the module docstring. `notify()` on a change that concerns admission (the operator's
    EventRouter); `run()` until cancelled."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder,
                 applied: Applied | None = None, debounce_s: float = DEBOUNCE_S,
                 metrics: Metrics | None = None, queue_status_interval_s: float = QUEUE_STATUS_INTERVAL_S,
                 evictor: Evictor | None = None, pods_ready: WaitForPodsReady | None = None,
                 arrivals: Arrivals | None = None) -> None:
        self.cache = cache
        self.arrivals = arrivals
        """While Workloads keep arriving, pending statuses wait for a lull (controller.kube.arrivals);
        None: each is written as it is decided."""
        self._explain_later: dict[str, Pending] = {}
        """Why each waiting Workload waits, as the latest cycle said, kept until the arrivals' lull."""
        self._explainer: asyncio.Task[None] | None = None
        self.pods_ready = pods_ready
        """waitForPodsReady's settings (None: off): each cycle first evicts the Workloads whose pods
        were not ready in time and ends the backoffs that are over (`_sweep_pods_ready`)."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self.queue_status_interval_s = queue_status_interval_s
        self.metrics = metrics
        self.api = api
        self.recorder = recorder
        self.applied: Applied = applied if applied is not None else cache.upsert
        """Where every Workload status this loop wrote goes (the operator's `EventRouter.applied`:
        into the cache, waking the loops it concerns); alone, just into the cache."""
        self.evictor = evictor if evictor is not None else Evictor(cache, api, recorder, self.applied, metrics)
        """Writes the eviction of each victim of a Preempt decision."""
        self.debounce_s = debounce_s
        self.cycles = 0
        self.admitted_at: dict[str, float] = {}
        """Workload key -> monotonic time its admission was written (benchmarks read it; the latest
        `ADMITTED_AT_KEPT`)."""
        self._wake = asyncio.Event()
        self._last_cause: dict[str, str] = {}
        self._queue_status: dict[tuple[bool, str], dict[str, Any]] = {}
        self._cohort_status: dict[str, dict[str, Any]] = {}
        self._seen_generation = -1
        self._slots = asyncio.Semaphore(PARALLEL_WRITES)
        self._in_flight: set[asyncio.Task[str]] = set()
        self._unstarted: deque[tuple[str, Coroutine[Any, Any, str]]] = deque()
        self._writing: set[str] = set()
        """Workloads with a status write in flight (no second one is started for them meanwhile)."""
        self._skipped: set[str] = set()
        self._queues_due: dict[str, str] | None = None
        self._queue_writer: asyncio.Task[None] | None = None
        self._backoff = Backoff()
        """Consecutive failures per Workload key (its status write) and of the cycle itself."""
        self._stretch = 0.0
        """When the cycle last took the event loop (see `_give_turn`)."""
        self._stops_seen: tuple[tuple[str, str], ...] | None = None
        """The stopped queues at the last full stop-policy sweep (None: sweep all at the next cycle)."""
        self._drained: set[str] = set()
        """Workloads a drain evicted or released and not requeued yet (`_sweep_stopped_queues`)."""

    def notify(self) -> None:
        self._wake.set()

    def _again(self) -> None:
        """A cycle even without a change (what failed, or a newer reason, is decided again)."""
        self._seen_generation = -1
        self._wake.set()

    def _again_later(self, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self._again)

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """Cycle after every burst of changes, while `leading` is set (always without one). A change
        after a quiet spell (no cycle ended within `debounce_s`) is decided at once; while changes
        keep coming, those within `debounce_s` are taken by one cycle (a burst stays batched)."""
        self._wake.set()
        ended = -math.inf
        while True:
            await self._wake.wait()
            if leading is not None and not leading.is_set():
                await leading.wait()
            if time.monotonic() - ended < self.debounce_s:
                await asyncio.sleep(self.debounce_s)
            self._wake.clear()
            if self.cache.generation == self._seen_generation:
                continue
            self._seen_generation = self.cache.generation
            try:
                await self.cycle()
            except Exception as e:  # a bug in one cycle must not stop admission for good
                delay = self._backoff.failed(_CYCLE)
                log_failure(log, "admission cycle", e, delay)
                self._again_later(delay)
            else:
                self._backoff.succeeded(_CYCLE)
            ended = time.monotonic()

    async def cycle(self) -> None:
        """Phases: decide (the pure core's rounds, admissions recorded in the cache as they come),
        say why the others wait, write statuses."""
        self.cycles += 1
        started = self._stretch = time.perf_counter()
        now = datetime.now(UTC)
        self._sweep_stopped_queues()
        blocked = self._sweep_pods_ready(now) if self.pods_ready is not None else None
        state = self.cache.admission_state(now.timestamp())
        state.now = now.timestamp()
        built = time.perf_counter() - started
        decisions: list[Decision] = []
        busy = 0.0
        if blocked is not None:  # blockAdmission: nothing is admitted until that Workload's pods are ready
            log.debug("admission blocked: workload %s is admitted and its pods are not all ready yet", blocked)
        else:
            decisions, busy = await self._decide(state, one=self.pods_ready is not None
                                                 and self.pods_ready.block_admission)
        admits = [d for d in decisions if isinstance(d, Admit)]
        if self.metrics is not None and decisions:
            # The cycle decides its heads in one pass: each attempt is charged its share.
            share = (built + busy) / len(decisions)
            for decision in decisions:
                self.metrics.admission_attempted(
                    c.ADMISSION_RESULT_SUCCESS if isinstance(decision, Admit) else c.ADMISSION_RESULT_INADMISSIBLE,
                    share)
        waiting_keys = state.waiting()
        current = self._current(state) and blocked is None
        if not current and blocked is None:  # the next cycle decides the rest, and says why, on the rebuilt snapshot
            self._again()
        pendings = await self._pending(state, waiting_keys) if current else []
        for admit in admits:
            self._start_write(admit.key, self._admission_written(admit))
            await self._give_turn()
        for preempt in (d for d in decisions if isinstance(d, Preempt)):
            for victim in preempt.victims:
                if victim.key not in self._writing:  # else a cycle after that write decides again
                    self._start_write(victim.key, self._eviction_written(Preemption(
                        victim.key, preempt.key, preempt.cluster_queue, victim.reason)))
        if current:
            await self._explain(pendings)
        waiting = {key: q for key in waiting_keys if (q := state.queue_of.get(key)) is not None}
        self._queues_due = waiting
        if self._queue_writer is None or self._queue_writer.done():
            self._queue_writer = asyncio.create_task(self._write_queues_while_due())

    def _sweep_stopped_queues(self) -> None:
        """Stop policies' phase before each cycle (controller.core.admission.draining): start the
        eviction (`Evictor.drain`) of every admitted Workload of a queue stopped with HoldAndDrain,
        and the Requeued=True write of every Workload a drain released whose queue runs again. Every
        Workload is looked at while some queue drains, after a queue stopped or ran again, and at the
        first cycle; otherwise only those a drain evicted or released (`_drained`), so a cluster
        with no stopped queue pays nothing per Workload."""
        stops = QueueStops.of(self.cache.local_queues, self.cache.cluster_queues)
        seen = stops.fingerprint()
        if stops.draining or seen != self._stops_seen:
            self._stops_seen = seen
            keys: list[str] | set[str] = list(self.cache.workloads)
        elif not self._drained:
            return
        else:
            keys = set(self._drained)
        standing = []
        for key in keys:
            entry = self.cache.workloads.get(key)
            drained = entry is not None and not entry.finished and _drained(entry)
            if drained:
                self._drained.add(key)
            else:
                self._drained.discard(key)
            if entry is not None and (drained or entry.admission is not None):
                standing.append(_standing(entry))
        for drain in drains(standing, stops):
            if drain.key not in self._writing:  # else a cycle after that write decides again
                self._start_write(drain.key, self._drain_written(drain))
        for restart in restarts(standing, stops):
            if restart.key not in self._writing:
                self._start_write(restart.key, self._restart_written(restart))

    async def _drain_written(self, drain: Drain) -> str:
        """Write one drain's eviction (`Evictor.drain`); a failure is decided again after a backoff."""
        async with self._slots:
            try:
                wrote = await self.evictor.drain(drain)
            except Exception as e:  # refused, no answer, or a bug: decided again later
                self._stops_seen = None
                delay = self._backoff.failed(drain.key)
                log_failure(log, f"evicting {drain.key} ({drain.reason})", e, delay)
                self._again_later(delay)
                return drain.key
        self._backoff.succeeded(drain.key)
        if wrote:
            self._drained.add(drain.key)
        return drain.key

    async def _restart_written(self, restart: Restart) -> str:
        """Write Requeued=True for a Workload a drain released (`mark_queue_restarted`); a failure is
        written again after a backoff."""
        entry = self.cache.workloads.get(restart.key)
        if entry is None:
            return restart.key
        now = datetime.now(UTC)
        async with self._slots:
            try:
                written = await write_workload_status(
                    self.api, entry.obj, lambda model: mark_queue_restarted(model, restart.reason, restart.message, now))
            except Exception as e:  # refused, no answer, or a bug: written again later
                delay = self._backoff.failed(restart.key)
                log_failure(log, f"requeueing {restart.key} ({restart.reason})", e, delay)
                self._again_later(delay)
                return restart.key
        self._backoff.succeeded(restart.key)
        if written is not None:
            self.applied(c.KIND_WORKLOAD, written)
            log.info("workload %s requeued: %s", restart.key, restart.message)
        return restart.key

    def _sweep_pods_ready(self, now: datetime) -> str | None:
        """waitForPodsReady's phase before each cycle, over the cache: start the timeout eviction
        (`Evictor.time_out`) of every admitted Workload past its readiness deadline and the
        Requeued write (`mark_requeued`) of every waiting one whose backoff ended or that was
        reactivated; then one timer for the nearest deadline or requeueAt still ahead (no polling).
        Returns a Workload that blocks admission under `blockAdmission` (admitted or being admitted,
        pods not all ready), else None."""
        settings = self.pods_ready
        assert settings is not None
        at = now.timestamp()
        nearest = math.inf
        blocker = None
        for key, entry in self.cache.workloads.items():
            wl = entry.obj
            deadline = readiness_deadline(wl, settings)
            if deadline is not None and deadline.at <= at:
                if key not in self._writing:
                    self._start_write(key, self._timed_out(entry, settings))
            elif deadline is not None:
                nearest = min(nearest, deadline.at)
            if entry.fit is None and not entry.finished:
                requeue = requeue_at(wl)
                if requeue is not None and requeue > at:
                    nearest = min(nearest, requeue)
                elif key not in self._writing and requeue_due(wl, at) is not None:
                    self._start_write(key, self._requeued(entry))
            elif blocker is None and entry.fit is not None and (holds_admission(wl) or not wl.is_admitted) \
                    and not entry.finished and not is_evicted(wl) and entry.evicting_for is None:
                blocker = key
        self._arm_timer(nearest, at)
        return blocker if settings.block_admission else None

    def _arm_timer(self, when: float, now: float) -> None:
        """One timer, for the nearest waitForPodsReady moment (`when`, epoch seconds), replaced only
        by a nearer one; it runs a cycle. Timestamps are whole seconds: a second is added so the
        cycle it wakes finds the moment passed."""
        if self._timer is not None and (self._timer_at <= now or when < self._timer_at):
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        if when == math.inf or self._timer is not None:
            return
        self._timer_at = when
        self._timer = asyncio.get_running_loop().call_later(max(when - now, 0.0) + 1.0, self._timer_rang)

    def _timer_rang(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._again()

    async def _timed_out(self, entry: WorkloadEntry, settings: WaitForPodsReady) -> str:
        """Write one PodsReady timeout (`Evictor.time_out`); a failure is tried again after a backoff."""
        key = entry.info.key
        async with self._slots:
            try:
                await self.evictor.time_out(entry, settings)
            except Exception as e:  # refused, no answer, or a bug: decided again later
                delay = self._backoff.failed(key)
                log_failure(log, f"evicting {key} (PodsReady timeout)", e, delay)
                self._again_later(delay)
                return key
        self._backoff.succeeded(key)
        return key

    async def _requeued(self, entry: WorkloadEntry) -> str:
        """Write Requeued=True (BackoffFinished or Reactivated) and clear requeueAt (`mark_requeued`)."""
        key = entry.info.key
        now = datetime.now(UTC)
        async with self._slots:
            try:
                written = await write_workload_status(self.api, entry.obj, lambda model: mark_requeued(model, now))
            except Exception as e:  # refused, no answer, or a bug: written again later
                delay = self._backoff.failed(key)
                log_failure(log, f"requeueing {key}", e, delay)
                self._again_later(delay)
                return key
        self._backoff.succeeded(key)
        if written is not None:
            self.applied(c.KIND_WORKLOAD, written)
        return key

    async def _decide(self, state: AdmissionState, one: bool = False) -> tuple[list[Decision], float]:
        """Phase: the cycle's rounds, each round's admissions recorded in the cache before anything
        else runs (a watch event for them then finds them held). Between rounds, once
        `STEP_BUDGET_S` has gone by, the event loop gets a turn: a cycle over thousands of waiting
        Workloads takes seconds. The state shares the cache's Usage and ledger, so what comes in
        meanwhile is seen by the next round; an admission whose Workload was deleted or finished
        meanwhile is given back at once. With `one` (blockAdmission) the first admission ends the
        cycle: any other admission of its round is given back. Returns the decisions and the seconds
        spent deciding."""
        decisions: list[Decision] = []
        started, paused = time.perf_counter(), 0.0
        admitted = False
        for step in rounds(state):
            for decision in step:
                if isinstance(decision, Admit):
                    entry = self.cache.workloads.get(decision.key)
                    if entry is None or entry.finished or (one and admitted):
                        self.cache.forget_admission(decision.key)
                        continue
                    admitted = True
                    self.cache.record_admission(decision.key, state.admitted[decision.key])
                elif isinstance(decision, Preempt):
                    for victim in decision.victims:  # claimed until released, even before the write lands
                        self.cache.record_eviction(victim.key, decision.key)
                decisions.append(decision)
            before = time.perf_counter()
            if one and admitted:
                break
            if await self._give_turn() and not self._current(state):
                break
            paused += time.perf_counter() - before
        return decisions, time.perf_counter() - started - paused

    def _current(self, state: AdmissionState) -> bool:
        """Whether the cache still decides on the state's quota ledger and flavor trees: a
        ClusterQueue, flavor or topology change meanwhile rebuilt them (from the admissions recorded
        so far), and what the state reserved after that would be missing from the new ones."""
        live = self.cache.snapshot()
        return live.quota is state.snapshot.quota and live.flavors is state.snapshot.flavors

    async def _give_turn(self) -> bool:
        """Let the event loop run once the cycle has held it for `STEP_BUDGET_S` (a cycle over
        thousands of waiting Workloads takes longer than a watch event may wait); True if it ran."""
        if time.perf_counter() - self._stretch < STEP_BUDGET_S:
            return False
        await asyncio.sleep(0)
        self._stretch = time.perf_counter()
        return True

    def _start_write(self, key: str, write: Coroutine[Any, Any, str]) -> None:
        """Status writes run beside the next cycles: the cache already holds each admission (an
        unwritten one is given back by `_admission_written`), and every write is resourceVersion-checked,
        so a later decision about the same Workload cannot be overwritten by an older one."""
        self._writing.add(key)
        self._unstarted.append((key, write))
        self._start_unstarted()

    def _start_unstarted(self) -> None:
        """Writes become tasks while fewer than `STARTED_WRITES` are: the first steps of thousands
        of tasks created at once would all run in one turn of the event loop."""
        while self._unstarted and len(self._in_flight) < STARTED_WRITES:
            key, write = self._unstarted.popleft()
            task = asyncio.create_task(write)
            self._in_flight.add(task)
            task.add_done_callback(functools.partial(self._write_done, key))

    def _write_done(self, key: str, task: asyncio.Task[str]) -> None:
        """The write of `key` ended: a Workload told to wait meanwhile is decided again. The writes
        handle their own failures; one that raised anyway (a bug) is logged here, once, and retried."""
        self._in_flight.discard(task)
        self._start_unstarted()
        self._writing.discard(key)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            delay = self._backoff.failed(key)
            log.error("status write of %s failed; retrying in %.1fs", key, delay, exc_info=error)
            self._again_later(delay)
        elif key in self._skipped:
            self._skipped.discard(key)
            self._again()  # its reason may be newer than the one just written

    async def _write_queues_while_due(self) -> None:
        """Queue statuses after a cycle at once, then at most every `queue_status_interval_s` while
        cycles keep coming (each write is an API call and a watch event: per cycle, they were a
        fifth of a busy operator's calls). The latest cycle's counts are the ones written."""
        while self._queues_due is not None:
            waiting, self._queues_due = self._queues_due, None
            if not await self._write_queues(waiting) and self._queues_due is None:
                self._queues_due = waiting  # a failed write is tried again after the interval
            await asyncio.sleep(self.queue_status_interval_s)

    async def _pending(self, state: AdmissionState, waiting: list[str]) -> list[Pending]:
        """Why each waiting workload waits: its decision this cycle, else (e.g. parked behind a
        same-shape head) explained afresh against this cycle's state, one answer per queue and shape
        (`memo`), so no workload keeps a reason whose figures are out of date. Only a changed reason
        is written (`mark_pending` leaves an equal one alone)."""
        out = []
        memo: dict[tuple[str, tuple[Any, ...]], Pending] = {}
        for key in waiting:
            await self._give_turn()
            why = state.pending.get(key)
            entry = self.cache.workloads.get(key)
            if entry is None:
                continue
            if why is None:
                why = explain(state, key, memo)
            if why is not None:
                out.append(why)
        return out

    async def _explain(self, pendings: list[Pending]) -> None:
        """Start the pending status writes of this cycle's `pendings`, or, while Workloads keep
        arriving, keep them (replacing what an earlier cycle kept: this cycle's reasons are the
        latest, and a Workload it admitted or no longer sees needs none) until the arrivals' lull."""
        if self.arrivals is None or self.arrivals.quiet:
            self._explain_later.clear()
            await self._start_pending_writes(pendings)
            return
        self._explain_later = {why.key: why for why in pendings}
        if self._explainer is None or self._explainer.done():
            self._explainer = asyncio.create_task(self._explain_after_lull())

    async def _explain_after_lull(self) -> None:
        """Once the arrivals pause, write what the latest cycle kept (`_explain`)."""
        assert self.arrivals is not None
        while self._explain_later:
            await self.arrivals.lull()
            later, self._explain_later = self._explain_later, {}
            await self._start_pending_writes(later.values())

    async def _start_pending_writes(self, pendings: Iterable[Pending]) -> None:
        """A pending status write for each, unless a write for that Workload is in flight (it is
        told again once that ends) or its status already says it."""
        for why in pendings:
            if why.key in self._writing:
                self._skipped.add(why.key)
            elif not self._told(why):
                self._start_write(why.key, self._pending_written(why))
                await self._give_turn()

    def _told(self, why: Pending) -> bool:
        """Whether the Workload's status already says `why` and no Event is owed for it: then there
        is nothing to write (a held backlog of thousands is re-explained every cycle, and a write
        task per Workload per cycle, each copying its model, was most of a cycle's cost)."""
        entry = self.cache.workloads.get(why.key)
        return entry is not None and says_pending(entry.obj, why.reason, why.message) \
            and not self._owes_event(why)

    def _owes_event(self, why: Pending) -> bool:
        """An Event for a new cause of a Workload the scheduling tried (reason Pending), as Kueue's
        scheduler posts one; a Workload that cannot be queued at all (reason Inadmissible: its queue
        stopped, missing or not selecting its namespace) gets its status only, as Kueue's Workload
        controller writes it: a held backlog of thousands would otherwise post an Event each."""
        return why.reason == c.REASON_PENDING and self._last_cause.get(why.key) != why.detail

    async def _admission_written(self, admit: Admit) -> str:
        """Write `status.admission` + QuotaReserved/Admitted; on a Workload gone, changed (another
        spec) or admitted elsewhere meanwhile, or a write that failed, give the reservation back and
        decide again after a backoff. A write whose outcome is unknown (no answer, or a 5xx: it may
        have been applied) is settled by reading the Workload back: giving back a reservation the
        server holds would let its quota be admitted twice. Returns the key."""
        entry = self.cache.workloads.get(admit.key)
        if entry is None:
            self.cache.forget_admission(admit.key)
            return admit.key
        shape = entry.info.shape
        now = datetime.now(UTC)
        ours = [False]

        wanted = Admission.model_validate(admit.admission)

        def change(model: Workload) -> bool:
            if not model.is_finished and model.status is not None and model.status.admission == wanted:
                ours[0] = True  # this very admission: our write, applied with its answer lost (then a 409)
                return False
            ours[0] = not (model.is_finished or model.reserved_admission is not None
                           or workload_info(model).shape != shape)
            return ours[0] and mark_admitted(model, admit.admission, now)

        failed: Exception | None = None
        async with self._slots:
            try:
                written = await write_workload_status(self.api, entry.obj, change)
            except Exception as e:  # refused, no answer, or a bug: never left reserved unwritten
                failed, written = e, None
        if failed is not None and (not isinstance(failed, ApiError) or failed.transient):
            log.warning("admitting %s: %s; reading it back", admit.key, failed)
            written = await _read_back_until_answered(self.api, entry.info.namespace, entry.info.name)
            ours[0] = written is not None and admission_of(written) is not None
        if written is None or not ours[0] or admission_of(written) is None:
            self.cache.forget_admission(admit.key)
            if failed is None:
                self.notify()
            else:
                delay = self._backoff.failed(admit.key)
                log_failure(log, f"admitting {admit.key} (reservation given back)", failed, delay)
                self._again_later(delay)
            return admit.key
        self._backoff.succeeded(admit.key)
        self.admitted_at.pop(admit.key, None)
        self.admitted_at[admit.key] = time.monotonic()
        if len(self.admitted_at) > ADMITTED_AT_KEPT:
            del self.admitted_at[next(iter(self.admitted_at))]
        self._last_cause.pop(admit.key, None)
        self.recorder.emit(written, c.REASON_ADMITTED, quota_reserved_message(admit.cluster_queue))
        waited = queued_seconds(written, now)
        log.info("admitted %s into ClusterQueue %s after %.1fs waiting", admit.key, admit.cluster_queue, waited)
        if self.metrics is not None:
            self.metrics.workload_admitted(admit.cluster_queue, priority_class_of(written), waited)
        self.applied(c.KIND_WORKLOAD, written)
        return admit.key

    async def _eviction_written(self, preemption: Preemption) -> str:
        """Write one victim's eviction (`Evictor.preempt`). A victim that needs none any more (gone,
        finished, no longer admitted) is unclaimed and the cycle decides again; a write that failed
        is unclaimed too and decided again after a backoff (the next search may choose differently).
        Returns the victim's key."""
        key = preemption.victim
        async with self._slots:
            try:
                await self.evictor.preempt(preemption)
            except Exception as e:  # refused, no answer, or a bug: decided again later
                self.cache.forget_eviction(key)
                delay = self._backoff.failed(key)
                log_failure(log, f"evicting {key} for {preemption.preemptor}", e, delay)
                self._again_later(delay)
                return key
        self._backoff.succeeded(key)
        entry = self.cache.workloads.get(key)
        if entry is None or entry.fit is None or not is_evicted(entry.obj):
            self.cache.forget_eviction(key)
            self.notify()
        return key

    async def _pending_written(self, why: Pending) -> str:
        """QuotaReserved=False with the reason and message; an Event when the cause is new."""
        entry = self.cache.workloads.get(why.key)
        if entry is None:
            return why.key
        now = datetime.now(UTC)

        def change(model: Workload) -> bool:
            if model.is_finished or model.has_quota_reservation:
                return False
            return mark_pending(model, why.reason, why.message, now)

        async with self._slots:
            try:
                written = await write_workload_status(self.api, entry.obj, change)
            except Exception as e:  # refused, no answer, or a bug: its reason is written again later
                delay = self._backoff.failed(why.key)
                log_failure(log, f"pending status of {why.key}", e, delay)
                self._again_later(delay)
                return why.key
        self._backoff.succeeded(why.key)
        if written is None:
            return why.key
        self.applied(c.KIND_WORKLOAD, written)
        if self._owes_event(why):
            self._last_cause[why.key] = why.detail
            if len(self._last_cause) > 2 * len(self.cache.workloads):  # those deleted while waiting
                self._last_cause = {k: v for k, v in self._last_cause.items() if k in self.cache.workloads}
            self.recorder.emit(written, why.reason, why.message)
        return why.key

    async def _write_queues(self, waiting: dict[str, str]) -> bool:
        """ClusterQueue and LocalQueue statuses, each written only when it changed; a deleted
        queue's last status is forgotten (one created again under its name gets its own) and a
        deleted ClusterQueue's metric series dropped. False when a write failed (it is logged; the
        status is written again next time)."""
        ok = True
        cqs, lqs = queue_statuses(queue_inputs(self.cache), waiting)
        if self.metrics is not None:
            self._record_queue_metrics(cqs, waiting)
        for local, statuses in ((False, cqs), (True, lqs)):
            for gone in [k for (is_local, k) in self._queue_status if is_local == local and k not in statuses]:
                del self._queue_status[(local, gone)]
            for key, status in statuses.items():
                if self._queue_status.get((local, key)) == status:
                    continue
                queue = (self.cache.local_queues if local else self.cache.cluster_queues).get(key)
                before = queue.status.conditions if queue is not None and queue.status is not None else []
                try:
                    await write_queue_status(self.api, local, key, stamp_conditions(status, before, datetime.now(UTC)),
                                             queue.to_dict() if queue is not None else None)
                    self._queue_status[(local, key)] = status
                except Exception as e:  # refused, no answer, or a bug: the loop must go on
                    ok = False
                    log_failure(log, f"status of queue {key}", e, self.queue_status_interval_s)
        ok = await write_finalizers(self.api, self.cache, self.applied) and ok
        return await self._write_cohorts() and ok

    async def _write_cohorts(self) -> bool:
        """Each Cohort's Active condition (a cycle, a missing parent), written only when it changed."""
        ok = True
        statuses = cohort_statuses(self.cache.cohorts, self.cache.snapshot().quota.tree)
        for gone in self._cohort_status.keys() - statuses.keys():
            del self._cohort_status[gone]
        for name, status in statuses.items():
            if self._cohort_status.get(name) == status:
                continue
            cohort = self.cache.cohorts[name]
            before = cohort.status.conditions if cohort.status is not None else []
            try:
                await write_cohort_status(self.api, name, stamp_conditions(status, before, datetime.now(UTC)),
                                          cohort.to_dict())
                self._cohort_status[name] = status
            except Exception as e:  # refused, no answer, or a bug: the loop must go on
                ok = False
                log_failure(log, f"status of cohort {name}", e, self.queue_status_interval_s)
        return ok

    def _record_queue_metrics(self, cqs: dict[str, dict[str, Any]], waiting: dict[str, str]) -> None:
        """The ClusterQueues' series (a deleted one's dropped) and the topology fragmentation."""
        assert self.metrics is not None
        for gone in self.metrics.cluster_queues_reported() - cqs.keys():
            self.metrics.cluster_queue_deleted(gone)
        for name, figures in queue_figures(self.cache, cqs, waiting).items():
            self.metrics.cluster_queue_reported(name, figures)
        self.metrics.fragmentation_reported(*fragmentation(self.cache, waiting))


def queue_inputs(cache: ClusterCache) -> QueueInputs:
    """What the queue statuses are computed from, as the cache holds it: a Workload counts as
    admitted while it holds quota here, or while its status records an admission and it has not
    finished (one restored after a restart, before its reservation is made again)."""
    snapshot = cache.snapshot()
    workloads = [QueuedWorkload(key, f"{entry.info.namespace}/{entry.info.queue_name}",
                                entry.fit is not None or (entry.admission is not None and not entry.finished),
                                entry.fit.cluster_queue if entry.fit is not None else None,
                                entry.fit.quota_usage if entry.fit is not None else None)
                 for key, entry in cache.workloads.items()]
    cycles = {name: cycle for name in snapshot.cluster_queues
              if (cycle := snapshot.quota.cohort_cycle(name)) is not None}
    return QueueInputs(cluster_queues=cache.cluster_queues, local_queues=cache.local_queues, flavors=cache.flavors,
                       topologies=cache.topologies, quotas=snapshot.cluster_queues, used=snapshot.quota.used,
                       workloads=workloads, cohort_cycles=cycles)


def _drained(entry: WorkloadEntry) -> bool:
    """Whether a drain evicted the Workload and it was not requeued since: still terminating (its
    release is to come), or released (Requeued=False LocalQueueStopped or ClusterQueueStopped)."""
    evicted = entry.obj.condition(c.CONDITION_EVICTED)
    if evicted is not None and evicted.status == "True" and evicted.reason in DRAIN_REASONS \
            and is_terminating(entry.obj):
        return True
    return released_by_drain(entry.obj) is not None


def _standing(entry: WorkloadEntry) -> StandingWorkload:
    """The Workload as controller.core.admission.draining reads it."""
    admission = entry.admission
    return StandingWorkload(entry.info.key, f"{entry.info.namespace}/{entry.info.queue_name}",
                            admission.cluster_queue if admission is not None else None, is_evicted(entry.obj),
                            entry.finished, released_by_drain(entry.obj))


async def _read_back_until_answered(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    """The Workload as the API server holds it now (None: gone), asked again with backoff until an
    answer comes (an API server restarting)."""
    backoff = Backoff()
    while True:
        try:
            return await api.get(WORKLOADS, namespace, name)
        except ApiError as e:
            if e.not_found:
                return None
            error: Exception = e
        except TRANSPORT_ERRORS as e:
            error = e
        delay = backoff.failed(name)
        log_failure(log, f"reading back workload {namespace}/{name}", error, delay)
        await asyncio.sleep(delay)
