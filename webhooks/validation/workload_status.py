"""Validation of a Workload's status: its conditions and the admission that places its pod sets.

Conditions follow metav1's rules (type, status, reason, lastTransitionTime); an admission must
name known pod sets once each, use valid flavors and quantities, and its topology slices must
name the same levels and hold exactly the assigned pods. Called by `webhooks.validation.workload`
with the pod sets' names and counts from the spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, get_args

from pydantic import ValidationError

from controller.api.meta import CONDITION_REASON_PATTERN, ConditionStatus
from controller.api.quantity import QuantityError, to_milli
from controller.api.topology_assignment import TopologyAssignment, TopologyAssignmentSlice
from webhooks.validation import formats, placement, shapes
from webhooks.validation.errors import (
    ROOT,
    FieldError,
    FieldPath,
    duplicate,
    duplicate_detail,
    invalid,
    not_found,
    required,
    unsupported,
)

STATUS = ROOT.child("status")
CONDITION_STATUSES: Final[tuple[str, ...]] = get_args(ConditionStatus)
TYPE_MAX: Final = 316
REASON_MAX: Final = 1024
MESSAGE_MAX: Final = 32768
_REASON_RE: Final = re.compile(CONDITION_REASON_PATTERN)  # the Condition schema's (anchored) pattern


def _condition(path: FieldPath, cond: Mapping[str, Any], errs: list[FieldError]) -> None:
    """One metav1.Condition, as ValidateConditions checks it."""
    type_ = cond.get("type") or ""
    errs.extend(formats.qualified_name(path.child("type"), type_))
    if isinstance(type_, str) and len(type_) > TYPE_MAX:
        errs.append(invalid(path.child("type"), type_, f"must be no more than {TYPE_MAX} characters"))
    status = cond.get("status")
    if status not in CONDITION_STATUSES:
        errs.append(unsupported(path.child("status"), status, CONDITION_STATUSES))
    reason = shapes.string(cond, "reason", path.child("reason"), errs)
    if not reason:
        errs.append(required(path.child("reason"), "must be set"))
    elif len(reason) > REASON_MAX or not _REASON_RE.fullmatch(reason):
        errs.append(invalid(path.child("reason"), reason, f"must be at most {REASON_MAX} characters of "
                                                          "letters, digits, '_', ',' or ':', starting with "
                                                          "a letter and not ending with ',' or ':'"))
    message = shapes.string(cond, "message", path.child("message"), errs)
    if cond.get("message") is None:
        errs.append(required(path.child("message"), "must be set (it may be empty)"))
    elif message is not None and len(message) > MESSAGE_MAX:
        errs.append(invalid(path.child("message"), f"{len(message)} characters",
                            f"must have at most {MESSAGE_MAX} characters"))
    if cond.get("lastTransitionTime") is None:
        errs.append(required(path.child("lastTransitionTime"), "must be set"))
    shapes.timestamp(cond, "lastTransitionTime", path.child("lastTransitionTime"), errs)
    generation = shapes.integer(cond, "observedGeneration", path.child("observedGeneration"), errs)
    if generation is not None and generation < 0:
        errs.append(invalid(path.child("observedGeneration"), generation, "must be greater than or equal to 0"))


def conditions(status: Mapping[str, Any], errs: list[FieldError]) -> None:
    """`status.conditions`: each valid, one per type (the list is a map keyed by type)."""
    path = STATUS.child("conditions")
    seen: set[str] = set()
    for item_path, cond in shapes.objects(shapes.sequence(status, "conditions", path, errs), path, errs):
        _condition(item_path, cond, errs)
        type_ = cond.get("type")
        if isinstance(type_, str) and type_:
            if type_ in seen:
                errs.append(duplicate(item_path.child("type"), type_))
            seen.add(type_)


def _resource_usage(path: FieldPath, usage: Mapping[str, Any], count: int | None,
                    errs: list[FieldError]) -> None:
    """Valid non-negative quantities; with a count, each a whole multiple of it (Kueue's rule)."""
    for resource in sorted(usage):  # string keys only: the caller dropped the others
        errs.extend(formats.qualified_name(path, resource))
        value_errs = formats.quantity(path.key(resource), usage[resource])
        errs.extend(value_errs)
        if value_errs or not count:
            continue
        try:
            milli = to_milli(usage[resource])
        except QuantityError:  # pragma: no cover - formats.quantity has reported it
            continue
        if milli % count:
            errs.append(invalid(path.key(resource), usage[resource], f"is not a multiple of {count}"))


def _slices(path: FieldPath, items: list[Any] | None, want_pods: int, errs: list[FieldError]) -> None:
    """Topology slices: valid level labels, the same levels in every slice, no domain twice,
    counts of at least 1 that add up to the pods the assignment places."""
    slices_path = path.child("slices")
    levels: tuple[str, ...] | None = None
    seen: set[tuple[tuple[str, str], ...]] = set()
    total = 0
    for item_path, item in shapes.objects(items, slices_path, errs):
        labels = shapes.string_map(item, "nodeLabels", item_path.child("nodeLabels"), errs)
        if not labels:
            errs.append(required(item_path.child("nodeLabels"), "a slice names its domain by level labels"))
        errs.extend(placement.node_labels(item_path.child("nodeLabels"), labels))
        if labels and levels is None:
            levels = tuple(sorted(labels))
        elif labels and tuple(sorted(labels)) != levels:
            errs.append(invalid(item_path.child("nodeLabels"), sorted(labels),
                                f"must name the same levels as {slices_path.index(0)}: "
                                f"{', '.join(levels or ())}"))
        domain = tuple(sorted(labels.items()))
        if labels and domain in seen:
            errs.append(duplicate(item_path.child("nodeLabels"), dict(domain)))
        seen.add(domain)
        count = shapes.integer(item, "count", item_path.child("count"), errs, bits=32)
        if count is None or count < 1:
            errs.append(invalid(item_path.child("count"), item.get("count"), "must be greater than 0"))
        else:
            total += count
    if total != want_pods:
        errs.append(invalid(slices_path, f"{total} pod(s)",
                            f"the slices must hold exactly the {want_pods} assigned pod(s)"))


def _compact(path: FieldPath, topology: Mapping[str, Any], want_pods: int, errs: list[FieldError]) -> None:
    """Kueue's compact TopologyAssignment: a shape that expands (lists as long as `domainCount` and
    `levels` say), level keys qualified names, every value a label value, counts of at least 1, no
    domain twice, exactly the assigned pods."""
    try:
        ta = TopologyAssignment.model_validate(topology)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(step) for step in first["loc"])
        errs.append(invalid(path.child(where) if where else path, "topologyAssignment",
                            str(first["msg"]).removeprefix("Value error, ")))
        return
    if not ta.levels:
        errs.append(required(path.child("levels"), "an assignment names at least one topology level"))
    for i, level in enumerate(ta.levels):
        errs.extend(formats.qualified_name(path.child("levels").index(i), level))
        if level in ta.levels[:i]:
            errs.append(duplicate(path.child("levels").index(i), level))
    for i, sl in enumerate(ta.slices):
        _compact_slice(path.child("slices").index(i), sl, errs)
    seen: set[tuple[str, ...]] = set()
    for i, domain in enumerate(ta.assigned_domains()):
        if domain.values in seen:
            errs.append(duplicate_detail(path.child("slices"), dict(zip(ta.levels, domain.values, strict=True)),
                                         f"domain {i} (in slice order) is assigned twice"))
            break
        seen.add(domain.values)
    if ta.total_count != want_pods:
        errs.append(invalid(path.child("slices"), f"{ta.total_count} pod(s)",
                            f"the slices must hold exactly the {want_pods} assigned pod(s)"))


def _compact_slice(path: FieldPath, sl: TopologyAssignmentSlice, errs: list[FieldError]) -> None:
    """One compact slice: a positive domainCount and pod counts, each level's values label values."""
    if sl.domain_count < 1:
        errs.append(invalid(path.child("domainCount"), sl.domain_count, "must be greater than 0"))
    counts = sl.pod_counts
    if counts.universal is not None and counts.universal < 1:
        errs.append(invalid(path.child("podCounts").child("universal"), counts.universal, "must be greater than 0"))
    for k, n in enumerate(counts.individual or ()):
        if n < 1:
            errs.append(invalid(path.child("podCounts").child("individual").index(k), n, "must be greater than 0"))
    for j, level in enumerate(sl.values_per_level):
        at = path.child("valuesPerLevel").index(j)
        if level.universal is not None:
            errs.extend(formats.label_value(at.child("universal"), level.universal))
            continue
        ind = level.individual
        assert ind is not None, "the model refuses a level with neither"
        for name, part in (("prefix", ind.prefix), ("suffix", ind.suffix)):
            if part == "":
                errs.append(invalid(at.child("individual").child(name), part, "must be absent or non-empty"))
        for k, root in enumerate(ind.roots):
            value_errs = formats.label_value(at.child("individual").child("roots").index(k),
                                             (ind.prefix or "") + root + (ind.suffix or ""))
            if value_errs:
                errs.extend(value_errs)
                break  # one bad value per level is enough: the rest share its prefix and suffix


def _assignment(path: FieldPath, item: Mapping[str, Any], pod_set_count: int | None,
                errs: list[FieldError]) -> None:
    """One PodSetAssignment against its pod set's count (None: the pod set is unknown)."""
    count = shapes.integer(item, "count", path.child("count"), errs, bits=32)
    if count is not None and count < 0:
        errs.append(invalid(path.child("count"), count, "must be greater than or equal to 0"))
    elif count is not None and pod_set_count is not None and count > pod_set_count:
        errs.append(invalid(path.child("count"), count,
                            f"must be less than or equal to the pod set's count ({pod_set_count})"))
    flavors = shapes.string_map(item, "flavors", path.child("flavors"), errs)
    for resource in sorted(flavors):
        errs.extend(formats.qualified_name(path.child("flavors"), resource))
        errs.extend(formats.dns_subdomain(path.child("flavors").key(resource), flavors[resource]))
    usage = shapes.string_keys(shapes.mapping(item, "resourceUsage", path.child("resourceUsage"), errs),
                               path.child("resourceUsage"), errs)
    _resource_usage(path.child("resourceUsage"), usage, count, errs)
    topology = shapes.mapping(item, "topologyAssignment", path.child("topologyAssignment"), errs)
    want_pods = count if count is not None else pod_set_count
    if topology is not None and want_pods is not None:
        if "levels" not in topology:  # the KEP's nodeLabels slices, still read as input
            _slices(path.child("topologyAssignment"),
                    shapes.sequence(topology, "slices", path.child("topologyAssignment").child("slices"), errs),
                    want_pods, errs)
        else:
            _compact(path.child("topologyAssignment"), topology, want_pods, errs)


def admission(status: Mapping[str, Any], pod_sets: Mapping[str, int | None], errs: list[FieldError]) -> None:
    """`status.admission`: a ClusterQueue, and at most one assignment per known pod set."""
    path = STATUS.child("admission")
    adm = shapes.mapping(status, "admission", path, errs)
    if adm is None:
        return
    cq = shapes.string(adm, "clusterQueue", path.child("clusterQueue"), errs)
    errs.extend(formats.dns_subdomain(path.child("clusterQueue"), cq or ""))
    items_path = path.child("podSetAssignments")
    seen: set[str] = set()
    for item_path, item in shapes.objects(shapes.sequence(adm, "podSetAssignments", items_path, errs),
                                          items_path, errs):
        name = shapes.string(item, "name", item_path.child("name"), errs) or ""
        if name not in pod_sets:
            errs.append(not_found(item_path.child("name"), name))
        elif name in seen:
            errs.append(duplicate(item_path.child("name"), name))
        seen.add(name)
        _assignment(item_path, item, pod_sets.get(name), errs)


def validate_status(obj: Mapping[str, Any], pod_sets: Mapping[str, int | None]) -> list[FieldError]:
    """Every error in `status`; `pod_sets` maps each spec pod set name to its count (None: invalid)."""
    errs: list[FieldError] = []
    status = shapes.mapping(obj, "status", STATUS, errs)
    if status is None:
        return errs
    conditions(status, errs)
    admission(status, pod_sets, errs)
    requeue_state(status, errs)
    return errs


def requeue_state(status: Mapping[str, Any], errs: list[FieldError]) -> None:
    """`status.requeueState`: a non-negative int32 count and an RFC 3339 requeueAt."""
    path = STATUS.child("requeueState")
    state = shapes.mapping(status, "requeueState", path, errs)
    count = shapes.integer(state, "count", path.child("count"), errs, bits=32)
    if count is not None and count < 0:
        errs.append(invalid(path.child("count"), count, "must be greater than or equal to 0"))
    shapes.timestamp(state, "requeueAt", path.child("requeueAt"), errs)
