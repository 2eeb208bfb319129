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
    """A taint of the flavor's nodes."""

    key: LabelKeyStr
    """The taint's key."""
    value: str | None = None
    """The taint's value."""
    effect: TaintEffect
    """What the taint does to pods that do not tolerate it: NoSchedule, PreferNoSchedule or NoExecute."""
    time_added: DateTimeStr | None = None
    """When the taint was added (NoExecute taints only)."""

    def to_selector(self) -> Taint:
        return Taint(self.key, self.value or "", self.effect)


class FlavorToleration(ApiModel):
    """A toleration added to admitted pods."""

    key: str | None = None
    """The taint key the toleration matches; empty with operator Exists matches every taint."""
    operator: TolerationOperator | None = None
    """Equal (default: key and value match) or Exists (any value)."""
    value: str | None = None
    """The taint value to match with operator Equal."""
    effect: TolerationEffect | None = None
    """The taint effect to match; empty matches every effect."""
    toleration_seconds: Int64 | None = None
    """How long a pod stays bound after a NoExecute taint appears; unset: forever."""

    def to_selector(self) -> Toleration:
        return Toleration(self.key or "", self.operator or "Equal", self.value or "", self.effect or "")


class InlineTopology(ApiModel):
    """The KEP's inline form: level node labels, widest first."""

    levels: list[LabelKeyStr] = Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)
    """The node labels of the levels, widest first (the TAS KEP's inline form)."""


# Kueue's limits on a flavor's node labels, taints and tolerations.
MAX_FLAVOR_ITEMS: Final = 8


class ResourceFlavorSpec(ApiModel):
    """The nodes a flavor stands for."""

    node_labels: dict[str, str] = omitempty_dict(maxProperties=MAX_FLAVOR_ITEMS)
    """Labels of the nodes this flavor stands for; admitted pods get them as a node selector."""
    node_taints: list[NodeTaint] = omitempty_list(maxItems=MAX_FLAVOR_ITEMS)
    """Taints of the nodes this flavor stands for; a Workload must tolerate them to use it."""
    tolerations: list[FlavorToleration] = omitempty_list(maxItems=MAX_FLAVOR_ITEMS)
    """Tolerations added to the pods of Workloads admitted on this flavor."""
    topology_name: DnsSubdomainStr | None = None
    """The Topology whose levels the flavor's nodes are organised in (Kueue's form)."""
    topology: InlineTopology | None = None
    """The levels written inline (the original TAS KEP's form); exclusive with topologyName."""


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
    """ResourceFlavor describes a kind of node: its labels, taints and topology."""

    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
    """The nodes this flavor stands for and how pods are steered to them."""

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
