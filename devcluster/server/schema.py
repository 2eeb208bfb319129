"""CRD structural schemas: pruning of unknown fields, defaulting and openAPIV3Schema validation.

Pure. The request pipeline calls `prune_and_default` then `validate` on every custom object it
writes, as kube-apiserver does (decode -> prune -> default -> validate). Error wording follows
kube-openapi's validator so kubectl prints the familiar `field: Invalid value: ...` lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from devcluster.server.errors import (
    CAUSE_DUPLICATE,
    CAUSE_INVALID,
    CAUSE_NOT_SUPPORTED,
    CAUSE_REQUIRED,
    CAUSE_TOO_LONG,
    CAUSE_TOO_MANY,
    CAUSE_TYPE_INVALID,
    Cause,
    field_error,
)
from devcluster.server.patching import clone

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"
_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune_and_default(obj: dict[str, Any], schema: Mapping[str, Any],
                      dropped: list[str] | None = None) -> dict[str, Any]:
    """Drop fields the schema does not declare and fill declared defaults; returns the new object.
    The paths of dropped fields are appended to `dropped` (for fieldValidation=Strict)."""
    out = _prune(obj, schema, "", dropped, root=True)
    return out if isinstance(out, dict) else obj


def _prune(value: Any, schema: Mapping[str, Any], path: str, dropped: list[str] | None,
           root: bool = False) -> Any:
    """One node: maps keep declared (or additionalProperties / preserved) keys, lists recurse into items."""
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get(PRESERVE))
        keep_meta = root or bool(schema.get(EMBEDDED))
        out: dict[str, Any] = {}
        for key, child in value.items():
            if keep_meta and key in _ROOT_KEEP:
                # apiVersion/kind/metadata are the server's business, never pruned by the CRD schema
                out[key] = child
            elif key in props:
                out[key] = _prune(child, props[key], _join(path, key), dropped)
            elif isinstance(additional, Mapping):
                out[key] = _prune(child, additional, _join(path, key), dropped)
            elif preserve or additional is True:
                out[key] = child
            elif dropped is not None:
                dropped.append(_join(path, key))
        for key, sub in props.items():
            if key not in out and isinstance(sub, Mapping) and "default" in sub:
                out[key] = _prune(clone(sub["default"]), sub, _join(path, key), None)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_prune(v, items, f"{path}[{i}]", dropped) for i, v in enumerate(value)]
    return value


_TYPE_NAMES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _type_ok(value: Any, wanted: str) -> bool:
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if wanted == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = _TYPE_NAMES.get(wanted)
    return expected is None or isinstance(value, expected)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return '"object"' if isinstance(value, dict) else '"array"'
    return "null" if value is None else str(value)


def validate(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Cause]:
    """Every schema violation, in document order, as field causes (`spec.podSets[0].count`)."""
    causes: list[Cause] = []
    body = {k: v for k, v in obj.items() if k not in _ROOT_KEEP}
    root = {k: v for k, v in schema.items() if k != "required"}
    required = [r for r in schema.get("required") or [] if r not in _ROOT_KEEP]
    _validate(body, {**root, "required": required}, "", causes)
    return causes


def _validate(value: Any, schema: Mapping[str, Any], path: str, causes: list[Cause]) -> None:
    """Check one node and recurse; `causes` accumulates everything wrong below `path`."""
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            causes.append(field_error(path, CAUSE_TYPE_INVALID, f'{path or "body"} in body must be of type '
                                      f'{schema["type"]}: "null"', None, show_value=True))
        return
    if not _check_type(value, schema, path, causes):
        return
    _check_scalar(value, schema, path, causes)
    if isinstance(value, dict):
        _check_object(value, schema, path, causes)
    elif isinstance(value, list):
        _check_array(value, schema, path, causes)
    for sub in schema.get("allOf") or []:
        _validate(value, sub, path, causes)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key) or []
        if options:
            matched = sum(1 for sub in options if not _sub_causes(value, sub, path))
            if matched == 0 or (key == "oneOf" and matched > 1):
                causes.append(field_error(path, CAUSE_INVALID, f"{path or 'body'} in body must match "
                                          f"{'exactly one' if key == 'oneOf' else 'at least one'} schema",
                                          value, show_value=True))


def _sub_causes(value: Any, schema: Mapping[str, Any], path: str) -> list[Cause]:
    out: list[Cause] = []
    _validate(value, schema, path, out)
    return out


def _json_type(value: Any) -> str:
    """The JSON type name kube-openapi shows as the invalid value of a type error."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object" if isinstance(value, dict) else "array"


def _check_type(value: Any, schema: Mapping[str, Any], path: str, causes: list[Cause]) -> bool:
    if schema.get(INT_OR_STRING):
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            return True
        causes.append(field_error(path, CAUSE_TYPE_INVALID,
                                  f"{path} in body must be of type integer,string: {_show(value)}",
                                  _json_type(value), show_value=True))
        return False
    wanted = schema.get("type")
    if not wanted or _type_ok(value, wanted):
        return True
    causes.append(field_error(path, CAUSE_TYPE_INVALID,
                              f"{path or 'body'} in body must be of type {wanted}: {_show(value)}",
                              _json_type(value), show_value=True))
    return False


def _check_scalar(value: Any, schema: Mapping[str, Any], path: str, causes: list[Cause]) -> None:
    """enum, numeric bounds, string length and pattern."""
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        allowed = ", ".join(_show(e) for e in enum)
        causes.append(field_error(path, CAUSE_NOT_SUPPORTED, f"supported values: {allowed}", value, True))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None:
            if schema.get("exclusiveMinimum") and value <= low:
                causes.append(field_error(path, CAUSE_INVALID, f"{path} in body should be greater than {low}",
                                          value, True))
            elif value < low:
                causes.append(field_error(path, CAUSE_INVALID,
                                          f"{path} in body should be greater than or equal to {low}", value, True))
        if high is not None:
            if schema.get("exclusiveMaximum") and value >= high:
                causes.append(field_error(path, CAUSE_INVALID, f"{path} in body should be less than {high}",
                                          value, True))
            elif value > high:
                causes.append(field_error(path, CAUSE_INVALID,
                                          f"{path} in body should be less than or equal to {high}", value, True))
    if isinstance(value, str):
        if (n := schema.get("minLength")) is not None and len(value) < n:
            causes.append(field_error(path, CAUSE_INVALID, f"{path} in body should be at least {n} chars long",
                                      value, True))
        if (n := schema.get("maxLength")) is not None and len(value) > n:
            causes.append(field_error(path, CAUSE_TOO_LONG, f"may not be more than {n} bytes"))
        if (pattern := schema.get("pattern")) and not re.search(pattern, value):
            causes.append(field_error(path, CAUSE_INVALID, f"{path} in body should match '{pattern}'", value, True))


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], path: str, causes: list[Cause]) -> None:
    """required, declared properties, additionalProperties, property counts."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            causes.append(field_error(_join(path, name), CAUSE_REQUIRED))
    additional = schema.get("additionalProperties")
    for key, child in value.items():
        if key in props:
            _validate(child, props[key], _join(path, key), causes)
        elif isinstance(additional, Mapping):
            _validate(child, additional, _join(path, key), causes)
    if (n := schema.get("maxProperties")) is not None and len(value) > n:
        causes.append(field_error(path, CAUSE_TOO_MANY, f"must have at most {n} items", len(value), True))
    if (n := schema.get("minProperties")) is not None and len(value) < n:
        causes.append(field_error(path, CAUSE_INVALID, f"{path} in body should have at least {n} properties",
                                  len(value), True))


def _check_array(value: list[Any], schema: Mapping[str, Any], path: str, causes: list[Cause]) -> None:
    """minItems/maxItems, list-type uniqueness, and every item against `items`."""
    if (n := schema.get("minItems")) is not None and len(value) < n:
        causes.append(field_error(path, CAUSE_INVALID, f"{path} in body should have at least {n} items",
                                  len(value), True))
    if (n := schema.get("maxItems")) is not None and len(value) > n:
        causes.append(field_error(path, CAUSE_TOO_MANY, f"must have at most {n} items", len(value), True))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                causes.append(field_error(f"{path}[{i}]", CAUSE_DUPLICATE, "", item, True))
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: set[tuple[str, ...]] = set()
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                k = tuple(repr(item.get(key)) for key in keys)
                if k in seen_keys:
                    causes.append(field_error(f"{path}[{i}]", CAUSE_DUPLICATE, "", item, True))
                seen_keys.add(k)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", causes)
