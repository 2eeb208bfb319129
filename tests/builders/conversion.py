"""Builders for CRD conversion tests: a two-version test CRD and an HTTPS conversion webhook for it.

`gadget_crd(strategy, url, ca_bundle)` is the CustomResourceDefinition of `Gadget`
(conformance.tasq.io, v1 served, v2 stored: v1's `spec.size` is v2's `spec.width`), with a Webhook or
None conversion. `ConversionServer(keys)` answers its ConversionReviews over TLS, records each, and fails
any object labelled `FAIL_LABEL` with a message naming it. `rename_cohort` is a stand-in converter for
tasq's own webhook (v1beta1 `spec.cohort` <-> v1beta2 `spec.cohortName`). Used by the conformance,
devcluster and webhook tests.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from devcluster.webhooking.certificates import KeyPair

GROUP = "conformance.tasq.io"
PLURAL = "gadgets"
SERVED, STORED = "v1", "v2"
FAIL_LABEL = "conformance.tasq.io/fail-conversion"
V1BETA1, V1BETA2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"


def _version(name: str, field: str, storage: bool) -> dict[str, Any]:
    spec = {"type": "object", "properties": {field: {"type": "string"}}}
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}},
            "additionalPrinterColumns": [{"name": field.title(), "type": "string", "jsonPath": f".spec.{field}"}]}


def gadget_crd(strategy: str = "Webhook", url: str = "", ca_bundle: str = "") -> dict[str, Any]:
    """The test CRD; `url`/`ca_bundle` are the conversion webhook's when `strategy` is Webhook."""
    conversion: dict[str, Any] = {"strategy": strategy}
    if strategy == "Webhook":
        conversion["webhook"] = {"conversionReviewVersions": ["v1"],
                                 "clientConfig": {"url": url, "caBundle": ca_bundle}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{PLURAL}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                     "versions": [_version(SERVED, "size", False), _version(STORED, "width", True)],
                     "conversion": conversion}}


def gadget(name: str, version: str, value: str, fail: bool = False) -> dict[str, Any]:
    field = "size" if version == SERVED else "width"
    metadata: dict[str, Any] = {"name": name}
    if fail:
        metadata["labels"] = {FAIL_LABEL: "true"}
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gadget", "metadata": metadata, "spec": {field: value}}


def convert_gadget(obj: Mapping[str, Any], desired: str) -> dict[str, Any] | str:
    """The converted object, or why not (an object labelled FAIL_LABEL)."""
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(FAIL_LABEL):
        return f'Gadget {meta.get("namespace")}/{meta.get("name")}: spec: refused by the test webhook'
    out = copy.deepcopy(dict(obj))
    spec = out.get("spec") or {}
    old, new = ("size", "width") if desired.endswith("/" + STORED) else ("width", "size")
    if old in spec:
        spec[new] = spec.pop(old)
    out["apiVersion"] = desired
    return out


@dataclass(frozen=True)
class Failure:
    message: str


def rename_cohort(obj: Mapping[str, Any], desired: str) -> dict[str, Any] | Failure:
    """v1beta1 spec.cohort <-> v1beta2 spec.cohortName; a non-string cohort cannot be converted."""
    out = copy.deepcopy(dict(obj))
    spec = out.get("spec") or {}
    old, new = ("cohort", "cohortName") if desired == V1BETA2 else ("cohortName", "cohort")
    if old in spec:
        if not isinstance(spec[old], str):
            return Failure(f'{obj["kind"]} {obj["metadata"]["name"]}: spec.{old}: must be a string')
        spec[new] = spec.pop(old)
    out["apiVersion"] = desired
    return out


class ConversionServer:
    """An aiohttp HTTPS server answering ConversionReviews with `convert_gadget` (or with what
    `respond(review)` returns, for a misbehaving webhook); records each review."""

    def __init__(self, keys: KeyPair, respond: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.keys = keys
        self.respond = respond
        self.reviews: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/convert"

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        if self.respond is not None:
            return web.json_response(self.respond(review))
        desired = review["request"]["desiredAPIVersion"]
        results = [convert_gadget(o, desired) for o in review["request"]["objects"]]
        failures = [r for r in results if isinstance(r, str)]
        response: dict[str, Any] = {"uid": review["request"]["uid"]}
        if failures:
            response["result"] = {"status": "Failure", "message": failures[0]}
        else:
            response["result"] = {"status": "Success"}
            response["convertedObjects"] = results
        return web.json_response({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                                  "response": response})

    async def start(self) -> ConversionServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/convert", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.keys.server_context())
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = int(server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
