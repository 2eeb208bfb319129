"""A JSONPath subset for CRD additionalPrinterColumns, evaluated as kubectl's printer does.

Supports `.a.b`, `['a.b']`, `[0]`, `[-1]`, `[*]`, `..`-free paths and filters
`[?(@.type=="Admitted")]` (==, !=, and bare `@.field` presence). Used by `devcluster.front.tables`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class JSONPathError(ValueError):
    """A path outside the supported subset."""


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # "field", "index", "all", "filter"
    name: str = ""
    index: int = 0
    filter_path: tuple[str, ...] = ()
    filter_op: str = ""
    filter_value: Any = None


_FILTER_RE = re.compile(r"^\?\(@((?:\.[A-Za-z0-9_\-/]+)+)\s*(?:(==|!=)\s*(.+?))?\s*\)$")


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError as e:
            raise JSONPathError(f"unsupported filter literal {text!r}") from e


def _bracket(content: str) -> Step:
    content = content.strip()
    if content == "*":
        return Step("all")
    if content[:1] in "\"'" and content[-1:] == content[:1]:
        return Step("field", name=content[1:-1])
    if m := _FILTER_RE.match(content):
        path = tuple(p for p in m.group(1).split(".") if p)
        op = m.group(2) or "exists"
        return Step("filter", filter_path=path, filter_op=op,
                    filter_value=_literal(m.group(3)) if m.group(3) else None)
    try:
        return Step("index", index=int(content))
    except ValueError as e:
        raise JSONPathError(f"unsupported JSONPath segment [{content}]") from e


def parse(path: str) -> tuple[Step, ...]:
    """Parse `.status.conditions[?(@.type=="Admitted")].status` (braces `{...}` are optional)."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[Step] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == ".":
            j = i + 1
            while j < len(text) and text[j] not in ".[":
                j += 1
            name = text[i + 1:j]
            if not name:
                raise JSONPathError(f"unsupported JSONPath {path!r} (recursive descent)")
            steps.append(Step("all") if name == "*" else Step("field", name=name))
            i = j
        elif ch == "[":
            depth, j = 0, i
            while j < len(text):
                if text[j] == "[":
                    depth += 1
                elif text[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(text):
                raise JSONPathError(f"unclosed bracket in {path!r}")
            steps.append(_bracket(text[i + 1:j]))
            i = j + 1
        else:
            raise JSONPathError(f"unexpected {ch!r} at {i} in {path!r}")
    return tuple(steps)


def _dig(value: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _apply(step: Step, values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if step.kind == "field":
            if isinstance(v, Mapping) and step.name in v:
                out.append(v[step.name])
        elif step.kind == "index":
            if isinstance(v, list) and -len(v) <= step.index < len(v):
                out.append(v[step.index])
        elif step.kind == "all":
            if isinstance(v, list):
                out.extend(v)
            elif isinstance(v, Mapping):
                out.extend(v.values())
        else:
            items = v if isinstance(v, list) else []
            for item in items:
                found, got = _dig(item, step.filter_path)
                if step.filter_op == "exists":
                    keep = found
                elif step.filter_op == "==":
                    keep = found and got == step.filter_value
                else:
                    keep = found and got != step.filter_value
                if keep:
                    out.append(item)
    return out


def evaluate(steps: tuple[Step, ...], obj: Any) -> list[Any]:
    """All values the path selects, in document order."""
    values = [obj]
    for step in steps:
        values = _apply(step, values)
    return values
