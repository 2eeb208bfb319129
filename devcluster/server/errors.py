"""API errors as Kubernetes `Status` objects: the HTTP code, the reason and the field causes.

Raised by the request pipeline (`devcluster.server.apiserver`) and turned into a `Status` body by the
HTTP layer; in-process callers catch `ApiError` the way client code catches `ApiException`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# metav1.StatusReason values (k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
NOT_FOUND = "NotFound"
ALREADY_EXISTS = "AlreadyExists"
CONFLICT = "Conflict"
INVALID = "Invalid"
BAD_REQUEST = "BadRequest"
GONE = "Gone"
EXPIRED = "Expired"
METHOD_NOT_ALLOWED = "MethodNotAllowed"
UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
FORBIDDEN = "Forbidden"
INTERNAL_ERROR = "InternalError"
SERVICE_UNAVAILABLE = "ServiceUnavailable"
TIMEOUT = "Timeout"

# metav1.CauseType values used in details.causes[].reason.
CAUSE_REQUIRED = "FieldValueRequired"
CAUSE_INVALID = "FieldValueInvalid"
CAUSE_NOT_SUPPORTED = "FieldValueNotSupported"
CAUSE_FORBIDDEN = "FieldValueForbidden"
CAUSE_TYPE_INVALID = "FieldValueTypeInvalid"
CAUSE_DUPLICATE = "FieldValueDuplicate"
CAUSE_TOO_LONG = "FieldValueTooLong"
CAUSE_RESOURCE_VERSION_TOO_LARGE = "ResourceVersionTooLarge"
CAUSE_TOO_MANY = "FieldValueTooMany"

# The human word Kubernetes prints before each cause (field.ErrorType.String()).
CAUSE_WORDS = {
    CAUSE_REQUIRED: "Required value",
    CAUSE_INVALID: "Invalid value",
    CAUSE_NOT_SUPPORTED: "Unsupported value",
    CAUSE_FORBIDDEN: "Forbidden",
    CAUSE_TYPE_INVALID: "Invalid value",
    CAUSE_DUPLICATE: "Duplicate value",
    CAUSE_TOO_LONG: "Too long",
    CAUSE_TOO_MANY: "Too many",
}


@dataclass(frozen=True, slots=True)
class Cause:
    """One field error: `field` is the path (`spec.podSets[0].count`), `message` the full text."""

    field: str
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def field_error(path: str, reason: str, detail: str = "", value: Any = None, show_value: bool = False) -> Cause:
    """A cause worded as Kubernetes' field.Error: `Invalid value: 0: must be greater than 0`."""
    word = CAUSE_WORDS.get(reason, "Invalid value")
    parts = [word]
    if show_value:
        parts.append(_render_value(value))
    if detail:
        parts.append(detail)
    return Cause(path, reason, ": ".join(parts))


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "{...}" if isinstance(value, dict) else "[...]"
    return str(value)


@dataclass
class ApiError(Exception):
    """A request the API server refuses; carries everything needed for the `Status` body."""

    code: int
    reason: str
    message: str
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after: int | None = None

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        body: dict[str, Any] = {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        }
        if not self.reason:  # an error passed through from etcd carries none
            del body["reason"]
        if details:
            body["details"] = details
        return body


def qualified(plural: str, group: str) -> str:
    """`pods` for the core group, `workloads.kueue.x-k8s.io` otherwise (k8s GroupResource.String(); kinds
    are qualified the same way in Invalid messages)."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, NOT_FOUND, f'{qualified(plural, group)} "{name}" not found',
                    kind=plural, name=name, group=group)


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, ALREADY_EXISTS, f'{qualified(plural, group)} "{name}" already exists',
                    kind=plural, name=name, group=group)


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(409, CONFLICT,
                    f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has '
                    "been modified; please apply your changes to the latest version and try again",
                    kind=plural, name=name, group=group)


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """422 with every cause, worded as kube-apiserver: `Kind.group "name" is invalid: [a, b]`."""
    joined = str(causes[0]) if len(causes) == 1 else "[" + ", ".join(str(c) for c in causes) + "]"
    return ApiError(422, INVALID, f'{qualified(kind, group)} "{name}" is invalid: {joined}',
                    kind=kind, name=name, group=group, causes=list(causes))


MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
"""kube-apiserver's limit on a request body (genericapiserver's MaxRequestBodyBytes default)."""
REQUEST_ENTITY_TOO_LARGE = "RequestEntityTooLarge"
ETCD_MAX_REQUEST_BYTES = 1536 * 1024
"""etcd's default --max-request-bytes: a larger write is refused by etcd itself."""
ETCD_MAX_SEND_BYTES = 2 * 1024 * 1024
"""kube-apiserver's etcd client refuses to send a gRPC message larger than this."""


def request_entity_too_large() -> ApiError:
    """413 for a request body over MAX_REQUEST_BODY_BYTES, before it is decoded."""
    return ApiError(413, REQUEST_ENTITY_TOO_LARGE, f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}")


def etcd_request_too_large(request_bytes: int) -> ApiError:
    """The 500 kube-apiserver passes on when a write is too large for etcd: over 2 MiB its gRPC client
    refuses to send it, over 1.5 MiB etcd refuses it; neither answer carries a reason."""
    if request_bytes > ETCD_MAX_SEND_BYTES:
        return ApiError(500, "", "rpc error: code = ResourceExhausted desc = trying to send message larger than "
                                 f"max ({request_bytes} vs. {ETCD_MAX_SEND_BYTES})")
    return ApiError(500, "", "etcdserver: request is too large")


def bad_request(message: str) -> ApiError:
    return ApiError(400, BAD_REQUEST, message)


def too_large_resource_version(wanted: int, current: int) -> ApiError:
    """504 for a read from a resourceVersion the server has not reached (storage's TooLargeResourceVersion)."""
    return ApiError(504, TIMEOUT, f"Timeout: Too large resource version: {wanted}, current: {current}",
                    causes=[Cause("", CAUSE_RESOURCE_VERSION_TOO_LARGE, "Too large resource version")],
                    retry_after=1)


def gone(message: str) -> ApiError:
    return ApiError(410, EXPIRED, message)
