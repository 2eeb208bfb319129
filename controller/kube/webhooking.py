"""Serving tasq's admission webhooks, and registering them for a local control plane.

A `WebhookServer` is an `AdmissionServer` on the caller's loop (TLS from files, reloaded on change)
or a `controller.kube.webhook_serving.WebhookProcess`; `serve_admission(client, server, stop)` runs
one alone, without an operator. For `tasq dev` and
`tasq run --local-webhooks`, `local_tls` writes a CA and a 127.0.0.1 certificate and `publish_webhooks`
applies the configurations (URL + caBundle) once the server listens, through the door
(`controller.kube.api.KubeApi`). Replicas share them: each configuration lists the servers
registered with it (an annotation) and points at the newest; a replica leaving hands them to the
newest other one still listening, and only the last deletes them. The CRDs of tasq's kinds get their
`spec.conversion` pointed at the same server's /convert the same way, except that the last replica
leaves it in place (see `release_conversion`). Called by controller.kube.operating/process; the one
module here that writes webhook configurations.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from kopf._core.reactor.inventory import ResourceMemories
from kubernetes.aio.client import ApiClient

from controller.api import constants as c
from controller.api.crd_ownership import kueue_installed_message, kueue_mark
from controller.api.crds import KINDS as TASQ_KINDS
from controller.kube.api import (
    CUSTOM_RESOURCE_DEFINITIONS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiError,
    KubeApi,
    retrying,
)
from webhooks.certificates import write_serving_files
from webhooks.configurations import EXCLUDED_NAMESPACES, crd_conversion, local_client, webhook_configurations
from webhooks.handlers import GroupMembers
from webhooks.serving import AdmissionServer, TlsFiles


class WebhookServer(Protocol):
    """What the operator and the registration read of a webhook server, wherever it runs."""

    tls: TlsFiles
    observe: Callable[[str, int, float], None] | None
    draining: bool
    failure: str | None

    @property
    def url(self) -> str: ...

    async def wait_listening(self) -> None: ...

    async def serve_reviews(self, group_members: GroupMembers | None) -> None: ...


def serving_files(directory: Path) -> TlsFiles:
    """The certificate, key and CA files in `directory` (a mounted Secret's layout)."""
    return TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)


def local_tls(directory: Path, now: datetime) -> TlsFiles:
    """A fresh CA and a serving certificate for 127.0.0.1/localhost, written into `directory`."""
    write_serving_files(directory, now)
    return serving_files(directory)


def _resource(kind: str) -> tuple[str, str]:
    return MUTATING_WEBHOOK_CONFIGURATIONS if kind == "MutatingWebhookConfiguration" else VALIDATING_WEBHOOK_CONFIGURATIONS


log = logging.getLogger(__name__)

SHARING_ATTEMPTS = 10
"""Read-modify-write rounds of a shared configuration before giving up (each loses only to another
replica's write in between)."""
PROBE_TIMEOUT_S = 1.0
KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

Server = dict[str, str]
"""One registered server: {"url", "caBundle"}."""


def _name(kind: str) -> str:
    return c.MUTATING_WEBHOOK_CONFIGURATION if kind == KINDS[0] else c.VALIDATING_WEBHOOK_CONFIGURATION


def sharing_servers(configuration: Any) -> list[Server]:
    """The servers a configuration (a dict, or None when absent) lists; malformed entries dropped."""
    annotations = ((configuration or {}).get("metadata") or {}).get("annotations") or {}
    try:
        listed = json.loads(annotations.get(c.ANNOTATION_LOCAL_WEBHOOK_SERVERS) or "[]")
    except ValueError:
        return []
    if not isinstance(listed, list):
        return []
    return [{"url": str(s["url"]), "caBundle": str(s.get("caBundle", ""))}
            for s in listed if isinstance(s, dict) and s.get("url")]


def joined(servers: list[Server], me: Server) -> list[Server]:
    """The list after `me` registers: listed once, last (the configuration points at the last)."""
    return [s for s in servers if s["url"] != me["url"]] + [me]


def left(servers: list[Server], url: str) -> list[Server]:
    """The list after the server at `url` leaves."""
    return [s for s in servers if s["url"] != url]


def _configuration(kind: str, server: Server, servers: list[Server], excluded: tuple[str, ...]) -> dict[str, Any]:
    """The configuration of `kind` pointing at `server`, listing `servers`."""
    mutating, validating = webhook_configurations(local_client(server["url"], server["caBundle"]), excluded)
    body = mutating if kind == KINDS[0] else validating
    body["metadata"]["annotations"] = {c.ANNOTATION_LOCAL_WEBHOOK_SERVERS: json.dumps(servers)}
    return body


async def _current(api: KubeApi, kind: str) -> dict[str, Any] | None:
    try:
        return await retrying(lambda: api.get(_resource(kind), None, _name(kind)))
    except ApiError as e:
        if e.not_found:
            return None
        raise


async def register_configurations(api: KubeApi, url: str, ca_bundle: str,
                                  excluded: tuple[str, ...] = EXCLUDED_NAMESPACES) -> None:
    """Point both configurations at the server at `url` (trusting `ca_bundle`) and add it to the
    servers they list; created when absent. resourceVersion-checked, redone on a conflict."""
    me = {"url": url, "caBundle": ca_bundle}
    for kind in KINDS:
        resource, name = _resource(kind), _name(kind)
        for _ in range(SHARING_ATTEMPTS):
            current = await _current(api, kind)
            body = _configuration(kind, me, joined(sharing_servers(current), me), excluded)
            try:
                if current is None:
                    await retrying(functools.partial(api.create, resource, None, body))
                else:
                    body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
                    await retrying(functools.partial(api.replace, resource, None, name, body))
                break
            except ApiError as e:
                if not e.conflict:
                    raise
        else:
            raise RuntimeError(f"{name}: changed by others {SHARING_ATTEMPTS} times while registering")


async def listening(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Something accepts connections at the host and port of `url` (a local webhook server)."""
    parts = urlsplit(url)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port or 443), timeout_s)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


async def release_configurations(api: KubeApi, url: str, excluded: tuple[str, ...] = EXCLUDED_NAMESPACES,
                                 alive: Callable[[str], Any] = listening) -> None:
    """The server at `url` leaves both configurations: they are handed to the newest other listed
    server that `alive` finds listening (another replica keeps serving them), deleted when none is
    left, and left alone when they do not list `url` (another installation's). Each step is
    resourceVersion-checked and redone on a conflict."""
    for kind in KINDS:
        resource, name = _resource(kind), _name(kind)
        for _ in range(SHARING_ATTEMPTS):
            current = await _current(api, kind)
            listed = sharing_servers(current)
            if current is None or all(s["url"] != url for s in listed):
                break
            remaining = [s for s in left(listed, url) if await alive(s["url"])]
            version = (current.get("metadata") or {}).get("resourceVersion")
            try:
                if remaining:
                    body = _configuration(kind, remaining[-1], remaining, excluded)
                    body["metadata"]["resourceVersion"] = version
                    await retrying(functools.partial(api.replace, resource, None, name, body))
                    log.info("%s handed to %s (%d server(s) left)", name, remaining[-1]["url"], len(remaining))
                else:
                    await retrying(functools.partial(api.delete, resource, None, name, resource_version=version))
                    log.info("%s deleted: no other server listed is listening", name)
                break
            except ApiError as e:
                if e.not_found:
                    break
                if not e.conflict:
                    raise
        else:
            raise RuntimeError(f"{name}: changed by others {SHARING_ATTEMPTS} times while releasing")


CONVERTED_CRDS = tuple(spec.crd_name for spec in TASQ_KINDS)
"""The CRDs whose objects are converted between versions by tasq's /convert: all of tasq's (one
served in a single version never needs it, as config/crd's patch sets it on every one)."""


class KueueCrdsInstalled(Exception):
    """A CRD tasq would point at itself is an installed Kueue's (controller.api.crd_ownership)."""


def _converting_through(crd: dict[str, Any], server: Server, servers: list[Server]) -> dict[str, Any]:
    """`crd` (as read, resourceVersion included) with its conversion pointing at `server`, listing `servers`."""
    metadata = dict(crd.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}),
                               c.ANNOTATION_LOCAL_WEBHOOK_SERVERS: json.dumps(servers)}
    spec = {**(crd.get("spec") or {}), "conversion": crd_conversion(local_client(server["url"], server["caBundle"]))}
    return {**crd, "metadata": metadata, "spec": spec}


async def _point_conversion(api: KubeApi, name: str, choose: Callable[[dict[str, Any]], Any]) -> None:
    """Read-modify-write of one CRD: `choose(crd)` (awaitable) gives (server, servers) to point it at,
    or None to leave it; resourceVersion-checked and redone on a conflict; an absent CRD is left alone."""
    for _ in range(SHARING_ATTEMPTS):
        try:
            current = await retrying(lambda: api.get(CUSTOM_RESOURCE_DEFINITIONS, None, name))
        except ApiError as e:
            if e.not_found:
                log.warning("CRD %s is not installed: its objects cannot be converted until it is and tasq "
                            "registers again", name)
                return
            raise
        chosen = await choose(current)
        if chosen is None:
            return
        server, servers = chosen
        try:
            await retrying(functools.partial(api.replace, CUSTOM_RESOURCE_DEFINITIONS, None, name,
                                             _converting_through(current, server, servers)))
            return
        except ApiError as e:
            if not e.conflict:
                raise
    raise RuntimeError(f"{name}: changed by others {SHARING_ATTEMPTS} times while pointing its conversion")


async def register_conversion(api: KubeApi, url: str, ca_bundle: str, crds: tuple[str, ...] = CONVERTED_CRDS) -> None:
    """Each CRD in `crds` converts through the server at `url` (trusting `ca_bundle`), which joins
    the servers the CRD lists."""
    me = {"url": url, "caBundle": ca_bundle}

    async def join(crd: dict[str, Any]) -> tuple[Server, list[Server]]:
        return me, joined(sharing_servers(crd), me)
    for name in crds:
        await _point_conversion(api, name, join)


async def release_conversion(api: KubeApi, url: str, crds: tuple[str, ...] = CONVERTED_CRDS,
                             alive: Callable[[str], Any] = listening) -> None:
    """The server at `url` leaves each CRD's list: a CRD pointing at it is handed to the newest other
    listed server `alive` finds listening. The last one leaves the conversion pointing at itself, and
    says so: unlike an admission webhook, a conversion cannot be dropped without serving objects in a
    version they were not converted to (reads in the storage version keep working; others fail with
    the webhook's address until a tasq registers again)."""
    async def leave(crd: dict[str, Any]) -> tuple[Server, list[Server]] | None:
        listed = sharing_servers(crd)
        if all(s["url"] != url for s in listed):
            return None
        remaining = [s for s in left(listed, url) if await alive(s["url"])]
        if not remaining:
            log.info("%s: conversion left pointing at %s, the last server registered; versions other than "
                     "an object's stored one are unreadable until a tasq registers again",
                     (crd.get("metadata") or {}).get("name"), url)
            return None
        return remaining[-1], remaining
    for name in crds:
        await _point_conversion(api, name, leave)


async def remove_configurations(api: KubeApi) -> None:
    """Delete both configurations whoever they point at (absent ones are fine): for a teardown that
    owns them (bench/failover.py); a replica leaving uses `release_configurations`."""
    for resource, name in ((MUTATING_WEBHOOK_CONFIGURATIONS, c.MUTATING_WEBHOOK_CONFIGURATION),
                           (VALIDATING_WEBHOOK_CONFIGURATIONS, c.VALIDATING_WEBHOOK_CONFIGURATION)):
        try:
            await retrying(functools.partial(api.delete, resource, None, name))
        except ApiError as e:
            if not e.not_found:
                raise


async def refuse_kueue_crds(api: KubeApi, crds: tuple[str, ...] = CONVERTED_CRDS) -> None:
    """KueueCrdsInstalled naming the first of `crds` an installed Kueue owns (controller.api.crd_ownership):
    checked before anything is registered, so a refusal changes nothing."""
    for name in crds:
        try:
            crd = await retrying(functools.partial(api.get, CUSTOM_RESOURCE_DEFINITIONS, None, name))
        except ApiError as e:
            if e.not_found:
                continue
            raise
        mark = kueue_mark(crd)
        if mark is not None:  # taking its conversion would break the Kueue that serves it
            raise KueueCrdsInstalled(kueue_installed_message(name, mark))


@asynccontextmanager
async def registered_webhooks(api: KubeApi, server: WebhookServer,
                              excluded: tuple[str, ...] = EXCLUDED_NAMESPACES) -> AsyncIterator[None]:
    """While inside: the configurations and the CRDs' conversion point at `server` (registered once it
    listens, so the API server never calls a port nobody serves); on exit this server leaves them
    (`release_configurations`): another replica still listening keeps them, the last one deletes
    them, so a stopped local operator leaves no failurePolicy Fail webhook behind and never takes
    them away from a replica that still serves."""
    await server.wait_listening()
    await refuse_kueue_crds(api)
    try:
        await register_configurations(api, server.url, server.tls.ca_bundle(), excluded)
        await register_conversion(api, server.url, server.tls.ca_bundle())
        yield
    finally:
        try:
            await release_configurations(api, server.url, excluded)
        finally:
            await release_conversion(api, server.url)


class ReviewMemories(ResourceMemories):
    """kopf keeps a memo per object uid for every UPDATE review and forgets it only on a watched
    deletion; an admission-only operator watches nothing, so that would grow with every Job and
    Workload ever updated. tasq's handlers keep no memos: every review gets a fresh one."""

    async def recall_memo(self, raw_body: Any, *, memobase: Any = None, ephemeral: bool = False) -> Any:
        return await super().recall_memo(raw_body, memobase=memobase, ephemeral=True)


async def publish_webhooks(client: ApiClient, server: WebhookServer, stop: asyncio.Event, *,
                           register_local: bool = False, ready: asyncio.Event | None = None) -> None:
    """Until `stop`: once `server` listens, `ready` is set and, with `register_local`, the
    configurations point at it (`registered_webhooks`: released again on the way out)."""
    listening = asyncio.create_task(server.wait_listening())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({listening, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            return
        async with registered_webhooks(KubeApi(client), server) if register_local else nullcontext():
            if ready is not None:
                ready.set()
            await stopping
    finally:
        listening.cancel()
        stopping.cancel()


async def serve_admission(client: ApiClient, server: AdmissionServer, stop: asyncio.Event, *,
                          register_local: bool = False, ready: asyncio.Event | None = None) -> None:
    """Serve only the webhooks (no cache: a queued pod's group is not checked) on this loop until
    `stop` is set (or serving fails: its error is raised), published as `publish_webhooks` says."""
    serving = asyncio.create_task(server.serve_reviews(None))
    publishing = asyncio.create_task(publish_webhooks(client, server, stop, register_local=register_local,
                                                      ready=ready))
    try:
        await asyncio.wait({serving, publishing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.set()
        await asyncio.gather(publishing, return_exceptions=True)  # released while still serving
        serving.cancel()
        results = await asyncio.gather(serving, publishing, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result
