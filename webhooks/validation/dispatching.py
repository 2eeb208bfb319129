"""The validators' entry points: pick the rules for an object by apiVersion and kind.

`validate(obj)` serves the validating webhook on create and `tasq simulate` on every manifest;
`validate_update(old, new)` adds Kueue's immutability rules. Kinds tasq does not own (Nodes,
Pods...) yield no errors; an unknown kind or version in tasq's group is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from controller.api import constants as c
from webhooks.validation import cohort, flavor, jobs, queues, topology, workload
from webhooks.validation.errors import ROOT, FieldError, unsupported, wrong_type

Validator = Callable[[Mapping[str, Any]], list[FieldError]]
UpdateValidator = Callable[[Mapping[str, Any], Mapping[str, Any]], list[FieldError]]

_V1BETA1: Final = c.API_VERSION
_V1ALPHA1: Final = f"{c.GROUP}/{c.VERSION_V1ALPHA1}"
_V1BETA2: Final = f"{c.GROUP}/{c.VERSION_V1BETA2}"

# kind -> (served apiVersions, create rules, update rules); Topology is served in both versions.
KINDS: Final[dict[str, tuple[tuple[str, ...], Validator, UpdateValidator | None]]] = {
    c.KIND_TOPOLOGY: ((_V1ALPHA1, _V1BETA1), topology.validate_topology, topology.validate_topology_update),
    c.KIND_RESOURCE_FLAVOR: ((_V1BETA1,), flavor.validate_resource_flavor,
                             flavor.validate_resource_flavor_update),
    c.KIND_CLUSTER_QUEUE: ((_V1BETA1,), queues.validate_cluster_queue, queues.validate_cluster_queue_update),
    c.KIND_LOCAL_QUEUE: ((_V1BETA1,), queues.validate_local_queue, queues.validate_local_queue_update),
    c.KIND_WORKLOAD: ((_V1BETA1,), workload.validate_workload, workload.validate_workload_update),
    c.KIND_COHORT: ((_V1BETA2,), cohort.validate_cohort, None),
    c.KIND_WORKLOAD_PRIORITY_CLASS: ((_V1BETA1, _V1BETA2), cohort.validate_workload_priority_class, None),
}


def _rules(obj: Any) -> tuple[list[FieldError], tuple[Validator, UpdateValidator | None] | None]:
    """Which rules apply: (type errors, (create, update) or None when tasq has no rules)."""
    if not isinstance(obj, Mapping):
        return [wrong_type(ROOT.child("object"), obj, "an object")], None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    shape_errs = [wrong_type(ROOT.child(field), value, "a string")
                  for field, value in (("apiVersion", api_version), ("kind", kind))
                  if value is not None and not isinstance(value, str)]
    if shape_errs:  # no object of any kind has these: not a Kubernetes object at all
        return shape_errs, None
    if api_version == c.JOB_API_VERSION and kind == c.KIND_JOB:
        return [], (jobs.validate_job, jobs.validate_job_update)
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
    return rules[0](obj)


def validate_update(old: Any, new: Any) -> list[FieldError]:
    """Every error in `new`, plus the changes from `old` that Kueue forbids."""
    errs, rules = _rules(new)
    if rules is None:
        return errs
    create, update = rules
    if update is None or not isinstance(old, Mapping):
        return create(new)
    return update(old, new)
