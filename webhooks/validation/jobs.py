"""Validation of batch/v1 Jobs that tasq manages: the queue label, the topology annotations and
Kueue's partial-admission annotations.

The KEP's Job annotations (`require-topology`, `prefer-topology`: a level label, `auto` for prefer)
and Kueue's pod-template ones (`podset-required/preferred/unconstrained-topology`) are all read on the
Job and its template, so values are checked in both places, at most one set. `job-min-parallelism`
must lie strictly between 0 and the Job's pod count, as Kueue checks it (on create, and on an update
that changes it: once admitted, the Job's parallelism is the admitted count, which may equal it).
Called by dispatching.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controller.api import constants as c
from controller.api.booleans import BOOLEAN_VALUES, parse_boolean
from webhooks.validation import formats, meta, pod_specs, pod_templates, shapes
from webhooks.validation.errors import (
    SPEC,
    FieldError,
    FieldPath,
    forbidden,
    invalid,
    invalid_omitted,
    quoted_list,
    unsupported,
)

JOB_ANNOTATIONS_PATH = meta.METADATA.child("annotations")
TEMPLATE_PATH = SPEC.child("template")
TEMPLATE_ANNOTATIONS_PATH = TEMPLATE_PATH.child("metadata").child("annotations")
JOB_TOPOLOGY_ANNOTATIONS: Final = (c.ANNOTATION_REQUIRE_TOPOLOGY, c.ANNOTATION_PREFER_TOPOLOGY)
POD_SET_TOPOLOGY_ANNOTATIONS: Final = (c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY,
                                       c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY,
                                       c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY)
TOPOLOGY_ANNOTATIONS: Final = JOB_TOPOLOGY_ANNOTATIONS + POD_SET_TOPOLOGY_ANNOTATIONS


def _level(path: FieldPath, value: str, auto_allowed: bool) -> list[FieldError]:
    """A topology level annotation value: a label name, or `auto` where allowed."""
    if value == c.TOPOLOGY_AUTO:
        if auto_allowed:
            return []
        return [invalid(path, value, f"{c.TOPOLOGY_AUTO!r} is only allowed for "
                                     f"{c.ANNOTATION_PREFER_TOPOLOGY}; use a topology level label "
                                     "such as \"cloud.provider.com/topology-rack\"")]
    return formats.qualified_name(path, value)


def topology_annotations(path: FieldPath, annotations: Mapping[str, str]) -> list[FieldError]:
    """The values of the five topology annotations, on the Job or its pod template (the job
    reconciler reads both places): required/preferred a level label (`auto` only for the KEP's
    prefer-topology), unconstrained a boolean."""
    errs: list[FieldError] = []
    for key in TOPOLOGY_ANNOTATIONS:
        if key not in annotations:
            continue
        if key == c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY:
            if parse_boolean(annotations[key]) is None:
                errs.append(unsupported(path.key(key), annotations[key], BOOLEAN_VALUES))
        else:
            errs.extend(_level(path.key(key), annotations[key],
                               auto_allowed=key == c.ANNOTATION_PREFER_TOPOLOGY))
    return errs


def single_topology_annotation(job: Mapping[str, str], template: Mapping[str, str]) -> list[FieldError]:
    """At most one topology annotation reaches the pod set, counting both places and both families."""
    found = [str(JOB_ANNOTATIONS_PATH.key(k)) for k in TOPOLOGY_ANNOTATIONS if k in job]
    found += [str(TEMPLATE_ANNOTATIONS_PATH.key(k)) for k in TOPOLOGY_ANNOTATIONS if k in template]
    if len(found) <= 1:
        return []
    path = TEMPLATE_ANNOTATIONS_PATH if any(k in template for k in TOPOLOGY_ANNOTATIONS) \
        else JOB_ANNOTATIONS_PATH
    return [invalid_omitted(path, f"must not contain more than one topology annotation, found "
                                  f"{len(found)}: {quoted_list(found)}")]


MIN_PARALLELISM_PATH = JOB_ANNOTATIONS_PATH.key(c.ANNOTATION_JOB_MIN_PARALLELISM)
COMPLETIONS_EQUAL_PATH = JOB_ANNOTATIONS_PATH.key(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM)


def _pods_count(spec: Mapping[str, Any]) -> int | None:
    """Kueue's pod count of a Job: parallelism (default 1), or completions when fewer; None when
    either is not a non-negative integer (reported elsewhere)."""
    parallelism, completions = spec.get("parallelism", 1), spec.get("completions")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 0:
        return None
    if isinstance(completions, int) and not isinstance(completions, bool) and 0 <= completions < parallelism:
        return completions
    return parallelism


def min_parallelism(notes: Mapping[str, str], spec: Mapping[str, Any]) -> list[FieldError]:
    """`job-min-parallelism`: an integer with 0 < value < the Job's pod count (Kueue's rule)."""
    raw = notes.get(c.ANNOTATION_JOB_MIN_PARALLELISM)
    if raw is None:
        return []
    digits = raw[1:] if raw[:1] in "+-" else raw
    if not (digits.isascii() and digits.isdigit()):  # Go's strconv.Atoi, as Kueue parses it
        return [invalid(MIN_PARALLELISM_PATH, raw, "must be an integer")]
    value = int(raw)
    count = _pods_count(spec)
    if count is not None and not 0 < value < count:
        return [invalid(MIN_PARALLELISM_PATH, value, f"must be greater than 0 and less than the Job's pod "
                                                     f"count {count} (its parallelism, or completions when fewer)")]
    return []


def completions_equal_parallelism(notes: Mapping[str, str], spec: Mapping[str, Any]) -> list[FieldError]:
    """`job-completions-equal-parallelism`: a boolean; true only on an Indexed Job whose completions
    equal its parallelism (Kueue's rules: a partial admission then sets both to the admitted count)."""
    raw = notes.get(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM)
    if raw is None:
        return []
    enabled = parse_boolean(raw)
    if enabled is None:
        return [unsupported(COMPLETIONS_EQUAL_PATH, raw, BOOLEAN_VALUES)]
    errs: list[FieldError] = []
    if enabled and spec.get("completionMode", "NonIndexed") != "Indexed":
        errs.append(invalid(COMPLETIONS_EQUAL_PATH, raw, "must not be true for a NonIndexed Job "
                                                         "(spec.completionMode is not Indexed)"))
    if enabled and spec.get("parallelism", 1) != spec.get("completions", 1):
        errs.append(invalid(SPEC.child("completions"), spec.get("completions"),
                            f"must equal spec.parallelism ({spec.get('parallelism', 1)}) when "
                            f"{c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM} is true"))
    return errs


def validate_job(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error tasq cares about in a new batch/v1 Job (see `_validate_job`), its minimum
    parallelism included."""
    return _validate_job(obj, check_min_parallelism=True)


def _validate_job(obj: Mapping[str, Any], check_min_parallelism: bool) -> list[FieldError]:
    """Every error tasq cares about in a batch/v1 Job: queue label, annotations, pod template, and the
    API server's own rules on that template (`pod_specs`: a cluster applies them before this runs)."""
    errs: list[FieldError] = []
    metadata = meta.object_meta(obj, errs)
    labels = shapes.string_map(metadata, "labels", meta.METADATA.child("labels"), errs)
    if c.LABEL_QUEUE_NAME in labels:
        path = meta.METADATA.child("labels").key(c.LABEL_QUEUE_NAME)
        errs.extend(formats.label_value(path, labels[c.LABEL_QUEUE_NAME])
                    or formats.dns_subdomain(path, labels[c.LABEL_QUEUE_NAME]))
    job_notes = shapes.string_map(metadata, "annotations", JOB_ANNOTATIONS_PATH, errs)
    errs.extend(topology_annotations(JOB_ANNOTATIONS_PATH, job_notes))
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    parallelism = shapes.integer(spec, "parallelism", SPEC.child("parallelism"), errs)
    if parallelism is not None and parallelism < 0:
        errs.append(invalid(SPEC.child("parallelism"), parallelism, "must be greater than or equal to 0"))
    if check_min_parallelism:
        errs.extend(min_parallelism(job_notes, spec))
    errs.extend(completions_equal_parallelism(job_notes, spec))
    template = shapes.mapping(spec, "template", TEMPLATE_PATH, errs)
    template_meta = shapes.mapping(template, "metadata", TEMPLATE_PATH.child("metadata"), errs)
    template_notes = shapes.string_map(template_meta, "annotations", TEMPLATE_ANNOTATIONS_PATH, errs)
    errs.extend(topology_annotations(TEMPLATE_ANNOTATIONS_PATH, template_notes))
    errs.extend(single_topology_annotation(job_notes, template_notes))
    errs.extend(pod_templates.tas_annotations(
        TEMPLATE_ANNOTATIONS_PATH, template_notes, 1 if parallelism is None else parallelism if parallelism >= 0 else None,
        level_elsewhere=any(k in job_notes for k in JOB_TOPOLOGY_ANNOTATIONS)))
    errs.extend(pod_templates.pod_template(TEMPLATE_PATH, template))
    template_spec = template.get("spec") if template is not None else None
    errs.extend(pod_specs.pod_spec(TEMPLATE_PATH.child("spec"), template_spec, is_pod=False))
    errs.extend(pod_specs.job_restart_policy(TEMPLATE_PATH.child("spec").child("restartPolicy"), template_spec,
                                             spec.get("podFailurePolicy") is not None))
    return errs


def validate_job_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue: the queue label may change only in an update that leaves the Job suspended; the minimum
    parallelism is checked when it changes; a Job that may be partially admitted keeps its
    parallelism while it runs (only tasq's start and stop change it, on a suspended Job)."""
    old_min = shapes.lookup(old, "metadata", "annotations", c.ANNOTATION_JOB_MIN_PARALLELISM)
    new_min = shapes.lookup(new, "metadata", "annotations", c.ANNOTATION_JOB_MIN_PARALLELISM)
    errs = _validate_job(new, check_min_parallelism=old_min != new_min)
    if (old_min is not None
            and shapes.lookup(old, "spec", "suspend") is not True
            and shapes.lookup(old, "spec", "parallelism") != shapes.lookup(new, "spec", "parallelism")):
        errs.append(forbidden(SPEC.child("parallelism"), "cannot change while the Job runs with "
                              f"{c.ANNOTATION_JOB_MIN_PARALLELISM} set (suspend it first)"))
    old_queue = shapes.lookup(old, "metadata", "labels", c.LABEL_QUEUE_NAME)
    new_queue = shapes.lookup(new, "metadata", "labels", c.LABEL_QUEUE_NAME)
    if old_queue != new_queue and shapes.lookup(new, "spec", "suspend") is not True:
        errs.append(invalid(meta.METADATA.child("labels").key(c.LABEL_QUEUE_NAME), new_queue,
                            "field is immutable while the Job is not suspended"))
    return errs
