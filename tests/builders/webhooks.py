"""Builders for admission webhook tests: HTTPS webhook servers and webhook configurations.

`WebhookServer(keys, allow(patch=[...]))` serves AdmissionReviews on 127.0.0.1:0 over TLS and
records them; `make_webhook_config("cfg").webhook("deny.tasq.test", url, ca).rule(...)...build()` gives a
Mutating/ValidatingWebhookConfiguration dict. Used by the devcluster webhook and fault tests.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from devcluster.webhooking.certificates import KeyPair

Responder = Callable[[Mapping[str, Any]], dict[str, Any]]


def allow(patch: Sequence[Mapping[str, Any]] | None = None, warnings: Sequence[str] = ()) -> Responder:
    """Allow every request, optionally with a JSONPatch and warnings for the client."""
    def respond(_request: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"allowed": True}
        if warnings:
            out["warnings"] = list(warnings)
        if patch:
            out["patchType"] = "JSONPatch"
            out["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
        return out
    return respond


def deny(message: str = "", code: int = 0, reason: str = "", warnings: Sequence[str] = ()) -> Responder:
    """Deny every request with this status message/code/reason (zero/empty: left out) and warnings."""
    def respond(_request: Mapping[str, Any]) -> dict[str, Any]:
        status: dict[str, Any] = {}
        if message:
            status["message"] = message
        if code:
            status["code"] = code
        if reason:
            status["reason"] = reason
        return {"allowed": False, "status": status, **({"warnings": list(warnings)} if warnings else {})}
    return respond


class WebhookServer:
    """An aiohttp HTTPS server answering AdmissionReviews with `respond`; `delay` seconds before answering."""

    def __init__(self, keys: KeyPair, respond: Responder, delay: float = 0.0) -> None:
        self.keys = keys
        self.respond = respond
        self.delay = delay
        self.reviews: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/admit"

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        if self.delay:
            await asyncio.sleep(self.delay)
        response = {"uid": review["request"]["uid"], **self.respond(review["request"])}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": response})

    async def start(self) -> WebhookServer:
        app = web.Application()
        app.router.add_post("/admit", self._handle)
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


class WebhookConfigBuilder:
    """A Mutating/ValidatingWebhookConfiguration; `.webhook()` starts a webhook the other calls modify."""

    def __init__(self, name: str, mutating: bool) -> None:
        kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
        self._obj: dict[str, Any] = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                                     "metadata": {"name": name}, "webhooks": []}

    @property
    def _last(self) -> dict[str, Any]:
        hook: dict[str, Any] = self._obj["webhooks"][-1]
        return hook

    def webhook(self, name: str, url: str = "", ca_bundle: str = "",
                service: Mapping[str, Any] | None = None) -> WebhookConfigBuilder:
        client: dict[str, Any] = {"url": url} if url else {"service": dict(service or {})}
        if ca_bundle:
            client["caBundle"] = ca_bundle
        self._obj["webhooks"].append({"name": name, "clientConfig": client, "rules": [],
                                      "sideEffects": "None", "admissionReviewVersions": ["v1"]})
        return self

    def rule(self, resources: Sequence[str] = ("pods",), operations: Sequence[str] = ("CREATE",),
             groups: Sequence[str] = ("",), versions: Sequence[str] = ("v1",), scope: str = "") -> WebhookConfigBuilder:
        rule: dict[str, Any] = {"apiGroups": list(groups), "apiVersions": list(versions),
                                "resources": list(resources), "operations": list(operations)}
        if scope:
            rule["scope"] = scope
        self._last["rules"].append(rule)
        return self

    def only_namespace(self, namespace: str) -> WebhookConfigBuilder:
        """namespaceSelector on the automatic `kubernetes.io/metadata.name` label."""
        return self.namespace_selector({"matchLabels": {"kubernetes.io/metadata.name": namespace}})

    def namespace_selector(self, selector: Mapping[str, Any]) -> WebhookConfigBuilder:
        self._last["namespaceSelector"] = dict(selector)
        return self

    def object_selector(self, selector: Mapping[str, Any]) -> WebhookConfigBuilder:
        self._last["objectSelector"] = dict(selector)
        return self

    def failure_policy(self, policy: str) -> WebhookConfigBuilder:
        self._last["failurePolicy"] = policy
        return self

    def side_effects(self, value: str) -> WebhookConfigBuilder:
        self._last["sideEffects"] = value
        return self

    def timeout(self, seconds: int) -> WebhookConfigBuilder:
        self._last["timeoutSeconds"] = seconds
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


def make_webhook_config(name: str, mutating: bool = False) -> WebhookConfigBuilder:
    return WebhookConfigBuilder(name, mutating)
