"""The validators' entry points: pick the rules for an object by apiVersion and kind.

`validate(obj)` serves the validating webhook on create and `tasq simulate` on every manifest;
`validate_update(old, new)` adds Kueue's immutability rules. A Pod is checked only when it asks
for tasq (its queue label); other kinds tasq does not own (Nodes...) yield no errors; an unknown kind or version in tasq's group is an error. Objects in
v1beta1 (Topology also v1alpha1) are converted to v1beta2 and checked as such.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from controller.api import constants as c
from controller.api.conversion import ConversionFailure, convert, served_versions
from webhooks.validation import cohort, flavor, jobs, jobsets, pods, queues, topology, workload
from webhooks.validation.errors import ROOT, FieldError, invalid_omitted, required, unsupported, wrong_type

Validator = Callable[[Mapping[str, Any]], list[FieldError]]
UpdateValidator = Callable[[Mapping[str, Any], Mapping[str, Any]], list[FieldError]]

# kind -> (served apiVersions, create rules, update rules). The rules read v1beta2 (the hub); an
# object in another served version is converted first, so its errors name v1beta2 fields (as Kueue's
# webhooks, which the API server calls with v1beta2 objects).
KINDS: Final[dict[str, tuple[tuple[str, ...], Validator, UpdateValidator | None]]] = {
    c.KIND_TOPOLOGY: (served_versions(c.KIND_TOPOLOGY), topology.validate_topology,
                      topology.validate_topology_update),
    c.KIND_RESOURCE_FLAVOR: (served_versions(c.KIND_RESOURCE_FLAVOR), flavor.validate_resource_flavor,
                             flavor.validate_resource_flavor_update),
    c.KIND_CLUSTER_QUEUE: (served_versions(c.KIND_CLUSTER_QUEUE), queues.validate_cluster_queue,
                           queues.validate_cluster_queue_update),
    c.KIND_LOCAL_QUEUE: (served_versions(c.KIND_LOCAL_QUEUE), queues.validate_local_queue,
                         queues.validate_local_queue_update),
    c.KIND_WORKLOAD: (served_versions(c.KIND_WORKLOAD), workload.validate_workload,
                      workload.validate_workload_update),
    c.KIND_COHORT: (served_versions(c.KIND_COHORT), cohort.validate_cohort, None),
    c.KIND_WORKLOAD_PRIORITY_CLASS: (served_versions(c.KIND_WORKLOAD_PRIORITY_CLASS),
                                     cohort.validate_workload_priority_class, None),
}


def _v1beta1_workload(obj: Mapping[str, Any]) -> list[FieldError]:
    """v1beta1's own rule, on a field conversion folds into priorityClassRef (or drops, when the
    source is unknown): a priorityClassName needs a priority."""
    spec = obj.get("spec")
    if isinstance(spec, (dict, Mapping)) and spec.get("priorityClassName") is not None and spec.get("priority") is None:
        return [required(ROOT.child("spec").child("priority"), "priority should not be nil when priorityClassName is set")]
    return []


SPOKE_RULES: Final[dict[tuple[str, str], Validator]] = {
    (c.KIND_WORKLOAD, c.API_VERSION_V1BETA1): _v1beta1_workload,
}
"""Rules of a served version other than v1beta2 on fields that conversion renames or drops; they run
on the object as written, before it is converted."""


def _with_spoke_errors(obj: Any, hub_errors: list[FieldError]) -> list[FieldError]:
    """The version's own errors, then the hub's on other fields (a field both name is said once, in
    the words of the version the object was written in)."""
    rule = SPOKE_RULES.get((str(obj.get("kind")), str(obj.get("apiVersion")))) if isinstance(obj, (dict, Mapping)) else None
    own = rule(obj) if rule is not None else []
    said = {e.path for e in own}
    return own + [e for e in hub_errors if e.path not in said]


def _hub(obj: Any) -> Any:
    """A tasq object as v1beta2 (an object in another served version converted; else unchanged)."""
    if not isinstance(obj, (dict, Mapping)) or obj.get("apiVersion") in (
            c.API_VERSION, c.JOB_API_VERSION, c.CORE_API_VERSION, f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}"):
        return obj
    return convert(obj, c.API_VERSION)


def _rules(obj: Any) -> tuple[list[FieldError], tuple[Validator, UpdateValidator | None] | None]:
    """Which rules apply: (type errors, (create, update) or None when tasq has no rules)."""
    if not isinstance(obj, (dict, Mapping)):
        return [wrong_type(ROOT.child("object"), obj, "an object")], None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    shape_errs = [wrong_type(ROOT.child(field), value, "a string")
                  for field, value in (("apiVersion", api_version), ("kind", kind))
                  if value is not None and not isinstance(value, str)]
    if shape_errs:  # no object of any kind has these: not a Kubernetes object at all
        return shape_errs, None
    if api_version == c.JOB_API_VERSION and kind == c.KIND_JOB:
        return [], (jobs.validate_job, jobs.validate_job_update)
    if api_version == f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}" and kind == c.KIND_JOBSET:
        return [], (jobsets.validate_jobset, jobsets.validate_jobset_update)
    if api_version == c.CORE_API_VERSION and kind == c.KIND_POD:
        return [], (pods.validate_pod, pods.validate_pod_update)
    if not isinstance(api_version, str) or not api_version.startswith(f"{c.GROUP}/"):
        return [], None
    if not isinstance(kind, str) or kind not in KINDS:
        return [unsupported(ROOT.child("kind"), kind, sorted(KINDS))], None
    versions, create, update = KINDS[kind]
    if api_version not in versions:
        return [unsupported(ROOT.child("apiVersion"), api_version, versions)], None
    return [], (create, update)


def validate(obj: Any) -> list[FieldError]:
    """Every error in one object (a plain dict as the API or a YAML file gives it)."""
    errs, rules = _rules(obj)
    if rules is None:
        return errs
    hub = _hub(obj)
    if isinstance(hub, ConversionFailure):
        return [invalid_omitted(ROOT.child(hub.field) if hub.field else ROOT, hub.message)]
    return _with_spoke_errors(obj, rules[0](hub))


def validate_update(old: Any, new: Any) -> list[FieldError]:
    """Every error in `new`, plus the changes from `old` that Kueue forbids."""
    errs, rules = _rules(new)
    if rules is None:
        return errs
    create, update = rules
    hub, old_hub = _hub(new), _hub(old)
    if isinstance(hub, ConversionFailure):
        return [invalid_omitted(ROOT.child(hub.field) if hub.field else ROOT, hub.message)]
    if update is None or not isinstance(old_hub, (dict, Mapping)):
        return _with_spoke_errors(new, create(hub))
    return _with_spoke_errors(new, update(old_hub, hub))
