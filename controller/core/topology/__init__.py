"""The topology engine: where a workload's pods fit in one flavor's topology Pure.

`FlavorTopology` is a flavor's static tree (built once, patched per node); `Usage` what is taken per
node, one for the whole cluster, cloned per cycle, with reservations that bound pods convert;
`assign(topology, usage, podsets)` returns an `AssignmentSuccess` or a quantitative
`AssignmentFailure` and never mutates `usage`. Used by the admission cycle and the cache.
The names below are loaded on first use (PEP 562), so a process that needs only the request types
(the webhook process, through the job adapters) never imports the engine and numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULES = {
    "assign": "assigning",
    **dict.fromkeys(("AssignmentFailure", "AssignmentOutcome", "AssignmentSuccess", "Placement", "Slice",
                     "TopologyAssignment"), "outcome"),
    **dict.fromkeys(("UNCONSTRAINED", "PodSetRequest", "SliceLayer", "TopologyMode", "TopologyRequest"), "request"),
    "FlavorTopology": "tree",
    **dict.fromkeys(("NodeRegistry", "Usage", "workload_key_of"), "usage"),
}


def __getattr__(name: str) -> Any:
    """A name of the package's API, imported from its module on first use."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value

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
