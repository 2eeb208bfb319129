"""Flavor assignment: which ResourceFlavor each PodSet of a Workload gets in its ClusterQueue.

For every pod set and every resource group it touches, the first flavor in the ClusterQueue's
order whose remaining quota covers the pod set and, for a topology flavor, whose
TopologyAssignment succeeds. All pod sets fit or nothing is kept: topology reservations made
while trying are released on failure. Called by the admission cycle for one workload at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from controller.api import constants as c
from controller.api.quantity import Resources, add_into, format_milli, resources_from, resources_to_strings
from controller.api.selectors import NodeSelectorTerm, requirement_matches, untolerated_taint
from controller.api.views import POD_SLOT_MILLI
from controller.api.workload import Admission
from controller.core.admission.quota import ClusterQueueQuota, FlavorResource, QuotaLedger, ResourceGroup
from controller.core.admission.snapshot import AdmissionSnapshot, FlavorInfo
from controller.core.admission.workloads import PodSetInfo, WorkloadInfo
from controller.core.topology import (
    AssignmentSuccess,
    FlavorTopology,
    PodSetRequest,
    TopologyAssignment,
    TopologyRequest,
    Usage,
    assign,
)
from controller.core.topology.candidacy import Signature

IMPLIED = TopologyRequest("unconstrained", None, implied=True)
"""What a pod set without a topology request gets on a topology flavor (Kueue's implicit TAS)."""


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
            "resourceUsage": dict(_quantities(tuple(self.usage.items()))),
        }
        if self.topology is not None:
            out["topologyAssignment"] = self.topology.to_dict()
        return out


@lru_cache(maxsize=1024)
def _quantities(usage: tuple[tuple[str, int], ...]) -> dict[str, str]:
    """`resources_to_strings` of a usage, kept (never handed out itself): the Workloads of one
    shape have one usage, and formatting it was a tenth of each admission's cost."""
    return resources_to_strings(dict(usage))


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


def fit_from_admission(wl: WorkloadInfo, admission: Admission) -> WorkloadFit:
    """The fit behind an existing `status.admission` (a Workload admitted before we saw it): quota
    from each pod set's flavors and resourceUsage, nodes from slices that name a single host."""
    by_name = {ps.name: ps for ps in wl.pod_sets}
    quota: dict[FlavorResource, int] = {}
    nodes: dict[str, Resources] = {}
    granted = []
    for psa in admission.pod_set_assignments:
        usage = resources_from(psa.resource_usage)
        flavors = dict(psa.flavors)
        for resource, flavor in flavors.items():
            quota[(flavor, resource)] = quota.get((flavor, resource), 0) + usage.get(resource, 0)
        ps = by_name.get(psa.name)
        if ps is not None and psa.topology_assignment is not None:
            for sl in psa.topology_assignment.domains():
                host = sl.node_labels.get(c.LABEL_HOSTNAME)
                if host is not None:
                    add_into(nodes.setdefault(host, {}), ps.placement_requests, sl.count)
        granted.append(PodSetFlavors(psa.name, psa.count or 0, flavors, usage, None))
    return WorkloadFit(admission.cluster_queue, tuple(granted), quota, nodes)


@dataclass(slots=True)
class _Attempt:
    """Working state while one workload is tried: what its earlier pod sets already took.

    `groups`: the workload's pod-set groups (Kueue's podset-group-name), members in order;
    `grouped`: members already placed with their group's first member (flavor, assignment)."""

    quota: dict[FlavorResource, int] = field(default_factory=dict)
    nodes: dict[str, Resources] = field(default_factory=dict)
    reserved: bool = False
    groups: dict[str, tuple[PodSetInfo, ...]] = field(default_factory=dict)
    grouped: dict[str, tuple[str, TopologyAssignment]] = field(default_factory=dict)


def quota_requests(cq: ClusterQueueQuota, ps: PodSetInfo) -> Resources:
    """Total requests of a pod set; `pods` counts only when the ClusterQueue covers it (Kueue)."""
    total = {r: v * ps.count for r, v in ps.requests.items()}
    if cq.group_for(c.RESOURCE_PODS) is not None:
        total[c.RESOURCE_PODS] = POD_SLOT_MILLI * ps.count
    return total


def assign_flavors(snap: AdmissionSnapshot, cq_name: str, wl: WorkloadInfo) -> WorkloadFit | NoFit:
    """Phase driver: every pod set in order; on the first that cannot fit, undo and report it.

    On success the nodes stay held in `snap.usage` under the workload key (quota is not charged):
    the caller commits the quota, or calls `snap.usage.release(wl.key)` to drop the fit.
    """
    cq = snap.cluster_queues[cq_name]
    attempt = _Attempt()
    for ps in wl.pod_sets:
        group = ps.topology.group if ps.topology is not None else None
        if group is not None:
            attempt.groups[group] = (*attempt.groups.get(group, ()), ps)
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
    if not groups and ps.topology is not None:
        placed = _place_without_quota(snap, cq, wl_key, ps, attempt)
        if isinstance(placed, NoFit):
            return placed
        topology = placed
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
    """The group's flavors in order; the first that takes the pod set wins.

    With whenCanBorrow: TryNextFlavor, a first pass looks for a flavor that fits without
    borrowing. Every rejected flavor (of the last pass) adds one clause to the message, so the user
    sees all the reasons; the reason is the flavors' common one (e.g. PodSetTopologyUnfit when only
    placement was missing), else QuotaExceeded.
    """
    passes = (False, True) if cq.try_next_flavor_before_borrowing else (True,)
    rejections: list[_Rejection] = []
    for may_borrow in passes:
        rejections = []
        for fq in group.flavors:
            result = _try_flavor(snap, cq, wl_key, ps, fq.name, wanted, attempt, topology_allowed, may_borrow)
            if not isinstance(result, _Rejection):
                return fq.name, result
            rejections.append(result)
    reasons = {r.reason for r in rejections}
    reason = reasons.pop() if len(reasons) == 1 else c.REASON_QUOTA_EXCEEDED
    return NoFit(reason, f"couldn't assign flavors to pod set \"{ps.name}\": "
                 + "; ".join(r.clause for r in rejections))


def _place_without_quota(snap: AdmissionSnapshot, cq: ClusterQueueQuota, wl_key: str, ps: PodSetInfo,
                         attempt: _Attempt) -> TopologyAssignment | NoFit:
    """A pod set that requests nothing the ClusterQueue covers but asks for a topology (Kueue's TAS
    still places it: each pod takes one `pods` slot of its node): the first topology flavor of the
    ClusterQueue, in its order, that suits the pod set and has room. No quota is charged."""
    rejections: list[_Rejection] = []
    for group in cq.groups:
        for fq in group.flavors:
            info = snap.flavors.get(fq.name)
            if info is None or not info.has_topology:
                continue
            mismatch = flavor_mismatch(info, ps)
            result = _place(snap, info, wl_key, ps, attempt) if mismatch is None else _Rejection(mismatch)
            if not isinstance(result, _Rejection):
                return result
            rejections.append(result)
    if not rejections:
        return NoFit(c.REASON_TOPOLOGY_NOT_FOUND, f"couldn't assign flavors to pod set \"{ps.name}\": it "
                     f"requests a topology but ClusterQueue \"{cq.name}\" has no flavor with a topology")
    reasons = {r.reason for r in rejections}
    return NoFit(reasons.pop() if len(reasons) == 1 else c.REASON_QUOTA_EXCEEDED,
                 f"couldn't assign flavors to pod set \"{ps.name}\": " + "; ".join(r.clause for r in rejections))


@dataclass(frozen=True, slots=True)
class _Rejection:
    clause: str
    reason: str = c.REASON_QUOTA_EXCEEDED
    """Why the flavor was refused: QuotaExceeded (quota or the flavor's rules), FlavorNotFound, or
    the topology's PodSetTopologyUnfit / TopologyLevelMissing / TopologyNotFound."""


def _try_flavor(snap: AdmissionSnapshot, cq: ClusterQueueQuota, wl_key: str, ps: PodSetInfo, name: str,
                wanted: Mapping[str, int], attempt: _Attempt, topology_allowed: bool,
                may_borrow: bool) -> TopologyAssignment | _Rejection | None:
    """One flavor, in Kueue's order of checks: the flavor exists and suits the pod set (taints,
    node selector, topology request), its quota covers the pod set, then the placement itself."""
    info = snap.flavors.get(name)
    if info is None:
        return _Rejection(f"flavor \"{name}\" not found", c.REASON_FLAVOR_NOT_FOUND)
    mismatch = flavor_mismatch(info, ps)
    if mismatch is not None:
        return _Rejection(mismatch)
    short = _quota_shortfall(snap.quota, cq, name, wanted, attempt, may_borrow)
    if short is not None:
        return _Rejection(short)
    if not info.has_topology:
        return None
    if not topology_allowed:
        return _Rejection(f"flavor \"{name}\": pod set already placed in another topology flavor")
    return _place(snap, info, wl_key, ps, attempt)


def flavor_mismatch(info: FlavorInfo, ps: PodSetInfo) -> str | None:
    """Why a flavor cannot take the pod set whatever the capacity, or None (Kueue's flavor checks):
    a flavor taint neither the pod nor the flavor tolerates, a nodeSelector / required node affinity
    that contradicts the flavor's nodeLabels (only keys the flavor sets are compared), or a topology
    request on a flavor without topology."""
    taint = untolerated_taint(info.taints, (*ps.tolerations, *info.tolerations))
    if taint is not None:
        return f"flavor \"{info.name}\": untolerated taint \"{taint}\""
    for key, value in sorted(ps.node_selector.items()):
        if key in info.node_labels and info.node_labels[key] != value:
            return (f"flavor \"{info.name}\": nodeSelector {key}={value} does not match the flavor's "
                    f"nodeLabels ({key}={info.node_labels[key]})")
    if ps.affinity_terms and not any(_term_allows(t, info.node_labels) for t in ps.affinity_terms):
        return f"flavor \"{info.name}\": required node affinity does not match the flavor's nodeLabels"
    if not info.has_topology and ps.topology is not None and ps.topology.mode != "unconstrained":
        return (f"flavor \"{info.name}\" has no topology for the requested {ps.topology.mode} level "
                f"\"{ps.topology.level or c.TOPOLOGY_AUTO}\"")
    return None


def _term_allows(term: NodeSelectorTerm, flavor_labels: Mapping[str, str]) -> bool:
    """A node selector term restricted to the keys the flavor labels (the rest is left to nodes)."""
    return all(requirement_matches(flavor_labels, key, op, values)
               for key, op, values in term.expressions if key in flavor_labels)


def _quota_shortfall(ledger: QuotaLedger, cq: ClusterQueueQuota, flavor: str, wanted: Mapping[str, int],
                     attempt: _Attempt, may_borrow: bool = True) -> str | None:
    """None when the flavor's remaining quota (within nominal unless `may_borrow`) covers every
    wanted resource, else the first shortfall."""
    for resource in sorted(wanted):
        need = wanted[resource]
        avail = ledger.availability(cq.name, flavor, resource)
        taken = attempt.quota.get((flavor, resource), 0)
        left = avail.available - taken
        if not may_borrow:
            left = min(left, avail.nominal - avail.used - taken)
        if need > left:
            limit = "" if may_borrow else " without borrowing"
            return (f"insufficient quota for {resource} in flavor \"{flavor}\": requests "
                    f"{format_milli(need, resource)}, available{limit} {format_milli(max(0, left), resource)} "
                    f"({avail.describe(resource)})")
    return None


def _place(snap: AdmissionSnapshot, info: FlavorInfo, wl_key: str, ps: PodSetInfo,
           attempt: _Attempt) -> TopologyAssignment | _Rejection:
    """Ask the topology engine; on success hold the nodes (under the workload key) for later pod sets."""
    if info.topology is None:
        return _Rejection(f"flavor \"{info.name}\": topology \"{info.topology_name}\" not found",
                          c.REASON_TOPOLOGY_NOT_FOUND)
    if info.topology.node_count == 0:
        return _Rejection(f"flavor \"{info.name}\": {no_node_message(info)}", c.REASON_POD_SET_TOPOLOGY_UNFIT)
    if ps.name in attempt.grouped:
        flavor, assignment = attempt.grouped[ps.name]
        if flavor == info.name:
            return assignment
        return _Rejection(f"flavor \"{info.name}\": pod set group of \"{ps.name}\" was placed in flavor "
                          f"\"{flavor}\"")
    if ps.topology is not None and len(ps.topology.slices) > 1 and not snap.features.multi_layer_topology:
        return _Rejection(f"flavor \"{info.name}\": multi-layer slices need the "
                          f"{c.FEATURE_TAS_MULTI_LAYER_TOPOLOGY} feature gate")
    group = ps.topology.group if ps.topology is not None else None
    members = attempt.groups.get(group, (ps,)) if group is not None else (ps,)
    # Kueue's implicit TAS: no topology request on a topology flavor is unconstrained at the lowest level.
    requests = [PodSetRequest(m.name, m.count, m.placement_requests,
                              m.topology if m.topology is not None else IMPLIED,
                              m.node_selector, m.affinity_terms, m.tolerations) for m in members]
    outcome = assign(info.topology, snap.usage, requests, balanced=snap.features.balanced_placement)
    if not isinstance(outcome, AssignmentSuccess):
        needs = ""
        if outcome.reason == c.REASON_POD_SET_TOPOLOGY_UNFIT:
            needs = "; " + needs_and_free(info.topology, snap.usage, ps)
        never = f"{outcome.never}; " if outcome.never else ""
        return _Rejection(f"flavor \"{info.name}\": {never}{outcome.message}{needs}", outcome.reason)
    for node, vector in outcome.placement.resources.items():
        add_into(attempt.nodes.setdefault(node, {}), vector)
    snap.usage.reserve(wl_key, attempt.nodes)
    attempt.reserved = True
    for member, assignment in zip(members, outcome.assignments, strict=True):
        if member.name != ps.name:
            attempt.grouped[member.name] = (info.name, assignment)
    return outcome.assignments[[m.name for m in members].index(ps.name)]


def no_node_message(info: FlavorInfo) -> str:
    """The fix when a topology flavor holds no node: which labels no node carries (sorted, as
    `kubectl get nodes -l` takes them)."""
    if not info.node_labels:
        return "the cluster has no node"
    labels = ",".join(f"{k}={v}" for k, v in sorted(info.node_labels.items()))
    return (f"no node carries flavor \"{info.name}\"'s nodeLabels {labels} "
            f"(label the nodes, or fix the flavor; kubectl get nodes -l {labels})")


def needs_and_free(topology: FlavorTopology, usage: Usage, ps: PodSetInfo) -> str:
    """`needs nvidia.com/gpu 100; free on 19 candidate node(s): nvidia.com/gpu 50`: the pod set's
    total requests against what is left on the flavor's nodes that pass its filters, per requested
    resource (`pods` only when it is short). A fragmented fleet shows enough free in total yet no fit;
    a gang deadlock shows the shortage itself. Only computed for a failed placement."""
    resources = sorted(r for r, m in ps.placement_requests.items() if m > 0)
    mask = topology.candidates(Signature.of(ps.node_selector, ps.affinity_terms, ps.tolerations))
    on = mask.mask[: topology.slots]
    free = topology.allocatable(resources) - usage.used_matrix(topology.rows_in(usage.registry), resources)
    # Python ints: per-node milli amounts (memory) summed over 50,000 nodes overflow int64.
    free_total = {r: sum(free[on, j].clip(min=0).tolist()) for j, r in enumerate(resources)}
    need = {r: ps.placement_requests[r] * ps.count for r in resources}
    shown = [r for r in resources if r != c.RESOURCE_PODS or need[r] > free_total[r]]
    needs = ", ".join(f"{r} {format_milli(need[r], r)}" for r in shown)
    frees = ", ".join(f"{r} {format_milli(free_total[r], r)}" for r in shown)
    return f"needs {needs}; free on {int(on.sum())} candidate node(s): {frees}"
