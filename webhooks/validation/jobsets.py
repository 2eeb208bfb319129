"""Validation of JobSets (jobset.x-k8s.io/v1alpha2) that tasq manages: the queue label, and on each
replicatedJob's pod template the topology annotations (values, at most one level, slices against the
pod set's count), the pod template's rules, and pod-set groups across replicatedJobs.

Kueue reads a JobSet's topology only on its replicatedJobs' pod templates, so errors name
`spec.replicatedJobs[i].template.spec.template...`. Called by dispatching.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.api import constants as c
from webhooks.validation import formats, meta, pod_templates, shapes
from webhooks.validation.errors import SPEC, FieldError, FieldPath, invalid, invalid_omitted, quoted_list
from webhooks.validation.jobs import POD_SET_TOPOLOGY_ANNOTATIONS, topology_annotations

REPLICATED_JOBS = SPEC.child("replicatedJobs")


def _single_level(path: FieldPath, annotations: Mapping[str, str]) -> list[FieldError]:
    found = [str(path.key(k)) for k in POD_SET_TOPOLOGY_ANNOTATIONS if k in annotations]
    if len(found) <= 1:
        return []
    return [invalid_omitted(path, f"must not contain more than one topology annotation, found {len(found)}: "
                                  f"{quoted_list(found)}")]


def _group_member(annotations: Mapping[str, str]) -> dict[str, Any]:
    """The parts of a topology request `pod_set_groups` compares, read from the annotations."""
    return {"required": annotations.get(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY),
            "preferred": annotations.get(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY),
            "podSetGroupName": annotations.get(c.ANNOTATION_PODSET_GROUP_NAME)}


def _replicated_job(path: FieldPath, rjob: Any, errs: list[FieldError]) -> Mapping[str, str]:
    """One replicatedJob's checks; returns its pod template's annotations (for the group rule)."""
    if not isinstance(rjob, (dict, Mapping)):
        errs.append(invalid(path, rjob, "must be an object"))
        return {}
    replicas = shapes.integer(rjob, "replicas", path.child("replicas"), errs)
    job_path = path.child("template").child("spec")
    job_spec = shapes.mapping(shapes.mapping(rjob, "template", path.child("template"), errs), "spec", job_path,
                              errs) or {}
    parallelism = shapes.integer(job_spec, "parallelism", job_path.child("parallelism"), errs)
    completions = shapes.integer(job_spec, "completions", job_path.child("completions"), errs)
    per_job = 1 if parallelism is None else parallelism
    if completions is not None:
        per_job = min(per_job, completions)
    count = (1 if replicas is None else replicas) * per_job
    template_path = job_path.child("template")
    template = shapes.mapping(job_spec, "template", template_path, errs)
    notes_path = template_path.child("metadata").child("annotations")
    notes = shapes.string_map(shapes.mapping(template, "metadata", template_path.child("metadata"), errs),
                              "annotations", notes_path, errs)
    errs.extend(topology_annotations(notes_path, notes))
    errs.extend(_single_level(notes_path, notes))
    errs.extend(pod_templates.tas_annotations(notes_path, notes, count if count >= 0 else None,
                                              level_elsewhere=False))
    errs.extend(pod_templates.pod_template(template_path, template))
    return notes


def validate_jobset(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error tasq cares about in a JobSet: the queue label, then each replicatedJob's pod
    template (`_replicated_job`), then pod-set groups across them."""
    errs: list[FieldError] = []
    metadata = meta.object_meta(obj, errs)
    labels = shapes.string_map(metadata, "labels", meta.METADATA.child("labels"), errs)
    if c.LABEL_QUEUE_NAME in labels:
        path = meta.METADATA.child("labels").key(c.LABEL_QUEUE_NAME)
        errs.extend(formats.label_value(path, labels[c.LABEL_QUEUE_NAME])
                    or formats.dns_subdomain(path, labels[c.LABEL_QUEUE_NAME]))
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    rjobs = spec.get("replicatedJobs")
    if rjobs is not None and not isinstance(rjobs, list):
        return [*errs, invalid(REPLICATED_JOBS, rjobs, "must be a list")]
    members = []
    for i, rjob in enumerate(rjobs or []):
        path = REPLICATED_JOBS.index(i)
        notes = _replicated_job(path, rjob, errs)
        members.append((path.child("template").child("spec").child("template").child("metadata")
                        .child("annotations").key(c.ANNOTATION_PODSET_GROUP_NAME), _group_member(notes)))
    errs.extend(pod_templates.pod_set_groups(members))
    return errs


def validate_jobset_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue: the queue label may change only in an update that leaves the JobSet suspended."""
    errs = validate_jobset(new)
    old_queue = shapes.lookup(old, "metadata", "labels", c.LABEL_QUEUE_NAME)
    new_queue = shapes.lookup(new, "metadata", "labels", c.LABEL_QUEUE_NAME)
    if old_queue != new_queue and shapes.lookup(new, "spec", "suspend") is not True:
        errs.append(invalid(meta.METADATA.child("labels").key(c.LABEL_QUEUE_NAME), new_queue,
                            "field is immutable while the JobSet is not suspended"))
    return errs
