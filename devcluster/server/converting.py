"""Conversion between served versions that share one storage: events.k8s.io/v1 Events <-> core/v1 Events.

Kubernetes stores Events once and serves them through both APIs; so does the devcluster: objects are
stored in the core/v1 form and converted on the way in (`to_storage`) and out (`from_storage`) by the
request pipeline, field selectors included. Field correspondence follows the events.k8s.io/v1 API
reference (regarding = involvedObject, note = message, deprecated* = the old core fields).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EVENTS_GROUP = "events.k8s.io"

# events.k8s.io/v1 field -> core/v1 field; the other fields have the same name in both.
_EVENTS_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_EVENTS = {core: events for events, core in _EVENTS_TO_CORE.items()}


def _rename(obj: Mapping[str, Any], names: Mapping[str, str], api_version: str) -> dict[str, Any]:
    out = {names.get(k, k): v for k, v in obj.items()}
    out["apiVersion"] = api_version
    out["kind"] = "Event"
    return out


def to_storage(group: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The stored form of a request body served under `group`."""
    if group != EVENTS_GROUP:
        return obj
    return _rename(obj, _EVENTS_TO_CORE, "v1")


def from_storage(group: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The stored object as served under `group`."""
    if group != EVENTS_GROUP:
        return obj
    return _rename(obj, _CORE_TO_EVENTS, f"{EVENTS_GROUP}/v1")


def storage_field(group: str, field: str) -> str:
    """A field-selector path on the served form, as a path on the stored form (`regarding.name`)."""
    if group != EVENTS_GROUP:
        return field
    head, dot, rest = field.partition(".")
    return _EVENTS_TO_CORE.get(head, head) + dot + rest
