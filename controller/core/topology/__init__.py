"""The topology engine: where a workload's pods fit in one flavor's topology (DESIGN.md §3). Pure.

API (used by the admission cycle and the cache):
- `FlavorTopology.build(name, levels, node_labels, flavor_tolerations, nodes)`: the static tree of a
  flavor (levels widest first) holding only the nodes carrying every flavor nodeLabel (pass all the
  cluster's); patch it with `upsert_node(NodeView)` (moves relabelled nodes in/out) / `remove_node(name)`.
- `Usage`: what is taken per node, one for the whole cluster (`Usage.from_pods(pods)`), shared by all
  flavors; `clone()` per cycle; `add_bound_pod` / `remove_bound_pod` / `remove_node` as events come;
  `reserve(workload_key, success.placement.resources)` after admitting, `release(workload_key)` when
  it finishes. Pods of a reserved workload convert its reservation into real usage as they bind.
- `assign(topology, usage, [PodSetRequest...])` -> `AssignmentSuccess` (`assignments`, one
  `TopologyAssignment` per pod set, `to_dict()` is the Workload-status form; `placement`) or
  `AssignmentFailure` (`reason`: PodSetTopologyUnfit / TopologyLevelMissing, `message`, `podset`,
  `fit`, `best`, `domain_fits`, `excluded`). Never mutates `usage`; the caller prefixes the message
  with the pod set it failed for if it wants to.
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
from controller.core.topology.request import UNCONSTRAINED, PodSetRequest, TopologyMode, TopologyRequest
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
    "TopologyAssignment",
    "TopologyMode",
    "TopologyRequest",
    "Usage",
    "assign",
    "workload_key_of",
]
