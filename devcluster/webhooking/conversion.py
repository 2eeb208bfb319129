"""Calling CRD conversion webhooks: a ConversionReview v1 over HTTPS, as kube-apiserver sends it.

`ConversionWebhooks(api).install()` becomes `ApiServer.crd_converter`, which the request pipeline calls
for custom objects that must change version under a CRD whose `spec.conversion.strategy` is Webhook
(`devcluster.server.converting`). The review goes to `clientConfig.url` or `.service` (mapped like the
admission chain's), trusting `caBundle`; the answer is checked as kube-apiserver checks it (uid, result,
count, apiVersion and kind, identity metadata unchanged) and every failure raised as ConversionFailed with
kube-apiserver's words (k8s.io/apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go).
"""

from __future__ import annotations

import base64
import binascii
import ssl
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp

from devcluster.server.apiserver import ApiServer
from devcluster.server.converting import ConversionFailed, webhook_failed

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
TIMEOUT_SECONDS = 30  # kube-apiserver's conversion requests carry ?timeout=30s
IDENTITY = ("name", "namespace", "uid")


class ConversionWebhooks:
    """The caller of conversion webhooks; `services` maps `(namespace, name, port)` of a
    `clientConfig.service` to a base URL (see `WebhookChain`)."""

    def __init__(self, api: ApiServer, services: dict[tuple[str, str, int], str] | None = None) -> None:
        self.api = api
        self.services = services if services is not None else {}
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}
        self.calls = 0

    def install(self) -> ConversionWebhooks:
        self.api.crd_converter = self.convert
        return self

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def convert(self, crd: Mapping[str, Any], objects: list[dict[str, Any]], desired: str) -> list[dict[str, Any]]:
        """`objects` (all in one version) converted to `desired` by the CRD's webhook, in order."""
        source, kind = str(objects[0].get("apiVersion")), str(objects[0].get("kind"))
        webhook = (((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {})
        uid = str(uuid.uuid4())
        review = {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview",
                  "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}}
        try:
            body = await self._post(webhook.get("clientConfig") or {}, review)
            converted = _converted_objects(body, uid)
        except ConversionFailed as e:
            raise webhook_failed(source, kind, e.detail) from None
        if len(converted) != len(objects):
            raise ConversionFailed(f"conversion webhook for {source}, Kind={kind} returned {len(converted)} objects, "
                                   f"expected {len(objects)}")
        for index, (before, after) in enumerate(zip(objects, converted, strict=True)):
            problem = _invalid(before, after, desired)
            if problem:
                raise ConversionFailed(f"conversion webhook for {source}, Kind={kind} returned {problem[0]} "
                                       f"at index {index}: {problem[1]}")
        return converted

    async def _post(self, client_config: Mapping[str, Any], review: dict[str, Any]) -> Any:
        url, server_name = self._url(client_config)
        shown = f'Post "{url}?timeout={TIMEOUT_SECONDS}s"'
        self.calls += 1
        try:
            async with self._client().post(url, params={"timeout": f"{TIMEOUT_SECONDS}s"}, json=review,
                                           ssl=self._context(client_config), server_hostname=server_name,
                                           timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200]
                    raise ConversionFailed(f"the server responded with status {resp.status}: {text}")
                return await resp.json(content_type=None)
        except ConversionFailed:
            raise
        except TimeoutError:
            raise ConversionFailed(f"{shown}: context deadline exceeded") from None
        except (aiohttp.ClientError, OSError, ssl.SSLError, ValueError) as e:
            raise ConversionFailed(f"{shown}: {e}") from None

    def _url(self, cfg: Mapping[str, Any]) -> tuple[str, str | None]:
        if cfg.get("url"):
            return str(cfg["url"]), None
        service = cfg.get("service") or {}
        ns, name, port = str(service.get("namespace", "")), str(service.get("name", "")), int(service.get("port") or 443)
        base = self.services.get((ns, name, port))
        if base is None:
            raise ConversionFailed(f'service "{name}" not found in namespace "{ns}" (no URL registered for port {port})')
        return base.rstrip("/") + str(service.get("path") or "/"), f"{name}.{ns}.svc"

    def _context(self, cfg: Mapping[str, Any]) -> ssl.SSLContext:
        bundle = str(cfg.get("caBundle") or "")
        context = self._contexts.get(bundle)
        if context is None:
            try:
                cadata = base64.b64decode(bundle, validate=True).decode() if bundle else None
                context = ssl.create_default_context(cadata=cadata)
            except (binascii.Error, UnicodeDecodeError, ssl.SSLError) as e:
                raise ConversionFailed(f"invalid caBundle: {e}") from None
            self._contexts[bundle] = context
        return context

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session


def _converted_objects(body: Any, uid: str) -> list[dict[str, Any]]:
    """The converted objects of a well-formed successful response; ConversionFailed otherwise."""
    if not isinstance(body, Mapping) or body.get("apiVersion") != REVIEW_API_VERSION or \
            body.get("kind") != "ConversionReview":
        got = f"{body.get('apiVersion')}, Kind={body.get('kind')}" if isinstance(body, Mapping) else "no object"
        raise ConversionFailed(f"expected webhook response of {REVIEW_API_VERSION}, Kind=ConversionReview, got {got}")
    response = body.get("response")
    if not isinstance(response, Mapping):
        raise ConversionFailed("no response provided")
    if response.get("uid") != uid:
        raise ConversionFailed(f'expected response.uid="{uid}", got "{response.get("uid")}"')
    result: Mapping[str, Any] = response["result"] if isinstance(response.get("result"), Mapping) else {}
    if result.get("status") != "Success":
        if result.get("message"):
            raise ConversionFailed(str(result["message"]))
        raise ConversionFailed(f"response.result.status was '{result.get('status', '')}', not 'Success'")
    converted = response.get("convertedObjects")
    if not isinstance(converted, list) or not all(isinstance(o, dict) for o in converted):
        raise ConversionFailed("response.convertedObjects must be a list of objects")
    return converted


def _invalid(before: Mapping[str, Any], after: Mapping[str, Any], desired: str) -> tuple[str, str] | None:
    """(what, why) kube-apiserver would refuse one converted object for; None when it would not."""
    if after.get("apiVersion") != desired:
        return "invalid converted object", f"invalid groupVersion (expected {desired}, received {after.get('apiVersion')})"
    if after.get("kind") != before.get("kind"):
        return "invalid converted object", f"invalid kind (expected {before.get('kind')}, received {after.get('kind')})"
    old, new = before.get("metadata") or {}, after.get("metadata")
    if not isinstance(new, Mapping):
        return "invalid metadata in object", "missing metadata in converted object"
    for field in IDENTITY:
        if old.get(field) != new.get(field):
            return "invalid metadata in object", f"must have the same {field}: {old.get(field)} != {new.get(field)}"
    return None
