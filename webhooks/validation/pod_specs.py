"""kube-apiserver's own rules on a Pod's spec or a Job's pod template, for the fields tasq reads.

On a cluster the API server refuses these before any webhook runs, so here they only repeat it;
`tasq simulate` reads manifests no API server has seen, so without them it would accept Jobs and
Pods a cluster refuses. Same field paths and equivalent messages as kube-apiserver v1.37. Not for
Workload templates (Kueue does not apply them there). Called by `jobs.validate_job` (Job templates)
and `controller.manifests.kube_objects` (Pods).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from controller.api.quantity import QuantityError, parse_quantity
from webhooks.validation import formats
from webhooks.validation.errors import (
    FieldError,
    FieldPath,
    duplicate,
    forbidden,
    invalid,
    required,
    unsupported,
)

POD_RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
JOB_RESTART_POLICIES: Final = ("OnFailure", "Never")
NODE_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_FIELD_SELECTOR_KEYS: Final = ("metadata.name",)
REQUIRED_AFFINITY: Final = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_AFFINITY: Final = "preferredDuringSchedulingIgnoredDuringExecution"
_NATIVE_DOMAIN: Final = "kubernetes.io/"


def _items(value: Any, path: FieldPath) -> Iterator[tuple[FieldPath, Mapping[str, Any]]]:
    """The object items of a list with their paths; other shapes are the schema's or pod_template's to report."""
    for i, item in enumerate(value if isinstance(value, list) else ()):
        if isinstance(item, (dict, Mapping)):
            yield path.index(i), item


def overcommit_allowed(name: str) -> bool:
    """Whether a request may be below its limit (core/v1 helper): native resources (no domain, or a
    kubernetes.io one) except hugepages; extended resources such as nvidia.com/gpu may not."""
    native = "/" not in name or _NATIVE_DOMAIN in name
    return native and not name.startswith("hugepages-")


def _amount(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ValueError):
        return None  # a malformed quantity is pod_template's error


def _amounts(resources: Mapping[str, Any], kind: str) -> dict[str, tuple[Any, Any]]:
    raw = resources.get(kind)
    return {name: (value, amount) for name, value in (raw.items() if isinstance(raw, (dict, Mapping)) else ())
            if isinstance(name, str) and (amount := _amount(value)) is not None}


def container_resources(path: FieldPath, resources: Any) -> list[FieldError]:
    """Extended resources and hugepages request exactly their limit (a limit is required), extended
    amounts are whole numbers, and hugepages come with cpu or memory."""
    if not isinstance(resources, (dict, Mapping)):
        return []
    errs: list[FieldError] = []
    limits, requests = _amounts(resources, "limits"), _amounts(resources, "requests")
    for kind, amounts in (("limits", limits), ("requests", requests)):
        for name, (value, amount) in sorted(amounts.items()):
            if "/" in name and _NATIVE_DOMAIN not in name and amount != amount.to_integral_value():
                errs.append(invalid(path.child(kind).key(name), value, "must be an integer"))
    unlimited = [name for name in requests if not overcommit_allowed(name) and name not in limits]
    if unlimited:  # the API server repeats this line per resource; once says it
        errs.append(required(path.child("limits"), "Limit must be set for non overcommitable resources"))
    for name, (value, amount) in sorted(requests.items()):
        if overcommit_allowed(name) or name not in limits:
            continue
        if amount < limits[name][1]:  # above the limit: pod_template reports it for every resource
            errs.append(invalid(path.child("requests"), value, f"must be equal to {name} limit of {limits[name][0]}"))
    names = set(limits) | set(requests)
    if any(n.startswith("hugepages-") for n in names) and not names & {"cpu", "memory"}:
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    return errs


def scheduling_gates(path: FieldPath, gates: Any) -> list[FieldError]:
    """Each gate name a qualified name, no two alike."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for item_path, gate in _items(gates, path):
        name = gate.get("name")
        if not isinstance(name, str):
            continue
        if not name:
            errs.append(invalid(item_path, name, "name part must be non-empty"))
        else:
            errs.extend(formats.qualified_name(item_path, name))
        if name in seen:
            errs.append(duplicate(item_path, name))
        seen.add(name)
    return errs


def _expressions(path: FieldPath, exprs: Any) -> list[FieldError]:
    """A term's matchExpressions: label keys, known operators, the values each operator takes."""
    errs: list[FieldError] = []
    for item_path, expr in _items(exprs, path):
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if isinstance(key, str):
            errs.extend(formats.qualified_name(item_path.child("key"), key) if key
                        else [invalid(item_path.child("key"), key, "name part must be non-empty")])
        values_path = item_path.child("values")
        if operator not in NODE_SELECTOR_OPERATORS:
            errs.append(invalid(item_path.child("operator"), operator, "not a valid selector operator"))
        elif operator in ("In", "NotIn") and not values:
            errs.append(required(values_path, "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist") and values:
            errs.append(forbidden(values_path, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif operator in ("Gt", "Lt") and (not isinstance(values, list) or len(values) != 1):
            errs.append(required(values_path, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        for i, value in enumerate(values if isinstance(values, list) else ()):
            if isinstance(value, str):
                errs.extend(formats.label_value(values_path.index(i), value))
    return errs


def _fields(path: FieldPath, exprs: Any) -> list[FieldError]:
    """A term's matchFields: only metadata.name, with In or NotIn and exactly one value."""
    errs: list[FieldError] = []
    for item_path, expr in _items(exprs, path):
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if key not in NODE_FIELD_SELECTOR_KEYS:
            errs.append(invalid(item_path.child("key"), key, "not a valid field selector key"))
        if operator not in ("In", "NotIn"):
            errs.append(invalid(item_path.child("operator"), operator, "not a valid selector operator"))
        elif not isinstance(values, list) or len(values) != 1:
            errs.append(required(item_path.child("values"),
                                 "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    return errs


def _term(path: FieldPath, term: Mapping[str, Any]) -> list[FieldError]:
    return (_expressions(path.child("matchExpressions"), term.get("matchExpressions"))
            + _fields(path.child("matchFields"), term.get("matchFields")))


def node_affinity(path: FieldPath, affinity: Any) -> list[FieldError]:
    """Required terms and preferred ones (weight 1-100); an empty term is allowed (it matches no node)."""
    if not isinstance(affinity, (dict, Mapping)):
        return []
    errs: list[FieldError] = []
    required_terms = affinity.get(REQUIRED_AFFINITY)
    if isinstance(required_terms, (dict, Mapping)):
        terms_path = path.child(REQUIRED_AFFINITY).child("nodeSelectorTerms")
        for term_path, term in _items(required_terms.get("nodeSelectorTerms"), terms_path):
            errs.extend(_term(term_path, term))
    for item_path, preferred in _items(affinity.get(PREFERRED_AFFINITY), path.child(PREFERRED_AFFINITY)):
        weight = preferred.get("weight")
        if isinstance(weight, int) and not 1 <= weight <= 100:
            errs.append(invalid(item_path.child("weight"), weight, "must be in the range 1-100"))
        preference = preferred.get("preference")
        if isinstance(preference, (dict, Mapping)):
            errs.extend(_term(item_path.child("preference"), preference))
    return errs


def pod_spec(path: FieldPath, spec: Any, *, is_pod: bool) -> list[FieldError]:
    """Every rule above on one pod spec at `path`; `is_pod` adds a Pod's own rules (its restart
    policy, no nodeName while scheduling gates remain), which a Job's template does not have."""
    if not isinstance(spec, (dict, Mapping)):
        return []
    errs: list[FieldError] = []
    for kind in ("initContainers", "containers"):
        for item_path, container in _items(spec.get(kind), path.child(kind)):
            if container.get("image") in (None, ""):
                errs.append(required(item_path.child("image")))
            errs.extend(container_resources(item_path.child("resources"), container.get("resources")))
    gates = spec.get("schedulingGates")
    errs.extend(scheduling_gates(path.child("schedulingGates"), gates))
    affinity = spec.get("affinity")
    errs.extend(node_affinity(path.child("affinity").child("nodeAffinity"),
                              affinity.get("nodeAffinity") if isinstance(affinity, (dict, Mapping)) else None))
    if is_pod:
        policy = spec.get("restartPolicy")
        if isinstance(policy, str) and policy and policy not in POD_RESTART_POLICIES:
            errs.append(unsupported(path.child("restartPolicy"), policy, POD_RESTART_POLICIES))
        if spec.get("nodeName") and isinstance(gates, list) and gates:
            errs.append(forbidden(path.child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
    return errs


def job_restart_policy(path: FieldPath, spec: Any, pod_failure_policy: bool) -> list[FieldError]:
    """A Job's template restarts OnFailure or Never (Never with a podFailurePolicy). Absent reads as
    Always: the API server defaults it before validating (and before any webhook sees the Job), and
    `tasq simulate` reads undefaulted manifests, so both refuse it with the same message."""
    if not isinstance(spec, (dict, Mapping)):
        return []
    policy = spec.get("restartPolicy") or "Always"
    if policy == "Always":
        return [required(path, 'valid values: "OnFailure", "Never"')]
    if policy not in JOB_RESTART_POLICIES:
        return [unsupported(path, policy, JOB_RESTART_POLICIES)]
    if pod_failure_policy and policy != "Never":
        return [invalid(path, policy, 'only "Never" is supported when podFailurePolicy is specified')]
    return []
