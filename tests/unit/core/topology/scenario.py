"""Shared vocabulary of the topology tests: the levels, GPU nodes, a pod-set builder, slice strings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from controller.api import constants as c
from controller.api.quantity import resources_from
from controller.api.selectors import NodeSelectorTerm, Toleration
from controller.api.views import NodeView, PodView
from controller.core.topology import (
    AssignmentFailure,
    AssignmentOutcome,
    AssignmentSuccess,
    FlavorTopology,
    PodSetRequest,
    SliceLayer,
    TopologyAssignment,
    TopologyMode,
    TopologyRequest,
    Usage,
    assign,
)
from tests.builders.cluster import NodeBuilder, make_node

BLOCK = "cloud.com/block"
RACK = "cloud.com/rack"
HOST = c.LABEL_HOSTNAME
LEVELS = (BLOCK, RACK, HOST)
GPU = "nvidia.com/gpu"


def gpu_node(name: str, block: str, rack: str, gpus: int = 8) -> NodeBuilder:
    """A node of the block > rack > host tree with `gpus` GPUs, 64 cpu and 110 pods."""
    return make_node(name).label(BLOCK, block).label(RACK, rack).allocatable({GPU: gpus}, cpu="64")


def views(nodes: Iterable[NodeBuilder | NodeView]) -> list[NodeView]:
    return [n if isinstance(n, NodeView) else n.view() for n in nodes]


def topology(nodes: Iterable[NodeBuilder | NodeView], levels: tuple[str, ...] = LEVELS, name: str = "gpu",
             node_labels: Mapping[str, str] | None = None,
             tolerations: Sequence[Toleration] = ()) -> FlavorTopology:
    return FlavorTopology.build(name, levels, node_labels or {}, tolerations, views(nodes))


class PodSetBuilder:
    """`make_podset(8).require(RACK).gpus(1).build()`; defaults: required rack, 1 GPU per pod."""

    def __init__(self, count: int, name: str) -> None:
        self._name, self._count = name, count
        self._mode: TopologyMode = "required"
        self._level: str | None = RACK
        self._requests: dict[str, int] = {GPU: 1000, c.RESOURCE_PODS: 1000}
        self._selector: dict[str, str] = {}
        self._terms: tuple[NodeSelectorTerm, ...] = ()
        self._tolerations: tuple[Toleration, ...] = ()
        self._slices: tuple[SliceLayer, ...] = ()
        self._group: str | None = None

    def slices(self, level: str, size: int) -> PodSetBuilder:
        """Kueue's `podset-slice-required-topology` + `podset-slice-size`."""
        self._slices = (SliceLayer(level, size),)
        return self

    def layers(self, *layers: tuple[str, int]) -> PodSetBuilder:
        """Kueue's `podset-slice-required-topology-constraints`, outer layer first."""
        self._slices = tuple(SliceLayer(level, size) for level, size in layers)
        return self

    def group(self, name: str) -> PodSetBuilder:
        """Kueue's `podset-group-name`."""
        self._group = name
        return self

    def require(self, level: str | None) -> PodSetBuilder:
        self._mode, self._level = "required", level
        return self

    def prefer(self, level: str | None) -> PodSetBuilder:
        self._mode, self._level = "preferred", level
        return self

    def unconstrained(self) -> PodSetBuilder:
        self._mode, self._level = "unconstrained", None
        return self

    def gpus(self, n: int) -> PodSetBuilder:
        self._requests[GPU] = n * 1000
        return self

    def requests(self, **quantities: str) -> PodSetBuilder:
        """Other per-pod requests, as quantities (`cpu="4"`)."""
        self._requests.update(resources_from(quantities))
        return self

    def selector(self, key: str, value: str) -> PodSetBuilder:
        self._selector[key] = value
        return self

    def affinity(self, key: str, operator: str, *values: str) -> PodSetBuilder:
        self._terms = (*self._terms, NodeSelectorTerm(((key, operator, values),), ()))
        return self

    def tolerate(self, key: str, value: str = "", effect: str = "") -> PodSetBuilder:
        self._tolerations = (*self._tolerations, Toleration(key, "Equal", value, effect))
        return self

    def build(self) -> PodSetRequest:
        return PodSetRequest(self._name, self._count, dict(self._requests),
                             TopologyRequest(self._mode, self._level, self._slices, self._group),
                             dict(self._selector),
                             self._terms, self._tolerations)


def make_podset(count: int, name: str = "main") -> PodSetBuilder:
    return PodSetBuilder(count, name)


def slice_strings(assignment: TopologyAssignment) -> list[str]:
    """`["b1/r1/x1=3", ...]`: each slice's label values in level order, then its count."""
    return ["/".join(s.node_labels[lv] for lv in assignment.levels) + f"={s.count}"
            for s in assignment.slices]


def run(nodes: Iterable[NodeBuilder | NodeView], *podsets: PodSetBuilder | PodSetRequest,
        pods: Iterable[PodView] = (), levels: tuple[str, ...] = LEVELS,
        node_labels: Mapping[str, str] | None = None, tolerations: Sequence[Toleration] = (),
        balanced: bool = False) -> AssignmentOutcome:
    """Build the topology, count `pods` as bound usage and assign the pod sets in order."""
    topo = topology(nodes, levels, node_labels=node_labels, tolerations=tolerations)
    requests = [p.build() if isinstance(p, PodSetBuilder) else p for p in podsets]
    return assign(topo, Usage.from_pods(pods), requests, balanced=balanced)


def expect_success(outcome: AssignmentOutcome) -> AssignmentSuccess:
    assert isinstance(outcome, AssignmentSuccess), getattr(outcome, "message", outcome)
    return outcome


def expect_failure(outcome: AssignmentOutcome) -> AssignmentFailure:
    assert isinstance(outcome, AssignmentFailure), outcome
    return outcome
