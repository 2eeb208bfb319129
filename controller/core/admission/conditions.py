"""Workload conditions as Kueue writes them: QuotaReserved, Admitted, Finished, Evicted, Preempted,
Requeued; and `status.unhealthyNodes` with the repaired assignment of a failed-node replacement.

Applies admission and eviction decisions to a Workload model (`status.admission` plus conditions)
with `now` passed in, so the same decision always yields the same status. Called by `tasq simulate`,
the admission loop, the Job reconciler and the operator's eviction (controller.kube.evicting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.api import constants as c
from controller.api.topology_assignment import TopologyAssignment
from controller.api.workload import MAX_UNHEALTHY_NODES, Admission, UnhealthyNode, Workload, WorkloadStatus

ADMITTED_MESSAGE = "The workload is admitted"


def quota_reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def mark_admitted(wl: Workload, admission: dict[str, Any], now: datetime) -> bool:
    """Record the admission and set QuotaReserved=True, Admitted=True, and an Evicted=True back to
    False; True when anything changed."""
    if wl.status is None:
        wl.status = WorkloadStatus()
    new = Admission.model_validate(admission)
    changed = wl.status.admission != new
    wl.status.admission = new
    changed |= wl.set_condition(c.CONDITION_QUOTA_RESERVED, "True", c.REASON_QUOTA_RESERVED,
                                quota_reserved_message(new.cluster_queue), now)
    changed |= wl.set_condition(c.CONDITION_ADMITTED, "True", c.REASON_ADMITTED, ADMITTED_MESSAGE, now)
    for type_ in (c.CONDITION_EVICTED, c.CONDITION_PREEMPTED):
        earlier = wl.condition(type_)
        if earlier is not None and earlier.status == "True":  # an earlier eviction is over (Kueue's wording)
            changed |= wl.set_condition(type_, "False", c.REASON_QUOTA_RESERVED, f"Previously: {earlier.message}", now)
    if wl.status.unhealthy_nodes:  # Kueue clears them on admission: a fresh placement
        wl.status.unhealthy_nodes = []
        changed = True
    return changed


def mark_pending(wl: Workload, reason: str, message: str, now: datetime) -> bool:
    """QuotaReserved=False with the reason and message saying why the workload waits."""
    return wl.set_condition(c.CONDITION_QUOTA_RESERVED, "False", reason, message, now)


def says_pending(wl: Workload, reason: str, message: str) -> bool:
    """Whether `mark_pending` would leave the Workload as it is: QuotaReserved already False with
    this reason and message for its generation, or it holds a reservation or finished (no pending
    status is written then). Lets the admission loop skip a write that would change nothing."""
    if wl.is_finished or wl.has_quota_reservation:
        return True
    cond = wl.condition(c.CONDITION_QUOTA_RESERVED)
    return cond is not None and cond.status == "False" and cond.reason == reason and cond.message == message \
        and cond.observed_generation == wl.metadata.generation


def mark_finished(wl: Workload, succeeded: bool, message: str, now: datetime) -> bool:
    """Finished=True, reason Succeeded or Failed (Kueue's); the admission stays for the record."""
    reason = c.REASON_SUCCEEDED if succeeded else c.REASON_FAILED
    return wl.set_condition(c.CONDITION_FINISHED, "True", reason, message, now)


def deactivation_message(workload: Workload) -> str:
    """Kueue's Evicted message of a deactivation, naming why when a DeactivationTarget says so."""
    target = workload.condition(c.CONDITION_DEACTIVATION_TARGET)
    message = "The workload is deactivated"
    return f"{message} due to {target.message}" if target is not None and target.status == "True" else message


def mark_deactivated(workload: Workload, now: datetime) -> bool:
    """Kueue's eviction of a deactivated Workload, once its Job is stopped: Evicted=True (reason
    Deactivated, `deactivation_message`), QuotaReserved=False, Admitted=False (reason NoReservation),
    an earlier Requeued=True back to False,
    no admission, and the DeactivationTarget condition and requeueState gone (a reactivated Workload
    starts its requeue count afresh). True when anything changed; the caller writes
    `status.admission` and `status.requeueState` as null so a merge patch drops them."""
    message = deactivation_message(workload)
    changed = workload.set_condition(c.CONDITION_EVICTED, "True", c.REASON_DEACTIVATED, message, now)
    if workload.condition(c.CONDITION_REQUEUED) is not None:  # not requeued until reactivated
        changed |= workload.set_condition(c.CONDITION_REQUEUED, "False", c.REASON_DEACTIVATED, message, now)
    if workload.status is not None:
        kept = [cond for cond in workload.status.conditions if cond.type != c.CONDITION_DEACTIVATION_TARGET]
        if len(kept) != len(workload.status.conditions):
            workload.status.conditions = kept
            changed = True
        if workload.status.requeue_state is not None:
            workload.status.requeue_state = None
            changed = True
    changed |= workload.set_condition(c.CONDITION_QUOTA_RESERVED, "False", c.REASON_PENDING, message, now)
    if workload.condition(c.CONDITION_ADMITTED) is not None:
        changed |= workload.set_condition(c.CONDITION_ADMITTED, "False", c.REASON_NO_RESERVATION,
                                          "The workload has no reservation", now)
    if workload.status is not None and workload.status.admission is not None:
        workload.status.admission = None
        changed = True
    return changed


PREEMPTION_CAUSES: dict[str, str] = {
    c.REASON_IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    c.REASON_IN_COHORT_RECLAMATION: "reclamation within the cohort",
    c.REASON_IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}
"""Preempted reason -> the words Kueue's preemption message uses for it."""


def preemption_message(preemptor: str, preemptor_uid: str, job: str | None, job_uid: str | None, reason: str,
                       preemptor_path: str, preemptee_path: str) -> str:
    """The Evicted/Preempted message of a victim, as Kueue composes it (the preemptor's Workload and
    Job UIDs, why, both ClusterQueue paths), with the preemptor's Workload and Job named too:
    `Preempted to accommodate a workload (UID: u, JobUID: j) due to prioritization in the
    ClusterQueue; preemptor path: /cq; preemptee path: /cq; preemptor: workload ns/w, job ns/j`."""
    cause = PREEMPTION_CAUSES.get(reason, "UNKNOWN")
    named = f"workload {preemptor}" + (f", job {job}" if job else "")
    return (f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, JobUID: {job_uid or 'UNKNOWN'}) "
            f"due to {cause}; preemptor path: {preemptor_path or 'UNKNOWN'}; preemptee path: "
            f"{preemptee_path or 'UNKNOWN'}; preemptor: {named}")


def is_evicted(wl: Workload) -> bool:
    """Evicted=True: an eviction was decided (and is carried out while the admission is still set)."""
    return wl.condition_true(c.CONDITION_EVICTED)


def is_terminating(wl: Workload) -> bool:
    """Evicted=True while it still holds its reservation: its Job is being stopped and its quota and
    nodes stay taken until its pods are gone (then `mark_eviction_done`). Read from the object alone,
    so a restarted or newly elected operator carries on where the previous one stopped."""
    return is_evicted(wl) and wl.reserved_admission is not None and not wl.is_finished


def mark_evicted(wl: Workload, reason: str, message: str, now: datetime) -> bool:
    """The eviction is decided: Evicted=True with `reason` (Kueue's: Preempted, Deactivated...) and
    `message`; the admission and QuotaReserved stay until the Job is stopped. True when it changed
    (an eviction already decided keeps its first reason and message)."""
    if is_evicted(wl):
        return False
    return wl.set_condition(c.CONDITION_EVICTED, "True", reason, message, now)


def mark_preempted(wl: Workload, reason: str, message: str, now: datetime) -> bool:
    """A preemption evicts the workload: Evicted=True reason Preempted and Preempted=True with the
    preemption's reason (InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing), both
    with `message`. True when it changed; a workload already evicted is left as it is."""
    if is_evicted(wl):
        return False
    changed = mark_evicted(wl, c.REASON_PREEMPTED, message, now)
    changed |= wl.set_condition(c.CONDITION_PREEMPTED, "True", reason, message, now)
    return changed


def mark_eviction_done(wl: Workload, now: datetime) -> bool:
    """The evicted workload's Job is stopped and its pods are gone: the reservation is released
    (no `status.admission`; QuotaReserved=False reason Pending and Admitted=False reason
    NoReservation, with the eviction's message) and, for a preemption, Requeued=True (the workload
    waits in its queue again). Evicted stays True until it is admitted again. True when it changed;
    the caller writes `status.admission` as null so a merge patch drops it."""
    evicted = wl.condition(c.CONDITION_EVICTED)
    if evicted is None or evicted.status != "True":
        return False
    changed = wl.set_condition(c.CONDITION_QUOTA_RESERVED, "False", c.REASON_PENDING, evicted.message, now)
    if wl.condition(c.CONDITION_ADMITTED) is not None:
        changed |= wl.set_condition(c.CONDITION_ADMITTED, "False", c.REASON_NO_RESERVATION,
                                    "The workload has no reservation", now)
    changed |= wl.set_condition(c.CONDITION_REQUEUED, "True" if evicted.reason in REQUEUED_AFTER else "False",
                                evicted.reason, evicted.message, now)
    pods_ready = wl.condition(c.CONDITION_PODS_READY)
    if pods_ready is not None:  # the next admission waits for its pods afresh (Kueue's WaitForStart)
        changed |= wl.set_condition(c.CONDITION_PODS_READY, "False", c.REASON_WAIT_FOR_START,
                                    "Not all pods are ready or succeeded", now)
    if wl.status is not None and wl.status.admission is not None:
        wl.status.admission = None
        changed = True
    if wl.status is not None and wl.status.unhealthy_nodes:
        wl.status.unhealthy_nodes = []  # the next admission places the whole Workload afresh
        changed = True
    return changed


REQUEUED_AFTER = frozenset({c.REASON_PREEMPTED, c.REASON_NODE_FAILURES})
"""Eviction reasons after which the released Workload is Requeued=True (Kueue's job reconciler)."""
DRAIN_REASONS = frozenset({c.REASON_LOCAL_QUEUE_STOPPED, c.REASON_CLUSTER_QUEUE_STOPPED})
"""Eviction reasons of a queue's HoldAndDrain: the released Workload is Requeued=False with that
reason until its queue runs again (then `mark_queue_restarted`)."""


def released_by_drain(wl: Workload) -> str | None:
    """LocalQueueStopped or ClusterQueueStopped when a drain released the workload and it has not
    been requeued since (Requeued=False with that reason, as Kueue marks it); else None."""
    requeued = wl.condition(c.CONDITION_REQUEUED)
    if requeued is None or requeued.status != "False" or requeued.reason not in DRAIN_REASONS:
        return None
    return requeued.reason


def mark_queue_restarted(wl: Workload, reason: str, message: str, now: datetime) -> bool:
    """The queue whose drain released the workload runs again: Requeued=True with `reason`
    (LocalQueueRestarted, ClusterQueueRestarted) and `message`. Only while `released_by_drain` still
    says so; True when it changed."""
    if released_by_drain(wl) is None:
        return False
    return wl.set_condition(c.CONDITION_REQUEUED, "True", reason, message, now)


def record_unhealthy_nodes(wl: Workload, names: Sequence[str]) -> bool:
    """Add failed nodes of the Workload's topology assignment to `status.unhealthyNodes` (Kueue's
    TASFailedNodeReplacement); True when one was new."""
    if wl.status is None:
        wl.status = WorkloadStatus()
    known = {node.name for node in wl.status.unhealthy_nodes}
    room = max(0, MAX_UNHEALTHY_NODES - len(known))
    new = [UnhealthyNode(name=name) for name in names if name not in known][:room]
    wl.status.unhealthy_nodes = [*wl.status.unhealthy_nodes, *new]
    return bool(new)


def forget_recovered_nodes(wl: Workload, failed: Sequence[str]) -> bool:
    """Drop from `status.unhealthyNodes` the nodes no longer failed (recovered before a replacement
    was written, as Kueue does); True when one was dropped."""
    if wl.status is None:
        return False
    kept = [node for node in wl.status.unhealthy_nodes if node.name in failed]
    changed = len(kept) != len(wl.status.unhealthy_nodes)
    wl.status.unhealthy_nodes = kept
    return changed


def mark_nodes_replaced(wl: Workload, assignments: Mapping[str, TopologyAssignment]) -> bool:
    """The failed nodes are replaced: each pod set's new TopologyAssignment (`assignments` by pod set
    name) in the admission, and `status.unhealthyNodes` emptied, in one write. True when it changed."""
    admission = wl.reserved_admission
    if admission is None or wl.status is None:
        return False
    changed = False
    for psa in admission.pod_set_assignments:
        new = assignments.get(psa.name)
        if new is not None and psa.topology_assignment != new:
            psa.topology_assignment = new
            changed = True
    if wl.status.unhealthy_nodes:
        wl.status.unhealthy_nodes = []
        changed = True
    return changed


def node_failures_message(nodes: Sequence[str]) -> str:
    """Kueue's eviction message when no replacement exists for failed nodes."""
    return f"Workload was evicted as there was no replacement for unhealthy node(s): {','.join(nodes)}"
