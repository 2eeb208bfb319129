"""Validation of pod templates embedded in Workload pod sets and Jobs.

Checks only what tasq relies on to compute requests and placement: containers present with
unique DNS-label names, container resource names core/v1 accepts, valid non-negative quantities
with requests no larger than limits, a valid nodeSelector and tolerations. Called by the Workload
and Job validators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controller.api import constants as c
from controller.api.quantity import parse_quantity
from webhooks.validation import formats, placement, shapes
from webhooks.validation.errors import FieldError, FieldPath, duplicate, invalid, render, required

STANDARD_CONTAINER_RESOURCES: Final = frozenset({c.RESOURCE_CPU, c.RESOURCE_MEMORY, "ephemeral-storage"})


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
        _resources(item_path.child("resources"),
                   shapes.mapping(container, "resources", item_path.child("resources"), errs), errs)


def _resource_name(path: FieldPath, name: str) -> list[FieldError]:
    """core/v1's container resource names: cpu, memory, ephemeral-storage, hugepages-<size>, or
    a domain-prefixed extended resource outside kubernetes.io (catches `gpu` for `nvidia.com/gpu`;
    `pods` is refused too, which is Kueue's rule for Workloads)."""
    name_errs = formats.qualified_name(path, name)
    if name_errs:
        return name_errs
    prefix, slash, _ = name.partition("/")
    if not slash and name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        return [invalid(path, name, "must be a standard resource for containers (cpu, memory, "
                                    "ephemeral-storage, hugepages-<size>) or an extended resource "
                                    "with a domain prefix such as \"nvidia.com/gpu\"")]
    if slash and (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")):
        return [invalid(path, name, "an extended resource must not use the kubernetes.io domain")]
    return []


def _resources(path: FieldPath, resources: Mapping[str, Any] | None, errs: list[FieldError]) -> None:
    """requests and limits: known resource names, valid non-negative quantities, request <= limit."""
    valid: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for kind in ("requests", "limits"):
        kind_path = path.child(kind)
        amounts = shapes.string_keys(shapes.mapping(resources, kind, kind_path, errs), kind_path, errs)
        for resource in sorted(amounts):
            name_errs = _resource_name(kind_path.key(resource), resource)
            value_errs = formats.quantity(kind_path.key(resource), amounts[resource])
            errs.extend(name_errs + value_errs)
            if not name_errs and not value_errs:
                valid[kind][resource] = amounts[resource]
    for resource, request in sorted(valid["requests"].items()):
        limit = valid["limits"].get(resource)
        if limit is not None and parse_quantity(request) > parse_quantity(limit):
            errs.append(invalid(path.child("requests").key(resource), request,
                                f"must be less than or equal to {resource} limit of {render(limit)}"))


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
