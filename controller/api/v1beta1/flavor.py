"""The ResourceFlavor kind as served in v1beta1: the same fields as v1beta2.

Kueue did not change ResourceFlavor between v1beta1 and v1beta2, so the hub model serves both; this
module names it for `controller.api.crds`, which builds one schema per served version.
"""

from controller.api.flavor import ResourceFlavor, ResourceFlavorSpec

__all__ = ["ResourceFlavor", "ResourceFlavorSpec"]
