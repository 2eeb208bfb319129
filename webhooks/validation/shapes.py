"""Typed reads of a plain-dict object that report a wrong type instead of raising.

Validators take raw dicts (so they can report every error, even on objects no model would
parse); these readers return the value when it has the expected shape, or None after
appending a FieldError. Absent (None) values are not errors here: callers decide what is required.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhooks.validation.errors import FieldError, FieldPath, invalid, wrong_type


def mapping(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
            errs: list[FieldError]) -> Mapping[str, Any] | None:
    """`parent[key]` when it is an object; None when absent or (reported) of another type."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        errs.append(wrong_type(path, value, "an object"))
        return None
    return value


def sequence(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
             errs: list[FieldError]) -> list[Any] | None:
    """`parent[key]` when it is a list; None when absent or (reported) of another type."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        errs.append(wrong_type(path, value, "a list"))
        return None
    return value


def string(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
           errs: list[FieldError]) -> str | None:
    """`parent[key]` when it is a string; None when absent or (reported) of another type."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        errs.append(wrong_type(path, value, "a string"))
        return None
    return value


def integer(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
            errs: list[FieldError]) -> int | None:
    """`parent[key]` when it is an integer (booleans are not); None when absent or wrong."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errs.append(wrong_type(path, value, "an integer"))
        return None
    return value


def string_map(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
               errs: list[FieldError]) -> dict[str, str]:
    """A `map[string]string` (labels, annotations, nodeLabels); entries of other types reported."""
    raw = mapping(parent, key, path, errs)
    out: dict[str, str] = {}
    for k, v in (raw or {}).items():
        if not isinstance(v, str):
            errs.append(wrong_type(path.key(str(k)), v, "a string"))
            continue
        out[str(k)] = v
    return out


def objects(items: list[Any] | None, path: FieldPath,
            errs: list[FieldError]) -> list[tuple[FieldPath, Mapping[str, Any]]]:
    """The object items of a list with their paths; non-object items reported and skipped."""
    out = []
    for i, item in enumerate(items or []):
        if not isinstance(item, Mapping):
            errs.append(wrong_type(path.index(i), item, "an object"))
            continue
        out.append((path.index(i), item))
    return out


def lookup(obj: Any, *keys: str) -> Any:
    """`obj[k1][k2]...` for update comparisons, None when any step is absent or not an object."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def unchanged(old: Any, new: Any, path: FieldPath, keys: tuple[str, ...], detail: str = "field is immutable",
              default: Any = None) -> list[FieldError]:
    """An update check: no error when the field at `keys` is equal in both objects (absent or empty
    reads as `default`), else one naming the new value."""
    before, after = (default if v is None or v == "" else v for v in (lookup(old, *keys), lookup(new, *keys)))
    return [] if before == after else [invalid(path, after, detail)]
