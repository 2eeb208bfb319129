"""The admission cycle: take the head of every ClusterQueue, try each against the snapshot, decide.

`AdmissionState` carries what lives between cycles; `run_cycle` is one Kueue scheduling round and
`run_until_quiet` repeats it until no queue has a head (`rounds` hands them out one at a time).
Decisions are values: `Admit` (the fit, and the full `status.admission` built from it), `Pending`
(reason + quantitative message) or `Preempt`. Pure. Called by `tasq simulate`
(controller.core.simulating), the benchmarks and the operator's admission loop
(controller.kube.admitting, on the state `ClusterCache.admission_state` hands it).

Preemption, the contract with whoever carries it out:
- A head that does not fit, in a ClusterQueue whose `spec.preemption` allows it, gets a victim search
  (controller.core.admission.preempting). When evicting some admitted Workloads makes room, the
  cycle decides `Preempt(key, cluster_queue, victims, in_flight, message)`: evict each of `victims`
  (conditions Evicted=True reason Preempted, Preempted=True with `Victim.reason`, then its Job
  stopped). The preemptor itself waits: `state.pending[key]` holds its Pending (detail Preempting,
  the message saying whom it preempts where), and it is parked until capacity is released.
- The state records every victim as evicting (`state.evicting[victim] = preemptor`) and keeps it
  admitted: its quota and nodes still count until its pods are gone, so nothing lands on them early.
  A later search of the same preemptor takes its in-flight victims first and decides no new
  eviction while they suffice (a Pending, not a Preempt); another preemptor never counts on them.
- The operator rebuilds the state per cycle, so it must tell it what it knows: `mark_evicting(victim,
  preemptor)` for every Workload evicted but still holding its admission (preemptor None when not
  known, e.g. after a restart: Evicted=True with `status.admission` set), and `release(victim,
  requeue=True)` once the victim's pods are gone: quota and nodes are given back, the parked retry,
  and the victim waits in its queue again (re-admitted when room exists).
- Partial admission (Kueue's order): a head that fits neither whole nor by preempting at its full
  count gets the largest count in [minCount, count) of its pod set with a minCount that fits
  (controller.core.admission.reducing); its `Admit` carries that count in `podSetAssignments[].count`.
- `admitted_at[key]` (quota reservation time, seconds) orders victims of equal priority newest first;
  an admission made by this state is stamped with `now` when the caller gives one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from controller.api import constants as c
from controller.core.admission.flavoring import NoFit, WorkloadFit, assign_flavors
from controller.core.admission.preempting import NoPreemption, Victim, VictimPool, VictimSet, find_victims
from controller.core.admission.queueing import QueueSet
from controller.core.admission.quota import cycle_text
from controller.core.admission.reducing import reducible, reserve_largest_count
from controller.core.admission.snapshot import AdmissionSnapshot
from controller.core.admission.workloads import WorkloadInfo


@dataclass(frozen=True, slots=True)
class Admit:
    key: str
    cluster_queue: str
    fit: WorkloadFit
    """What was admitted (its quota and nodes are held in the state)."""
    _admission: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def admission(self) -> dict[str, Any]:
        """The Workload's `status.admission`, built at its first read (by whoever writes it) and
        the same dict after: the cycle itself never reads it, and a cycle admitting thousands built
        thousands of nested dicts up front, each one more object for the collector to traverse."""
        if self._admission is None:
            object.__setattr__(self, "_admission", self.fit.admission())
        assert self._admission is not None
        return self._admission


@dataclass(frozen=True, slots=True)
class Pending:
    """A workload that waits. `reason` is the QuotaReserved=False reason Kueue writes (Pending or
    Inadmissible); `detail` the finer PascalCase cause (QuotaExceeded, PodSetTopologyUnfit...)."""

    key: str
    cluster_queue: str | None
    reason: str
    detail: str
    message: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict `victims` so that the workload `key` of `cluster_queue` fits (see the module docstring).
    `in_flight`: victims it also needs that are already being evicted (not to be evicted again);
    `message`: `preempting 2 workload(s) in rack "b1/r1" to fit 16 pod(s) of pod set "main" in flavor
    "h100"`, deterministic and quantitative."""

    key: str
    cluster_queue: str
    victims: tuple[Victim, ...]
    in_flight: tuple[str, ...]
    message: str


Decision = Admit | Pending | Preempt


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
    evicting: dict[str, str | None] = field(default_factory=dict)
    """Admitted workloads being evicted, whose quota is not released yet -> their preemptor (None:
    not known). They stay in `admitted` until `release`."""
    admitted_at: dict[str, float] = field(default_factory=dict)
    """Quota reservation time (seconds) of admitted workloads, where known."""
    now: float | None = None
    """When this state decides (seconds), given by the caller: stamps `admitted_at` of its admissions."""
    _resolved: dict[tuple[str, str], str | Pending] = field(default_factory=dict)
    """(namespace, queue name) -> the ClusterQueue it resolved to, or why a Workload naming it cannot
    be queued (a stopped queue...): the snapshot's queues and namespaces are fixed for a state's
    life, and a backlog of thousands names a handful of queues."""

    def resolved(self, wl: WorkloadInfo) -> str | Pending:
        """The ClusterQueue the workload's LocalQueue leads to, or why it cannot be queued at all
        (`resolve_cluster_queue`, once per queue; the Pending's key is that of the first asker: its
        text names the queue and namespace, never the workload). Changes nothing else."""
        resolved = self._resolved.get((wl.namespace, wl.queue_name))
        if resolved is None:
            cq_found, problem = resolve_cluster_queue(self.snapshot, wl)
            if problem is not None:
                resolved = problem
            else:
                assert cq_found is not None
                resolved = cq_found
            self._resolved[(wl.namespace, wl.queue_name)] = resolved
        return resolved

    def submit(self, wl: WorkloadInfo, resolved: str | Pending | None = None) -> Pending | None:
        """Queue a new workload in its ClusterQueue; a Pending when it cannot be queued at all.
        `resolved`: what `resolved(wl)` answered, when the caller asked already."""
        key = wl.key
        self.workloads[key] = wl
        if resolved is None:
            resolved = self.resolved(wl)
        if isinstance(resolved, Pending):
            problem = self.pending[key] = resolved if resolved.key == key else replace(resolved, key=key)
            return problem
        cq_name = resolved
        cq = self.snapshot.cluster_queues[cq_name]
        self.queue_of[key] = cq_name
        # Workloads of one shape fail alike, so a parked head parks its shape; where preemption may
        # make room, how much depends on the priority too, so that is part of the shape there.
        shape = (wl.shape, wl.priority) if cq.preemption.enabled else wl.shape
        self.queues.ensure(cq_name, cq.queueing_strategy).push(key, wl.order_key(), shape)
        return None

    def release(self, key: str, requeue: bool = False) -> bool:
        """The workload finished or was deleted, or (`requeue`) an evicted one's pods are gone: give
        back quota and nodes, let the parked retry; with `requeue` it waits in its queue again.
        False when it held nothing."""
        fit = self.admitted.pop(key, None)
        cq_name = self.queue_of.pop(key, None)
        info = self.workloads.pop(key, None)
        self.pending.pop(key, None)
        self.evicting.pop(key, None)
        self.admitted_at.pop(key, None)
        if fit is None:
            if cq_name is not None:
                self.queues.queues[cq_name].remove(key)
        else:
            self.snapshot.quota.release(key)
            self.snapshot.usage.release(key)
            self._no_fit.clear()
            self.queues.requeue_all()
        if requeue and info is not None:
            self.submit(info)
        return fit is not None

    def mark_evicting(self, key: str, preemptor: str | None = None) -> None:
        """An admitted workload is being evicted (for `preemptor`, if known); it keeps its quota."""
        if key in self.admitted:
            self.evicting[key] = preemptor

    def victim_pool(self) -> VictimPool:
        """The admitted workloads as the victim search reads them (views, not copies)."""
        return VictimPool(self.admitted, self.workloads, self.admitted_at, self.evicting)

    def waiting(self) -> list[str]:
        """Every workload that is neither admitted nor finished, sorted by key."""
        queued = (key for queue in self.queues.queues.values() for key in queue.members)
        return sorted({*queued, *self.pending} - self.admitted.keys())

    def capacity_changed(self) -> None:
        """Nodes or quotas changed outside admission: forget memoised failures, retry parked ones."""
        self._no_fit.clear()
        self.queues.requeue_all()


def resolve_cluster_queue(snap: AdmissionSnapshot, wl: WorkloadInfo) -> tuple[str | None, Pending | None]:
    """LocalQueue -> ClusterQueue, then the LocalQueue's and the ClusterQueue's stop policies, the
    cohort tree and the namespaceSelector."""
    def inadmissible(detail: str, message: str, cq: str | None = None) -> tuple[None, Pending]:
        return None, Pending(wl.key, cq, c.REASON_INADMISSIBLE, detail, message)

    if not wl.queue_name:
        return inadmissible(c.REASON_LOCAL_QUEUE_NOT_FOUND, "the workload names no queue")
    cq_name = snap.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if cq_name is None:
        return inadmissible(c.REASON_LOCAL_QUEUE_NOT_FOUND,
                            f"LocalQueue \"{wl.queue_name}\" doesn't exist in namespace \"{wl.namespace}\"")
    held = snap.stopped_local_queues.get(f"{wl.namespace}/{wl.queue_name}")
    if held is not None:  # Kueue asks the LocalQueue before its ClusterQueue
        return inadmissible(c.REASON_STOPPED, f"LocalQueue \"{wl.queue_name}\" in namespace \"{wl.namespace}\" is "
                            f"stopped (stopPolicy {held})", cq_name)
    cq = snap.cluster_queues.get(cq_name)
    if cq is None:
        return inadmissible(c.REASON_CLUSTER_QUEUE_NOT_FOUND, f"ClusterQueue \"{cq_name}\" doesn't exist")
    if cq.stopped:
        return inadmissible(c.REASON_INADMISSIBLE, f"ClusterQueue \"{cq_name}\" is stopped", cq_name)
    if cq.terminating:
        return inadmissible(c.REASON_INADMISSIBLE, f"ClusterQueue \"{cq_name}\" is terminating", cq_name)
    cycle = snap.quota.cohort_cycle(cq_name)
    if cycle is not None:  # Kueue leaves every ClusterQueue of a cyclic cohort tree out of scheduling
        return inadmissible(c.REASON_COHORT_HAS_CYCLE, f"ClusterQueue \"{cq_name}\" is inactive: its cohort "
                            f"\"{cq.cohort}\" is in a cycle of cohorts ({cycle_text(cycle)})", cq_name)
    # Kueue: a nil namespaceSelector selects no namespace; an empty one selects all.
    if cq.namespace_selector is None or not cq.namespace_selector.matches(snap.namespace_labels(wl.namespace)):
        return inadmissible(c.REASON_NAMESPACE_MISMATCH, f"namespace \"{wl.namespace}\" doesn't match "
                            f"the namespaceSelector of ClusterQueue \"{cq_name}\"", cq_name)
    return cq_name, None


def run_cycle(state: AdmissionState) -> list[Decision]:
    """One round: every ClusterQueue's head, decided as `_round` orders them."""
    return _round(state, state.queues.heads())


def run_until_quiet(state: AdmissionState) -> list[Decision]:
    """Rounds back to back until no queue offers a head (`rounds`, all at once)."""
    return [decision for step in rounds(state) for decision in step]


def rounds(state: AdmissionState) -> Iterator[list[Decision]]:
    """The rounds until no queue offers a head, one round's decisions per step (a round tries at
    most one head per ClusterQueue), so a caller may pause between them. Every round admits or parks
    each of its heads (a borrower is decided at the round's end), so it ends."""
    heads = state.queues.heads()
    while heads:
        yield _round(state, heads)
        heads = state.queues.heads()


def _round(state: AdmissionState, heads: list[tuple[str, str]]) -> list[Decision]:
    """Kueue's order within one scheduling cycle: heads that fit without borrowing first, then
    those that must borrow; each group by priority, then age. Heads are tried by priority then age;
    one that fits within nominal quota is admitted at once (later heads see it); one that fits only
    by borrowing drops its trial nodes and is decided after the round's non-borrowers: tried again
    when something was admitted since its trial, else its trial fit stands."""
    heads = sorted(heads, key=lambda head: state.workloads[head[1]].order_key())
    decisions: list[Decision] = []
    borrowers: list[tuple[str, str, WorkloadFit, int]] = []
    admitted = 0
    for cq_name, key in heads:
        result = _try(state, cq_name, key)
        if isinstance(result, WorkloadFit) and borrows(state.snapshot, result):
            state.snapshot.usage.release(key)
            borrowers.append((cq_name, key, result, admitted))
            continue
        decisions.append(_settle(state, cq_name, key, result))
        admitted += isinstance(decisions[-1], Admit)
    for cq_name, key, trial, admitted_before in borrowers:
        outcome: WorkloadFit | NoFit = trial
        if admitted != admitted_before:
            outcome = _try(state, cq_name, key)
        elif trial.node_usage:
            # Nothing was admitted since its trial: quota and nodes are as they were, so is its fit.
            state.snapshot.usage.reserve(key, trial.node_usage)
        decisions.append(_settle(state, cq_name, key, outcome))
        admitted += isinstance(decisions[-1], Admit)
    return decisions


def borrows(snap: AdmissionSnapshot, fit: WorkloadFit) -> bool:
    """Whether charging the fit takes its ClusterQueue above nominal quota for some flavor/resource."""
    for (flavor, resource), amount in fit.quota_usage.items():
        if amount:
            used, nominal = snap.quota.used_and_nominal(fit.cluster_queue, flavor, resource)
            if used + amount > nominal:
                return True
    return False


def _try(state: AdmissionState, cq_name: str, key: str) -> WorkloadFit | NoFit:
    """The head's fit now (its nodes held in the snapshot's usage) or why not (memoised per shape)."""
    wl = state.workloads[key]
    memo = state._no_fit.get((cq_name, wl.shape))
    if memo is not None:
        return memo
    result = assign_flavors(state.snapshot, cq_name, wl)
    if isinstance(result, NoFit) and _may_admit_partially(state, cq_name, wl):
        return reserve_largest_count(state.snapshot, cq_name, wl, result)
    return result


def _may_admit_partially(state: AdmissionState, cq_name: str, wl: WorkloadInfo) -> bool:
    """Kueue's order for a Workload that does not fit whole: a reduced count (controller.core.
    admission.reducing) only with the PartialAdmission gate on, a pod set with a minCount, and, in a
    ClusterQueue that may preempt, no preemption that makes room for the full count (that wins)."""
    if not state.snapshot.features.partial_admission or reducible(wl) is None:
        return False
    cq = state.snapshot.cluster_queues[cq_name]
    if not cq.preemption.enabled:
        return True
    return not isinstance(find_victims(state.victim_pool(), state.snapshot, cq_name, wl), VictimSet)


def _settle(state: AdmissionState, cq_name: str, key: str, result: WorkloadFit | NoFit) -> Decision:
    """Commit a fit's quota (the nodes are already held), or park the head with why it waits,
    preempting when that makes room (`_preempting`). whenCanPreempt MayStopSearch: a fit in a later
    flavor gives way to preemption in an earlier one."""
    queue = state.queues.queues[cq_name]
    cq = state.snapshot.cluster_queues[cq_name]
    if isinstance(result, WorkloadFit) and cq.preemption.enabled and cq.preemption.stop_at_preemption:
        state.snapshot.usage.release(key)  # the search must not see the fit's own trial nodes as taken
        earlier = find_victims(state.victim_pool(), state.snapshot, cq_name, state.workloads[key], before=result)
        if not isinstance(earlier, VictimSet) and result.node_usage:
            state.snapshot.usage.reserve(key, result.node_usage)
        if isinstance(earlier, VictimSet):
            queue.park(key)
            return _preempting(state, cq_name, key, earlier, "a flavor earlier in ClusterQueue order needs preemption")
    if isinstance(result, WorkloadFit):
        state.snapshot.quota.reserve(key, cq_name, result.quota_usage)
        state.admitted[key] = result
        if state.now is not None:
            state.admitted_at[key] = state.now
        state.pending.pop(key, None)
        queue.remove(key)
        return Admit(key, cq_name, result)
    state._no_fit[(cq_name, state.workloads[key].shape)] = result
    queue.park(key)
    if cq.preemption.enabled:
        found = find_victims(state.victim_pool(), state.snapshot, cq_name, state.workloads[key])
        if isinstance(found, VictimSet):
            return _preempting(state, cq_name, key, found, result.message)
    decision = Pending(key, cq_name, c.REASON_PENDING, result.reason, result.message)
    state.pending[key] = decision
    return decision


def _preempting(state: AdmissionState, cq_name: str, key: str, found: VictimSet, why: str) -> Decision:
    """Claim the victims for the preemptor and record why it waits; a Preempt for those not yet
    being evicted, or the Pending alone when its in-flight victims already suffice."""
    in_flight = tuple(v.key for v in found.victims if v.key in state.evicting)
    new = tuple(v for v in found.victims if v.key not in state.evicting)
    for victim in found.victims:
        state.evicting[victim.key] = key
    message = found.message(len(in_flight))
    pending = Pending(key, cq_name, c.REASON_PENDING, c.REASON_PREEMPTING, f"{why}; {message}")
    state.pending[key] = pending
    if not new:
        return pending
    return Preempt(key, cq_name, new, in_flight, message)


def explain(state: AdmissionState, key: str,
            memo: dict[tuple[str, tuple[Any, ...]], Pending] | None = None) -> Pending | None:
    """Why a pending workload waits right now, recomputed against the current usage (no cycle memo).

    `memo`, shared by the calls of one pass that changes nothing in between (every trial fit is
    dropped again), keeps one answer per (ClusterQueue, shape): workloads of one shape fit or fail
    alike on the same usage, so a backlog of n costs one assignment per shape, not n."""
    cq_name = state.queue_of.get(key)
    if cq_name is None or key in state.admitted:
        return state.pending.get(key)
    blocker = state.queues.queues[cq_name].blocked_by
    if blocker is not None and blocker != key:
        return Pending(key, cq_name, c.REASON_PENDING, c.REASON_STRICT_FIFO_BLOCKED,
                       f"StrictFIFO: waiting behind \"{blocker}\" in ClusterQueue \"{cq_name}\"")
    shape = (cq_name, state.workloads[key].shape)
    known = memo.get(shape) if memo is not None else None
    if known is not None:
        return replace(known, key=key)
    wl = state.workloads[key]
    result = assign_flavors(state.snapshot, cq_name, wl)
    if isinstance(result, NoFit) and _may_admit_partially(state, cq_name, wl):
        result = reserve_largest_count(state.snapshot, cq_name, wl, result)
    if isinstance(result, WorkloadFit):
        state.snapshot.usage.release(key)
        why = Pending(key, cq_name, c.REASON_PENDING, c.REASON_PENDING,
                      "fits now" + _partially(wl, result) + "; waiting for the next admission cycle")
    else:
        why = Pending(key, cq_name, c.REASON_PENDING, result.reason, result.message)
    if memo is not None:
        memo[shape] = why
    return why


def _partially(wl: WorkloadInfo, fit: WorkloadFit) -> str:
    """` with 6 of the 8 pod(s) of pod set "main" (partial admission)` for each pod set the fit
    reduces; empty when it takes every pod."""
    full = {ps.name: ps.count for ps in wl.pod_sets}
    return "".join(f" with {ps.count} of the {full[ps.name]} pod(s) of pod set \"{ps.name}\" (partial admission)"
                   for ps in fit.pod_sets if ps.count < full.get(ps.name, ps.count))


def explain_preemption(state: AdmissionState, key: str) -> str | None:
    """What preemption would do for a waiting workload right now: `would preempt "ns/a"
    (InClusterQueue, priority 0), ...: preempting 1 workload(s) ...`, or `preemption would not help:
    ...` with the reason; None when the workload is not queued or fits without it. Changes nothing."""
    cq_name = state.queue_of.get(key)
    if cq_name is None or key in state.admitted:
        return None
    wl = state.workloads[key]
    result = assign_flavors(state.snapshot, cq_name, wl)
    if isinstance(result, WorkloadFit):
        state.snapshot.usage.release(key)
        return None
    found = find_victims(state.victim_pool(), state.snapshot, cq_name, wl)
    if isinstance(found, NoPreemption):
        return f"preemption would not help ({found.reason}): {found.message}"
    victims = ", ".join(f"\"{v.key}\" ({v.reason}, priority {v.priority})" for v in found.victims)
    in_flight = sum(v.key in state.evicting for v in found.victims)
    return f"would preempt {victims}: {found.message(in_flight)}"
