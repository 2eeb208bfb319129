"""Whether a JSON merge patch (RFC 7386) would change an object: the status writers' no-op check.

`changes(obj, patch)` walks the patch only (never the whole object), so a write whose every value is
already there is skipped before it becomes an API request. `metadata.resourceVersion` in a patch is
a precondition, not a change. Called by controller.kube.statuses before a status write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def changes(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> bool:
    """True when applying `patch` to `obj` gives another object."""
    for key, value in patch.items():
        if key == "metadata" and isinstance(value, Mapping) and "resourceVersion" in value:
            value = {k: v for k, v in value.items() if k != "resourceVersion"}
        if _changes_member(obj, key, value):
            return True
    return False


def _changes_member(obj: Mapping[str, Any], key: str, value: Any) -> bool:
    """One member of a patch: null removes the key, an object merges into an object (or replaces
    anything else), every other value replaces."""
    if value is None:
        return key in obj
    if key not in obj:
        return True  # even an object of nulls adds an empty object there
    current = obj[key]
    if isinstance(value, Mapping):
        if not isinstance(current, Mapping):
            return True
        return any(_changes_member(current, k, v) for k, v in value.items())
    return bool(current != value)

