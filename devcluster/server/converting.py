"""Conversion between served versions that share one storage: Events, and custom resources' versions.

Kubernetes stores Events once and serves them through both APIs; so does the devcluster: objects are
stored in the core/v1 form and converted on the way in (`to_storage`) and out (`from_storage`) by the
request pipeline, field selectors included. Field correspondence follows the events.k8s.io/v1 API
reference (regarding = involvedObject, note = message, deprecated* = the old core fields). Custom
resources: see the second half (the CRD's conversion strategy and the errors of a failed conversion);
used by the request pipeline (`devcluster.server.apiserver`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from devcluster.server.errors import INTERNAL_ERROR, ApiError, Cause

STORAGE_READ_ERROR = "StorageReadError"

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


# ---------------------------------------------------------------- custom resources
#
# A custom object is stored in the CRD's storage version of the time it was written and served in any
# version: an object already in the requested version is served as stored; otherwise the CRD's
# `spec.conversion` decides: strategy None rewrites apiVersion only, Webhook sends a ConversionReview
# (the caller, `CrdConverter`, is installed by devcluster.webhooking.conversion). A failed conversion
# reaches the client as kube-apiserver reports it: a 500 whose text depends on where it failed
# (decoding a stored object for a get, a list or an update; encoding a written one for storage).

STRATEGY_NONE = "None"
STRATEGY_WEBHOOK = "Webhook"

CrdConverter = Callable[[Mapping[str, Any], list[dict[str, Any]], str], Awaitable[list[dict[str, Any]]]]
"""(the CRD, objects all in one version, desired apiVersion) -> the converted objects, in order;
raises ConversionFailed."""


class ConversionFailed(Exception):
    """A conversion that did not happen; `detail` is kube-apiserver's text for it
    (`conversion webhook for <group/version>, Kind=<Kind> failed: <why>`)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def webhook_failed(api_version: str, kind: str, why: str) -> ConversionFailed:
    return ConversionFailed(f"conversion webhook for {api_version}, Kind={kind} failed: {why}")


def crd_conversion(crd: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The CRD's spec.conversion, `{strategy: None}` when it has none."""
    conversion = ((crd or {}).get("spec") or {}).get("conversion")
    return conversion if isinstance(conversion, Mapping) and conversion.get("strategy") else {"strategy": STRATEGY_NONE}


def storage_api_version(crd: Mapping[str, Any]) -> str:
    spec = crd.get("spec") or {}
    for version in spec.get("versions") or []:
        if version.get("storage"):
            return f"{spec.get('group')}/{version.get('name')}"
    return ""


def _key(obj: Mapping[str, Any], group: str, plural: str) -> str:
    meta = obj.get("metadata") or {}
    namespace = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"/{group}/{plural}/{namespace}{meta.get('name', '')}"


def _undecodable(obj: Mapping[str, Any], failed: ConversionFailed) -> str:
    revision = (obj.get("metadata") or {}).get("resourceVersion", "0")
    return f"object not decodable revision={revision}: {failed.detail}"


def read_failure(obj: Mapping[str, Any], group: str, plural: str, failed: ConversionFailed) -> ApiError:
    """A stored object a get or a delete cannot serve in the requested version."""
    storage = (f"StorageError: corrupt object, Code: 7, Key: {_key(obj, group, plural)}, ResourceVersion: 0, "
               f"AdditionalErrorMsg: {_undecodable(obj, failed)}")
    return ApiError(500, INTERNAL_ERROR, f"Internal error occurred: {storage}", causes=[Cause("", "", storage)])


def list_failure(obj: Mapping[str, Any], group: str, plural: str, failed: ConversionFailed) -> ApiError:
    """A list that holds an object it cannot serve in the requested version."""
    storage = (f"StorageError: corrupt object, Code: 7, Key: /registry{_key(obj, group, plural)}, "
               f"ResourceVersion: 0, AdditionalErrorMsg: {_undecodable(obj, failed)}")
    return ApiError(500, STORAGE_READ_ERROR, f"failed to read one or more {plural}.{group} from the storage: {storage}",
                    kind=plural, group=group, name="list", causes=[Cause("", "UnexpectedServerResponse", storage)])


def update_failure(obj: Mapping[str, Any], failed: ConversionFailed) -> ApiError:
    """An update or patch whose stored object cannot be read in the request's version."""
    return ApiError(500, "", _undecodable(obj, failed))


def write_failure(failed: ConversionFailed) -> ApiError:
    """A written object that cannot be converted to the storage version."""
    return ApiError(500, "", failed.detail)
