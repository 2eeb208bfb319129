"""The ResourceFlavor kind, in both topology forms, and its one normalised topology view.

Kueue names a Topology object (`spec.topologyName`); the original TAS KEP writes the levels
inline (`spec.topology.levels`). `resolve_topology` turns either into a `ResolvedTopology`, telling
"no topology" (None) apart from "names a Topology that does not exist" (`missing`).
Used by the admission cycle, the cache, the validators and `tasq simulate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import Field

from controller.api.meta import (
    ApiModel,
    DateTimeStr,
    DnsSubdomainStr,
    Int64,
    KubeObject,
    LabelKeyStr,
    omitempty_dict,
    omitempty_list,
)
from controller.api.selectors import Taint, Toleration
from controller.api.topology import MAX_TOPOLOGY_LEVELS, Topology

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
# core/v1 lets a toleration leave both empty: "" means Equal, and an empty effect matches every effect.
TolerationOperator = Literal["Exists", "Equal", ""]
TolerationEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""]


class NodeTaint(ApiModel):
    key: LabelKeyStr
    value: str | None = None
    effect: TaintEffect
    time_added: DateTimeStr | None = None

    def to_selector(self) -> Taint:
        return Taint(self.key, self.value or "", self.effect)


class FlavorToleration(ApiModel):
    key: str | None = None
    operator: TolerationOperator | None = None
    value: str | None = None
    effect: TolerationEffect | None = None
    toleration_seconds: Int64 | None = None

    def to_selector(self) -> Toleration:
        return Toleration(self.key or "", self.operator or "Equal", self.value or "", self.effect or "")


class InlineTopology(ApiModel):
    """The KEP's inline form: level node labels, widest first."""

    levels: list[LabelKeyStr] = Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)


# Kueue's limits on a flavor's node labels, taints and tolerations.
MAX_FLAVOR_ITEMS: Final = 8


class ResourceFlavorSpec(ApiModel):
    node_labels: dict[str, str] = omitempty_dict(maxProperties=MAX_FLAVOR_ITEMS)
    node_taints: list[NodeTaint] = omitempty_list(maxItems=MAX_FLAVOR_ITEMS)
    tolerations: list[FlavorToleration] = omitempty_list(maxItems=MAX_FLAVOR_ITEMS)
    topology_name: DnsSubdomainStr | None = None
    topology: InlineTopology | None = None


@dataclass(frozen=True, slots=True)
class ResolvedTopology:
    """A flavor's topology after resolving either form.

    `name` is the Topology's name (the flavor's own name for the inline form); `levels` is empty
    exactly when the flavor names a Topology that does not exist (`missing`).
    """

    name: str
    levels: tuple[str, ...]

    @property
    def missing(self) -> bool:
        return not self.levels


class ResourceFlavor(KubeObject):
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)

    @property
    def has_topology(self) -> bool:
        return self.spec.topology_name is not None or self.spec.topology is not None

    def resolve_topology(self, topologies_by_name: Mapping[str, Topology]) -> ResolvedTopology | None:
        """None without a topology; otherwise the levels, empty when the named Topology is absent.

        The Kueue form wins when a flavor carries both (the validators reject that combination).
        """
        if self.spec.topology_name is not None:
            topo = topologies_by_name.get(self.spec.topology_name)
            levels = topo.level_labels if topo is not None else ()
            return ResolvedTopology(self.spec.topology_name, levels)
        if self.spec.topology is not None:
            return ResolvedTopology(self.name, tuple(self.spec.topology.levels))
        return None

    def topology_levels(self, topologies_by_name: Mapping[str, Topology]) -> tuple[str, ...] | None:
        """The level labels, widest first; None for no topology or a missing Topology."""
        resolved = self.resolve_topology(topologies_by_name)
        if resolved is None or resolved.missing:
            return None
        return resolved.levels

    def taints(self) -> tuple[Taint, ...]:
        return tuple(t.to_selector() for t in self.spec.node_taints)

    def selector_tolerations(self) -> tuple[Toleration, ...]:
        return tuple(t.to_selector() for t in self.spec.tolerations)
