"""Validation of pod templates embedded in Workload pod sets and Jobs.

Checks only what tasq relies on to compute requests and placement: containers present with
unique DNS-label names, container resource names core/v1 accepts, valid non-negative quantities
with requests no larger than limits, a valid nodeSelector and tolerations; and Kueue's pod-set
slice and group requests, as template annotations (`tas_annotations`) or as a Workload's
topologyRequest fields (`slice_fields`), and the pod-set groups of a Workload (`pod_set_groups`:
any number of pod sets, where Kueue allows two). Called by the Workload and Job validators.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controller.api import constants as c
from controller.api.quantity import parse_quantity
from webhooks.validation import formats, placement, shapes
from webhooks.validation.errors import (
    FieldError,
    FieldPath,
    duplicate,
    forbidden,
    invalid,
    invalid_omitted,
    render,
    required,
)

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


@dataclass(frozen=True, slots=True)
class _SliceRequest:
    """One pod set's slice and group request, wherever it was written: each item is (path, value)
    or None when absent; `level` is whether a required or preferred level is set."""

    slice_level: tuple[FieldPath, Any] | None
    size: tuple[FieldPath, Any] | None
    layers: tuple[FieldPath, Any] | None
    group: tuple[FieldPath, Any] | None
    level: bool
    names: tuple[str, str, str, str]
    """How the four are named in messages: slice level, size, layers, group."""
    size_path: FieldPath
    """Where the size belongs (named when it is missing)."""


def _size_value(path: FieldPath, raw: Any, errs: list[FieldError]) -> int | None:
    """A slice size: an integer (a numeric string in an annotation) of at least 1."""
    value = raw
    if isinstance(raw, str):
        try:
            value = int(raw, 10)
        except ValueError:
            errs.append(invalid(path, raw, "must be a numeric value"))
            return None
    if isinstance(value, bool) or not isinstance(value, int):
        errs.append(invalid(path, raw, "must be an integer"))
        return None
    if value < 1:
        errs.append(invalid(path, raw, "must be greater than or equal to 1"))
        return None
    return value


def _layers(path: FieldPath, raw: Any, count: int | None, errs: list[FieldError]) -> None:
    """Kueue's multi-layer constraints: 1-3 `{topology, size}`, outer first, topologies label names
    and distinct, sizes >= 1, each dividing the one before, the first at most the pod count."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as err:
            errs.append(invalid(path, raw, f"must be a valid JSON array: {err}"))
            return
    if not isinstance(raw, list) or not 1 <= len(raw) <= c.MAX_SLICE_LAYERS:
        errs.append(invalid_omitted(path, f"topology constraints must contain between 1 and "
                                          f"{c.MAX_SLICE_LAYERS} entries"))
        return
    sizes: list[int | None] = []
    seen: dict[str, int] = {}
    for i, layer in enumerate(raw):
        item = path.index(i)
        if not isinstance(layer, (dict, Mapping)):
            errs.append(invalid(item, layer, "must be an object with \"topology\" and \"size\""))
            sizes.append(None)
            continue
        topology = layer.get("topology")
        errs.extend(formats.qualified_name(item.child("topology"), topology if topology is not None else ""))
        if isinstance(topology, str) and topology in seen:
            errs.append(duplicate(item.child("topology"), f"{topology} (also at index {seen[topology]})"))
        elif isinstance(topology, str):
            seen[topology] = i
        if layer.get("size") is None:
            errs.append(required(item.child("size")))
            sizes.append(None)
        else:
            sizes.append(_size_value(item.child("size"), layer["size"], errs))
    for i in range(1, len(sizes)):
        outer, inner = sizes[i - 1], sizes[i]
        if outer is not None and inner is not None and outer % inner:
            errs.append(invalid(path.index(i).child("size"), inner,
                                f"must evenly divide the parent layer size {outer}"))
    if count is not None and sizes and sizes[0] is not None and sizes[0] > count:
        errs.append(invalid(path.index(0).child("size"), sizes[0], f"must not be greater than pod set count {count}"))


def _slice_rules(request: _SliceRequest, count: int | None) -> list[FieldError]:
    """Kueue's rules, every error: the slice level a label name; a size with a level and a level
    with a size, 1 <= size <= count; layers exclusive with both; a group name not a number, needing
    a required or preferred level, exclusive with slices."""
    errs: list[FieldError] = []
    slice_name, size_name, layers_name, _ = request.names
    if request.slice_level is not None:
        errs.extend(formats.qualified_name(*request.slice_level))
    if request.size is not None:
        size = _size_value(*request.size, errs)
        if size is not None and count is not None and size > count:
            errs.append(invalid(request.size[0], request.size[1], f"must not be greater than pod set count {count}"))
        if request.slice_level is None:
            errs.append(forbidden(request.size[0], f"may not be set when '{slice_name}' is not specified"))
    elif request.slice_level is not None:
        errs.append(required(request.size_path, f"must be set when '{slice_name}' is specified"))
    if request.layers is not None:
        for name, given in ((slice_name, request.slice_level), (size_name, request.size)):
            if given is not None:
                errs.append(forbidden(request.layers[0], f"may not be set when '{name}' is specified"))
        _layers(*request.layers, count, errs)
    if request.group is not None:
        path, name = request.group
        if isinstance(name, str) and name.isdigit():
            errs.append(invalid(path, name, "must not be a number"))
        for other, given in ((size_name, request.size), (slice_name, request.slice_level),
                             (layers_name, request.layers)):
            if given is not None:
                errs.append(forbidden(path, f"may not be set when '{other}' is specified"))
        if not request.level:
            errs.append(forbidden(path, "may not be set when neither a required nor a preferred topology "
                                        "is specified"))
    return errs


def tas_annotations(path: FieldPath, annotations: Mapping[str, str], count: int | None,
                    level_elsewhere: bool = False) -> list[FieldError]:
    """Kueue's slice and group annotations of one pod template; `path` is its annotations map,
    `count` the pod set's pod count (None: unknown or invalid, the upper bound is not checked) and
    `level_elsewhere` whether a required/preferred level is set outside the template (the KEP's
    Job annotations, which tasq reads too)."""
    def item(key: str) -> tuple[FieldPath, Any] | None:
        return (path.key(key), annotations[key]) if key in annotations else None

    level = level_elsewhere or any(k in annotations for k in (
        c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY,
        c.ANNOTATION_REQUIRE_TOPOLOGY, c.ANNOTATION_PREFER_TOPOLOGY))
    return _slice_rules(_SliceRequest(
        item(c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY), item(c.ANNOTATION_PODSET_SLICE_SIZE),
        item(c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS), item(c.ANNOTATION_PODSET_GROUP_NAME),
        level, (c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY, c.ANNOTATION_PODSET_SLICE_SIZE,
                c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS, c.ANNOTATION_PODSET_GROUP_NAME),
        path.key(c.ANNOTATION_PODSET_SLICE_SIZE)), count)


_FIELDS: Final = ("podSetSliceRequiredTopology", "podSetSliceSize", "podsetSliceRequiredTopologyConstraints",
                  "podSetGroupName")


def slice_fields(path: FieldPath, request: Mapping[str, Any], count: int | None) -> list[FieldError]:
    """The same rules on a Workload pod set's `topologyRequest` (`path`); null fields are absent."""
    def item(key: str) -> tuple[FieldPath, Any] | None:
        return (path.child(key), request[key]) if request.get(key) is not None else None

    level = request.get("required") is not None or request.get("preferred") is not None
    return _slice_rules(_SliceRequest(item(_FIELDS[0]), item(_FIELDS[1]), item(_FIELDS[2]), item(_FIELDS[3]),
                                      level, _FIELDS, path.child(_FIELDS[1])), count)


def pod_set_groups(members: Sequence[tuple[FieldPath, Mapping[str, Any]]]) -> list[FieldError]:
    """A Workload's pod-set groups, given each pod set's topologyRequest path and value: the members
    of one group ask for the same required or preferred level (Kueue's rule). Any number of pod sets
    may form a group (Kueue allows exactly two, one of them a single pod)."""
    groups: dict[str, list[tuple[FieldPath, Mapping[str, Any]]]] = {}
    for path, request in members:
        name = request.get(_FIELDS[3])
        if isinstance(name, str) and name:
            groups.setdefault(name, []).append((path, request))
    errs: list[FieldError] = []
    for name, group in groups.items():
        levels = {(r.get("required"), r.get("preferred")) for _, r in group}
        if len(levels) > 1:
            first = group[0][0]
            for path, _ in group:
                errs.append(invalid_omitted(path, f"must specify the same required or preferred topology as "
                                                  f"{first} in pod-set group {render(name)}"))
    return errs
