"""The boundary's checks: one parsed document -> errors with field paths, or the object tasq keeps.

Core kinds tasq reads (Node, Pod, Namespace, PriorityClass, Job) are checked against Kubernetes'
schema (`kube_schema`, strict as kubectl) and then the API server's value rules for what tasq reads
(names, label keys and values, non-negative quantities and counts); tasq's kinds go to the webhook
validators (a v1beta1 document converted to v1beta2 first, its errors named as written,
`api_versions`); other kinds are ignored (`Checked.ignored`). Nodes and Pods keep only the fields tasq
reads, so a 50,000-node dump fits in memory. Called by `tasq simulate` for every document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.flavor import ResourceFlavor
from controller.api.meta import KubeObject
from controller.api.priority_class import WorkloadPriorityClass
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.workload import Workload
from controller.manifests.api_versions import model_errors, to_hub
from controller.manifests.kube_schema import MAX_WALK_DEPTH, schema_errors
from webhooks.validation import FieldError, formats, placement, pod_specs, validate
from webhooks.validation.errors import ROOT, SPEC, invalid, required, unsupported
from webhooks.validation.meta import METADATA, object_meta
from webhooks.validation.pod_templates import pod_template

HIGHEST_USER_PRIORITY: Final = 1_000_000_000
"""Kubernetes' HighestUserDefinablePriority: classes not named `system-*` stay at or below it."""

CORE_DEFINITIONS: Final = {
    (c.CORE_API_VERSION, c.KIND_NODE): "io.k8s.api.core.v1.Node",
    (c.CORE_API_VERSION, c.KIND_POD): "io.k8s.api.core.v1.Pod",
    (c.CORE_API_VERSION, c.KIND_NAMESPACE): "io.k8s.api.core.v1.Namespace",
    (c.PRIORITY_CLASS_API_VERSION, c.KIND_PRIORITY_CLASS): "io.k8s.api.scheduling.v1.PriorityClass",
    (c.JOB_API_VERSION, c.KIND_JOB): "io.k8s.api.batch.v1.Job",
}
"""The core kinds tasq reads -> their definition in Kubernetes' schema."""


@dataclass(frozen=True, slots=True)
class Checked:
    """What the boundary made of one document: its errors, or the object to use (None: ignored)."""

    errors: list[FieldError]
    obj: dict[str, Any] | None

    @property
    def ignored(self) -> bool:
        return not self.errors and self.obj is None


def check_object(obj: dict[str, Any]) -> Checked:
    """Every error of one object (apiVersion and kind are strings, `documents` checked that)."""
    key = (obj["apiVersion"], obj["kind"])
    if obj["apiVersion"].startswith(f"{c.GROUP}/"):
        depth = _too_deep(obj)
        if depth is not None:
            return Checked([depth], None)
        in_hub = to_hub(obj, _hub_errors)
        return Checked(in_hub.errors, in_hub.obj)
    if key == (f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}", c.KIND_JOBSET):
        # no Kubernetes schema for a CRD of another project: tasq's JobSet rules only
        errs = validate(obj)
        return Checked(errs, None if errs else obj)
    definition = CORE_DEFINITIONS.get(key)
    if definition is None:
        return Checked([], None)
    errs = schema_errors(definition, obj)
    if not errs:
        errs = _value_errors(obj)
    if errs:
        return Checked(errs, None)
    slim = _SLIM.get(obj["kind"])
    return Checked([], slim(obj) if slim is not None else obj)


_MODELS: Final[dict[str, type[KubeObject]]] = {
    c.KIND_TOPOLOGY: Topology, c.KIND_RESOURCE_FLAVOR: ResourceFlavor, c.KIND_CLUSTER_QUEUE: ClusterQueue,
    c.KIND_LOCAL_QUEUE: LocalQueue, c.KIND_WORKLOAD: Workload, c.KIND_COHORT: Cohort,
    c.KIND_WORKLOAD_PRIORITY_CLASS: WorkloadPriorityClass,
}


def _hub_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The validators' errors, then (when there are none) the hub model's."""
    return validate(obj) or _model_errors(obj)


def _model_errors(obj: dict[str, Any]) -> list[FieldError]:
    """What the model of a validated tasq kind still refuses, at its field path: the validators
    check what Kueue's webhooks check; anything else they let through must not escape as a crash."""
    model = _MODELS.get(obj["kind"])
    return [] if model is None else model_errors(model, obj)


def _too_deep(obj: Any) -> FieldError | None:
    """The first value nested deeper than MAX_WALK_DEPTH (iteratively: no recursion to overflow)."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_WALK_DEPTH:
            return invalid(ROOT, "...", f"nested deeper than {MAX_WALK_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return None


def _value_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The API server's value rules on a schema-valid core object, for the fields tasq reads."""
    errs: list[FieldError] = []
    meta = object_meta(obj, errs)
    if obj["kind"] == c.KIND_NAMESPACE and isinstance(meta.get("name"), str):
        errs.extend(formats.dns_label(METADATA.child("name"), meta["name"]))
    for key, value in (meta.get("labels") or {}).items():
        errs.extend(formats.qualified_name(METADATA.child("labels").key(key), key))
        errs.extend(formats.label_value(METADATA.child("labels").key(key), value))
    for key in meta.get("annotations") or {}:
        errs.extend(formats.qualified_name(METADATA.child("annotations").key(key), key))
    errs.extend(_KIND_RULES.get(obj["kind"], _no_rules)(obj))
    return errs


def _no_rules(obj: Mapping[str, Any]) -> list[FieldError]:
    return []


def _quantities(path_name: str, amounts: Mapping[str, Any] | None) -> list[FieldError]:
    """Each amount a valid, non-negative quantity (`status.allocatable`, `spec.overhead`...)."""
    path = ROOT
    for part in path_name.split("."):
        path = path.child(part)
    return [err for name in sorted(amounts or {}) for err in formats.quantity(path.key(name), (amounts or {})[name])]


def _node_rules(obj: Mapping[str, Any]) -> list[FieldError]:
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    errs = _quantities("status.allocatable", status.get("allocatable"))
    errs.extend(_quantities("status.capacity", status.get("capacity")))
    errs.extend(placement.taints(SPEC.child("taints"), spec.get("taints")))
    return errs  # conditions: the API server stores any type and status (a null item as empty ones)


def _pod_rules(obj: Mapping[str, Any]) -> list[FieldError]:
    """The template rules tasq shares with Workloads, the API server's own on a Pod (`pod_specs`),
    overhead amounts, the phase, and condition types (a status write refuses an empty one)."""
    errs = pod_template(ROOT, obj)
    errs.extend(pod_specs.pod_spec(SPEC, obj.get("spec"), is_pod=True))
    conditions = ROOT.child("status").child("conditions")
    for i, cond in enumerate((obj.get("status") or {}).get("conditions") or []):
        kind = cond.get("type") if isinstance(cond, Mapping) else None
        if kind == "":
            errs.append(invalid(conditions.index(i).child("type"), kind, "name part must be non-empty"))
        elif isinstance(kind, str):
            errs.extend(formats.qualified_name(conditions.index(i).child("type"), kind))
    errs.extend(_quantities("spec.overhead", (obj.get("spec") or {}).get("overhead")))
    phase = (obj.get("status") or {}).get("phase")
    if phase is not None and phase not in c.POD_PHASES:
        errs.append(unsupported(ROOT.child("status").child("phase"), phase, c.POD_PHASES))
    return errs


def _job_rules(obj: Mapping[str, Any]) -> list[FieldError]:
    """Counts that must not be negative (apimachinery's ValidateNonnegativeField), then the
    topology annotations and pod template (the Job validator, which reads an absent restartPolicy
    as the API server's default, Always, and refuses it as a cluster does)."""
    spec = obj.get("spec") or {}
    errs = [invalid(SPEC.child(name), spec[name], "must be greater than or equal to 0")
            for name in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds")
            if isinstance(spec.get(name), int) and spec[name] < 0]
    mode = spec.get("completionMode")
    if mode is not None and mode not in c.JOB_COMPLETION_MODES:
        errs.append(unsupported(SPEC.child("completionMode"), mode, c.JOB_COMPLETION_MODES))
    return errs + validate(obj)


def _priority_class_rules(obj: Mapping[str, Any]) -> list[FieldError]:
    name = str((obj.get("metadata") or {}).get("name", ""))
    value = obj.get("value")
    if value is None:  # the schema leaves it optional; the API server requires it
        return [required(ROOT.child("value"))]
    if isinstance(value, int) and value > HIGHEST_USER_PRIORITY and not name.startswith("system-"):
        return [invalid(ROOT.child("value"), value,
                        f"must be no greater than {HIGHEST_USER_PRIORITY} (classes not named system-*)")]
    return []


_KIND_RULES: Final[dict[str, Callable[[Mapping[str, Any]], list[FieldError]]]] = {
    c.KIND_NODE: _node_rules, c.KIND_POD: _pod_rules, c.KIND_JOB: _job_rules,
    c.KIND_PRIORITY_CLASS: _priority_class_rules,
}


def _pick(obj: Mapping[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: obj[k] for k in keys if obj and obj.get(k) is not None}


_META_KEYS: Final = ("name", "generateName", "namespace", "uid", "labels", "creationTimestamp")
_POD_META_KEYS: Final = (*_META_KEYS, "ownerReferences", "deletionTimestamp")
_POD_SPEC_KEYS: Final = ("nodeName", "overhead", "schedulingGates", "nodeSelector", "tolerations",
                         "priorityClassName", "priority")


def _slim_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Node as NodeView reads it: name, labels, taints, unschedulable, allocatable, Ready."""
    status = obj.get("status") or {}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": _pick(obj.get("metadata"), _META_KEYS),
            "spec": _pick(obj.get("spec"), ("taints", "unschedulable")),
            "status": {"allocatable": status.get("allocatable") or {},
                       "conditions": [_pick(cd, ("type", "status")) for cd in status.get("conditions") or []]}}


def _slim_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod as PodView reads it: identity, tasq's annotations, what it requests, where it runs."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    slim_meta = _pick(meta, _POD_META_KEYS)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(c.GROUP)}
    if annotations:
        slim_meta["annotations"] = annotations
    slim_spec = _pick(spec, _POD_SPEC_KEYS)
    slim_spec["containers"] = [_pick(ctr, ("name", "resources")) for ctr in spec.get("containers") or []]
    if spec.get("initContainers"):
        slim_spec["initContainers"] = [_pick(ctr, ("name", "resources", "restartPolicy"))
                                       for ctr in spec["initContainers"]]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        slim_spec["affinity"] = {"nodeAffinity": node_affinity}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": slim_meta, "spec": slim_spec,
            "status": _pick(status, ("phase", "conditions"))}


_SLIM: Final[dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    c.KIND_NODE: _slim_node, c.KIND_POD: _slim_pod,
}
