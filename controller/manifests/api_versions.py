"""tasq's kinds read in the version the user wrote: a document is checked for fields its version's
CRD schema does not list (as kubectl's strict field validation); a v1beta1 (or Topology v1alpha1) one
is checked against that version's model, converted to the hub (v1beta2) with `conversion.convert`, and
every error of the hub's rules is reported back at the field path, and with the field names, of the
version written. Called by `manifests.kube_objects.check_object` for every document of tasq's group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from pydantic import ValidationError

from controller.api import constants as c
from controller.api.conversion import HUB, ConversionFailure, convert, served_versions
from controller.api.crds import crd, kind_spec
from controller.api.meta import KubeObject
from webhooks.validation import FieldError
from webhooks.validation.errors import ROOT, invalid_omitted

SPOKE_FIELDS: Final[Mapping[str, tuple[tuple[str, str, bool], ...]]] = {
    c.KIND_CLUSTER_QUEUE: (("spec.cohortName", "spec.cohort", True),),
    c.KIND_LOCAL_QUEUE: (("status.flavorsUsage", "status.flavorUsage", True),),
    c.KIND_WORKLOAD: (("spec.priorityClassRef.name", "spec.priorityClassName", True),
                      ("spec.priorityClassRef.group", "spec.priorityClassSource", True),
                      ("spec.priorityClassRef.kind", "spec.priorityClassSource", True),
                      ("spec.priorityClassRef", "spec.priorityClassName", False),
                      ("status.accumulatedPastExecutionTimeSeconds", "status.accumulatedPastExexcutionTimeSeconds",
                       True),
                      # a slice is any number of v1beta1's domains: the error is on the domains as a whole
                      ("status.admission.podSetAssignments[*].topologyAssignment.slices",
                       "status.admission.podSetAssignments[*].topologyAssignment.domains", False)),
}
"""kind -> (hub field path, the v1beta1 field it comes from, whether a path below it keeps its tail
there; `[*]` is any list index, the same in both), most specific first: Kueue's renames as `conversion` carries them out
(tests/unit/manifests/test_api_versions.py checks the two agree)."""


@dataclass(frozen=True, slots=True)
class InHub:
    """A document of tasq's group as the hub reads it (`obj`, v1beta2), or its errors in the version
    the user wrote (`obj` None)."""

    obj: dict[str, Any] | None
    errors: list[FieldError]


def _prefix(hub: str) -> re.Pattern[str]:
    """A hub path as a pattern matching it and any path below it, each `[*]` capturing its index."""
    return re.compile(re.escape(hub).replace(re.escape("[*]"), r"\[(\d+)\]") + r"(?=$|[.\[])")


def spoke_path(kind: str, hub_path: str) -> str:
    """The v1beta1 path of a field error found in the hub form of a `kind` object."""
    for hub, spoke, keeps_tail in SPOKE_FIELDS.get(kind, ()):
        found = _prefix(hub).match(hub_path)
        if found is not None:
            head = spoke
            for index in found.groups():
                head = head.replace("[*]", f"[{index}]", 1)
            return head + (hub_path[found.end():] if keeps_tail else "")
    return hub_path


def _bracketed(dotted: str) -> str:
    """`conversion`'s dotted field path with list indexes written as kubectl writes them: a.0.b -> a[0].b."""
    return re.sub(r"\.(\d+)(?=\.|\[|$)", r"[\1]", dotted)


def spoke_message(kind: str, message: str) -> str:
    """A hub rule's message with the renamed fields called by their v1beta1 names (a renamed field's
    own name only: `name` in a message is not priorityClassRef's)."""
    for hub, spoke, _ in SPOKE_FIELDS.get(kind, ()):
        hub_steps, spoke_steps = hub.split("."), spoke.split(".")
        if len(hub_steps) == len(spoke_steps) and hub_steps[:-1] == spoke_steps[:-1]:
            message = re.sub(rf"\b{re.escape(hub_steps[-1])}\b", spoke_steps[-1], message)
    return message


@cache
def _schema(kind: str, version: str) -> Mapping[str, Any]:
    """The openAPIV3Schema the CRD of `kind` serves `version` with."""
    served = next(v for v in crd(kind_spec(kind))["spec"]["versions"] if v["name"] == version)
    schema: Mapping[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def unknown_fields(schema: Mapping[str, Any], value: Any, path: str = "") -> list[FieldError]:
    """Fields the schema does not list (kubectl's strict field validation; the API server would drop
    them), e.g. v1beta1's `spec.cohort` written in a v1beta2 ClusterQueue. Iterative, so any depth."""
    errs: list[FieldError] = []
    stack: list[tuple[Mapping[str, Any], Any, str]] = [(schema, value, path)]
    while stack:
        node, val, where = stack.pop()
        if node.get("x-kubernetes-preserve-unknown-fields"):
            continue
        if isinstance(val, dict) and "properties" in node:
            for key, item in val.items():
                sub = node["properties"].get(key)
                child = f"{where}.{key}" if where else key
                if sub is None:
                    errs.append(FieldError(child, f'unknown field "{key}"'))
                else:
                    stack.append((sub, item, child))
        elif isinstance(val, dict) and isinstance(node.get("additionalProperties"), Mapping):
            stack.extend((node["additionalProperties"], item, f"{where}[{key}]") for key, item in val.items())
        elif isinstance(val, list) and isinstance(node.get("items"), Mapping):
            stack.extend((node["items"], item, f"{where}[{i}]") for i, item in enumerate(val))
    return sorted(errs, key=lambda e: e.path)


def model_errors(model: type[KubeObject], obj: Mapping[str, Any]) -> list[FieldError]:
    """What `model` refuses in `obj` (a field the version lacks a type for, a wrong type), at its path."""
    try:
        model.from_dict(dict(obj))
    except ValidationError as err:
        return [FieldError(_loc_path(e["loc"]), f"Invalid value: {e['msg']}") for e in err.errors()]
    return []


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path = f"{path}[{part}]" if isinstance(part, int) else (f"{path}.{part}" if path else str(part))
    return path


def _served(kind: str) -> tuple[str, ...]:
    """The apiVersions the CRD of `kind` serves, the storage version first; () for a kind it has not."""
    try:
        spec = kind_spec(kind)
    except KeyError:
        return ()
    return tuple(f"{c.GROUP}/{v}" for v in spec.served_versions)


def to_hub(obj: dict[str, Any], check_hub: Callable[[dict[str, Any]], list[FieldError]]) -> InHub:
    """`obj` (of tasq's group) as the hub, checked by `check_hub` (the validators and the hub's model);
    a served older version is first checked against its own model, and any error is reported in it.
    A kind `conversion` does not map has the same fields in every version it is served in."""
    kind = obj["kind"]
    if obj["apiVersion"] not in _served(kind):
        return InHub(None, check_hub(obj))  # the validators name what is served
    version = obj["apiVersion"].split("/", 1)[1]
    errors = unknown_fields(_schema(kind, version), obj)
    if obj["apiVersion"] == HUB or errors:
        errors = errors or check_hub(obj)
        return InHub(None if errors else obj, errors)
    errors = model_errors(kind_spec(kind).version(version).model, obj)
    if errors:
        return InHub(None, errors)
    hub = convert(obj, HUB) if obj["apiVersion"] in served_versions(kind) else {**obj, "apiVersion": HUB}
    if isinstance(hub, ConversionFailure):
        return InHub(None, [FieldError(_bracketed(hub.field), f"Invalid value: {hub.detail}") if hub.field
                            else invalid_omitted(ROOT, hub.message)])
    errors = [FieldError(spoke_path(kind, e.path), spoke_message(kind, e.message)) for e in check_hub(hub)]
    return InHub(None if errors else hub, errors)
