"""The Topology kind as served in v1alpha1 and v1beta1: the same fields as v1beta2.

Kueue's Topology kept its schema from v1alpha1 through v1beta2, so the hub model serves all three;
this module names it for `controller.api.crds`, which builds one schema per served version.
"""

from controller.api.topology import Topology, TopologyLevel, TopologySpec

__all__ = ["Topology", "TopologyLevel", "TopologySpec"]
