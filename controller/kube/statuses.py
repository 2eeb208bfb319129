"""Status writes with optimistic concurrency: Workload conditions/admission, queue statuses.

`write_workload_status` applies a change to a Workload model and merge-patches its status with the
object's resourceVersion; on 409 it reads the object afresh and applies the change again, so a
concurrent writer is never overwritten. `queue_statuses` computes the ClusterQueue and LocalQueue
status (counts, flavor usage and borrowing, the Active condition) from the cache. Used by the admission loop and the job reconciler.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from controller.api import constants as c
from controller.api.flavor import ResourceFlavor
from controller.api.meta import Condition, find_condition, format_time
from controller.api.quantity import format_milli
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.workload import Workload
from controller.cache.cluster import ClusterCache
from controller.kube.api import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, ApiError, KubeApi, retrying

CONFLICT_ATTEMPTS = 8
"""Fresh reads after a 409 before a status write gives up (the next event retries it)."""


async def write_workload_status(api: KubeApi, workload: Workload,
                                change: Callable[[Workload], bool]) -> dict[str, Any] | None:
    """Apply `change` (True when it changed something) to a copy of the cached model and patch the
    status; retried from a fresh read on 409. The Workload as written (or as found, when `change`
    had nothing to do); None when it is gone or its fresh read cannot be parsed."""
    model = workload.model_copy(deep=True)
    namespace, name = model.namespace, model.name
    for _ in range(CONFLICT_ATTEMPTS):
        if not change(model):
            return model.to_dict()
        status = model.status.to_dict() if model.status is not None else {}
        patch = {"metadata": {"resourceVersion": model.metadata.resource_version}, "status": status}
        try:
            return await retrying(functools.partial(api.merge_patch, WORKLOADS, namespace, name, patch, "status"))
        except ApiError as e:
            if e.not_found:
                return None
            if not e.conflict:
                raise
        try:
            model = Workload.from_dict(await retrying(lambda: api.get(WORKLOADS, namespace, name)))
        except ValidationError:
            return None
        except ApiError as e:
            if e.not_found:
                return None
            raise
    raise ApiError(409, f"workload {namespace}/{name}: still conflicting after {CONFLICT_ATTEMPTS} fresh reads")


def _flavor_usage(used: Mapping[tuple[str, str], int], spec_pairs: list[tuple[str, str]],
                  nominal: Mapping[tuple[str, str], int] | None) -> list[dict[str, Any]]:
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
                         topologies: Mapping[str, Any]) -> dict[str, str]:
    """The ClusterQueue's Active condition (type, status, reason, message; no time): False when it
    is stopped, names a ResourceFlavor that does not exist, or a flavor of it names a missing
    Topology; True (Ready) otherwise."""
    if cq.stopped:
        return _active(False, c.REASON_STOPPED, f"Cannot admit new Workloads: stopPolicy is {cq.spec.stop_policy}")
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
    """The LocalQueue's Active condition: True (Ready) when its ClusterQueue exists and is active.
    `cluster_queue_conditions`: ClusterQueue name -> its Active condition."""
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


def queue_statuses(cache: ClusterCache, waiting: Mapping[str, str]) -> tuple[
        dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(ClusterQueue name -> status, LocalQueue `ns/name` -> status) from the cache's held
    admissions and `waiting` (workload key -> its ClusterQueue). Admitted = reserving: tasq has no
    admission checks, so both conditions are set together. Conditions carry no time: see
    `stamp_conditions`, so a status computed twice compares equal."""
    snapshot = cache.snapshot()
    cq_counts = {name: [0, 0] for name in cache.cluster_queues}
    lq_counts = {key: [0, 0] for key in cache.local_queues}
    lq_used: dict[str, dict[tuple[str, str], int]] = {key: {} for key in cache.local_queues}
    for key, entry in cache.workloads.items():
        lq = f"{entry.info.namespace}/{entry.info.queue_name}"
        if entry.fit is not None or (entry.admission is not None and not entry.finished):
            if entry.fit is not None and entry.fit.cluster_queue in cq_counts:
                cq_counts[entry.fit.cluster_queue][1] += 1
            if lq in lq_counts:
                lq_counts[lq][1] += 1
                for fr, milli in (entry.fit.quota_usage if entry.fit else {}).items():
                    lq_used[lq][fr] = lq_used[lq].get(fr, 0) + milli
        elif key in waiting:
            if waiting[key] in cq_counts:
                cq_counts[waiting[key]][0] += 1
            if lq in lq_counts:
                lq_counts[lq][0] += 1
    cqs: dict[str, dict[str, Any]] = {}
    actives: dict[str, dict[str, str]] = {}
    for name, (pending, admitted) in cq_counts.items():
        quota = snapshot.cluster_queues.get(name)
        pairs = [(fq.name, res) for g in quota.groups for fq in g.flavors for res in fq.resources] if quota else []
        nominal = {(fq.name, res): q.nominal for g in quota.groups for fq in g.flavors
                   for res, q in fq.resources.items()} if quota else {}
        used = snapshot.quota.used.get(name, {})
        usage = _flavor_usage(used, pairs, nominal)
        actives[name] = cluster_queue_active(cache.cluster_queues[name], cache.flavors, cache.topologies)
        cqs[name] = {"pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
                     "flavorsReservation": usage, "flavorsUsage": usage, "conditions": [actives[name]]}
    lqs: dict[str, dict[str, Any]] = {}
    for key, (pending, admitted) in lq_counts.items():
        usage = _flavor_usage(lq_used[key], sorted(lq_used[key]), None)
        lqs[key] = {"pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted,
                    "flavorsReservation": usage, "flavorUsage": usage,
                    "conditions": [local_queue_active(cache.local_queues[key], actives)]}
    return cqs, lqs


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


async def write_queue_status(api: KubeApi, kind_local: bool, key: str, status: Mapping[str, Any]) -> None:
    """Merge-patch one queue's status (tasq is its only writer: no resourceVersion needed)."""
    if kind_local:
        namespace, name = key.split("/", 1)
        await retrying(lambda: api.merge_patch(LOCAL_QUEUES, namespace, name, {"status": status}, "status"))
    else:
        await retrying(lambda: api.merge_patch(CLUSTER_QUEUES, None, key, {"status": status}, "status"))
