"""Answering a CRD ConversionReview (apiextensions.k8s.io/v1): tasq's objects converted between versions.

`answer_conversion(review, converter)` turns one decoded request body into (HTTP status, body): a
ConversionReview whose response carries the request's uid and either every object converted, in
order (`result.status: Success`), or `result.status: Failure` with a message naming the object (kind,
namespace/name) and the field that could not be converted. Only a body that is no ConversionReview
at all (no request uid to answer) gets a 400. The converter itself is injected (the pure
`controller.api.conversion.convert` in the operator). Called by webhooks.serving for POST /convert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

logger = logging.getLogger(__name__)

REVIEW_VERSIONS: Final = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")
SUCCESS: Final = "Success"
FAILURE: Final = "Failure"
MAX_FAILURES_SHOWN: Final = 3
"""Objects named in one Failure message; kube-apiserver shows the message to the client whole."""
IDENTITY_FIELDS: Final = ("name", "namespace", "uid")
"""What kube-apiserver refuses a converted object for changing (besides labels and annotations
it also checks, which tasq's conversions never touch)."""


class Failed(Protocol):
    """What a converter returns for an object it cannot convert (`ConversionFailure`)."""

    @property
    def message(self) -> str: ...


Converter = Callable[[Mapping[str, Any], str], "dict[str, Any] | Failed"]
"""(object, desired apiVersion) -> the converted object, or a failure naming object and field."""


def review_problems(review: Any) -> list[str]:
    """What keeps a body from being a ConversionReview request (empty: well-formed)."""
    if not isinstance(review, Mapping):
        return ["the body must be a JSON object"]
    problems = []
    if review.get("apiVersion") not in REVIEW_VERSIONS or review.get("kind") != "ConversionReview":
        problems.append(f"apiVersion/kind must be one of {', '.join(REVIEW_VERSIONS)} / ConversionReview")
    request = review.get("request")
    if not isinstance(request, Mapping):
        return [*problems, "request must be an object"]
    if not isinstance(request.get("uid"), str) or not request.get("uid"):
        problems.append("request.uid must be a non-empty string")
    desired = request.get("desiredAPIVersion")
    if not isinstance(desired, str) or "/" not in desired:
        problems.append("request.desiredAPIVersion must be a string group/version")
    if not isinstance(request.get("objects"), list):
        problems.append("request.objects must be a list")
    return problems


def describe(obj: Any) -> str:
    """`Workload ns/name` (or what of it the object has) for messages and logs."""
    if not isinstance(obj, Mapping):
        return "an object"
    metadata = _metadata(obj)
    name, namespace = metadata.get("name"), metadata.get("namespace")
    where = f"{namespace}/{name}" if namespace else str(name or "")
    return f"{obj.get('kind') or 'object'} {where}".strip()


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _convert_one(converter: Converter, index: int, obj: Any, desired: str) -> dict[str, Any] | str:
    """One object converted, or why not (a message naming it); a converter that raises is a bug,
    logged with its traceback and answered as a failure rather than a 500."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("apiVersion"), str) or not isinstance(
            obj.get("kind"), str):
        return f"request.objects[{index}]: must be an object with a string apiVersion and kind"
    try:
        converted = converter(obj, desired)
    except Exception as e:
        logger.exception("Conversion of %s to %s failed unexpectedly", describe(obj), desired)
        return f"{describe(obj)}: cannot be converted to {desired}: internal error ({type(e).__name__})"
    if not isinstance(converted, dict):
        return converted.message
    if converted.get("apiVersion") != desired:
        return f"{describe(obj)}: converted to apiVersion {converted.get('apiVersion')!r}, not {desired}"
    before, after = _metadata(obj), _metadata(converted)
    changed = [f"metadata.{k}" for k in IDENTITY_FIELDS if before.get(k) != after.get(k)]
    if changed:
        return f"{describe(obj)}: conversion to {desired} changed {', '.join(changed)}"
    return converted


def convert_all(converter: Converter, objects: Sequence[Any], desired: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every object converted (in order) and the messages of those that could not be."""
    converted: list[dict[str, Any]] = []
    failures: list[str] = []
    for index, obj in enumerate(objects):
        result = _convert_one(converter, index, obj, desired)
        if isinstance(result, str):
            failures.append(result)
        else:
            converted.append(result)
    return converted, failures


def failure_message(failures: Sequence[str], total: int) -> str:
    """One message for a failed review: the failures themselves when few, else the first ones and a count."""
    shown = "; ".join(failures[:MAX_FAILURES_SHOWN])
    if len(failures) == 1:
        return shown
    more = f"; and {len(failures) - MAX_FAILURES_SHOWN} more" if len(failures) > MAX_FAILURES_SHOWN else ""
    return f"{len(failures)} of {total} objects cannot be converted: {shown}{more}"


def response(review: Mapping[str, Any], converted: list[dict[str, Any]], failures: Sequence[str]) -> dict[str, Any]:
    """The ConversionReview answering `review` (same apiVersion), Success only when nothing failed."""
    request = review["request"]
    body: dict[str, Any] = {"uid": request["uid"]}
    if failures:
        body["result"] = {"status": FAILURE, "message": failure_message(failures, len(request["objects"]))}
        body["convertedObjects"] = []
    else:
        body["result"] = {"status": SUCCESS}
        body["convertedObjects"] = converted
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview", "response": body}


def answer_conversion(review: Any, converter: Converter | None) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for one decoded request body (see module)."""
    problems = review_problems(review)
    request = review.get("request") if isinstance(review, Mapping) else None
    uid = request.get("uid") if isinstance(request, Mapping) else None
    if problems and not (isinstance(request, Mapping) and isinstance(uid, str) and uid
                         and review.get("kind") == "ConversionReview" and review.get("apiVersion") in REVIEW_VERSIONS):
        return 400, {"message": "; ".join(problems)}
    if problems and isinstance(request, Mapping):
        return 200, response({**review, "request": {**request, "objects": []}}, [],
                             ["malformed ConversionReview: " + "; ".join(problems)])
    if converter is None:
        return 200, response(review, [], ["this server converts no objects (no converter configured)"])
    converted, failures = convert_all(converter, review["request"]["objects"], review["request"]["desiredAPIVersion"])
    return 200, response(review, converted, failures)
