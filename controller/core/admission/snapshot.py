"""The admission snapshot: queues, flavors and namespaces (static) plus quota and node usage (per cycle).

`build_snapshot` turns API objects, nodes and bound pods into one; `clone` copies only the
per-cycle parts (the QuotaLedger and the topology Usage), never the static topology trees.
Built by `tasq simulate` and the benchmarks (`build_snapshot`) and by the operator's cache
(controller.cache.cluster, from `flavor_infos` and its own ledger); read by the admission cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.features import FeatureGates
from controller.api.flavor import ResourceFlavor
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.selectors import Taint, Toleration
from controller.api.topology import Topology
from controller.api.views import NodeView, PodView
from controller.core.admission.quota import ClusterQueueQuota, CohortQuota, QuotaLedger
from controller.core.topology import FlavorTopology, Usage


@dataclass(frozen=True, slots=True)
class FlavorInfo:
    """A ResourceFlavor as admission needs it; `topology` is None for a plain flavor or a missing Topology."""

    name: str
    has_topology: bool
    topology_name: str | None
    topology: FlavorTopology | None
    node_labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(slots=True)
class AdmissionSnapshot:
    cluster_queues: Mapping[str, ClusterQueueQuota]
    local_queues: Mapping[str, str]
    """`namespace/name` of a LocalQueue -> its ClusterQueue."""
    flavors: Mapping[str, FlavorInfo]
    namespaces: Mapping[str, Mapping[str, str]]
    """Known namespaces and their labels; an unknown namespace has only its name label."""
    quota: QuotaLedger
    usage: Usage
    features: FeatureGates = field(default_factory=FeatureGates)
    """Kueue's placement feature gates (`--feature-gates`); the defaults unless a command sets them."""
    stopped_local_queues: Mapping[str, str] = field(default_factory=dict)
    """`namespace/name` of a LocalQueue whose stopPolicy is Hold or HoldAndDrain -> that policy."""

    def clone(self) -> AdmissionSnapshot:
        return replace(self, quota=self.quota.clone(), usage=self.usage.clone())

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        labels = self.namespaces.get(namespace)
        if labels is None:
            return {c.LABEL_NAMESPACE_NAME: namespace}
        return {c.LABEL_NAMESPACE_NAME: namespace, **labels}


def flavor_infos(flavors: Iterable[ResourceFlavor], topologies: Iterable[Topology],
                 nodes: Sequence[NodeView]) -> dict[str, FlavorInfo]:
    """Build the static topology tree of every topology flavor (once per node set)."""
    by_name = {t.name: t for t in topologies}
    out: dict[str, FlavorInfo] = {}
    for flavor in flavors:
        resolved = flavor.resolve_topology(by_name)
        node_labels, tolerations = dict(flavor.spec.node_labels), flavor.selector_tolerations()
        rules = (node_labels, flavor.taints(), tolerations)
        if resolved is None:
            out[flavor.name] = FlavorInfo(flavor.name, False, None, None, *rules)
            continue
        tree = None
        if not resolved.missing:
            tree = FlavorTopology.build(resolved.name, resolved.levels, node_labels, tolerations, nodes)
        out[flavor.name] = FlavorInfo(flavor.name, True, resolved.name, tree, *rules)
    return out


def build_snapshot(cluster_queues: Iterable[ClusterQueue], local_queues: Iterable[LocalQueue],
                   flavors: Iterable[ResourceFlavor], topologies: Iterable[Topology],
                   nodes: Sequence[NodeView], pods: Iterable[PodView],
                   namespaces: Mapping[str, Mapping[str, str]] | None = None,
                   reservations: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None,
                   cohorts: Iterable[Cohort] = ()) -> AdmissionSnapshot:
    """`reservations` (workload key -> node -> milli) are what admitted workloads hold; they are
    taken before the pods are counted, so a bound pod of such a workload replaces its share.
    `cohorts`: the Cohort objects the ClusterQueues' cohorts form a tree with."""
    queues = {cq.name: ClusterQueueQuota.from_model(cq) for cq in cluster_queues}
    local_queues = list(local_queues)
    usage = Usage()
    for key, held in (reservations or {}).items():
        usage.reserve(key, held)
    for pod in pods:
        usage.add_bound_pod(pod)
    return AdmissionSnapshot(
        cluster_queues=queues,
        local_queues={f"{lq.namespace or 'default'}/{lq.name}": lq.spec.cluster_queue for lq in local_queues},
        flavors=flavor_infos(flavors, topologies, nodes),
        namespaces=dict(namespaces or {}),
        quota=QuotaLedger.build(queues, {co.name: CohortQuota.from_model(co) for co in cohorts}),
        usage=usage,
        stopped_local_queues=stopped_local_queues(local_queues),
    )


def stopped_local_queues(local_queues: Iterable[LocalQueue]) -> dict[str, str]:
    """`namespace/name` -> stopPolicy of each LocalQueue that admits nothing (Hold, HoldAndDrain)."""
    return {f"{lq.namespace or 'default'}/{lq.name}": str(lq.spec.stop_policy) for lq in local_queues if lq.stopped}
