"""What the topology engine is asked to place: one pod set, its per-pod requests, its topology mode,
its slice layers (Kueue's pod-set slices) and its pod-set group.

Built by the admission cycle from a Workload's podSets (or by tests directly); read by `assigning`.
`PodSetRequest.from_template` computes the effective requests as kube-scheduler does, plus 1 `pods`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.api.selectors import NodeSelectorTerm, Toleration
from controller.api.views import PodTemplateView

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
        view = PodTemplateView.from_dict(template)
        return cls(
            name=name,
            count=count,
            requests=view.placement_requests,
            topology=topology,
            node_selector=view.node_selector,
            affinity_terms=view.affinity_terms,
            tolerations=view.tolerations,
        )
