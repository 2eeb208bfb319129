"""The base of every manifest builder in tests: a plain dict under construction.

Named steps live in the kind's builder (`tests/builders/kueue.py`, `cluster.py`); for odd shapes no
well-formed step produces (validator tests), `.set("spec.podSets.0.count", -1)` and `.drop(...)`
edit any field by dotted path. `obj()` (alias `build()`) returns an independent copy.
"""

from __future__ import annotations

import copy
from typing import Any, Self


def _walk(obj: Any, parts: list[str]) -> Any:
    for part in parts:
        obj = obj[int(part)] if isinstance(obj, list) else obj.setdefault(part, {})
    return obj


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    """A node taint as the API writes it (an empty value is left out)."""
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


class Manifest:
    """A manifest under construction (see the module docstring)."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    def set(self, dotted: str, value: Any) -> Self:
        """Set a field by dotted path (list items by index), creating objects on the way."""
        *parents, last = dotted.split(".")
        holder = _walk(self._obj, parents)
        if isinstance(holder, list):
            holder[int(last)] = value
        else:
            holder[last] = value
        return self

    def drop(self, dotted: str) -> Self:
        """Remove a field (or list item) by dotted path; absent fields are fine."""
        *parents, last = dotted.split(".")
        holder = _walk(self._obj, parents)
        if isinstance(holder, list):
            del holder[int(last)]
        else:
            holder.pop(last, None)
        return self

    def label(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotate(self, key: str, value: str) -> Self:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def created(self, timestamp: str) -> Self:
        self._obj["metadata"]["creationTimestamp"] = timestamp
        return self

    def uid(self, uid: str) -> Self:
        """Another object under the same name (one deleted and recreated gets a new uid)."""
        self._obj["metadata"]["uid"] = uid
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def build(self) -> dict[str, Any]:
        return self.obj()
