"""Evaluates a CRD's `x-kubernetes-validations` on an object with cel-python, as the API server would.

Walks the CRD version's schema alongside the object: every rule on a node present in the object
runs with `self` bound to that value (each item for rules under `items`, each value under
`additionalProperties`). Rules naming `oldSelf` run only on updates and only where the old object
has the node too (list items are not correlated: tasq puts no transition rule under items).
A rule that is false or fails to evaluate (e.g. a missing field) is a refusal, as on the server.
Shared by the CEL rule tests and the validator/CRD agreement property test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError

from controller.api.crds import VALIDATIONS

_ENV = celpy.Environment()


@dataclass(frozen=True, slots=True)
class CelFailure:
    path: str
    message: str


@cache
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule))


def _holds(rule: str, self_value: Any, old_value: Any) -> bool:
    try:  # cel-python raises (rather than returns) some of CEL's errors: no such key or overload, overflow
        bindings = {"self": json_to_cel(self_value)}
        if old_value is not None:
            bindings["oldSelf"] = json_to_cel(old_value)
        result = _program(rule).evaluate(bindings)
    except (CELEvalError, ValueError, TypeError, KeyError):
        return False
    return isinstance(result, BoolType) and bool(result)


def _is_transition(rule: str) -> bool:
    return "oldSelf" in rule


def _walk(schema: Mapping[str, Any], value: Any, old: Any, path: str, out: list[CelFailure]) -> None:
    if value is None:
        return
    for entry in schema.get(VALIDATIONS, ()):
        rule = entry["rule"]
        if _is_transition(rule) and old is None:
            continue
        if not _holds(rule, value, old if _is_transition(rule) else None):
            out.append(CelFailure(path, entry["message"]))
    if isinstance(value, Mapping):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key) if isinstance(key, str) else None
            if sub is None and isinstance(extra, Mapping):
                sub = extra
            if sub is not None:
                old_child = old.get(key) if isinstance(old, Mapping) else None
                _walk(sub, child, old_child, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _walk(schema["items"], item, None, f"{path}[{i}]", out)


def cel_failures(crd: Mapping[str, Any], version: str, obj: Any, old: Any = None) -> list[CelFailure]:
    """Every CEL rule of `crd`'s `version` that `obj` breaks (`old`: the stored object on update)."""
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            out: list[CelFailure] = []
            _walk(v["schema"]["openAPIV3Schema"], obj, old, "", out)
            return out
    raise KeyError(version)
