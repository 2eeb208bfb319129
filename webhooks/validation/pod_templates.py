"""Validation of pod templates embedded in Workload pod sets and Jobs.

Checks only what tasq relies on to compute requests and placement: containers present with
unique DNS-label names, valid non-negative request/limit quantities, a valid nodeSelector and
tolerations. Called by the Workload and Job validators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhooks.validation import formats, placement, shapes
from webhooks.validation.errors import FieldError, FieldPath, duplicate, required


def _containers(path: FieldPath, items: list[Any] | None, errs: list[FieldError],
                names: set[str]) -> None:
    """Names unique across all container lists (`names` is shared); quantities valid."""
    for item_path, container in shapes.objects(items, path, errs):
        name = container.get("name")
        errs.extend(formats.dns_label(item_path.child("name"), name if name is not None else ""))
        if isinstance(name, str) and name:
            if name in names:
                errs.append(duplicate(item_path.child("name"), name))
            names.add(name)
        resources = shapes.mapping(container, "resources", item_path.child("resources"), errs)
        for kind in ("requests", "limits"):
            kind_path = item_path.child("resources").child(kind)
            amounts = shapes.mapping(resources, kind, kind_path, errs) or {}
            for resource in sorted(amounts):
                errs.extend(formats.qualified_name(kind_path, resource))
                errs.extend(formats.quantity(kind_path.key(resource), amounts[resource]))


def pod_template(path: FieldPath, template: Mapping[str, Any] | None) -> list[FieldError]:
    """Every error in a PodTemplateSpec at `path` (None: the template is missing)."""
    errs: list[FieldError] = []
    if template is None:
        return [required(path)]
    spec_path = path.child("spec")
    spec = shapes.mapping(template, "spec", spec_path, errs)
    if spec is None:
        return [*errs, required(spec_path)]
    containers = shapes.sequence(spec, "containers", spec_path.child("containers"), errs)
    if not containers:
        errs.append(required(spec_path.child("containers"), "at least 1 container is required"))
    names: set[str] = set()
    _containers(spec_path.child("initContainers"),
                shapes.sequence(spec, "initContainers", spec_path.child("initContainers"), errs),
                errs, names)
    _containers(spec_path.child("containers"), containers, errs, names)
    selector = shapes.string_map(spec, "nodeSelector", spec_path.child("nodeSelector"), errs)
    errs.extend(placement.node_labels(spec_path.child("nodeSelector"), selector))
    errs.extend(placement.tolerations(
        spec_path.child("tolerations"),
        shapes.sequence(spec, "tolerations", spec_path.child("tolerations"), errs)))
    return errs
