"""Validation of ResourceFlavor objects, in both the Kueue and the original-KEP topology forms.

A flavor names its topology either by `spec.topologyName` (Kueue) or inline with
`spec.topology.levels` (the TAS KEP); never both, and a topology flavor must select nodes by
at least one nodeLabel. Limits (8 labels, taints, tolerations) are Kueue's; the spec of a flavor with a
topology is immutable (its nodes and levels were cached and assigned). Called by dispatching.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controller.api.flavor import MAX_FLAVOR_ITEMS
from webhooks.validation import formats, meta, placement, shapes, topology
from webhooks.validation.errors import SPEC, FieldError, forbidden, invalid_omitted, required

# One limit for the three lists, shared with the model (and so the CRD schema).
MAX_NODE_LABELS: Final = MAX_FLAVOR_ITEMS
MAX_TAINTS: Final = MAX_FLAVOR_ITEMS
MAX_TOLERATIONS: Final = MAX_FLAVOR_ITEMS


def _inline_topology(spec: Mapping[str, Any], errs: list[FieldError]) -> bool:
    """Validate `spec.topology.levels` (KEP form); True when an inline topology is present."""
    inline = shapes.mapping(spec, "topology", SPEC.child("topology"), errs)
    if inline is None:
        return False
    path = SPEC.child("topology").child("levels")
    items = shapes.sequence(inline, "levels", path, errs)
    if items is not None or inline.get("levels") is None:
        # A non-list `levels` was reported as such; "no levels" on top of it would be noise.
        errs.extend(topology.levels(path, [(path.index(i), label) for i, label in enumerate(items or [])]))
    return True


def validate_resource_flavor(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a ResourceFlavor object."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    labels = shapes.string_map(spec, "nodeLabels", SPEC.child("nodeLabels"), errs)
    errs.extend(placement.node_labels(SPEC.child("nodeLabels"), labels, MAX_NODE_LABELS))
    taints = shapes.sequence(spec, "nodeTaints", SPEC.child("nodeTaints"), errs)
    errs.extend(placement.taints(SPEC.child("nodeTaints"), taints, MAX_TAINTS))
    for i, taint in enumerate(taints or []):
        if isinstance(taint, (dict, Mapping)):  # placement.taints reported the other items
            shapes.timestamp(taint, "timeAdded", SPEC.child("nodeTaints").index(i).child("timeAdded"), errs)
    errs.extend(placement.tolerations(SPEC.child("tolerations"),
                                      shapes.sequence(spec, "tolerations", SPEC.child("tolerations"), errs),
                                      MAX_TOLERATIONS))
    name = shapes.string(spec, "topologyName", SPEC.child("topologyName"), errs)
    if name is not None:
        errs.extend(formats.dns_subdomain(SPEC.child("topologyName"), name))
    has_inline = _inline_topology(spec, errs)
    if name is not None and has_inline:
        errs.append(forbidden(SPEC.child("topology"),
                              "must not be set together with spec.topologyName (use one form)"))
    if (name is not None or has_inline) and not labels:
        errs.append(required(SPEC.child("nodeLabels"),
                             "a flavor with a topology needs at least 1 node label"))
    return errs


def validate_resource_flavor_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue: once a flavor has a topology its spec is frozen (both forms here, not only topologyName)."""
    errs = validate_resource_flavor(new)
    old_spec = shapes.lookup(old, "spec")
    had_topology = isinstance(old_spec, (dict, Mapping)) and (
        old_spec.get("topologyName") is not None or old_spec.get("topology") is not None)
    if had_topology and old_spec != shapes.lookup(new, "spec"):
        errs.append(invalid_omitted(SPEC, "field is immutable once the flavor has a topology "
                                          "(spec.topologyName or spec.topology)"))
    return errs
