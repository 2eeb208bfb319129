"""The admission cycle: take the head of every ClusterQueue, try each against the snapshot, decide.

`AdmissionState` carries what lives between cycles; `run_cycle` is one Kueue scheduling round and
`run_until_quiet` repeats it until no queue has a head. Decisions are values: `Admit` (the full
`status.admission`) or `Pending` (reason + quantitative message). Pure. Called by `tasq simulate`,
the benchmarks and (later) the controller's scheduler loop.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from controller.api import constants as c
from controller.api.selectors import label_selector_matches
from controller.core.admission.flavoring import NoFit, WorkloadFit, assign_flavors
from controller.core.admission.queueing import QueueSet
from controller.core.admission.snapshot import AdmissionSnapshot
from controller.core.admission.workloads import WorkloadInfo


@dataclass(frozen=True, slots=True)
class Admit:
    key: str
    cluster_queue: str
    admission: dict[str, Any]
    """The Workload's `status.admission`."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A workload that waits. `reason` is the QuotaReserved=False reason Kueue writes (Pending or
    Inadmissible); `detail` the finer PascalCase cause (QuotaExceeded, PodSetTopologyUnfit...)."""

    key: str
    cluster_queue: str | None
    reason: str
    detail: str
    message: str


Decision = Admit | Pending


@dataclass(slots=True)
class AdmissionState:
    """Between cycles: the snapshot (its usage includes every admission), queues and outcomes.

    `_no_fit` memoises failures per (ClusterQueue, pod-set signature). Between two releases
    capacity only shrinks, so a shape that did not fit still does not; `release` clears it.
    """

    snapshot: AdmissionSnapshot
    queues: QueueSet = field(default_factory=QueueSet)
    workloads: dict[str, WorkloadInfo] = field(default_factory=dict)
    queue_of: dict[str, str] = field(default_factory=dict)
    admitted: dict[str, WorkloadFit] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)
    """The last Pending decision of every workload that was tried (or could not be queued) and
    waits; workloads parked with a same-shape head without being tried are in `waiting()` only."""
    _no_fit: dict[tuple[str, tuple[Any, ...]], NoFit] = field(default_factory=dict)

    def submit(self, wl: WorkloadInfo) -> Pending | None:
        """Queue a new workload in its ClusterQueue; a Pending when it cannot be queued at all."""
        self.workloads[wl.key] = wl
        cq_name, problem = resolve_cluster_queue(self.snapshot, wl)
        if problem is not None:
            self.pending[wl.key] = problem
            return problem
        assert cq_name is not None
        cq = self.snapshot.cluster_queues[cq_name]
        self.queue_of[wl.key] = cq_name
        self.queues.ensure(cq_name, cq.queueing_strategy).push(wl.key, wl.order_key(), wl.shape)
        return None

    def release(self, key: str) -> bool:
        """The workload finished or was deleted: give back quota and nodes, let the parked retry."""
        fit = self.admitted.pop(key, None)
        cq_name = self.queue_of.pop(key, None)
        self.workloads.pop(key, None)
        self.pending.pop(key, None)
        if fit is None:
            if cq_name is not None:
                self.queues.queues[cq_name].remove(key)
            return False
        self.snapshot.quota.release(key)
        self.snapshot.usage.release(key)
        self._no_fit.clear()
        self.queues.requeue_all()
        return True

    def waiting(self) -> list[str]:
        """Every workload that is neither admitted nor finished, sorted by key."""
        queued = (key for queue in self.queues.queues.values() for key in queue.members)
        return sorted({*queued, *self.pending} - self.admitted.keys())

    def capacity_changed(self) -> None:
        """Nodes or quotas changed outside admission: forget memoised failures, retry parked ones."""
        self._no_fit.clear()
        self.queues.requeue_all()


def resolve_cluster_queue(snap: AdmissionSnapshot, wl: WorkloadInfo) -> tuple[str | None, Pending | None]:
    """LocalQueue -> ClusterQueue, then the ClusterQueue's namespaceSelector and stop policy."""
    def inadmissible(detail: str, message: str, cq: str | None = None) -> tuple[None, Pending]:
        return None, Pending(wl.key, cq, c.REASON_INADMISSIBLE, detail, message)

    if not wl.queue_name:
        return inadmissible(c.REASON_LOCAL_QUEUE_NOT_FOUND, "the workload names no queue")
    cq_name = snap.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if cq_name is None:
        return inadmissible(c.REASON_LOCAL_QUEUE_NOT_FOUND,
                            f"LocalQueue \"{wl.queue_name}\" doesn't exist in namespace \"{wl.namespace}\"")
    cq = snap.cluster_queues.get(cq_name)
    if cq is None:
        return inadmissible(c.REASON_CLUSTER_QUEUE_NOT_FOUND, f"ClusterQueue \"{cq_name}\" doesn't exist")
    if cq.stopped:
        return inadmissible(c.REASON_INADMISSIBLE, f"ClusterQueue \"{cq_name}\" is stopped", cq_name)
    # Kueue: a nil namespaceSelector selects no namespace; an empty one selects all.
    if cq.namespace_selector is None or not label_selector_matches(
            cq.namespace_selector, snap.namespace_labels(wl.namespace)):
        return inadmissible(c.REASON_NAMESPACE_MISMATCH, f"namespace \"{wl.namespace}\" doesn't match "
                            f"the namespaceSelector of ClusterQueue \"{cq_name}\"", cq_name)
    return cq_name, None


def run_cycle(state: AdmissionState) -> list[Decision]:
    """One round: every ClusterQueue's head, by priority then age, each seeing earlier admissions."""
    heads = state.queues.heads()
    heads.sort(key=lambda head: state.workloads[head[1]].order_key())
    return [_decide(state, cq_name, key) for cq_name, key in heads]


def run_until_quiet(state: AdmissionState) -> list[Decision]:
    """Cycles back to back until no queue offers a head, merged into one pass: a queue's next head
    joins the round as soon as its previous head is decided, so across all ClusterQueues heads are
    always tried by priority then age. Every step admits or parks a head, so it ends."""
    decisions: list[Decision] = []
    round_: list[tuple[tuple[int, float, int, str], str]] = [
        (state.workloads[key].order_key(), cq_name) for cq_name, key in state.queues.heads()]
    heapq.heapify(round_)
    while round_:
        _, cq_name = heapq.heappop(round_)
        queue = state.queues.queues[cq_name]
        key = queue.head()
        if key is None:
            continue
        decisions.append(_decide(state, cq_name, key))
        following = queue.head()
        if following is not None:
            heapq.heappush(round_, (state.workloads[following].order_key(), cq_name))
    return decisions


def _decide(state: AdmissionState, cq_name: str, key: str) -> Decision:
    """Try one head: commit its quota on a fit (the nodes are already held), else park it."""
    wl = state.workloads[key]
    memo = (cq_name, wl.shape)
    result: WorkloadFit | NoFit | None = state._no_fit.get(memo)
    if result is None:
        result = assign_flavors(state.snapshot, cq_name, wl)
    queue = state.queues.queues[cq_name]
    if isinstance(result, WorkloadFit):
        state.snapshot.quota.reserve(key, cq_name, result.quota_usage)
        state.admitted[key] = result
        state.pending.pop(key, None)
        queue.remove(key)
        return Admit(key, cq_name, result.admission())
    state._no_fit[memo] = result
    queue.park(key)
    decision = Pending(key, cq_name, c.REASON_PENDING, result.reason, result.message)
    state.pending[key] = decision
    return decision


def explain(state: AdmissionState, key: str) -> Pending | None:
    """Why a pending workload waits right now, recomputed against the current usage (no memo)."""
    cq_name = state.queue_of.get(key)
    if cq_name is None or key in state.admitted:
        return state.pending.get(key)
    blocker = state.queues.queues[cq_name].blocked_by
    if blocker is not None and blocker != key:
        return Pending(key, cq_name, c.REASON_PENDING, c.REASON_STRICT_FIFO_BLOCKED,
                       f"StrictFIFO: waiting behind \"{blocker}\" in ClusterQueue \"{cq_name}\"")
    result = assign_flavors(state.snapshot, cq_name, state.workloads[key])
    if isinstance(result, WorkloadFit):
        state.snapshot.usage.release(key)
        return Pending(key, cq_name, c.REASON_PENDING, c.REASON_PENDING,
                       "fits now; waiting for the next admission cycle")
    return Pending(key, cq_name, c.REASON_PENDING, result.reason, result.message)
