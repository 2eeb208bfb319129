"""Answering AdmissionReviews with tasq's handler table (`webhooks.handlers.handler_table`).

`Reviewer(group_members)` indexes the table once by (path, resource) and answers each decoded review
as kopf's admission engine answered it when tasq's handlers ran behind it (the same handlers chosen:
those of the path for the review's resource and subresource, mutating ones never on a DELETE; the
same verdict, denial message and code, and patch), without kopf: the handlers' own JSON patch is
sent as they built it, and nothing is copied or diffed. Called by `webhooks.serving.answer` (the
webhook process and tests); a review of a resource no handler serves raises `UnroutableReview`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from webhooks.handlers import AdmissionRequest, Denial, GroupMembers, Handler, handler_table

logger = logging.getLogger(__name__)

ResourceKey = tuple[str, str, str]
"""(group, version, plural) of a review's `request.resource`."""

_encode = json.JSONEncoder(separators=(",", ":")).encode


class UnroutableReview(Exception):
    """A well-formed review no handler can answer (a resource without handlers): a 400."""


class Reviewer:
    """tasq's admission handlers answering reviews directly (see module). `group_members`: where the
    queued-pod validator finds a new pod's group (None: not checked); `handlers`: another table
    (tests), instead of `handler_table(group_members)`."""

    def __init__(self, group_members: GroupMembers | None = None, handlers: Sequence[Handler] | None = None) -> None:
        table: dict[tuple[str, ResourceKey], list[Handler]] = {}
        by_resource: dict[ResourceKey, list[Handler]] = {}
        for handler in handler_table(group_members) if handlers is None else handlers:
            table.setdefault((handler.path, handler.resource), []).append(handler)
            by_resource.setdefault(handler.resource, []).append(handler)
        self.table = {key: tuple(found) for key, found in table.items()}
        self.by_resource = {key: tuple(found) for key, found in by_resource.items()}

    def handlers(self, webhook: str | None, resource: ResourceKey, operation: Any,
                 subresource: Any) -> list[Handler]:
        """The handlers that answer: those of the path (all paths' without one) for the resource and
        subresource; mutating ones never on DELETE."""
        found = self.by_resource.get(resource, ()) if webhook is None else self.table.get((webhook, resource), ())
        return [h for h in found if (h.subresource == "*" or h.subresource == subresource)
                and (not h.mutating or operation != "DELETE")]

    async def __call__(self, review: Mapping[str, Any], *, webhook: str | None = None, **_: Any) -> dict[str, Any]:
        """The AdmissionReview answering `review` (well-formed: `webhooks.serving.review_problems`);
        UnroutableReview for a resource no handler serves."""
        request = review["request"]
        found = request["resource"]
        resource = (found["group"], found["version"], found["resource"])
        if resource not in self.by_resource:
            raise UnroutableReview(f"The specified resource has no handlers: {found}")
        operation = request.get("operation")
        new, old = request.get("object"), request.get("oldObject")
        asked = AdmissionRequest(operation, new if new is not None else old, old)
        ops: list[Any] = []
        denials: list[Denial] = []
        crashes: list[Exception] = []
        for handler in self.handlers(webhook, resource, operation, request.get("subResource")):
            try:
                verdict = handler.fn(asked)
            except Exception as e:
                logger.exception("Admission handler %s failed on %s %s", handler.path, operation, found)
                crashes.append(e)
                continue
            if isinstance(verdict, Denial):
                denials.append(verdict)
            else:
                ops += verdict
        return _response(review, denials, crashes, ops)


def _response(review: Mapping[str, Any], denials: list[Denial], crashes: list[Exception],
              ops: list[Any]) -> dict[str, Any]:
    """The AdmissionReview kube-apiserver reads: allowed unless a handler denied or failed, the JSON
    patch (base64) when there is one, and the first denial (else the first failure, a 500) as the status."""
    answer: dict[str, Any] = {"uid": review["request"].get("uid", ""), "allowed": not denials and not crashes}
    if ops:
        answer["patch"] = base64.b64encode(_encode(ops).encode("utf-8")).decode("ascii")
        answer["patchType"] = "JSONPatch"
    if denials:
        answer["status"] = {"message": denials[0].message, "code": denials[0].code or 500}
    elif crashes:
        answer["status"] = {"message": str(crashes[0]) or repr(crashes[0]), "code": 500}
    return {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": review.get("kind", "AdmissionReview"),
            "response": answer}
