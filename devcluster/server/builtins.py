"""Defaulting and validation of the built-in kinds (the parts of their registry strategies tasq relies on).

Pure functions called by the request pipeline: `prune_unknown_fields` (decoding into the Go type),
`apply_defaults` at decoding (before admission and again on a webhook's output), `prepare_for_create`
after admission, then `validate_create` / `validate_update` returning every field cause (an empty
list = valid).
Rules and wording follow pkg/apis/core/validation and pkg/apis/batch/validation.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from kubernetes.client import models

from devcluster.server import validation
from devcluster.server.errors import (
    CAUSE_DUPLICATE,
    CAUSE_FORBIDDEN,
    CAUSE_INVALID,
    CAUSE_NOT_SUPPORTED,
    CAUSE_REQUIRED,
    Cause,
    field_error,
)
from devcluster.server.resources import ResourceType

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_KINDS = frozenset({"Namespace", "Service"})
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                  "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                  "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")

LABEL_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
LABEL_LEGACY_CONTROLLER_UID = "controller-uid"
LABEL_LEGACY_JOB_NAME = "job-name"
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"


def name_causes(resource: ResourceType, name: str) -> list[Cause]:
    """metadata.name: DNS-1123 label for Namespaces/Services, subdomain otherwise (CRs too)."""
    if not name:
        return [field_error("metadata.name", CAUSE_REQUIRED, "name or generateName is required")]
    if resource.kind in _DNS_LABEL_KINDS:
        if len(name) > 63 or not _LABEL.match(name):
            return [field_error("metadata.name", CAUSE_INVALID, _LABEL_MSG, name, True)]
    elif resource.kind not in ("Event",) and (len(name) > 253 or not _SUBDOMAIN.match(name)):
        return [field_error("metadata.name", CAUSE_INVALID, _SUBDOMAIN_MSG, name, True)]
    return []


# ---------------------------------------------------------------- defaults


DEFAULT_SCHEDULER = "default-scheduler"
CONDITION_POD_SCHEDULED = "PodScheduled"
REASON_SCHEDULING_GATED = "SchedulingGated"
MESSAGE_GATED = "Scheduling is blocked due to non-empty scheduling gates"


def apply_defaults(resource: ResourceType, obj: dict[str, Any]) -> None:
    """The defaults Kubernetes fills on create that clients read back (in place)."""
    if resource.custom:
        return
    if resource.kind == "Pod":
        _default_pod_spec(obj.setdefault("spec", {}))
        _default_requests_to_limits(obj["spec"])
    elif resource.kind == "Job" and resource.group == "batch":
        _default_job(obj)
    elif resource.kind == "Namespace":
        name = obj["metadata"].get("name", "")
        obj["metadata"].setdefault("labels", {})[LABEL_NAMESPACE_NAME] = name
    elif resource.kind in WEBHOOK_CONFIGURATION_KINDS:
        default_webhooks(resource, obj)


WEBHOOK_CONFIGURATION_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})


def default_webhooks(resource: ResourceType, obj: dict[str, Any]) -> None:
    """admissionregistration/v1's defaults of each webhook (on create and on every update, as decoding
    defaults): selectors match everything, Fail, Equivalent, 10 s, rules of any scope, and for a
    mutating webhook no reinvocation. Writes only what is missing (stored subtrees may be shared)."""
    defaults: dict[str, Any] = {"failurePolicy": "Fail", "matchPolicy": "Equivalent", "namespaceSelector": {},
                                "objectSelector": {}, "timeoutSeconds": 10}
    if resource.kind == "MutatingWebhookConfiguration":
        defaults["reinvocationPolicy"] = "Never"
    for webhook in obj.get("webhooks") or []:
        if not isinstance(webhook, dict):
            continue
        for key, value in defaults.items():
            if key not in webhook:
                webhook[key] = {} if value == {} else value
        for rule in webhook.get("rules") or []:
            if isinstance(rule, dict) and "scope" not in rule:
                rule["scope"] = "*"


def prepare_for_create(resource: ResourceType, obj: dict[str, Any]) -> None:
    """What the kinds' create strategies fill after admission (once uid and name are known)."""
    if resource.custom:
        return
    if resource.kind == "Pod":
        _prepare_pod(obj)
    elif resource.kind == "Job" and resource.group == "batch":
        _generate_job_selector(obj)
    elif resource.kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")


def _default_pod_spec(spec: dict[str, Any], restart: str = "Always") -> None:
    spec.setdefault("restartPolicy", restart)
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    for c in spec.get("containers") or []:
        if isinstance(c, dict):
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("imagePullPolicy", "IfNotPresent")


def _default_requests_to_limits(spec: dict[str, Any]) -> None:
    """A container's limits stand in for its missing requests (Pods only: Kubernetes does not default
    pod templates this way). Writes only when something is missing: stored subtrees may be shared."""
    for kind in ("containers", "initContainers"):
        for c in spec.get(kind) or []:
            resources = c.get("resources") if isinstance(c, dict) else None
            if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
                continue
            requests = resources.get("requests")
            requests = requests if isinstance(requests, dict) else {}
            if any(name not in requests for name in resources["limits"]):
                c["resources"] = {**resources, "requests": {**resources["limits"], **requests}}


def _prepare_pod(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    conditions = status.get("conditions") or []
    if spec.get("schedulingGates") and not any(c.get("type") == CONDITION_POD_SCHEDULED for c in conditions):
        # kube-apiserver's pod strategy records the gate at create, before any scheduler sees the pod
        status["conditions"] = [*conditions, {"type": CONDITION_POD_SCHEDULED, "status": "False",
                                              "reason": REASON_SCHEDULING_GATED, "message": MESSAGE_GATED}]


def _default_job(obj: dict[str, Any]) -> None:
    """Job defaults incl. the generated selector and pod-template labels (manualSelector unset)."""
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        _default_pod_spec(template.setdefault("spec", {}))  # Always, as kube-apiserver: validation refuses it


def _generate_job_selector(obj: dict[str, Any]) -> None:
    """The selector and template labels the Job strategy generates from the uid (manualSelector unset)."""
    spec = obj.setdefault("spec", {})
    template = spec.get("template")
    if isinstance(template, dict) and not spec.get("manualSelector"):
        uid = obj["metadata"].get("uid", "")
        name = obj["metadata"].get("name", "")
        spec["selector"] = {"matchLabels": {LABEL_CONTROLLER_UID: uid}}
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update({LABEL_CONTROLLER_UID: uid, LABEL_JOB_NAME: name,
                       LABEL_LEGACY_CONTROLLER_UID: uid, LABEL_LEGACY_JOB_NAME: name})


# ---------------------------------------------------------------- validation


def validate_create(resource: ResourceType, obj: Mapping[str, Any]) -> list[Cause]:
    causes = validation.metadata_causes(obj.get("metadata"), builtin=not resource.custom)
    if resource.custom:
        return causes
    if resource.kind == "Pod":
        return causes + _pod_spec_causes(obj.get("spec") or {}, "spec", pod=True)
    if resource.kind == "Job" and resource.group == "batch":
        return causes + _job_causes(obj.get("spec") or {}) + validation.job_status_causes(obj.get("status"))
    if resource.kind == "Lease":
        return causes + validation.lease_causes(obj.get("spec"))
    return causes


def _pod_spec_causes(spec: Mapping[str, Any], path: str, pod: bool) -> list[Cause]:
    causes: list[Cause] = []
    containers = spec.get("containers") or []
    if not containers:
        causes.append(field_error(f"{path}.containers", CAUSE_REQUIRED))
    for kind in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(kind) or []):
            if not isinstance(c, Mapping):
                continue
            if not c.get("name"):
                causes.append(field_error(f"{path}.{kind}[{i}].name", CAUSE_REQUIRED))
            if not c.get("image"):
                causes.append(field_error(f"{path}.{kind}[{i}].image", CAUSE_REQUIRED))
    if pod and spec.get("schedulingGates") and spec.get("nodeName"):
        causes.append(field_error(f"{path}.nodeName", CAUSE_FORBIDDEN,
                                  "cannot be set until all schedulingGates have been cleared"))
    causes += validation.pod_spec_field_causes(spec, path)
    names = [g.get("name") for g in spec.get("schedulingGates") or [] if isinstance(g, Mapping)]
    for i, name in enumerate(names):
        causes += [field_error(f"{path}.schedulingGates[{i}]", CAUSE_INVALID, problem, name, True)
                   for problem in validation.qualified_name_problems(str(name or ""))]
        if name in names[:i]:
            causes.append(field_error(f"{path}.schedulingGates[{i}]", CAUSE_DUPLICATE, "", name, True))
    return causes


def _job_causes(spec: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("parallelism", "completions", "backoffLimit"):
        v = spec.get(key)
        if isinstance(v, int) and v < 0:
            causes.append(field_error(f"spec.{key}", CAUSE_INVALID,
                                      "must be greater than or equal to 0", v, True))
    causes += validation.job_spec_field_causes(spec)
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    causes += _pod_spec_causes(tspec, "spec.template.spec", pod=False)
    if tspec.get("restartPolicy") in (None, "", "Always"):  # absent was defaulted to Always
        causes.append(field_error("spec.template.spec.restartPolicy", CAUSE_REQUIRED,
                                  'valid values: "OnFailure", "Never"'))
    elif tspec.get("restartPolicy") not in ("Never", "OnFailure"):
        causes.append(field_error("spec.template.spec.restartPolicy", CAUSE_NOT_SUPPORTED,
                                  'supported values: "OnFailure", "Never"', tspec.get("restartPolicy"), True))
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(field_error("spec.completions", CAUSE_REQUIRED,
                                  "when completion mode is Indexed"))
    return causes


def validate_update(resource: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    causes = validation.metadata_causes(new.get("metadata"), builtin=not resource.custom)
    if resource.custom:
        return causes
    if resource.kind == "Pod":
        return causes + _pod_update_causes(old.get("spec") or {}, new.get("spec") or {})
    if resource.kind == "Job" and resource.group == "batch":
        return (causes + _job_update_causes(old, new.get("spec") or {})
                + _job_causes(new.get("spec") or {}) + validation.job_status_causes(new.get("status")))
    if resource.kind == "Lease":
        return causes + validation.lease_causes(new.get("spec"))
    return causes


def _gate_names(spec: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, Mapping)]


_POD_MUTABLE_MSG = ("pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it "
                    "to be set to 1 if it was previously negative)")


def _pod_update_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """Pod spec is immutable except images, deadline, toleration additions, gate removal and (while
    gated) nodeSelector additions and affinity; nodeName changes only through the binding subresource."""
    causes: list[Cause] = []
    old_gates, new_gates = _gate_names(old), _gate_names(new)
    added = [g for g in new_gates if g not in old_gates]
    if added:
        causes.append(field_error("spec.schedulingGates", CAUSE_FORBIDDEN,
                                  f"only deletion is allowed, but found new scheduling gate '{added[0]}'"))
    if not _only_added_tolerations(old.get("tolerations") or [], new.get("tolerations") or []):
        causes.append(field_error("spec.tolerations", CAUSE_FORBIDDEN,
                                  "existing toleration can not be modified except its tolerationSeconds"))
    gated = bool(old_gates)
    if gated:
        old_sel, new_sel = old.get("nodeSelector") or {}, new.get("nodeSelector") or {}
        changed = [k for k, v in old_sel.items() if new_sel.get(k) != v]
        if changed:
            causes.append(field_error("spec.nodeSelector", CAUSE_INVALID,
                                      "only additions to spec.nodeSelector are allowed (no mutations or "
                                      "deletions)", new_sel, True))
    if _masked_pod_spec(old, gated) != _masked_pod_spec(new, gated):
        causes.append(field_error("spec", CAUSE_FORBIDDEN, _POD_MUTABLE_MSG))
    return causes


def _only_added_tolerations(old: list[Any], new: list[Any]) -> bool:
    """Every old toleration is still there, possibly with another tolerationSeconds (pod update rule)."""
    def key(t: Any) -> Any:
        return sorted((k, repr(v)) for k, v in t.items() if k != "tolerationSeconds") if isinstance(t, Mapping) else t
    kept = [key(t) for t in new]
    return all(key(t) in kept for t in old)


def _masked_pod_spec(spec: Mapping[str, Any], gated: bool) -> dict[str, Any]:
    """The pod spec without its mutable parts (shallow copies only: this runs on every pod update)."""
    dropped = {"activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"}
    if gated:
        dropped |= {"nodeSelector", "affinity"}
    masked = {k: v for k, v in spec.items() if k not in dropped}
    for kind in ("containers", "initContainers"):
        if isinstance(masked.get(kind), list):
            masked[kind] = [{k: v for k, v in c.items() if k != "image"} if isinstance(c, Mapping) else c
                            for c in masked[kind]]
    return masked


_JOB_SCHEDULING_FIELDS = ("nodeSelector", "tolerations", "schedulingGates")
_IMMUTABLE = "field is immutable"


def _job_update_causes(old_job: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """selector and (but for elastic Indexed Jobs) completions are immutable; so is the template, see
    `_template_update_causes`."""
    old = old_job.get("spec") or {}
    causes: list[Cause] = []
    if old.get("selector") != new.get("selector"):
        causes.append(field_error("spec.selector", CAUSE_INVALID, _IMMUTABLE, new.get("selector"), True))
    if old.get("completions") != new.get("completions"):
        # Indexed Jobs are elastic: completions may change together with parallelism (kept equal)
        if new.get("completionMode") != "Indexed":
            causes.append(field_error("spec.completions", CAUSE_INVALID, _IMMUTABLE,
                                      new.get("completions"), True))
        elif new.get("completions") != new.get("parallelism"):
            causes.append(field_error("spec.completions", CAUSE_INVALID,
                                      "can only be modified in tandem with spec.parallelism",
                                      new.get("completions"), True))
    return causes + _template_update_causes(old_job, new)


def template_mutable(job: Mapping[str, Any]) -> bool:
    """Whether this (old) Job's pod template takes scheduling directives and container resources: it is
    suspended, has no active pods, and has never started or carries Suspended=True (Kubernetes 1.36+,
    MutableSchedulingDirectivesForSuspendedJobs and MutablePodResourcesForSuspendedJobs, both on)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    suspended_condition = any(isinstance(c, Mapping) and c.get("type") == "Suspended" and c.get("status") == "True"
                              for c in status.get("conditions") or ())
    return (bool(spec.get("suspend")) and not status.get("active")
            and (not status.get("startTime") or suspended_condition))


def _template_update_causes(old_job: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    """A template is immutable (`spec.template`), but while `template_mutable(old_job)` its labels,
    annotations, nodeSelector, tolerations, schedulingGates, node affinity and its containers' resources
    may change; anything else in its spec is then refused at `spec.template.spec`."""
    old = old_job.get("spec") or {}
    old_t, new_t = _semantic(old.get("template")), _semantic(new.get("template"))
    if not template_mutable(old_job):
        if old_t != new_t:
            return [field_error("spec.template", CAUSE_INVALID, _IMMUTABLE)]
        return []
    if _masked_template_spec(old_t.get("spec") or {}) != _masked_template_spec(new_t.get("spec") or {}):
        return [field_error("spec.template.spec", CAUSE_INVALID, _IMMUTABLE)]
    return []


def _semantic(value: Any) -> Any:
    """The value with absent, null and empty fields alike (apimachinery compares nil and empty equal)."""
    if isinstance(value, Mapping):
        kept = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _masked_template_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A (semantic) template spec without what a mutable template may change: scheduling directives,
    node affinity and the containers' resources."""
    masked = {k: v for k, v in spec.items() if k not in _JOB_SCHEDULING_FIELDS}
    affinity = {k: v for k, v in (masked.pop("affinity", None) or {}).items() if k != "nodeAffinity"}
    if affinity:
        masked["affinity"] = affinity
    for kind in ("containers", "initContainers"):
        if isinstance(masked.get(kind), list):
            masked[kind] = [{k: v for k, v in c.items() if k != "resources"} if isinstance(c, Mapping) else c
                            for c in masked[kind]]
    return masked


def convert_string_data(resource: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret's write-only `stringData` merged into `data` (base64, overriding its keys), as the
    v1 -> internal conversion does on every write; other objects are returned as they are."""
    string_data = obj.get("stringData")
    if resource.custom or resource.kind != "Secret" or "stringData" not in obj:
        return obj
    out = {k: v for k, v in obj.items() if k != "stringData"}
    if isinstance(string_data, Mapping) and string_data:
        out["data"] = {**(obj.get("data") or {}),
                       **{k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()}}
    return out


# ---------------------------------------------------------------- unknown fields

# Field names and types of every built-in kind come from the official client's generated models
# (kubernetes 37 = Kubernetes 1.37), e.g. V1PodSpec: {"nodeSelector": "Dict[str, str]", ...}.
_LIST, _DICT = "List[", "Dict[str, "


def prune_unknown_fields(resource: ResourceType, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Drop what the kind's Go type has no field for, as kube-apiserver's decoding does; returns the
    object (the same one when nothing was dropped, never mutated) and the dropped paths in order."""
    model = client_model(resource)
    dropped: list[str] = []
    if model is None:
        return obj, dropped
    return _prune_object(obj, model, "", dropped), dropped


def client_model(resource: ResourceType) -> str | None:
    """The official client's model name of a built-in kind as stored (`V1Pod`), None for custom kinds."""
    if resource.custom:
        return None
    group = resource.storage_group if resource.storage_group is not None else resource.group
    return _model_for(group, resource.version, resource.kind)


def model_fields(model: str) -> dict[str, tuple[str, str]]:
    """JSON field name -> (client type string, description) of one model, for OpenAPI documents."""
    cls = getattr(models, model, None)
    docs = getattr(cls, "model_fields", None) or {}
    names: dict[str, str] = getattr(cls, "attribute_map", None) or {}
    return {names[attr]: (kind, str(getattr(docs.get(attr), "description", "") or ""))
            for attr, kind in (getattr(cls, "openapi_types", None) or {}).items() if attr in names}


@cache
def _model_for(group: str, version: str, kind: str) -> str | None:
    """The client model name of a stored kind (core Events are `CoreV1Event`), or None if unknown."""
    prefix = "CoreV1" if (group, kind) == ("", "Event") else version.capitalize()
    name = f"{prefix}{kind}"
    return name if _fields(name) else None


@cache
def _fields(model: str) -> dict[str, str]:
    """JSON field name -> client type string of one model ({} for names that are not models)."""
    cls = getattr(models, model, None)
    types: dict[str, str] = getattr(cls, "openapi_types", None) or {}
    names: dict[str, str] = getattr(cls, "attribute_map", None) or {}
    return {names[attr]: kind for attr, kind in types.items() if attr in names}


_SCALAR_ZEROS: dict[str, Any] = {"str": "", "int": 0, "float": 0, "bool": False}


def _zero(kind: str) -> Any:
    """A Go zero value by client type: a model with its required scalar fields empty (Go writes
    every non-optional field), "", 0, false; None for anything else."""
    cls = getattr(models, kind, None)
    if cls is None or not _fields(kind):
        return _SCALAR_ZEROS.get(kind)
    required = getattr(cls, "model_fields", None) or {}
    names: dict[str, str] = getattr(cls, "attribute_map", None) or {}
    return {names[attr]: _SCALAR_ZEROS[t] for attr, t in (getattr(cls, "openapi_types", None) or {}).items()
            if t in _SCALAR_ZEROS and attr in names and attr in required and required[attr].is_required()}


def _prune_object(obj: dict[str, Any], model: str, path: str, dropped: list[str]) -> dict[str, Any]:
    fields = _fields(model)
    out: dict[str, Any] | None = None
    for key, value in obj.items():
        where = f"{path}.{key}" if path else key
        kind = fields.get(key)
        if kind is None:
            dropped.append(where)
            out = dict(obj) if out is None else out
            del out[key]
            continue
        pruned = _prune_value(value, kind, where, dropped)
        if pruned is not value:
            out = dict(obj) if out is None else out
            out[key] = pruned
    return obj if out is None else out


def _prune_value(value: Any, kind: str, path: str, dropped: list[str]) -> Any:
    """Follow a client type string (`List[V1Container]`, `Dict[str, V1X]`, a model or a scalar); a
    null list item becomes the item type's zero value, as Go's JSON decoder makes it."""
    if kind.startswith(_LIST) and isinstance(value, list):
        item = kind[len(_LIST):-1]
        items = [_prune_value(v, item, f"{path}[{i}]", dropped) if v is not None else _zero(item)
                 for i, v in enumerate(value)]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if kind.startswith(_DICT) and isinstance(value, dict):
        item = kind[len(_DICT):-1]
        entries = {k: _prune_value(v, item, f"{path}.{k}", dropped) for k, v in value.items()}
        return value if all(entries[k] is v for k, v in value.items()) else entries
    if isinstance(value, dict) and _fields(kind):
        return _prune_object(value, kind, path, dropped)
    return value
