"""Validation of Topology objects and of topology level lists wherever they appear.

`levels` is shared with ResourceFlavor's inline `spec.topology.levels` (the KEP form), so both
spellings obey the same rules: 1-16 levels, widest first, valid unique label names, and
`kubernetes.io/hostname` only as the lowest. Called by `webhooks.validation.dispatching`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controller.api import constants as c
from controller.api.topology import MAX_TOPOLOGY_LEVELS
from webhooks.validation import formats, meta, shapes
from webhooks.validation.errors import (
    SPEC,
    FieldError,
    FieldPath,
    duplicate,
    invalid,
    required,
    too_many,
)

MAX_LEVELS: Final = MAX_TOPOLOGY_LEVELS  # shared with the models (and so the CRD schemas)


def levels(path: FieldPath, labels: Sequence[tuple[FieldPath, Any]]) -> list[FieldError]:
    """Rules for an ordered list of level labels, each given with its own field path."""
    errs: list[FieldError] = []
    if not labels:
        errs.append(required(path, "at least 1 topology level is required"))
    if len(labels) > MAX_LEVELS:
        errs.append(too_many(path, len(labels), MAX_LEVELS))
    seen: set[str] = set()
    for position, (label_path, label) in enumerate(labels):
        errs.extend(formats.qualified_name(label_path, label))
        if not isinstance(label, str):
            continue
        if label in seen:
            errs.append(duplicate(label_path, label))
        seen.add(label)
        if label == c.LABEL_HOSTNAME and position != len(labels) - 1:
            errs.append(invalid(label_path, label, f"{c.LABEL_HOSTNAME!r} may only be the lowest "
                                                   f"(last) level, found at {position + 1} of "
                                                   f"{len(labels)}"))
    return errs


def topology_levels(spec: Mapping[str, Any] | None,
                    errs: list[FieldError]) -> list[tuple[FieldPath, Any]]:
    """The `spec.levels[].nodeLabel` values of a Topology, with shape errors appended."""
    items = shapes.sequence(spec, "levels", SPEC.child("levels"), errs)
    out: list[tuple[FieldPath, Any]] = []
    for item_path, item in shapes.objects(items, SPEC.child("levels"), errs):
        out.append((item_path.child("nodeLabel"), item.get("nodeLabel", "")))
    return out


def validate_topology(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a Topology object."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    spec = shapes.mapping(obj, "spec", SPEC, errs)
    if spec is None:
        errs.append(required(SPEC))
        return errs
    found = topology_levels(spec, errs)
    if spec.get("levels") is None or isinstance(spec.get("levels"), list):
        errs.extend(levels(SPEC.child("levels"), found))
    return errs


def validate_topology_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """A Topology's levels are immutable: workloads were admitted against them."""
    errs = validate_topology(new)
    errs.extend(shapes.unchanged(old, new, SPEC.child("levels"), ("spec", "levels")))
    return errs
