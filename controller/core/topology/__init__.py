"""The topology engine: where a workload's pods fit in one flavor's topology Pure.

`FlavorTopology` is a flavor's static tree (built once, patched per node); `Usage` what is taken per
node, one for the whole cluster, cloned per cycle, with reservations that bound pods convert;
`assign(topology, usage, podsets)` returns an `AssignmentSuccess` or a quantitative
`AssignmentFailure` and never mutates `usage`. Used by the admission cycle and the cache.
"""

from controller.core.topology.assigning import assign
from controller.core.topology.outcome import (
    AssignmentFailure,
    AssignmentOutcome,
    AssignmentSuccess,
    Placement,
    Slice,
    TopologyAssignment,
)
from controller.core.topology.request import (
    UNCONSTRAINED,
    PodSetRequest,
    SliceLayer,
    TopologyMode,
    TopologyRequest,
)
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import NodeRegistry, Usage, workload_key_of

__all__ = [
    "UNCONSTRAINED",
    "AssignmentFailure",
    "AssignmentOutcome",
    "AssignmentSuccess",
    "FlavorTopology",
    "NodeRegistry",
    "Placement",
    "PodSetRequest",
    "Slice",
    "SliceLayer",
    "TopologyAssignment",
    "TopologyMode",
    "TopologyRequest",
    "Usage",
    "assign",
    "workload_key_of",
]
