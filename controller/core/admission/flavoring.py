"""Flavor assignment: which ResourceFlavor each PodSet of a Workload gets in its ClusterQueue.

For every pod set and every resource group it touches, the first flavor in the ClusterQueue's
order whose remaining quota covers the pod set and, for a topology flavor, whose
TopologyAssignment succeeds. All pod sets fit or nothing is kept: topology reservations made
while trying are released on failure. Called by the admission cycle for one workload at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.api import constants as c
from controller.api.quantity import Resources, add_into, format_milli, resources_from, resources_to_strings
from controller.core.admission.quota import ClusterQueueQuota, FlavorResource, QuotaLedger, ResourceGroup
from controller.core.admission.snapshot import AdmissionSnapshot, FlavorInfo
from controller.core.admission.workloads import PodSetInfo, WorkloadInfo
from controller.core.topology import (
    UNCONSTRAINED,
    AssignmentSuccess,
    PodSetRequest,
    TopologyAssignment,
    assign,
)


@dataclass(frozen=True, slots=True)
class PodSetFlavors:
    """What one pod set was granted: a flavor per resource, total usage, and its topology slices."""

    name: str
    count: int
    flavors: Mapping[str, str]
    usage: Resources
    topology: TopologyAssignment | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "count": self.count,
            "flavors": {r: self.flavors[r] for r in sorted(self.flavors)},
            "resourceUsage": resources_to_strings(self.usage),
        }
        if self.topology is not None:
            out["topologyAssignment"] = self.topology.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class WorkloadFit:
    """A full flavor assignment: every pod set placed, the quota to charge and the nodes held."""

    cluster_queue: str
    pod_sets: tuple[PodSetFlavors, ...]
    quota_usage: Mapping[FlavorResource, int]
    node_usage: Mapping[str, Resources]

    def admission(self) -> dict[str, Any]:
        """The Workload's `status.admission`."""
        return {"clusterQueue": self.cluster_queue,
                "podSetAssignments": [ps.to_dict() for ps in self.pod_sets]}


@dataclass(frozen=True, slots=True)
class NoFit:
    """Why a workload does not fit now: a PascalCase reason and a quantitative message."""

    reason: str
    message: str


def fit_from_admission(wl: WorkloadInfo, admission: Mapping[str, Any]) -> WorkloadFit:
    """The fit behind an existing `status.admission` (a Workload admitted before we saw it): quota
    from each pod set's flavors and resourceUsage, nodes from slices that name a single host."""
    by_name = {ps.name: ps for ps in wl.pod_sets}
    quota: dict[FlavorResource, int] = {}
    nodes: dict[str, Resources] = {}
    granted = []
    for psa in admission.get("podSetAssignments") or []:
        usage = resources_from(psa.get("resourceUsage"))
        flavors = dict(psa.get("flavors") or {})
        for resource, flavor in flavors.items():
            quota[(flavor, resource)] = quota.get((flavor, resource), 0) + usage.get(resource, 0)
        ps = by_name.get(str(psa.get("name", "")))
        slices = (psa.get("topologyAssignment") or {}).get("slices") or []
        for sl in slices if ps is not None else []:
            host = (sl.get("nodeLabels") or {}).get(c.LABEL_HOSTNAME)
            if host is not None and ps is not None:
                add_into(nodes.setdefault(host, {}), ps.placement_requests, int(sl.get("count", 0)))
        granted.append(PodSetFlavors(str(psa.get("name", "")), int(psa.get("count") or 0), flavors, usage, None))
    return WorkloadFit(str(admission.get("clusterQueue", "")), tuple(granted), quota, nodes)


@dataclass(slots=True)
class _Attempt:
    """Working state while one workload is tried: what its earlier pod sets already took."""

    quota: dict[FlavorResource, int] = field(default_factory=dict)
    nodes: dict[str, Resources] = field(default_factory=dict)
    reserved: bool = False


def quota_requests(cq: ClusterQueueQuota, ps: PodSetInfo) -> Resources:
    """Total requests of a pod set; `pods` counts only when the ClusterQueue covers it (Kueue)."""
    total = {r: v * ps.count for r, v in ps.requests.items()}
    if cq.group_for(c.RESOURCE_PODS) is not None:
        total[c.RESOURCE_PODS] = 1000 * ps.count
    return total


def assign_flavors(snap: AdmissionSnapshot, cq_name: str, wl: WorkloadInfo) -> WorkloadFit | NoFit:
    """Phase driver: every pod set in order; on the first that cannot fit, undo and report it.

    On success the nodes stay held in `snap.usage` under the workload key (quota is not charged):
    the caller commits the quota, or calls `snap.usage.release(wl.key)` to drop the fit.
    """
    cq = snap.cluster_queues[cq_name]
    attempt = _Attempt()
    granted: list[PodSetFlavors] = []
    for ps in wl.pod_sets:
        result = _assign_pod_set(snap, cq, wl.key, ps, attempt)
        if isinstance(result, NoFit):
            if attempt.reserved:
                snap.usage.release(wl.key)
            return result
        granted.append(result)
    return WorkloadFit(cq_name, tuple(granted), attempt.quota, attempt.nodes)


def _assign_pod_set(snap: AdmissionSnapshot, cq: ClusterQueueQuota, wl_key: str, ps: PodSetInfo,
                    attempt: _Attempt) -> PodSetFlavors | NoFit:
    """One pod set: resolve each resource group it touches to a flavor; state grows in `attempt`."""
    total = quota_requests(cq, ps)
    groups: list[ResourceGroup] = []
    for resource in sorted(total):
        group = cq.group_for(resource)
        if group is None:
            return NoFit(c.REASON_QUOTA_EXCEEDED, f"couldn't assign flavors to pod set \"{ps.name}\": "
                         f"resource \"{resource}\" unavailable in ClusterQueue \"{cq.name}\"")
        if group not in groups:
            groups.append(group)
    flavors: dict[str, str] = {}
    topology: TopologyAssignment | None = None
    for group in groups:
        wanted = {r: v for r, v in total.items() if r in group.covered}
        chosen = _first_fitting_flavor(snap, cq, wl_key, ps, group, wanted, attempt, topology is None)
        if isinstance(chosen, NoFit):
            return chosen
        flavor, assignment = chosen
        topology = topology or assignment
        for resource, amount in wanted.items():
            flavors[resource] = flavor
            attempt.quota[(flavor, resource)] = attempt.quota.get((flavor, resource), 0) + amount
    return PodSetFlavors(ps.name, ps.count, flavors, total, topology)


def _first_fitting_flavor(snap: AdmissionSnapshot, cq: ClusterQueueQuota, wl_key: str, ps: PodSetInfo,
                          group: ResourceGroup, wanted: Mapping[str, int], attempt: _Attempt,
                          topology_allowed: bool) -> tuple[str, TopologyAssignment | None] | NoFit:
    """The group's flavors in order: quota first, then (topology flavors) the placement itself.

    Every rejected flavor adds one clause to the message, so the user sees all the reasons.
    """
    reasons: list[str] = []
    topology_only = True
    for fq in group.flavors:
        short = _quota_shortfall(snap.quota, cq, fq.name, wanted, attempt)
        if short is not None:
            reasons.append(short)
            topology_only = False
            continue
        info = snap.flavors.get(fq.name)
        if info is None:
            reasons.append(f"flavor \"{fq.name}\" not found")
            topology_only = False
            continue
        if not info.has_topology:
            if ps.topology is not None and ps.topology.mode != "unconstrained":
                reasons.append(f"flavor \"{fq.name}\" has no topology for the requested "
                               f"{ps.topology.mode} level \"{ps.topology.level or c.TOPOLOGY_AUTO}\"")
                continue
            return fq.name, None
        placed = _place(snap, info, wl_key, ps, attempt) if topology_allowed else \
            f"flavor \"{fq.name}\": pod set already placed in another topology flavor"
        if isinstance(placed, str):
            reasons.append(placed)
            continue
        return fq.name, placed
    reason = c.REASON_POD_SET_TOPOLOGY_UNFIT if topology_only else c.REASON_QUOTA_EXCEEDED
    return NoFit(reason, f"couldn't assign flavors to pod set \"{ps.name}\": " + "; ".join(reasons))


def _quota_shortfall(ledger: QuotaLedger, cq: ClusterQueueQuota, flavor: str, wanted: Mapping[str, int],
                     attempt: _Attempt) -> str | None:
    """None when the flavor's remaining quota covers every wanted resource, else the first shortfall."""
    for resource in sorted(wanted):
        need = wanted[resource]
        avail = ledger.availability(cq.name, flavor, resource)
        left = avail.available - attempt.quota.get((flavor, resource), 0)
        if need > left:
            return (f"insufficient quota for {resource} in flavor \"{flavor}\": requests "
                    f"{format_milli(need, resource)}, available {format_milli(max(0, left), resource)} "
                    f"({avail.describe(resource)})")
    return None


def _place(snap: AdmissionSnapshot, info: FlavorInfo, wl_key: str, ps: PodSetInfo,
           attempt: _Attempt) -> TopologyAssignment | str:
    """Ask the topology engine; on success hold the nodes (under the workload key) for later pod sets."""
    if info.topology is None:
        return f"flavor \"{info.name}\": topology \"{info.topology_name}\" not found"
    request = PodSetRequest(ps.name, ps.count, ps.placement_requests,
                            ps.topology if ps.topology is not None else UNCONSTRAINED,
                            ps.node_selector, ps.affinity_terms, ps.tolerations)
    outcome = assign(info.topology, snap.usage, [request])
    if not isinstance(outcome, AssignmentSuccess):
        return f"flavor \"{info.name}\": {outcome.message}"
    for node, vector in outcome.placement.resources.items():
        held = attempt.nodes.setdefault(node, {})
        for r, v in vector.items():
            held[r] = held.get(r, 0) + v
    snap.usage.reserve(wl_key, attempt.nodes)
    attempt.reserved = True
    return outcome.assignments[0]
