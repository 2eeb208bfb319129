"""What the topology engine is asked to place: one pod set, its per-pod requests, its topology mode,
its slice layers (Kueue's pod-set slices) and its pod-set group.

Built by the admission cycle from a Workload's podSets (or by tests directly); read by `assigning`.
`PodSetRequest.from_template` computes the effective requests as kube-scheduler does, plus 1 `pods`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.api.selectors import NodeSelectorTerm, Toleration, required_node_affinity_terms
from controller.api.views import placement_requests, tolerations_from

TopologyMode = Literal["required", "preferred", "unconstrained"]


@dataclass(frozen=True, slots=True)
class SliceLayer:
    """Every `size` consecutive pods of the pod set lie inside one domain of `level`."""

    level: str
    size: int


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """How a pod set must be packed; `level` None means the lowest level (the KEP's `auto`).

    `slices`: Kueue's slice layers, outer first (`podset-slice-required-topology` + `-size` is one
    layer; `-constraints` up to three), each inner size dividing the outer one. `group`: Kueue's
    `podset-group-name`: pod sets of one workload sharing it are placed in one domain together.
    `implied`: no annotation at all, placed as unconstrained because every flavor of the
    ClusterQueue has a topology (Kueue's implicit TAS).
    """

    mode: TopologyMode
    level: str | None = None
    slices: tuple[SliceLayer, ...] = ()
    group: str | None = None
    implied: bool = False

    @property
    def slice_size(self) -> int:
        """Pods per outer slice; 1 (every pod its own slice) without slice layers."""
        return self.slices[0].size if self.slices else 1


UNCONSTRAINED = TopologyRequest("unconstrained", None)


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """One pod set to place: `count` pods each needing `requests` (milli-units, `pods` included)."""

    name: str
    count: int
    requests: Mapping[str, int]
    topology: TopologyRequest = UNCONSTRAINED
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def from_template(cls, name: str, template: Mapping[str, Any], count: int,
                      topology: TopologyRequest = UNCONSTRAINED) -> PodSetRequest:
        """From a pod template (`{"metadata":..., "spec":...}`) as a Job or Workload carries it."""
        spec: Mapping[str, Any] = template.get("spec") or {}
        return cls(
            name=name,
            count=count,
            requests=placement_requests(spec),
            topology=topology,
            node_selector=dict(spec.get("nodeSelector") or {}),
            affinity_terms=required_node_affinity_terms(spec),
            tolerations=tolerations_from(spec.get("tolerations")),
        )
