"""Validation of Workload objects, their pod sets and topology requests, and their updates.

Kueue's rules: 1-8 pod sets with unique DNS-label names (default "main"), count >= 0 (default 1),
0 < minCount <= count on at most one pod set, a pod template with containers, and at most one of
required/preferred/unconstrained per topology request. Once quota is reserved the pod sets and
queue name are immutable. The status is checked by `workload_status`. Called by dispatching.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, get_args

from controller.api import constants as c
from controller.api.workload import DEFAULT_POD_SET_NAME, MAX_POD_SETS, PriorityClassGroup, PriorityClassKind
from webhooks.validation import formats, meta, pod_templates, shapes, workload_status
from webhooks.validation.errors import (
    SPEC,
    FieldError,
    FieldPath,
    duplicate,
    invalid,
    invalid_omitted,
    quoted_list,
    required,
    too_many,
    wrong_type,
)

DEFAULT_COUNT: Final = 1
TOPOLOGY_MODES: Final = ("preferred", "required", "unconstrained")
PRIORITY_CLASS_GROUPS: Final[tuple[str, ...]] = get_args(PriorityClassGroup)
PRIORITY_CLASS_KINDS: Final[tuple[str, ...]] = get_args(PriorityClassKind)
PRIORITY_CLASS_KIND_OF_GROUP: Final = {c.GROUP: c.KIND_WORKLOAD_PRIORITY_CLASS, c.PRIORITY_CLASS_GROUP: c.KIND_PRIORITY_CLASS}
GROUP_NAME_MAX: Final = 256  # Kueue's limit on podSetGroupName, as the model declares it


def topology_request(path: FieldPath, request: Mapping[str, Any]) -> list[FieldError]:
    """A PodSetTopologyRequest: at most one mode; levels are label names; `auto` only preferred."""
    errs: list[FieldError] = []
    present = [mode for mode in TOPOLOGY_MODES if request.get(mode) is not None]
    if len(present) > 1:
        errs.append(invalid(path, {m: request[m] for m in present},
                            f"must specify at most one of {quoted_list(TOPOLOGY_MODES)}"))
    for mode in ("required", "preferred"):
        level = request.get(mode)
        if level is None:
            continue
        errs.extend(formats.qualified_name(path.child(mode), level))
        if mode == "required" and level == c.TOPOLOGY_AUTO:
            errs.append(invalid(path.child(mode), level,
                                f"{c.TOPOLOGY_AUTO!r} is only allowed for \"preferred\""))
    unconstrained = request.get("unconstrained")
    if unconstrained is not None and not isinstance(unconstrained, bool):
        errs.append(wrong_type(path.child("unconstrained"), unconstrained, "a boolean"))
    label = request.get("podIndexLabel")
    if label is not None:
        errs.extend(formats.qualified_name(path.child("podIndexLabel"), label))
    # The group name's rules are pod_templates.slice_fields'; its type and length the CRD's.
    group = shapes.string(request, "podSetGroupName", path.child("podSetGroupName"), errs)
    if group is not None and len(group) > GROUP_NAME_MAX:
        errs.append(invalid(path.child("podSetGroupName"), group, f"must be no more than {GROUP_NAME_MAX} characters"))
    return errs


def _counts(path: FieldPath, pod_set: Mapping[str, Any], errs: list[FieldError]) -> int | None:
    """count >= 0 (absent: the CRD default, 1) and 0 < minCount <= count; returns the count."""
    count = shapes.integer(pod_set, "count", path.child("count"), errs, bits=32)
    if pod_set.get("count") is None:
        count = DEFAULT_COUNT
    elif count is not None and count < 0:
        errs.append(invalid(path.child("count"), count, "must be greater than or equal to 0"))
        count = None
    min_count = shapes.integer(pod_set, "minCount", path.child("minCount"), errs, bits=32)
    if min_count is None:
        return count
    if min_count < 1:
        errs.append(invalid(path.child("minCount"), min_count, "must be greater than 0"))
    elif count is not None and min_count > count:
        errs.append(invalid(path.child("minCount"), min_count,
                            f"must be less than or equal to count ({count})"))
    return count


def pod_sets(items: list[Any] | None, errs: list[FieldError]) -> dict[str, int | None]:
    """`spec.podSets`: 1-8 items, unique names, counts, templates, topology requests, and at
    most one pod set with a minCount (Kueue). Returns each valid name's count (None: invalid)."""
    path = SPEC.child("podSets")
    if not items:
        errs.append(required(path, "at least 1 pod set is required"))
    elif len(items) > MAX_POD_SETS:
        errs.append(too_many(path, len(items), MAX_POD_SETS))
    counts: dict[str, int | None] = {}
    requests: list[tuple[FieldPath, Mapping[str, Any]]] = []
    with_min_count = 0
    for item_path, pod_set in shapes.objects(items, path, errs):
        # An absent (or null) name is the CRD default, as the API server would store it.
        name = pod_set.get("name")
        name = DEFAULT_POD_SET_NAME if name is None else name
        name_errs = formats.dns_label(item_path.child("name"), name)
        errs.extend(name_errs)
        if not name_errs and name in counts:
            errs.append(duplicate(item_path.child("name"), name))
        count = _counts(item_path, pod_set, errs)
        if not name_errs and name not in counts:
            counts[name] = count
        with_min_count += pod_set.get("minCount") is not None
        template = shapes.mapping(pod_set, "template", item_path.child("template"), errs)
        if template is not None or "template" not in pod_set:
            errs.extend(pod_templates.pod_template(item_path.child("template"), template))
        request = shapes.mapping(pod_set, "topologyRequest", item_path.child("topologyRequest"), errs)
        if request is not None:
            errs.extend(topology_request(item_path.child("topologyRequest"), request))
            errs.extend(pod_templates.slice_fields(item_path.child("topologyRequest"), request, count))
            requests.append((item_path.child("topologyRequest"), request))
    errs.extend(pod_templates.pod_set_groups(requests))
    if with_min_count > 1:
        errs.append(invalid(path, f"{with_min_count} pod sets with minCount",
                            "at most one podSet can use minCount"))
    return counts


def validate_workload(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a Workload object."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    spec = shapes.mapping(obj, "spec", SPEC, errs)
    if spec is None:
        return [*errs, required(SPEC)]
    queue = shapes.string(spec, "queueName", SPEC.child("queueName"), errs)
    if queue is not None:  # "" too: the CRD's pattern refuses it
        errs.extend(formats.dns_subdomain(SPEC.child("queueName"), queue))
    _priority(spec, errs)
    shapes.boolean(spec, "active", SPEC.child("active"), errs)
    counts = pod_sets(shapes.sequence(spec, "podSets", SPEC.child("podSets"), errs), errs)
    errs.extend(workload_status.validate_status(obj, counts))
    errs.extend(_assignments_cover_pod_sets(obj))
    return errs


def _assignments_cover_pod_sets(obj: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's CEL rule: with QuotaReserved True, the admission assigns as many pod sets as the
    spec has (a partial admission would leave a pod set without a flavor)."""
    pod_set_items = shapes.lookup(obj, "spec", "podSets")
    assignments = shapes.lookup(obj, "status", "admission", "podSetAssignments")
    if not _reserved_condition(obj) or not isinstance(shapes.lookup(obj, "status", "admission"), (dict, Mapping)):
        return []
    want = len(pod_set_items) if isinstance(pod_set_items, list) else 0
    have = len(assignments) if isinstance(assignments, list) else 0
    if want == have:
        return []
    return [invalid(workload_status.STATUS.child("admission").child("podSetAssignments"), f"{have} item(s)",
                    f"podSetAssignments must have the same number of podSets as the spec ({want})")]


def _priority(spec: Mapping[str, Any], errs: list[FieldError]) -> None:
    """priority is an int32, present whenever priorityClassRef is (Kueue's CEL rule); the reference
    names a WorkloadPriorityClass (kueue.x-k8s.io) or a PriorityClass (scheduling.k8s.io) by a DNS
    subdomain name."""
    priority = shapes.integer(spec, "priority", SPEC.child("priority"), errs, bits=32)
    ref_path = SPEC.child("priorityClassRef")
    ref = shapes.mapping(spec, "priorityClassRef", ref_path, errs)
    if ref is None:
        return
    if priority is None and spec.get("priority") is None:
        errs.append(required(SPEC.child("priority"), "priority should not be nil when priorityClassRef is set"))
    for key in ("group", "kind", "name"):
        if ref.get(key) is None:
            errs.append(required(ref_path.child(key), f"{key} is required"))
    group = shapes.enum(ref, "group", ref_path.child("group"), PRIORITY_CLASS_GROUPS, errs)
    kind = shapes.enum(ref, "kind", ref_path.child("kind"), PRIORITY_CLASS_KINDS, errs)
    if group is not None and kind is not None and PRIORITY_CLASS_KIND_OF_GROUP[group] != kind:
        errs.append(invalid(ref_path, dict(ref), f"only the {PRIORITY_CLASS_KIND_OF_GROUP[group]} kind is "
                                                 f"allowed for the {group} group"))
    name = shapes.string(ref, "name", ref_path.child("name"), errs)
    if name is not None:
        errs.extend(formats.dns_subdomain(ref_path.child("name"), name))


def has_quota_reserved(obj: Mapping[str, Any]) -> bool:
    """True when the Workload holds quota: an admission is recorded or QuotaReserved is True."""
    return bool(shapes.lookup(obj, "status", "admission")) or _reserved_condition(obj)


def _reserved_condition(obj: Mapping[str, Any]) -> bool:
    """The Workload's QuotaReserved condition is True."""
    conditions = shapes.lookup(obj, "status", "conditions")
    return isinstance(conditions, list) and any(
        shapes.lookup(cond, "type") == c.CONDITION_QUOTA_RESERVED and shapes.lookup(cond, "status") == "True"
        for cond in conditions)


def validate_workload_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's update rules: podSets and queueName are frozen while quota is reserved, and a
    recorded admission cannot be edited."""
    errs = validate_workload(new) + _admission_update(old, new)
    if not has_quota_reserved(old):
        return errs
    if not shapes.same(shapes.lookup(old, "spec", "podSets"), shapes.lookup(new, "spec", "podSets")):
        errs.append(invalid_omitted(SPEC.child("podSets"), "field is immutable once quota is reserved"))
    errs.extend(shapes.unchanged(old, new, SPEC.child("queueName"), ("spec", "queueName"),
                                 "field is immutable once quota is reserved"))
    errs.extend(_priority_class_update(old, new))
    return errs


def _priority_class_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's CEL rules while quota is reserved: priorityClassRef stays set or unset, keeps its group
    and kind, and its name unless it names a WorkloadPriorityClass (whose name may change)."""
    before, after = shapes.lookup(old, "spec", "priorityClassRef"), shapes.lookup(new, "spec", "priorityClassRef")
    path = SPEC.child("priorityClassRef")
    if (before is None) != (after is None):
        return [invalid(path, after, "priorityClassRef is immutable while workload quota reserved")]
    if not isinstance(before, (dict, Mapping)) or not isinstance(after, (dict, Mapping)):
        return []
    errs = [invalid(path.child(key), after.get(key), f"priorityClassRef.{key} is immutable while workload quota "
                                                     "reserved")
            for key in ("group", "kind") if before.get(key) != after.get(key)]
    pod_class = after.get("group") == c.PRIORITY_CLASS_GROUP and after.get("kind") == c.KIND_PRIORITY_CLASS
    if pod_class and before.get("name") != after.get("name"):
        errs.append(invalid(path.child("name"), after.get("name"), "priorityClassRef.name is immutable for "
                                                                  "scheduling.k8s.io/priorityclass while workload "
                                                                  "quota reserved"))
    return errs


def _without_topology(admission: Any) -> Any:
    """The admission with each pod set assignment's topologyAssignment (and delayedTopologyRequest)
    left out: what Kueue, with TopologyAwareScheduling, keeps immutable."""
    if not isinstance(admission, (dict, Mapping)) or not isinstance(admission.get("podSetAssignments"), list):
        return admission
    return {**admission, "podSetAssignments": [
        {k: v for k, v in psa.items() if k not in ("topologyAssignment", "delayedTopologyRequest")}
        if isinstance(psa, (dict, Mapping)) else psa for psa in admission["podSetAssignments"]]}


def _admission_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue: an admission may be set or cleared, never edited in place, except its pod sets'
    topology assignments (a failed node's replacement rewrites them)."""
    old_admission = shapes.lookup(old, "status", "admission")
    new_admission = shapes.lookup(new, "status", "admission")
    if old_admission and new_admission and not shapes.same(_without_topology(old_admission),
                                                           _without_topology(new_admission)):
        return [invalid_omitted(workload_status.STATUS.child("admission"),
                                "field is immutable once set; clear it before admitting again")]
    return []
