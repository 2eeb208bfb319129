"""The Topology kind: the ordered node labels (widest first) that define a topology's levels.

The v1beta2 model (the hub), whose schema v1beta1 and v1alpha1 share. ResourceFlavors name a
Topology by `topologyName`; the cache and the topology engine read its `level_labels`.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from controller.api.meta import ApiModel, KubeObject, LabelKeyStr

MAX_TOPOLOGY_LEVELS: Final = 16
"""Kueue's limit on a topology's levels (both the Topology kind and the KEP's inline form)."""


class TopologyLevel(ApiModel):
    """One level of a topology."""

    node_label: LabelKeyStr
    """The node label whose values name this level's domains (e.g. a rack label)."""


class TopologySpec(ApiModel):
    """A topology's levels."""

    levels: list[TopologyLevel] = Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)
    """The levels, widest first (e.g. block, rack, host); at most 16, each label once."""


class Topology(KubeObject):
    """Topology lists the node labels of a topology's levels, widest first."""

    spec: TopologySpec
    """The topology's levels."""

    @property
    def level_labels(self) -> tuple[str, ...]:
        """The level node labels, widest first."""
        return tuple(level.node_label for level in self.spec.levels)
