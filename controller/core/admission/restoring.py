"""Node capacity for a Workload admitted before tasq saw it, whose slices name domains above hosts.

Its quota comes from `status.admission`; slices naming a host hold that host (`fit_from_admission`),
but a slice naming a rack or block says nothing about nodes. `domain_holdings` places each such
slice's pods not yet bound onto that domain's nodes as the topology engine places a chosen domain's
pods (fewest nodes, most free first) and adds the share of its bound pods. Called by the operator's
cache (controller.cache.cluster) and `tasq simulate` (controller.core.simulating).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.api import constants as c
from controller.api.quantity import Resources, add_into
from controller.api.views import POD_SLOT_MILLI, NodeView, PodView
from controller.api.workload import Admission
from controller.core.admission.snapshot import AdmissionSnapshot
from controller.core.admission.workloads import PodSetInfo, WorkloadInfo
from controller.core.topology import AssignmentSuccess, FlavorTopology, PodSetRequest, TopologyRequest, assign
from controller.core.topology.usage import workload_key_of


@dataclass(frozen=True, slots=True)
class DomainSlice:
    """One slice of an admitted pod set that names a domain above the host level."""

    pod_set: PodSetInfo
    topology: FlavorTopology
    level: str
    """The deepest topology level the slice names; the slice's domain is a domain of this level."""
    node_labels: Mapping[str, str]
    count: int


def domain_slices(snap: AdmissionSnapshot, wl: WorkloadInfo, admission: Admission) -> list[DomainSlice]:
    """Phase 1: the slices of `admission` naming no single host, each with its flavor's tree (slices
    of a flavor without a tree, or naming labels the tree lacks, hold nothing)."""
    by_name = {ps.name: ps for ps in wl.pod_sets}
    out = []
    for psa in admission.pod_set_assignments:
        ps = by_name.get(psa.name)
        trees = [info.topology for name in sorted(set(psa.flavors.values()))
                 if (info := snap.flavors.get(name)) is not None and info.topology is not None]
        if ps is None or not trees or psa.topology_assignment is None:
            continue
        for sl in psa.topology_assignment.domains():
            labels = sl.node_labels
            named = [level for level in trees[0].levels if level in labels]
            if c.LABEL_HOSTNAME in labels or not named or len(named) != len(labels):
                continue
            out.append(DomainSlice(ps, trees[0], named[-1], labels, sl.count))
    return out


def _bound_in(sl: DomainSlice, pods: Iterable[PodView], nodes: Mapping[str, NodeView]) -> dict[str, Resources]:
    """Phase 2: per node, the share of the workload's bound pods (`pods` are the workload's own) of
    this pod set inside the slice's domain (they already count as pods; their share is held so they
    convert it when they bind)."""
    held: dict[str, Resources] = {}
    for pod in pods:
        node = nodes.get(pod.node_name or "")
        if (node is None or pod.terminal
                or pod.annotations.get(c.ANNOTATION_TOPOLOGY_PODSET, sl.pod_set.name) != sl.pod_set.name
                or any(node.labels.get(k) != v for k, v in sl.node_labels.items())):
            continue
        add_into(held.setdefault(node.name, {}), sl.pod_set.placement_requests)
    return held


def _request(sl: DomainSlice, count: int) -> PodSetRequest:
    """`count` pods of the slice's pod set confined to the slice's domain: a nodeSelector of the
    slice's labels and a required request at its level leave that domain as the only candidate."""
    ps = sl.pod_set
    return PodSetRequest(ps.name, count, ps.placement_requests, TopologyRequest("required", sl.level),
                         {**ps.node_selector, **sl.node_labels}, ps.affinity_terms, ps.tolerations)


def _place(snap: AdmissionSnapshot, sl: DomainSlice, count: int) -> Mapping[str, Resources]:
    """Phase 3: `count` pods onto the slice's domain, fewest nodes and most free first; when the
    domain no longer holds them all (the cluster changed), as many as still fit there."""
    if count <= 0:
        return {}
    outcome = assign(sl.topology, snap.usage, [_request(sl, count)])
    if isinstance(outcome, AssignmentSuccess):
        return outcome.placement.resources
    if min(outcome.fit, count) <= 0:
        return {}
    outcome = assign(sl.topology, snap.usage, [_request(sl, min(outcome.fit, count))])
    return outcome.placement.resources if isinstance(outcome, AssignmentSuccess) else {}


def domain_holdings(snap: AdmissionSnapshot, wl: WorkloadInfo, admission: Admission,
                    pods: Iterable[PodView], nodes: Mapping[str, NodeView]) -> dict[str, Resources]:
    """Driver: what the domain slices of an admitted workload hold per node (its pods not yet bound,
    placed; plus its bound pods' share, so reserving this before counting pods, as `build_snapshot`
    does, counts each pod once). The placed part is also reserved in `snap.usage` at once, under
    `<workload key>/domain-slices`, so the next slice and the next workload see it."""
    mine = [pod for pod in pods if workload_key_of(pod) == wl.key]  # once, not once per slice
    placed: dict[str, Resources] = {}
    held: dict[str, Resources] = {}
    for sl in domain_slices(snap, wl, admission):
        bound = _bound_in(sl, mine, nodes)
        already = sum(v.get(c.RESOURCE_PODS, 0) for v in bound.values()) // POD_SLOT_MILLI
        here = _place(snap, sl, sl.count - already)
        for into, parts in ((placed, (here,)), (held, (here, bound))):
            for part in parts:
                for node, vector in part.items():
                    add_into(into.setdefault(node, {}), vector)
        snap.usage.reserve(f"{wl.key}/domain-slices", placed)
    return held
