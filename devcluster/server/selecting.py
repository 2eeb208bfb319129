"""List selectors: the `labelSelector` and `fieldSelector` query strings, parsed and matched.

Pure: the request pipeline parses the strings once per request (errors become 400 Bad Request)
and matches each stored object. Grammar follows k8s.io/apimachinery labels.Parse / fields.ParseSelector.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector string that does not parse; the message is what the 400 response says."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (= and == are In, != is NotIn)
    values: tuple[str, ...]


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_OP_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( ... )` value sets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` -> requirements, ANDed."""
    reqs: list[Requirement] = []
    for part in _split_top_level(text or ""):
        if m := _SET_RE.match(part):
            values = tuple(v.strip() for v in m.group(4).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), "In" if m.group(3) == "in" else "NotIn", values))
        elif m := _OP_RE.match(part):
            op = "NotIn" if m.group(3) == "!=" else "In"
            reqs.append(Requirement(m.group(1), op, (m.group(4),)))
        elif m := _EXISTS_RE.match(part):
            reqs.append(Requirement(m.group(2), "DoesNotExist" if m.group(1) else "Exists", ()))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return tuple(reqs)


_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int64(text: str) -> int | None:
    """A base-10 int64 as strconv.ParseInt reads it (Python's int() would also take " 5" and "1_0")."""
    if not _INT64_RE.fullmatch(text):
        return None
    n = int(text)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def requirement_matches(labels: Mapping[str, str], key: str, operator: str, values: Sequence[str]) -> bool:
    """One requirement (In, NotIn, Exists, DoesNotExist, and node selectors' Gt, Lt) against labels."""
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels and len(values) == 1:
        have, bound = _int64(labels[key]), _int64(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector object (matchLabels AND matchExpressions); absent or {} selects all."""
    if not selector:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(requirement_matches(labels, str(e.get("key", "")), str(e.get("operator", "")),
                                   [str(v) for v in e.get("values") or []])
               for e in selector.get("matchExpressions") or [])


def labels_match(reqs: Sequence[Requirement], labels: Mapping[str, str]) -> bool:
    return all(requirement_matches(labels, r.key, r.operator, r.values) for r in reqs)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str


def parse_field_selector(text: str, allowed: Sequence[str]) -> tuple[FieldRequirement, ...]:
    """`metadata.name=x,spec.nodeName!=` -> requirements; fields outside `allowed` are refused."""
    reqs: list[FieldRequirement] = []
    for part in (p for p in (text or "").split(",") if p.strip()):
        if "!=" in part:
            key, value = part.split("!=", 1)
            equal = False
        elif "==" in part:
            key, value = part.split("==", 1)
            equal = True
        elif "=" in part:
            key, value = part.split("=", 1)
            equal = True
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        key = key.strip()
        if key not in allowed:
            if all(a.startswith("metadata.") for a in allowed):
                # kinds without field label conversions of their own answer with the generic list
                only = ", ".join(f'"{a}"' for a in allowed)
                raise SelectorError(f'"{key}" is not a known field selector: only {only}')
            raise SelectorError(f'field label not supported: {key}')
        reqs.append(FieldRequirement(key, equal, value.strip()))
    return tuple(reqs)


# What Kubernetes' field-label functions report for absent fields that are not strings.
_ABSENT = {"spec.unschedulable": "false", "status.successful": "0"}


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value of a dotted field; absent fields read as "" (so `spec.nodeName=` finds unbound
    pods), or as their Go zero value for booleans and counts (`spec.unschedulable=false`)."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return _ABSENT.get(path, "")
        cur = cur.get(part)
    if cur is None:
        return _ABSENT.get(path, "")
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, Mapping):
        # `source` on core Events is an object; Kubernetes matches its component.
        return str(cur.get("component", ""))
    return str(cur)


def fields_match(reqs: Sequence[FieldRequirement], obj: Mapping[str, Any]) -> bool:
    return all((field_value(obj, r.field) == r.value) == r.equal for r in reqs)
