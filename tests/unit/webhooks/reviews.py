"""AdmissionReviews for tests, and tasq's handlers answering them as the webhook server does.

`review(obj, "CREATE")` builds the AdmissionReview v1 kube-apiserver would send for `obj`;
`Admission().admit(handler_id, review)` answers it exactly as the webhook server does
(`webhooks.reviewing.Reviewer` behind `serving.answer`), without a cluster; `Admission(kopf_engine=True)`
answers through kopf's own admission engine instead (`serve_admission_request`, the same handler
table registered with kopf's decorators by `register_with_kopf`), the oracle the reviewer is held
to. Used by the handler, reviewer, configuration and server tests.
"""

from __future__ import annotations

import base64
import copy
import functools
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch
import kopf
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import admission
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.reactor import inventory

from controller.api import constants as c
from controller.api.crds import KINDS
from webhooks import defaulting
from webhooks.handlers import AdmissionRequest, Denial, GroupMembers, Handler, HandlerFn, handler_table
from webhooks.reviewing import Reviewer
from webhooks.serving import ReviewFn, answer

_uids = itertools.count(1)

# apiVersion/kind -> (group, version, plural, namespaced), for the kinds the handlers serve.
RESOURCES: dict[tuple[str, str], tuple[str, str, str, bool]] = {
    ("batch/v1", "Job"): ("batch", "v1", "jobs", True),
    ("v1", "Pod"): ("", "v1", "pods", True),
    **{(f"{c.GROUP}/{version}", spec.kind): (c.GROUP, version, spec.plural, spec.namespaced)
       for spec in KINDS for version in spec.served_versions},
}


def review(obj: Mapping[str, Any], operation: str = "CREATE", old: Mapping[str, Any] | None = None,
           dry_run: bool = False, api_version: str = "", kind: str = "", subresource: str = "") -> dict[str, Any]:
    """The AdmissionReview for `obj` (its apiVersion/kind pick the resource unless given)."""
    api_version = api_version or str(obj.get("apiVersion"))
    kind = kind or str(obj.get("kind"))
    group, version, plural, _ = RESOURCES[(api_version, kind)]
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    request: dict[str, Any] = {
        "uid": f"uid-{next(_uids)}", "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "name": metadata.get("name", "") if isinstance(metadata, Mapping) else "",
        "namespace": metadata.get("namespace", "") if isinstance(metadata, Mapping) else "",
        "operation": operation, "userInfo": {"username": "tester", "groups": ["system:authenticated"]},
        "object": copy.deepcopy(dict(obj)), "oldObject": copy.deepcopy(dict(old)) if old is not None else None,
        "dryRun": dry_run,
    }
    if subresource:
        request["subResource"] = subresource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _kopf_handler(fn: HandlerFn) -> Any:
    """`fn` as a kopf admission handler: a denial raised as kopf's AdmissionError, a JSON patch
    applied to kopf's patched copy (kopf then sends the diff)."""
    async def handler(body: kopf.Body, patch: kopf.Patch, old: kopf.Body | None, operation: str, **_: Any) -> None:
        verdict = fn(AdmissionRequest(operation, dict(body), dict(old) if old is not None else None))
        if isinstance(verdict, Denial):
            raise kopf.AdmissionError(verdict.message, code=verdict.code)
        if verdict:
            def transform(raw: Any, ops: defaulting.JsonPatch = verdict) -> None:
                new = defaulting.applied(raw, ops)
                raw.clear()
                raw.update(new)
            patch.fns.append(transform)
    return handler


def register_with_kopf(registry: kopf.OperatorRegistry, handlers: Sequence[Handler]) -> None:
    """Each handler of tasq's table registered with kopf's decorators, as tasq registered them
    before it had a table of its own."""
    for h in handlers:
        on = kopf.on.mutate if h.mutating else kopf.on.validate
        operations: Any = list(h.operations)  # kopf types them as literals; the table as strings
        on(h.group, h.version, h.plural, id=h.path, operations=operations, subresource=h.subresource,
           registry=registry)(_kopf_handler(h.fn))


class Admission:
    """tasq's handlers as the webhook server calls them (`Reviewer`), or behind kopf's admission engine.
    `handlers`: another table than `handler_table(group_members)`."""

    fn: ReviewFn

    def __init__(self, group_members: GroupMembers | None = None, *, kopf_engine: bool = False,
                 handlers: Sequence[Handler] | None = None) -> None:
        table = handler_table(group_members) if handlers is None else handlers
        if not kopf_engine:
            self.fn = Reviewer(handlers=table)
            return
        self.registry = kopf.OperatorRegistry()
        register_with_kopf(self.registry, table)
        insights = references.Insights()
        insights.webhook_resources.update(
            references.Resource(group=g, version=v, plural=p, kind=k, namespaced=ns, verbs=frozenset({"create"}))
            for (_, k), (g, v, p, ns) in RESOURCES.items())
        self.fn = functools.partial(
            admission.serve_admission_request, settings=kopf.OperatorSettings(), registry=self.registry,
            insights=insights, memories=inventory.ResourceMemories(), memobase=ephemera.AnyMemo(kopf.Memo()),
            indices=OperatorIndexers().indices)

    async def answer(self, handler_id: str, request: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) as the server sends them (`webhooks.serving.answer`)."""
        return await answer(self.fn, request, handler_id)

    async def admit(self, handler_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """The AdmissionReview response's `response` part (the review must be well-formed)."""
        status, out = await self.answer(handler_id, request)
        assert status == 200, out
        response: dict[str, Any] = out["response"]
        return response


def patch_of(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The decoded JSON patch of an allowed response (empty when there is none)."""
    if not response.get("patch"):
        return []
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


def patched(obj: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` after the response's patch, applied by an independent RFC 6902 implementation."""
    out: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(dict(obj)), patch_of(response))
    return out
