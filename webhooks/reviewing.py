"""Answering AdmissionReviews by calling tasq's handlers directly, without kopf's admission engine.

`Reviewer(group_members)` reads once the handler table `webhooks.handlers.register_handlers` puts into
a kopf registry (each handler's path, mutating or validating, resource and subresource) and then
answers each decoded review as kopf's engine would (same handlers chosen, same verdict, denial
message and code, same patched object), minus its per-review cost: no deep copy and diff of the
object (a handler's JSON patch is sent as it built it), no cause, memo or per-handler progress
bookkeeping. Called as kopf calls its `WebhookFn`; `webhooks.serving.AdmissionServer` serves it.
"""

from __future__ import annotations

import base64
import copy
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonpatch
import kopf

# kopf's engine raises these for a review it cannot route; the server answers them with a 400.
from kopf._core.engines.admission import UnknownResourceError

from webhooks.handlers import GroupMembers, JsonPatchFn, register_handlers

logger = logging.getLogger(__name__)

MUTATING: Final = "mutating"
VALIDATING: Final = "validating"
UNSUPPORTED_FILTERS: Final = ("labels", "annotations", "when", "field", "value")
"""kopf's per-handler filters; tasq's handlers use none of them, so the table does not evaluate them."""

ResourceKey = tuple[str, str, str]
"""(group, version, plural) of a review's `request.resource`."""


@dataclass(frozen=True, slots=True)
class Handler:
    """One registered admission handler: what kopf's engine would match it by, and the function."""

    handler_id: str
    kind: str  # MUTATING or VALIDATING
    subresource: str | None  # "*": any; None: the main resource only
    fn: Callable[..., Any]


def handler_table(registry: kopf.OperatorRegistry) -> dict[tuple[str, ResourceKey], tuple[Handler, ...]]:
    """The admission handlers of `registry` by (path, resource), in registration order. A handler
    with a filter kopf would evaluate per review (labels, annotations, when, field) is refused: the
    dispatch here would ignore it."""
    table: dict[tuple[str, ResourceKey], list[Handler]] = {}
    for registered in registry._webhooks.get_all_handlers():  # kopf keeps its handler list private
        if any(getattr(registered, name) is not None for name in UNSUPPORTED_FILTERS):
            raise ValueError(f"admission handler {registered.id}: per-review filters are not dispatched here")
        selector = registered.selector
        plural = (selector.plural or selector.any_name) if selector is not None else None  # kopf.on.validate(g, v, plural)
        if selector is None or selector.group is None or selector.version is None or not isinstance(plural, str):
            raise ValueError(f"admission handler {registered.id}: needs an explicit group, version and plural")
        kind = MUTATING if str(registered.reason.value) == MUTATING else VALIDATING
        key = (str(registered.id), (selector.group, selector.version, plural))
        table.setdefault(key, []).append(Handler(str(registered.id), kind, registered.subresource, registered.fn))
    return {key: tuple(handlers) for key, handlers in table.items()}


def _patch_ops(patch: kopf.Patch, body: Mapping[str, Any]) -> list[Any]:
    """The JSON patch the handlers asked for: their own operations when every transform carries
    them (tasq's), else kopf's way (apply to a copy and diff), for a handler written otherwise."""
    if not patch:
        return []
    if not dict(patch) and all(isinstance(fn, JsonPatchFn) for fn in patch.fns):
        return [op for fn in patch.fns if isinstance(fn, JsonPatchFn) for op in fn.ops]
    changed: Any = copy.deepcopy(dict(body))
    patch._apply_patch(changed, (), dict(patch))  # kopf's merge-patch step, then the transforms
    for fn in patch.fns:
        fn(changed)
    return list(jsonpatch.JsonPatch.from_diff(dict(body), changed).patch)


def _rank(error: Exception) -> int:
    """Which error a denial reports when several handlers fail (kopf's order)."""
    if isinstance(error, kopf.AdmissionError):
        return 0
    if isinstance(error, kopf.PermanentError):
        return 1
    if isinstance(error, kopf.TemporaryError):
        return 2
    return 9


class Reviewer:
    """tasq's admission handlers answering reviews directly (see module). `group_members`: where the
    queued-pod validator finds a new pod's group (None: not checked), as `register_handlers` takes it."""

    def __init__(self, group_members: GroupMembers | None = None,
                 register: Callable[[kopf.OperatorRegistry, GroupMembers | None], None] = register_handlers) -> None:
        registry = kopf.OperatorRegistry()
        register(registry, group_members)
        self.table = handler_table(registry)
        self.resources = frozenset(resource for _, resource in self.table)

    def handlers(self, webhook: str | None, resource: ResourceKey, operation: Any,
                 subresource: Any) -> list[Handler]:
        """The handlers kopf's engine would run: those of the path (all paths' without one) for the
        resource, of the subresource; mutating ones never on DELETE."""
        if webhook is None:
            found = [h for (_, r), hs in self.table.items() if r == resource for h in hs]
        else:
            found = list(self.table.get((webhook, resource), ()))
        return [h for h in found if (h.subresource == "*" or h.subresource == subresource)
                and (h.kind == VALIDATING or operation != "DELETE")]

    async def __call__(self, review: Mapping[str, Any], *, webhook: str | None = None,
                       headers: Mapping[str, str] | None = None, sslpeer: Mapping[str, Any] | None = None,
                       **_: Any) -> dict[str, Any]:
        """The AdmissionReview answering `review` (well-formed: `webhooks.serving.review_problems`);
        UnknownResourceError for a resource no handler serves."""
        request = review["request"]
        found = request["resource"]
        resource = (found["group"], found["version"], found["resource"])
        if resource not in self.resources:
            raise UnknownResourceError(f"The specified resource has no handlers: {found}")
        operation, subresource = request.get("operation"), request.get("subResource")
        new, old = request.get("object"), request.get("oldObject")
        body = new if new is not None else old
        patch = kopf.Patch()
        warnings: list[str] = []
        errors: list[Exception] = []
        for handler in self.handlers(webhook, resource, operation, subresource):
            try:
                result = handler.fn(body=body, patch=patch, old=old, new=new, operation=operation,
                                    subresource=subresource, dryrun=bool(request.get("dryRun")),
                                    userinfo=request.get("userInfo"), warnings=warnings, webhook=webhook,
                                    headers=headers or {}, sslpeer=sslpeer or {}, logger=logger)
                if inspect.isawaitable(result):
                    await result
            except kopf.PermanentError as e:  # AdmissionError among them: a denial, logged by the server
                errors.append(e)
            except Exception as e:
                logger.exception("Admission handler %s failed on %s %s", handler.handler_id, operation, found)
                errors.append(e)
        return _response(review, errors, warnings, _patch_ops(patch, body))


def _response(review: Mapping[str, Any], errors: list[Exception], warnings: list[str],
              ops: list[Any]) -> dict[str, Any]:
    """The AdmissionReview kube-apiserver reads: allowed unless a handler failed, the JSON patch
    (base64) when there is one, and the first error by kopf's ranking as the status."""
    answer: dict[str, Any] = {"uid": review["request"].get("uid", ""), "allowed": not errors}
    if warnings:
        answer["warnings"] = [str(w) for w in warnings]
    if ops:
        answer["patch"] = base64.b64encode(json.dumps(ops).encode("utf-8")).decode("ascii")
        answer["patchType"] = "JSONPatch"
    if errors:
        first = min(errors, key=_rank)
        code = first.code if isinstance(first, kopf.AdmissionError) else None
        answer["status"] = {"message": str(first) or repr(first), "code": code or 500}
    return {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": review.get("kind", "AdmissionReview"),
            "response": answer}
