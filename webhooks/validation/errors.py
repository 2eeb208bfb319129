"""Field errors: what every validator returns, one value per problem, never an exception.

`FieldError` renders as Kubernetes does (`spec.podSets[0].count: Invalid value: -1: must be
greater than or equal to 0`); the constructors below name the error types of apimachinery's
field package so messages read the same as the API server's. Used by every validator module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class FieldPath:
    """A Kubernetes field path (`spec.podSets[0].template`, `metadata.labels[a/b]`), immutable."""

    text: str

    def child(self, name: str) -> FieldPath:
        """The path of field `name` below this one (the same object for the same path, from a
        bounded table: the validators name the same fields on every object they read)."""
        found = _CHILDREN.get((self.text, name))
        if found is None:
            found = FieldPath(f"{self.text}.{name}" if self.text else name)
            if len(_CHILDREN) < _CHILDREN_MAX:
                _CHILDREN[(self.text, name)] = found
        return found

    def index(self, i: int) -> FieldPath:
        return FieldPath(f"{self.text}[{i}]")

    def key(self, k: str) -> FieldPath:
        return FieldPath(f"{self.text}[{k}]")

    def __str__(self) -> str:
        return self.text


_CHILDREN: dict[tuple[str, str], FieldPath] = {}
_CHILDREN_MAX: Final = 4096
"""Paths kept by (parent, field); beyond this many, new ones are built each time (names can come
from the data, e.g. a walk of an object's keys, so the table must not grow with it)."""

ROOT = FieldPath("")
SPEC = ROOT.child("spec")


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field path; `str()` is the line the API server would print."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


RENDER_MAX: Final = 256
"""Characters of a value repeated in a message; a megabyte string is cut, not echoed whole."""


def render(value: Any) -> str:
    """A value as apimachinery quotes it in messages: strings quoted, numbers and booleans bare;
    at most RENDER_MAX characters, so no input makes a message (or a denial) huge."""
    if isinstance(value, str) and len(value) > RENDER_MAX:
        return f"{json.dumps(value[:RENDER_MAX], ensure_ascii=False)}... ({len(value)} characters)"
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # mixed key types, NaN-free encoders, deep nesting
        text = _bounded_repr(value)
    return text if len(text) <= RENDER_MAX else f"{text[:RENDER_MAX]}... ({len(text)} characters)"


def _bounded_repr(value: Any) -> str:
    try:
        return repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deep to show>"
    except ValueError:  # an integer past Python's str-conversion digit limit
        return f"<{type(value).__name__} too long to show>"


def quoted_list(values: Iterable[str]) -> str:
    return ", ".join(render(v) for v in values)


def required(path: FieldPath, detail: str = "") -> FieldError:
    return FieldError(str(path), "Required value" + (f": {detail}" if detail else ""))


def invalid(path: FieldPath, value: Any, detail: str) -> FieldError:
    return FieldError(str(path), f"Invalid value: {render(value)}: {detail}")


def invalid_omitted(path: FieldPath, detail: str) -> FieldError:
    """An invalid value too large to repeat (a whole list or map): only the reason is shown."""
    return FieldError(str(path), f"Invalid value: {detail}")


def unsupported(path: FieldPath, value: Any, supported: Iterable[str]) -> FieldError:
    return FieldError(str(path), f"Unsupported value: {render(value)}: supported values: "
                                 f"{quoted_list(supported)}")


def duplicate(path: FieldPath, value: Any) -> FieldError:
    return FieldError(str(path), f"Duplicate value: {render(value)}")


def duplicate_detail(path: FieldPath, value: Any, detail: str) -> FieldError:
    """A duplicate with the rule that makes it one (`taints must be unique by key and effect`)."""
    return FieldError(str(path), f"Duplicate value: {render(value)}: {detail}")


def not_found(path: FieldPath, value: Any) -> FieldError:
    return FieldError(str(path), f"Not found: {render(value)}")


def too_many(path: FieldPath, actual: int, limit: int) -> FieldError:
    return FieldError(str(path), f"Too many: {actual}: must have at most {limit} items")


def forbidden(path: FieldPath, detail: str) -> FieldError:
    return FieldError(str(path), f"Forbidden: {detail}")


def wrong_type(path: FieldPath, value: Any, want: str) -> FieldError:
    return FieldError(str(path), f"Invalid value: {render(value)}: must be {want}")
