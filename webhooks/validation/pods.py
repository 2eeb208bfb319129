"""Rules for plain pods that ask for tasq: their group labels and annotations, and their group.

`validate_pod` checks one queued pod's own metadata (Kueue's pod webhook rules: the group name a
valid object name, the total count a positive integer and present with Kueue's group label, the
coscheduling min-available no larger than the total, the managed label only `true`);
`validate_pod_update` adds that the group name never changes; `conflicts_with_group` gives the
conflicts with the pods already in its group (`controller.core.jobs.pod_group.group_conflicts`).
Pure; called by `webhooks.validation.dispatching` and the Pod validating handler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.api import constants as c
from controller.core.jobs import pod_group
from controller.core.jobs.integrations import POD_GROUP
from webhooks.validation.errors import ROOT, FieldError, FieldPath, forbidden, invalid, required
from webhooks.validation.formats import dns_subdomain

LABELS = ROOT.child("metadata").child("labels")
ANNOTATIONS = ROOT.child("metadata").child("annotations")
_BOTH = (f"both the {c.ANNOTATION_POD_GROUP_TOTAL_COUNT!r} annotation and the {c.LABEL_POD_GROUP_NAME!r} "
         "label should be set")


def _map(pod: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    value = meta.get(field) if isinstance(meta, (dict, Mapping)) else None
    return value if isinstance(value, (dict, Mapping)) else {}


def _positive(path: FieldPath, value: Any, what: str) -> list[FieldError]:
    if not isinstance(value, str) or not value.isdigit() or int(value) < 1:
        return [invalid(path, value, f"{what} must be a positive integer written in decimal")]
    return []


def _group_metadata(pod: Mapping[str, Any]) -> list[FieldError]:
    """The group name label (an object name: it names the Workload), the total count and min-available."""
    labels, notes = _map(pod, "labels"), _map(pod, "annotations")
    named = pod_group.group_name(pod)
    total = notes.get(c.ANNOTATION_POD_GROUP_TOTAL_COUNT)
    if named is None:
        if total is not None:
            return [required(LABELS.key(c.LABEL_POD_GROUP_NAME), _BOTH)]
        if c.LABEL_COSCHEDULING_MIN_AVAILABLE in labels:
            return [required(LABELS.key(c.LABEL_COSCHEDULING_NAME),
                             f"{c.LABEL_COSCHEDULING_MIN_AVAILABLE!r} needs the group's name in this label")]
        return []
    key, name = named
    errs = dns_subdomain(LABELS.key(key), name)
    if total is None:
        if key == c.LABEL_POD_GROUP_NAME:
            return [*errs, required(ANNOTATIONS.key(c.ANNOTATION_POD_GROUP_TOTAL_COUNT), _BOTH)]
        if key == c.LABEL_SCHEDULING_POD_GROUP:
            return [*errs, required(ANNOTATIONS.key(c.ANNOTATION_POD_GROUP_TOTAL_COUNT),
                                    f"a {key!r} group's size lives in its PodGroup object, which tasq does not "
                                    "read: give the number of pods in this annotation")]
        if c.LABEL_COSCHEDULING_MIN_AVAILABLE not in labels:
            return [*errs, required(LABELS.key(c.LABEL_COSCHEDULING_MIN_AVAILABLE),
                                    f"a {key!r} group needs its minimum, or the "
                                    f"{c.ANNOTATION_POD_GROUP_TOTAL_COUNT!r} annotation")]
    else:
        errs += _positive(ANNOTATIONS.key(c.ANNOTATION_POD_GROUP_TOTAL_COUNT), total, "the group's total count")
    minimum = labels.get(c.LABEL_COSCHEDULING_MIN_AVAILABLE)
    if minimum is not None:
        min_errs = _positive(LABELS.key(c.LABEL_COSCHEDULING_MIN_AVAILABLE), minimum, "min-available")
        count = pod_group.total_count(pod)
        if not min_errs and count is not None and int(minimum) > count:
            min_errs.append(invalid(LABELS.key(c.LABEL_COSCHEDULING_MIN_AVAILABLE), minimum,
                                    f"must not exceed the group's total count {count}"))
        errs += min_errs
    return errs


def validate_pod(pod: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a pod's tasq metadata; none for a pod tasq does not manage."""
    if not isinstance(pod, (dict, Mapping)) or not POD_GROUP.is_managed(pod):
        return []
    labels = _map(pod, "labels")
    errs = dns_subdomain(LABELS.key(c.LABEL_QUEUE_NAME), labels.get(c.LABEL_QUEUE_NAME))
    managed = labels.get(c.LABEL_MANAGED)
    if managed is not None and managed != c.LABEL_MANAGED_VALUE:
        errs.append(forbidden(LABELS.key(c.LABEL_MANAGED), f"managed label value can only be {c.LABEL_MANAGED_VALUE!r}"))
    return errs + _group_metadata(pod)


def validate_pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """`validate_pod`, and a grouped pod keeps its group (its Workload is the group's)."""
    errs = validate_pod(new)
    before = pod_group.group_name(old) if isinstance(old, (dict, Mapping)) else None
    if before is not None and pod_group.group_name(new) != before:
        errs.append(invalid(LABELS.key(before[0]), _map(new, "labels").get(before[0]), "field is immutable"))
    return errs


def conflicts_with_group(pod: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> list[FieldError]:
    """Every conflict of a well-formed grouped pod with the runnable pods already in its group (the
    pod itself left out), each message naming this pod and the one it disagrees with; none for a
    single pod or one `validate_pod` refuses (its own errors come first)."""
    if validate_pod(pod) or not POD_GROUP.is_managed(pod) or pod_group.group_name(pod) is None:
        return []
    name = pod_group.pod_name(pod)
    others = [m for m in members if pod_group.pod_name(m) != name and pod_group.runnable_or_succeeded(m)]
    return [FieldError(conflict.path, f"pod {conflict.pod}: {conflict.message}")
            for conflict in pod_group.group_conflicts(pod, others)]
