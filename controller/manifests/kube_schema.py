"""The Kubernetes v1.37 OpenAPI schema of core kinds, compiled into a fast structural checker.

The schema is the one `kubernetes-validate` maintains (its `_definitions.json`, read as data);
`schema_errors` walks one object against it as kubectl's strict field validation does: unknown
fields, wrong types, int32/int64 overflow, enum values, required fields, date-time strings; and, as
the API server's JSON decoder does, it turns a null list item or map value into its type's zero value
in place (`[null]` of objects is `[{}]` with required scalars empty, of strings `[""]`), so what
follows sees what a cluster would store or refuse. Each definition is compiled once into a `_Rule`.
Called by `kube_objects.check_object`.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

from webhooks.validation.errors import FieldError, FieldPath, invalid, required, unsupported, wrong_type

SCHEMA_PACKAGE: Final = "kubernetes_validate"
SCHEMA_FILE: Final = "kubernetes-json-schema/v1.37.0-local/_definitions.json"
_REF_PREFIX: Final = "#/$defs/"
_INT_RANGES: Final = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}
_DATE_TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_TYPE_WORDS: Final = {"object": "an object", "array": "a list", "string": "a string",
                      "integer": "an integer", "number": "a number", "boolean": "a boolean"}


@dataclass(slots=True)
class _Rule:
    """One compiled schema node: accepted JSON types (empty: anything), the fields of an object or
    the rule for any key, the rule for list items, enum values, integer range, date-time."""

    types: frozenset[str] = frozenset()
    properties: dict[str, _Rule] | None = None
    values: _Rule | None = None
    items: _Rule | None = None
    enum: frozenset[Any] | None = None
    int_range: tuple[int, int] | None = None
    date_time: bool = False
    required: tuple[str, ...] = ()
    expected: str = field(default="")
    quantity: bool = False


@cache
def _definitions() -> dict[str, Any]:
    text = (importlib.resources.files(SCHEMA_PACKAGE) / SCHEMA_FILE).read_text(encoding="utf-8")
    defs: dict[str, Any] = json.loads(text)["$defs"]
    return defs


_compiled: dict[str, _Rule] = {}


def _compile(schema: dict[str, Any]) -> _Rule:
    """A `_Rule` for one schema node; `$ref`s compile once each (recursive schemas share rules)."""
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.removeprefix(_REF_PREFIX)
        rule = _compiled.get(name)
        if rule is None:
            rule = _compiled[name] = _Rule()
            compiled = _compile(_definitions()[name])
            for slot in _Rule.__slots__:
                setattr(rule, slot, getattr(compiled, slot))
        return rule
    types: set[str] = set()
    for option in schema.get("oneOf", ()):
        types.update(_types(option))
    types.update(_types(schema))
    rule = _Rule(types=frozenset(types - {"null"}))
    rule.quantity = rule.types == {"string", "number"}  # resource.Quantity: its zero value reads "0"
    if "properties" in schema:
        rule.properties = {}
        for name, sub in schema["properties"].items():
            rule.properties[name] = _compile(sub)
    if isinstance(schema.get("additionalProperties"), dict):
        rule.values = _compile(schema["additionalProperties"])
    if isinstance(schema.get("items"), dict):
        rule.items = _compile(schema["items"])
    if "enum" in schema:
        rule.enum = frozenset(schema["enum"])
    rule.int_range = _INT_RANGES.get(schema.get("format", ""))
    rule.date_time = schema.get("format") == "date-time"
    rule.required = tuple(schema.get("required", ()))
    rule.expected = " or ".join(_TYPE_WORDS.get(t, t) for t in sorted(rule.types))
    return rule


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type", [])
    return [declared] if isinstance(declared, str) else list(declared)


def _type_ok(types: frozenset[str], value: Any) -> bool:
    if not types:
        return True
    if isinstance(value, bool):
        return "boolean" in types
    if isinstance(value, int):
        return "integer" in types or "number" in types
    if isinstance(value, float):
        return "number" in types or ("integer" in types and value.is_integer())
    if isinstance(value, str):
        return "string" in types
    if isinstance(value, dict):
        return "object" in types
    if isinstance(value, list):
        return "array" in types
    return False


def _walk(rule: _Rule, value: Any, path: str, depth: int, errs: list[FieldError]) -> None:
    """Check `value` at `path` against `rule`, appending each problem; null is an absent field."""
    if value is None:
        return
    if not _type_ok(rule.types, value):
        shown = value if not isinstance(value, (dict, list)) else f"<{type(value).__name__}>"
        errs.append(wrong_type(_path(path), shown, rule.expected))
        return
    if depth > MAX_WALK_DEPTH:
        errs.append(invalid(_path(path), "...", f"nested deeper than {MAX_WALK_DEPTH} levels"))
        return
    if isinstance(value, dict):
        _walk_object(rule, value, path, depth, errs)
    elif isinstance(value, list):
        if rule.items is not None:
            for i, item in enumerate(value):
                if item is None:
                    item = value[i] = zero_value(rule.items)
                _walk(rule.items, item, f"{path}[{i}]", depth + 1, errs)
    elif rule.enum is not None and value not in rule.enum:
        errs.append(unsupported(_path(path), value, sorted(str(v) for v in rule.enum)))
    elif rule.int_range is not None and isinstance(value, (int, float)) and \
            not rule.int_range[0] <= value <= rule.int_range[1]:
        errs.append(invalid(_path(path), value, f"must be between {rule.int_range[0]} and {rule.int_range[1]}"))
    elif rule.date_time and not _DATE_TIME.fullmatch(value):
        errs.append(invalid(_path(path), value, "must be an RFC 3339 date-time such as \"2026-01-01T00:00:00Z\""))


def _walk_object(rule: _Rule, value: dict[str, Any], path: str, depth: int, errs: list[FieldError]) -> None:
    """Known fields by their rule, other keys by the map's value rule, else unknown (strict)."""
    props = rule.properties
    for key, item in value.items():
        sub = props.get(key) if props is not None else None
        if sub is None:
            sub = rule.values
        if sub is None:
            if props is not None:
                errs.append(FieldError(_child(path, key), f'unknown field "{key}"'))
            continue
        if item is None and sub is rule.values:
            item = value[key] = zero_value(sub)
        _walk(sub, item, _child(path, key) if props is not None and key in props else f"{path}[{key}]",
              depth + 1, errs)
    for key in rule.required:
        if value.get(key) is None:
            errs.append(required(_path(_child(path, key))))


def zero_value(rule: _Rule, depth: int = 0) -> Any:
    """What Go decodes a JSON null into, as a list item or map value of this type: an object with its
    required scalar fields empty (Go writes every non-optional field), "", 0, false or quantity "0";
    None (absent) for a list, a map or a type the schema leaves open."""
    if rule.quantity:
        return "0"
    if rule.types == {"object"} and rule.properties is not None:
        obj: dict[str, Any] = {}
        for key in rule.required:
            sub = rule.properties.get(key)
            value = zero_value(sub, depth + 1) if sub is not None and depth < _ZERO_DEPTH else None
            if value is not None:
                obj[key] = value
        return obj
    if rule.types == {"object"}:
        return None  # a map: Go's nil map
    return _SCALAR_ZEROS.get(min(rule.types, default=""))


_SCALAR_ZEROS: Final[dict[str, Any]] = {"string": "", "integer": 0, "number": 0, "boolean": False}
_ZERO_DEPTH: Final = 8
"""Required objects inside required objects are filled this deep (no core type nests further)."""

MAX_WALK_DEPTH: Final = 100
"""As `documents.MAX_DEPTH`: a JSON document below json's own recursion limit is cut off here."""


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _path(path: str) -> FieldPath:
    return FieldPath(path)


def definition_rule(definition: str) -> _Rule:
    """The compiled rule of one definition (e.g. `io.k8s.api.core.v1.Pod`)."""
    return _compile({"$ref": _REF_PREFIX + definition})


def schema_errors(definition: str, obj: dict[str, Any]) -> list[FieldError]:
    """Every structural problem of `obj` against the named definition, with field paths."""
    errs: list[FieldError] = []
    _walk(definition_rule(definition), obj, "", 0, errs)
    return errs
