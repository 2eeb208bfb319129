"""Typed reads of a plain-dict object that report a wrong type instead of raising.

Validators take raw dicts (so they can report every error, even on objects no model would
parse); these readers return the value when it has the expected shape, or None after
appending a FieldError. Absent (None) values are not errors here: callers decide what is required.
The validators test for objects with `isinstance(v, (dict, Mapping))`: a decoded JSON object is a
dict, matched before the Mapping ABC's slower check (the webhooks run them on every review).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from controller.api.meta import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from webhooks.validation.errors import FieldError, FieldPath, invalid, render, unsupported, wrong_type

# RFC 3339 as metav1.Time parses it: date, `T`, time, optional fraction, `Z` or an offset.
_RFC3339: Final = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def mapping(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
            errs: list[FieldError]) -> Mapping[str, Any] | None:
    """`parent[key]` when it is an object; None when absent or (reported) of another type."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if not isinstance(value, (dict, Mapping)):
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
            errs: list[FieldError], *, bits: int = 64) -> int | None:
    """`parent[key]` when it is an integer (booleans are not) that fits Go's int32 or int64
    (`bits`); None when absent or (reported) wrong."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        errs.append(wrong_type(path, value, "an integer"))
        return None
    low, high = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
    if not low <= value <= high:
        errs.append(invalid(path, value, f"must fit a {bits}-bit integer ({low} to {high})"))
        return None
    return value


def boolean(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
            errs: list[FieldError]) -> bool | None:
    """`parent[key]` when it is true or false; None when absent or (reported) of another type."""
    value = None if parent is None else parent.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        errs.append(wrong_type(path, value, "a boolean"))
        return None
    return value


def enum(parent: Mapping[str, Any] | None, key: str, path: FieldPath, allowed: Sequence[str],
         errs: list[FieldError]) -> str | None:
    """`parent[key]` when it is one of `allowed`; None when absent or (reported) anything else."""
    value = string(parent, key, path, errs)
    if value is not None and value not in allowed:
        errs.append(unsupported(path, value, allowed))
        return None
    return value


def timestamp(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
              errs: list[FieldError]) -> str | None:
    """`parent[key]` when it is an RFC 3339 date-time (metav1.Time); None when absent or wrong."""
    value = string(parent, key, path, errs)
    if value is None:
        return None
    valid = _RFC3339.fullmatch(value) is not None
    if valid:
        try:
            datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        except ValueError:  # 2026-02-30T...: the shape is right, the date is not
            valid = False
    if not valid:
        errs.append(invalid(path, value, "must be an RFC 3339 date-time such as \"2026-01-02T03:04:05Z\""))
        return None
    return value


def string_map(parent: Mapping[str, Any] | None, key: str, path: FieldPath,
               errs: list[FieldError]) -> dict[str, str]:
    """A `map[string]string` (labels, annotations, nodeLabels); entries of other types reported."""
    raw = mapping(parent, key, path, errs)
    out: dict[str, str] = {}
    for k, v in (raw or {}).items():
        if not isinstance(k, str):  # YAML allows `1: x` or `true: x`; JSON objects never do
            errs.append(wrong_type(path.key(render(k)), k, "a string key"))
        elif not isinstance(v, str):
            errs.append(wrong_type(path.key(k), v, "a string"))
        else:
            out[k] = v
    return out


def string_keys(raw: Mapping[Any, Any] | None, path: FieldPath, errs: list[FieldError]) -> dict[str, Any]:
    """The string-keyed entries of a map (a YAML map may mix `1:` with `cpu:`); others reported."""
    out: dict[str, Any] = {}
    for k, v in (raw or {}).items():
        if isinstance(k, str):
            out[k] = v
        else:
            errs.append(wrong_type(path.key(render(k)), k, "a string key"))
    return out


def same(a: Any, b: Any) -> bool:
    """`a == b` that reads values nested too deep to compare (RecursionError) as different."""
    try:
        return bool(a == b)
    except RecursionError:
        return False


def objects(items: list[Any] | None, path: FieldPath,
            errs: list[FieldError]) -> list[tuple[FieldPath, Mapping[str, Any]]]:
    """The object items of a list with their paths; non-object items reported and skipped."""
    out = []
    for i, item in enumerate(items or []):
        if not isinstance(item, (dict, Mapping)):
            errs.append(wrong_type(path.index(i), item, "an object"))
            continue
        out.append((path.index(i), item))
    return out


def lookup(obj: Any, *keys: str) -> Any:
    """`obj[k1][k2]...` for update comparisons, None when any step is absent or not an object."""
    for key in keys:
        if not isinstance(obj, (dict, Mapping)):
            return None
        obj = obj.get(key)
    return obj


def unchanged(old: Any, new: Any, path: FieldPath, keys: tuple[str, ...], detail: str = "field is immutable",
              default: Any = None) -> list[FieldError]:
    """An update check: no error when the field at `keys` is equal in both objects (absent or empty
    reads as `default`), else one naming the new value."""
    before, after = (default if v is None or v == "" else v for v in (lookup(old, *keys), lookup(new, *keys)))
    return [] if same(before, after) else [invalid(path, after, detail)]
