"""Validation of batch/v1 Jobs that tasq manages: the queue label and the topology annotations.

Two annotation families select a pod set's topology: the original KEP's Job annotations
(`require-topology`, `prefer-topology`, value a level label or `auto` for prefer) and Kueue's
pod-template annotations (`podset-required/preferred/unconstrained-topology`). The Job-level ones
apply to the Job's one template, so at most one of all five may be set. Called by dispatching.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controller.api import constants as c
from webhooks.validation import formats, meta, pod_templates, shapes
from webhooks.validation.errors import (
    ROOT,
    FieldError,
    FieldPath,
    invalid,
    invalid_omitted,
    quoted_list,
    unsupported,
)

SPEC = ROOT.child("spec")
JOB_ANNOTATIONS_PATH = meta.METADATA.child("annotations")
TEMPLATE_PATH = SPEC.child("template")
TEMPLATE_ANNOTATIONS_PATH = TEMPLATE_PATH.child("metadata").child("annotations")
JOB_TOPOLOGY_ANNOTATIONS: Final = (c.ANNOTATION_REQUIRE_TOPOLOGY, c.ANNOTATION_PREFER_TOPOLOGY)
POD_SET_TOPOLOGY_ANNOTATIONS: Final = (c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY,
                                       c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY,
                                       c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY)
BOOLEAN_VALUES: Final = ("true", "false")


def _level(path: FieldPath, value: str, auto_allowed: bool) -> list[FieldError]:
    """A topology level annotation value: a label name, or `auto` where allowed."""
    if value == c.TOPOLOGY_AUTO:
        if auto_allowed:
            return []
        return [invalid(path, value, f"{c.TOPOLOGY_AUTO!r} is only allowed for "
                                     f"{c.ANNOTATION_PREFER_TOPOLOGY}; use a topology level label "
                                     "such as \"cloud.provider.com/topology-rack\"")]
    return formats.qualified_name(path, value)


def job_annotations(annotations: Mapping[str, str]) -> list[FieldError]:
    """The KEP annotations on the Job: require-topology (a level), prefer-topology (a level or auto)."""
    errs: list[FieldError] = []
    for key in JOB_TOPOLOGY_ANNOTATIONS:
        if key in annotations:
            errs.extend(_level(JOB_ANNOTATIONS_PATH.key(key), annotations[key],
                               auto_allowed=key == c.ANNOTATION_PREFER_TOPOLOGY))
    return errs


def pod_set_annotations(path: FieldPath, annotations: Mapping[str, str]) -> list[FieldError]:
    """Kueue's pod-template annotations: required/preferred a level label, unconstrained a boolean."""
    errs: list[FieldError] = []
    for key in (c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY):
        if key in annotations:
            errs.extend(_level(path.key(key), annotations[key], auto_allowed=False))
    key = c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY
    if key in annotations and annotations[key] not in BOOLEAN_VALUES:
        errs.append(unsupported(path.key(key), annotations[key], BOOLEAN_VALUES))
    return errs


def single_topology_annotation(job: Mapping[str, str], template: Mapping[str, str]) -> list[FieldError]:
    """At most one topology annotation reaches the pod set, counting the Job-level ones."""
    found = [str(JOB_ANNOTATIONS_PATH.key(k)) for k in JOB_TOPOLOGY_ANNOTATIONS if k in job]
    found += [str(TEMPLATE_ANNOTATIONS_PATH.key(k)) for k in POD_SET_TOPOLOGY_ANNOTATIONS if k in template]
    if len(found) <= 1:
        return []
    path = TEMPLATE_ANNOTATIONS_PATH if any(k in template for k in POD_SET_TOPOLOGY_ANNOTATIONS) \
        else JOB_ANNOTATIONS_PATH
    return [invalid_omitted(path, f"must not contain more than one topology annotation, found "
                                  f"{len(found)}: {quoted_list(found)}")]


def validate_job(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error tasq cares about in a batch/v1 Job: queue label, annotations, pod template."""
    errs: list[FieldError] = []
    metadata = meta.object_meta(obj, errs)
    labels = shapes.string_map(metadata, "labels", meta.METADATA.child("labels"), errs)
    if c.LABEL_QUEUE_NAME in labels:
        path = meta.METADATA.child("labels").key(c.LABEL_QUEUE_NAME)
        errs.extend(formats.label_value(path, labels[c.LABEL_QUEUE_NAME])
                    or formats.dns_subdomain(path, labels[c.LABEL_QUEUE_NAME]))
    job_notes = shapes.string_map(metadata, "annotations", JOB_ANNOTATIONS_PATH, errs)
    errs.extend(job_annotations(job_notes))
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    parallelism = shapes.integer(spec, "parallelism", SPEC.child("parallelism"), errs)
    if parallelism is not None and parallelism < 0:
        errs.append(invalid(SPEC.child("parallelism"), parallelism, "must be greater than or equal to 0"))
    template = shapes.mapping(spec, "template", TEMPLATE_PATH, errs)
    template_meta = shapes.mapping(template, "metadata", TEMPLATE_PATH.child("metadata"), errs)
    template_notes = shapes.string_map(template_meta, "annotations", TEMPLATE_ANNOTATIONS_PATH, errs)
    errs.extend(pod_set_annotations(TEMPLATE_ANNOTATIONS_PATH, template_notes))
    errs.extend(single_topology_annotation(job_notes, template_notes))
    errs.extend(pod_templates.pod_template(TEMPLATE_PATH, template))
    return errs


def validate_job_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue: the queue label of a running (unsuspended) Job cannot change."""
    errs = validate_job(new)
    old_queue = shapes.lookup(old, "metadata", "labels", c.LABEL_QUEUE_NAME)
    new_queue = shapes.lookup(new, "metadata", "labels", c.LABEL_QUEUE_NAME)
    suspended = shapes.lookup(old, "spec", "suspend") is True and shapes.lookup(new, "spec", "suspend") is True
    if old_queue != new_queue and not suspended:
        errs.append(invalid(meta.METADATA.child("labels").key(c.LABEL_QUEUE_NAME), new_queue,
                            "field is immutable while the Job is not suspended"))
    return errs
