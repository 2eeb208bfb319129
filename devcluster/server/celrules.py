"""CRD validation rules (`x-kubernetes-validations`): CEL expressions evaluated as kube-apiserver does.

The request pipeline calls `rule_causes(obj, old, schema)` after the schema checks of every custom
object it writes; CRD validation calls `compile_causes` so a rule that does not parse refuses the CRD.
Each rule sees `self` (its node's value) and, on updates of a correlatable node, `oldSelf`; rules that
name `oldSelf` (transition rules) run only then, and the others are ratcheted (skipped) on a node the
update leaves unchanged. Evaluated with the `common-expression-language` library (cel-rust); programs
are cached by their text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import cel

from devcluster.server.errors import (
    CAUSE_DUPLICATE,
    CAUSE_FORBIDDEN,
    CAUSE_INVALID,
    CAUSE_REQUIRED,
    Cause,
    field_error,
)

RULES = "x-kubernetes-validations"
ROOT_PATH = "<nil>"  # how a nil field.Path prints: the field of a rule on the object's root
_REASONS = {CAUSE_INVALID, CAUSE_FORBIDDEN, CAUSE_REQUIRED, CAUSE_DUPLICATE}
_OLD_SELF = re.compile(r"\boldSelf\b")
_PARSE_PREFIX = re.compile(r"^Failed to parse expression '.*?': ", re.S)
_MISSING = object()


class RuleError(Exception):
    """A rule that does not compile or does not evaluate to what it must."""


@lru_cache(maxsize=4096)
def _program(text: str) -> cel.Program:
    try:
        return cel.compile(text)
    except (ValueError, RuntimeError) as e:
        # the library's parse errors carry cel-go's own `ERROR: <input>:1:10: ...` lines
        raise RuleError(f"compilation failed: {_PARSE_PREFIX.sub('', str(e)).strip()}") from None


def _context(value: Any, old: Any) -> cel.Context:
    """`self` (and `oldSelf`) converted to CEL once for all the rules of one node."""
    return cel.Context({"self": value} if old is _MISSING else {"self": value, "oldSelf": old})


def _evaluate(text: str, context: cel.Context) -> Any:
    """The rule's result as a Python value; RuleError when evaluation fails (a missing field...)."""
    try:
        return _program(text).execute(context)
    except RuleError:
        raise
    except Exception as e:  # the library raises KeyError, ValueError, ZeroDivisionError, TypeError...
        detail = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise RuleError(f"no such key: {detail}" if isinstance(e, KeyError) else str(detail)) from None


def _schema_type(schema: Mapping[str, Any], value: Any) -> str:
    """The value shown in `Invalid value: "object"`: the node's schema type, as the apiserver shows it."""
    declared = schema.get("type")
    if isinstance(declared, str) and declared:
        return declared
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "string"


def _join(path: str, key: str) -> str:
    return key if path in ("", ROOT_PATH) else f"{path}.{key}"


def _field_path(base: str, relative: str) -> str:
    """A rule's `fieldPath` (`.spec.levels`, `['a.b']`) below the rule's own node."""
    path = base
    for dotted, quoted in re.findall(r"\.([A-Za-z_$][A-Za-z0-9_$-]*)|\['([^']*)'\]", relative or ""):
        path = _join(path, dotted) if dotted else f"{'' if path == ROOT_PATH else path}[{quoted}]"
    return path


def _cause(rule: Mapping[str, Any], value: Any, context: cel.Context, path: str) -> Cause:
    """The field error of a failed rule: its message(Expression) or `failed rule: <rule>`. The invalid
    value shown is the node's own when it is a scalar; structured values and messages built by a
    messageExpression (which embed what they want) show none, as Kubernetes 1.37 prints them."""
    message = str(rule.get("message") or f"failed rule: {rule.get('rule', '')}")
    show = not isinstance(value, dict | list)
    expression = rule.get("messageExpression")
    if isinstance(expression, str) and expression:
        try:
            produced = _evaluate(expression, context)
            if isinstance(produced, str) and produced.strip():
                message, show = str(produced), False
        except RuleError:
            pass  # the apiserver falls back to `message` when messageExpression fails
    reason = str(rule.get("reason") or CAUSE_INVALID)
    reason = reason if reason in _REASONS else CAUSE_INVALID
    where = _field_path(path, str(rule.get("fieldPath") or ""))
    if reason in (CAUSE_FORBIDDEN, CAUSE_REQUIRED):
        return field_error(where, reason, message)
    if reason == CAUSE_DUPLICATE:
        return field_error(where, reason, "", value, show_value=show)
    return field_error(where, reason, message, value, show_value=show)


def _check_rules(value: Any, old: Any, schema: Mapping[str, Any], path: str, causes: list[Cause]) -> None:
    """This node's rules: transition rules only with an old value; a failing evaluation is an error too."""
    context: cel.Context | None = None
    for rule in schema.get(RULES) or ():
        text = rule.get("rule") if isinstance(rule, Mapping) else None
        if not isinstance(text, str):
            continue
        transition = bool(_OLD_SELF.search(text))
        if transition and old is _MISSING:
            continue
        if not transition and old is not _MISSING and value == old:
            continue  # ratcheting: an unchanged value keeps passing whatever the rule says now
        if context is None:
            context = _context(value, old)
        try:
            passed = _evaluate(text, context)
        except RuleError as e:
            causes.append(field_error(path, CAUSE_INVALID, f"{e} evaluating rule: {text}",
                                      _schema_type(schema, value), show_value=True))
            continue
        if passed is not True:
            causes.append(_cause(rule, value, context, path))


def _children(value: Any, old: Any, schema: Mapping[str, Any], path: str) -> list[tuple[Any, Any, Any, str]]:
    """(value, old value or _MISSING, schema, path) of each child node; list items are correlated with
    old ones only where the apiserver can (listType map by its keys, set by value)."""
    out: list[tuple[Any, Any, Any, str]] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, child in value.items():
            sub = props.get(key) if isinstance(props, Mapping) else None
            if sub is not None:
                out.append((child, old_map.get(key, _MISSING), sub, _join(path, str(key))))
            elif isinstance(additional, Mapping):
                where = f"{'' if path == ROOT_PATH else path}[{key}]"
                out.append((child, old_map.get(key, _MISSING), additional, where))
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        list_type = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        olds = old if isinstance(old, list) else []
        for i, item in enumerate(value):
            previous: Any = _MISSING
            if list_type == "map" and isinstance(item, dict):
                ident = tuple(item.get(k) for k in keys)
                previous = next((o for o in olds if isinstance(o, dict) and tuple(o.get(k) for k in keys) == ident),
                                _MISSING)
            elif list_type == "set" and item in olds:
                previous = item
            out.append((item, previous, items, f"{'' if path == ROOT_PATH else path}[{i}]"))
    return out


def rule_causes(obj: Mapping[str, Any], old: Mapping[str, Any] | None, schema: Mapping[str, Any]) -> list[Cause]:
    """Every failed rule of a custom object against its version's openAPIV3Schema, in document order."""
    causes: list[Cause] = []
    stack: list[tuple[Any, Any, Any, str]] = [(obj, _MISSING if old is None else old, schema, ROOT_PATH)]
    while stack:
        value, previous, node, path = stack.pop()
        if value is None or not isinstance(node, Mapping):
            continue
        _check_rules(value, previous, node, path, causes)
        stack.extend(reversed(_children(value, previous, node, path)))
    return causes


def has_rules(schema: Any) -> bool:
    """Whether any node of a schema carries rules (objects of kinds without any skip the walk)."""
    if isinstance(schema, Mapping):
        return bool(schema.get(RULES)) or any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False


def compile_causes(schema: Any, path: str) -> list[Cause]:
    """Rules of a CRD schema that do not compile, at their CRD field path (the CRD is refused)."""
    causes: list[Cause] = []
    if not isinstance(schema, Mapping):
        return causes
    for i, rule in enumerate(schema.get(RULES) or ()):
        text = rule.get("rule") if isinstance(rule, Mapping) else None
        where = f"{path}.{RULES}[{i}]"
        if not isinstance(text, str) or not text.strip():
            causes.append(field_error(f"{where}.rule", CAUSE_REQUIRED))
            continue
        for key in ("rule", "messageExpression"):
            expression = rule.get(key)
            if isinstance(expression, str) and expression:
                try:
                    _program(expression)
                except RuleError as e:
                    causes.append(field_error(f"{where}.{key}", CAUSE_INVALID, str(e), expression, show_value=True))
    for name, sub in (schema.get("properties") or {}).items():
        causes += compile_causes(sub, f"{path}.properties[{name}]")
    for key in ("items", "additionalProperties"):
        causes += compile_causes(schema.get(key), f"{path}.{key}")
    return causes
