"""ClusterQueue, LocalQueue and Cohort statuses: pending and admitted counts, flavor usage, Active.

`queue_statuses` computes both kinds of queue status from plain inputs (the queues, flavors and
topologies, each queue's quota and usage, and how each Workload stands); `cohort_statuses` the
Cohorts' Active condition from the cohort tree; `stamp_conditions` gives
their conditions a transition time at write. Pure: `now` is passed in. Called by the admission
loop (controller.kube.admitting), which writes the statuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.flavor import ResourceFlavor
from controller.api.meta import Condition, find_condition, format_time
from controller.api.quantity import format_milli
from controller.api.queues import ClusterQueue, LocalQueue
from controller.core.admission.quota import ClusterQueueQuota, CohortTree, cycle_text

FlavorResource = tuple[str, str]


@dataclass(frozen=True, slots=True)
class QueuedWorkload:
    """One Workload as the queue statuses count it. `admitted`: it holds an admission (reserved
    here, or recorded in its status and not finished); `cluster_queue` and `quota_usage`: the
    ClusterQueue and quota it holds here (None and empty while nothing is reserved here)."""

    key: str
    local_queue: str
    """`namespace/name` of the LocalQueue it was submitted to."""
    admitted: bool
    cluster_queue: str | None = None
    quota_usage: Mapping[FlavorResource, int] | None = None


@dataclass(frozen=True, slots=True)
class QueueInputs:
    """What the queue statuses are computed from. `quotas`: ClusterQueue name -> its quota (for the
    flavors and resources in spec order and the nominal amounts); `used`: ClusterQueue name ->
    (flavor, resource) -> milli-units in use."""

    cluster_queues: Mapping[str, ClusterQueue]
    local_queues: Mapping[str, LocalQueue]
    flavors: Mapping[str, ResourceFlavor]
    topologies: Mapping[str, Any]
    quotas: Mapping[str, ClusterQueueQuota]
    used: Mapping[str, Mapping[FlavorResource, int]]
    workloads: Sequence[QueuedWorkload]
    cohort_cycles: Mapping[str, tuple[str, ...]] | None = None
    """ClusterQueue name -> the cycle of cohorts that disables it (CohortTree.cycle_of_queue)."""


def _flavor_usage(used: Mapping[FlavorResource, int], spec_pairs: list[FlavorResource],
                  nominal: Mapping[FlavorResource, int] | None) -> list[dict[str, Any]]:
    """Kueue's `flavorsUsage` list: every flavor and resource of the queue, in spec order. With
    `nominal` (a ClusterQueue's), each entry also says how much is `borrowed`: the usage above the
    nominal quota (a resource the queue has no quota for is borrowed whole)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for flavor, resource in [*spec_pairs, *sorted(set(used) - set(spec_pairs))]:
        milli = used.get((flavor, resource), 0)
        entry: dict[str, Any] = {"name": resource, "total": format_milli(milli, resource)}
        if nominal is not None:
            entry["borrowed"] = format_milli(max(0, milli - nominal.get((flavor, resource), 0)), resource)
        out.setdefault(flavor, []).append(entry)
    return [{"name": flavor, "resources": resources} for flavor, resources in out.items()]


def cluster_queue_active(cq: ClusterQueue, flavors: Mapping[str, ResourceFlavor],
                         topologies: Mapping[str, Any], cycle: tuple[str, ...] | None = None) -> dict[str, str]:
    """The ClusterQueue's Active condition (type, status, reason, message; no time): False when it
    is being deleted (Terminating), stopped, its cohort is in or under a cycle of cohorts (`cycle`),
    it names a ResourceFlavor that does not exist, or a flavor of it names a missing Topology; True
    (Ready) otherwise."""
    if cq.metadata.deletion_timestamp is not None:
        return _active(False, c.REASON_TERMINATING, "Cannot admit new Workloads: the ClusterQueue is terminating")
    if cq.stopped:
        return _active(False, c.REASON_STOPPED, f"Cannot admit new Workloads: stopPolicy is {cq.spec.stop_policy}")
    if cycle is not None:
        return _active(False, c.REASON_COHORT_HAS_CYCLE, f"Cannot admit new Workloads: cohort {cq.spec.cohort_name} "
                       f"is in or under a cycle of cohorts ({cycle_text(cycle)})")
    missing = sorted({name for name in cq.flavor_names if name not in flavors})
    if missing:
        return _active(False, c.REASON_FLAVOR_NOT_FOUND,
                       f"Cannot admit new Workloads: missing ResourceFlavor(s) {', '.join(missing)}")
    no_topology = sorted({(name, str(flavors[name].spec.topology_name)) for name in cq.flavor_names
                          if flavors[name].spec.topology_name is not None
                          and flavors[name].spec.topology_name not in topologies})
    if no_topology:
        named = ", ".join(f"{topology} (of ResourceFlavor {flavor})" for flavor, topology in no_topology)
        return _active(False, c.REASON_TOPOLOGY_NOT_FOUND, f"Cannot admit new Workloads: missing Topology {named}")
    return _active(True, c.REASON_READY, "Can admit new Workloads")


def local_queue_active(lq: LocalQueue, cluster_queue_conditions: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The LocalQueue's Active condition: False (Stopped) when its own stopPolicy holds it, else True
    (Ready) when its ClusterQueue exists and is active. `cluster_queue_conditions`: ClusterQueue
    name -> its Active condition."""
    if lq.stopped:
        return _active(False, c.REASON_STOPPED, f"Cannot admit new Workloads: stopPolicy is {lq.spec.stop_policy}")
    name = lq.spec.cluster_queue
    cq_active = cluster_queue_conditions.get(name)
    if cq_active is None:
        return _active(False, c.REASON_CLUSTER_QUEUE_DOES_NOT_EXIST,
                       f"Cannot submit new Workloads: ClusterQueue {name} does not exist")
    if cq_active["status"] != "True":
        return _active(False, c.REASON_CLUSTER_QUEUE_IS_INACTIVE,
                       f"Cannot submit new Workloads: ClusterQueue {name} is inactive ({cq_active['reason']})")
    return _active(True, c.REASON_READY, f"Can submit new Workloads to ClusterQueue {name}")


def _active(status: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": c.CONDITION_ACTIVE, "status": "True" if status else "False", "reason": reason, "message": message}


@dataclass(slots=True)
class _Counts:
    """Per queue: [pending, admitted]; per LocalQueue also the quota its admitted Workloads hold."""

    cluster_queues: dict[str, list[int]]
    local_queues: dict[str, list[int]]
    local_used: dict[str, dict[FlavorResource, int]]


def _count(inputs: QueueInputs, waiting: Mapping[str, str]) -> _Counts:
    """Phase 1: each Workload counted once, as admitted (by its LocalQueue, and by its ClusterQueue
    when it holds quota here) or as pending (by the ClusterQueue it waits in, and its LocalQueue).
    A Workload neither admitted nor waiting (finished, inactive) is not counted."""
    counts = _Counts({name: [0, 0] for name in inputs.cluster_queues}, {key: [0, 0] for key in inputs.local_queues},
                     {key: {} for key in inputs.local_queues})
    for wl in inputs.workloads:
        lq = wl.local_queue
        if wl.admitted:
            if wl.cluster_queue is not None and wl.cluster_queue in counts.cluster_queues:
                counts.cluster_queues[wl.cluster_queue][1] += 1
            if lq in counts.local_queues:
                counts.local_queues[lq][1] += 1
                for fr, milli in (wl.quota_usage or {}).items():
                    counts.local_used[lq][fr] = counts.local_used[lq].get(fr, 0) + milli
        elif wl.key in waiting:
            if waiting[wl.key] in counts.cluster_queues:
                counts.cluster_queues[waiting[wl.key]][0] += 1
            if lq in counts.local_queues:
                counts.local_queues[lq][0] += 1
    return counts


def _cluster_queue_status(inputs: QueueInputs, name: str, pending: int, admitted: int) -> dict[str, Any]:
    """Phase 2: one ClusterQueue's status; its usage lists every flavor and resource of its quota."""
    quota = inputs.quotas.get(name)
    pairs = [(fq.name, res) for g in quota.groups for fq in g.flavors for res in fq.resources] if quota else []
    nominal = {(fq.name, res): q.nominal for g in quota.groups for fq in g.flavors
               for res, q in fq.resources.items()} if quota else {}
    usage = _flavor_usage(inputs.used.get(name, {}), pairs, nominal)
    active = cluster_queue_active(inputs.cluster_queues[name], inputs.flavors, inputs.topologies,
                                  (inputs.cohort_cycles or {}).get(name))
    return {"pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
            "flavorsReservation": usage, "flavorsUsage": usage, "conditions": [active]}


def queue_statuses(inputs: QueueInputs, waiting: Mapping[str, str]) -> tuple[
        dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(ClusterQueue name -> status, LocalQueue `ns/name` -> status), `waiting` being workload key
    -> the ClusterQueue it waits in. Admitted = reserving: tasq has no admission checks, so both
    conditions are set together. Conditions carry no time (see `stamp_conditions`), so a status
    computed twice compares equal."""
    counts = _count(inputs, waiting)
    cqs = {name: _cluster_queue_status(inputs, name, pending, admitted)
           for name, (pending, admitted) in counts.cluster_queues.items()}
    actives = {name: status["conditions"][0] for name, status in cqs.items()}
    lqs: dict[str, dict[str, Any]] = {}
    for key, (pending, admitted) in counts.local_queues.items():
        usage = _flavor_usage(counts.local_used[key], sorted(counts.local_used[key]), None)
        lqs[key] = {"pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
                    "flavorsReservation": usage, "flavorsUsage": usage,
                    "conditions": [local_queue_active(inputs.local_queues[key], actives)]}
    return cqs, lqs


def cohort_active(cohort: Cohort, tree: CohortTree) -> dict[str, str]:
    """A Cohort's Active condition: False when it is in or under a cycle of cohorts (Kueue admits
    nothing in such a tree); True otherwise, with reason ParentNotFound when its parent has no
    Cohort object (it then hangs under an empty root of that name, as in Kueue)."""
    cycle = tree.cycles.get(cohort.name)
    if cycle is not None:
        return _active(False, c.REASON_COHORT_HAS_CYCLE, "Cannot admit new Workloads in this cohort tree: cohort "
                       f"{cohort.name} is in or under a cycle of cohorts ({cycle_text(cycle)})")
    parent = cohort.parent
    if parent is not None and not tree.cohorts[parent].explicit:
        return _active(True, c.REASON_PARENT_NOT_FOUND, f"Parent cohort {parent} has no Cohort object: it acts as "
                       "a root with no quota of its own and no limits")
    return _active(True, c.REASON_READY, "Can admit new Workloads")


def cohort_statuses(cohorts: Mapping[str, Cohort], tree: CohortTree) -> dict[str, dict[str, Any]]:
    """Cohort name -> its status (the Active condition; no time, see `stamp_conditions`)."""
    return {name: {"conditions": [cohort_active(cohort, tree)]} for name, cohort in cohorts.items()}


def stamp_conditions(status: Mapping[str, Any], previous: Sequence[Condition], now: datetime) -> dict[str, Any]:
    """`status` with a lastTransitionTime on each condition: the previous one's when its status is
    unchanged (Kubernetes' meaning: the time the status last changed), else `now`."""
    stamped = []
    for cond in status.get("conditions") or []:
        before = find_condition(previous, cond["type"])
        since = before.last_transition_time if before is not None and before.status == cond["status"] else \
            format_time(now)
        stamped.append({**cond, "lastTransitionTime": since})
    return {**status, "conditions": stamped}
