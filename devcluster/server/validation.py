"""Built-in validation the apiserver applies to every write: object metadata (label keys and values,
annotations, finalizer names), pod specs (resource quantities, node selectors, tolerations), Job spec
and status fields, and Leases.

Pure; called by `builtins.validate_create` / `validate_update` (field causes, a 422) and by the request
pipeline's decoding (`undecodable`: a quantity that does not parse is a 400, as the apiserver's decoder
refuses it). Messages follow apimachinery's validation so kubectl prints the familiar lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from devcluster.server.errors import (
    CAUSE_INVALID,
    CAUSE_NOT_SUPPORTED,
    CAUSE_REQUIRED,
    CAUSE_TOO_LONG,
    Cause,
    field_error,
)
from devcluster.server.quantities import QUANTITY_HINT, QuantityError, parse

_NAME_CHARS = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(_NAME_CHARS)
_VALUE_RE = re.compile(rf"({_NAME_CHARS})?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             f"'{_NAME_CHARS}')")
_QUALIFIED_MSG = ("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                  "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  f"validation is '{_NAME_CHARS}') with an optional DNS subdomain prefix and '/' "
                  "(e.g. 'example.com/MyName')")
_SUBDOMAIN_MSG = ("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                  "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
                  "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
              "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
              f"regex used for validation is '({_NAME_CHARS})?')")
ANNOTATIONS_MAX_BYTES = 256 * 1024
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_GE_ZERO = "must be greater than or equal to 0"


def qualified_name_problems(name: str) -> list[str]:
    """IsQualifiedName: `[prefix/]name`, prefix a DNS subdomain, name at most 63 characters."""
    parts = name.split("/")
    if len(parts) > 2:
        return [_QUALIFIED_MSG]
    problems = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        elif not _SUBDOMAIN_RE.fullmatch(prefix):
            problems.append(_SUBDOMAIN_MSG)
    short = parts[-1]
    if not short:
        problems.append("name part must be non-empty")
    elif len(short) > 63:
        problems.append("name part must be no more than 63 characters")
    if short and not _NAME_RE.fullmatch(short):
        problems.append(_NAME_MSG)
    return problems


def label_value_problems(value: str) -> list[str]:
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _VALUE_RE.fullmatch(value):
        problems.append(_VALUE_MSG)
    return problems


def labels_causes(labels: Any, path: str) -> list[Cause]:
    """Label-style maps (metadata.labels, nodeSelector): qualified-name keys, label values."""
    causes: list[Cause] = []
    if not isinstance(labels, Mapping):
        return causes
    for key, value in labels.items():
        causes += [field_error(path, CAUSE_INVALID, p, str(key), True) for p in qualified_name_problems(str(key))]
        if isinstance(value, str):
            causes += [field_error(path, CAUSE_INVALID, p, value, True) for p in label_value_problems(value)]
    return causes


def metadata_causes(meta: Any, builtin: bool) -> list[Cause]:
    """ValidateObjectMeta's field rules (names are checked by `builtins.name_causes`)."""
    if not isinstance(meta, Mapping):
        return []
    causes = labels_causes(meta.get("labels"), "metadata.labels")
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        size = 0
        for key, value in annotations.items():
            size += len(str(key)) + len(str(value))
            causes += [field_error("metadata.annotations", CAUSE_INVALID, p, str(key), True)
                       for p in qualified_name_problems(str(key).lower())]
        if size > ANNOTATIONS_MAX_BYTES:
            causes.append(field_error("metadata.annotations", CAUSE_TOO_LONG,
                                      f"must have at most {ANNOTATIONS_MAX_BYTES} bytes"))
    for i, name in enumerate(meta.get("finalizers") or ()):
        path = f"metadata.finalizers[{i}]"
        problems = qualified_name_problems(str(name))
        causes += [field_error(path, CAUSE_INVALID, p, str(name), True) for p in problems]
        if builtin and not problems and "/" not in str(name) and name not in STANDARD_FINALIZERS:
            causes.append(field_error(path, CAUSE_INVALID, "name is neither a standard finalizer name nor is it "
                                      "fully qualified", str(name), True))
    return causes


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def overcommit_allowed(name: str) -> bool:
    """Whether a request may be below its limit: native resources (no domain, or a kubernetes.io one)
    but hugepages. Extended resources (`nvidia.com/gpu`) and hugepages must request what they limit."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def _integer_resource(name: str) -> bool:
    """Extended resources are counted in whole units (a request of `500m` GPUs is refused)."""
    return not overcommit_allowed(name) and not name.startswith("hugepages-")


def _container_resource_causes(resources: Any, path: str) -> list[Cause]:
    """Requests and limits not negative, extended ones whole; a request not above its limit, and equal
    to it (which must be set) for a resource that cannot be overcommitted."""
    causes: list[Cause] = []
    if not isinstance(resources, Mapping):
        return causes
    values: dict[str, dict[str, Any]] = {}
    for kind in ("limits", "requests"):
        for name, value in (resources.get(kind) or {}).items():
            try:
                amount = parse(value)
            except QuantityError:
                continue  # refused at decoding already
            values.setdefault(kind, {})[name] = (amount, value)
            if amount < 0:
                causes.append(field_error(f"{path}.{kind}[{name}]", CAUSE_INVALID, _GE_ZERO, _shown(value), True))
            elif _integer_resource(str(name)) and amount.denominator != 1:
                causes.append(field_error(f"{path}.{kind}[{name}]", CAUSE_INVALID, "must be an integer",
                                          _shown(value), True))
    for name, (amount, value) in values.get("requests", {}).items():
        limit = values.get("limits", {}).get(name)
        if limit is None:
            if not overcommit_allowed(str(name)):
                causes.append(field_error(f"{path}.limits", CAUSE_REQUIRED,
                                          "Limit must be set for non overcommitable resources"))
        elif amount != limit[0] and not overcommit_allowed(str(name)):
            causes.append(field_error(f"{path}.requests", CAUSE_INVALID,
                                      f"must be equal to {name} limit of {_shown(limit[1])}", _shown(value), True))
        elif amount > limit[0]:
            causes.append(field_error(f"{path}.requests", CAUSE_INVALID,
                                      f"must be less than or equal to {name} limit of {_shown(limit[1])}",
                                      _shown(value), True))
    return causes


def _toleration_causes(toleration: Any, path: str) -> list[Cause]:
    if not isinstance(toleration, Mapping):
        return []
    causes: list[Cause] = []
    key, operator = str(toleration.get("key") or ""), toleration.get("operator") or ""
    value, effect = str(toleration.get("value") or ""), toleration.get("effect") or ""
    if key:
        causes += [field_error(f"{path}.key", CAUSE_INVALID, p, key, True) for p in qualified_name_problems(key)]
    elif operator != "Exists":
        causes.append(field_error(f"{path}.operator", CAUSE_INVALID, "operator must be Exists when `key` is empty, "
                                  'which means "match all values and all keys"', str(operator), True))
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        causes.append(field_error(f"{path}.effect", CAUSE_INVALID,
                                  "effect must be 'NoExecute' when `tolerationSeconds` is set", str(effect), True))
    if operator in ("", "Equal"):
        causes += [field_error(f"{path}.operator", CAUSE_INVALID, p, value, True) for p in label_value_problems(value)]
    elif operator == "Exists":
        if value:
            causes.append(field_error(f"{path}.operator", CAUSE_INVALID,
                                      "value must be empty when `operator` is 'Exists'", value, True))
    else:
        causes.append(field_error(f"{path}.operator", CAUSE_NOT_SUPPORTED, 'supported values: "Equal", "Exists"',
                                  str(operator), True))
    if effect and effect not in TAINT_EFFECTS:
        causes.append(field_error(f"{path}.effect", CAUSE_NOT_SUPPORTED,
                                  'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"', str(effect), True))
    return causes


def pod_spec_field_causes(spec: Mapping[str, Any], path: str) -> list[Cause]:
    """Resources of every container, nodeSelector and tolerations of a pod (or pod template) spec."""
    causes: list[Cause] = []
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or ()):
            if isinstance(container, Mapping):
                causes += _container_resource_causes(container.get("resources"), f"{path}.{kind}[{i}].resources")
    causes += labels_causes(spec.get("nodeSelector"), f"{path}.nodeSelector")
    for i, toleration in enumerate(spec.get("tolerations") or ()):
        causes += _toleration_causes(toleration, f"{path}.tolerations[{i}]")
    return causes


def _not_negative(obj: Mapping[str, Any], keys: tuple[str, ...], path: str) -> list[Cause]:
    return [field_error(f"{path}.{k}", CAUSE_INVALID, _GE_ZERO, obj[k], True)
            for k in keys if isinstance(obj.get(k), int) and obj[k] < 0]


def job_spec_field_causes(spec: Mapping[str, Any]) -> list[Cause]:
    """Job spec fields besides the template's basics: modes and durations."""
    causes = _not_negative(spec, ("ttlSecondsAfterFinished", "backoffLimitPerIndex", "maxFailedIndexes"), "spec")
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.append(field_error("spec.completionMode", CAUSE_NOT_SUPPORTED, 'supported values: "NonIndexed", '
                                  '"Indexed"', str(mode), True))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= 0:
        causes.append(field_error("spec.activeDeadlineSeconds", CAUSE_INVALID, "must be greater than 0",
                                  deadline, True))
    return causes


def job_status_causes(status: Any) -> list[Cause]:
    """A Job status write: counts not negative; Complete and Failed never both true."""
    if not isinstance(status, Mapping):
        return []
    causes = _not_negative(status, ("active", "succeeded", "failed", "ready", "terminating"), "status")
    true = {c.get("type") for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("status") == "True"}
    if {"Complete", "Failed"} <= true:
        causes.append(field_error("status.conditions", CAUSE_INVALID,
                                  "cannot set Complete=True and Failed=true conditions", "[...]", False))
    return causes


def lease_causes(spec: Any) -> list[Cause]:
    if not isinstance(spec, Mapping):
        return []
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(field_error("spec.leaseDurationSeconds", CAUSE_INVALID, "must be greater than 0", duration, True))
    return causes + _not_negative(spec, ("leaseTransitions",), "spec")


def undecodable(kind: str, obj: Mapping[str, Any]) -> str | None:
    """Why the apiserver's decoder would refuse this Pod, Job or Node body (a quantity that does not
    parse), as the 400 message says it; None when it decodes."""
    specs: list[Any] = []
    if kind == "Pod":
        specs.append(obj.get("spec"))
    elif kind == "Job":
        specs.append(((obj.get("spec") or {}).get("template") or {}).get("spec"))
    quantities: list[Any] = []
    for spec in specs:
        if not isinstance(spec, Mapping):
            continue
        quantities += list((spec.get("overhead") or {}).values())
        for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping):
                for part in ("requests", "limits"):
                    values = resources.get(part)
                    quantities += list(values.values()) if isinstance(values, Mapping) else []
    if kind == "Node":
        status = obj.get("status") or {}
        for part in ("capacity", "allocatable"):
            values = status.get(part) if isinstance(status, Mapping) else None
            quantities += list(values.values()) if isinstance(values, Mapping) else []
    for value in quantities:
        try:
            parse(value)
        except QuantityError:
            return f'{kind} in version "v1" cannot be handled as a {kind}: quantities {QUANTITY_HINT}'
    return None
