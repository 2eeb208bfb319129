"""Serving tasq's admission webhooks from the operator, and registering them for a local control plane.

`serve_admission(client, server, stop)` runs kopf with only the handlers of
`webhooks.handlers.register_handlers`, behind an `AdmissionServer` (TLS from files, reloaded on
change), logged in with the operator's own client settings. For `tasq dev` and `tasq run
--local-webhooks`, `local_tls` writes a CA and a 127.0.0.1 certificate and `registered_webhooks`
applies the configurations (URL + caBundle) once the server listens and deletes them on exit.
Called by controller.commands.run/dev; the one module here that writes webhook configurations.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

import kopf
from kopf._core.reactor.inventory import ResourceMemories
from kubernetes.aio.client import AdmissionregistrationV1Api, ApiClient, ApiException

from controller.api import constants as c
from webhooks.certificates import write_serving_files
from webhooks.configurations import EXCLUDED_NAMESPACES, local_client, webhook_configurations
from webhooks.handlers import register_handlers
from webhooks.serving import AdmissionServer, TlsFiles

NOT_FOUND = 404
CONFLICT = 409


def serving_files(directory: Path) -> TlsFiles:
    """The certificate, key and CA files in `directory` (a mounted Secret's layout)."""
    return TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)


def local_tls(directory: Path, now: datetime) -> TlsFiles:
    """A fresh CA and a serving certificate for 127.0.0.1/localhost, written into `directory`."""
    write_serving_files(directory, now)
    return serving_files(directory)


async def _apply(api: AdmissionregistrationV1Api, configuration: dict[str, Any]) -> None:
    """Create the configuration, or replace the one of that name (a previous run's, say)."""
    mutating = configuration["kind"] == "MutatingWebhookConfiguration"
    name = configuration["metadata"]["name"]
    body: Any = configuration  # the client serialises a plain dict as it is, like its own models
    try:
        if mutating:
            await api.create_mutating_webhook_configuration(body)
        else:
            await api.create_validating_webhook_configuration(body)
        return
    except ApiException as e:
        if e.status != CONFLICT:
            raise
    current = await (api.read_mutating_webhook_configuration(name) if mutating
                     else api.read_validating_webhook_configuration(name))
    version = current.metadata.resource_version if current.metadata is not None else None
    body = {**configuration, "metadata": {**configuration["metadata"], "resourceVersion": version}}
    if mutating:
        await api.replace_mutating_webhook_configuration(name, body)
    else:
        await api.replace_validating_webhook_configuration(name, body)


async def register_configurations(client: ApiClient, url: str, ca_bundle: str,
                                  excluded: tuple[str, ...] = EXCLUDED_NAMESPACES) -> None:
    """Apply both configurations, calling the server at `url` and trusting `ca_bundle`."""
    api = AdmissionregistrationV1Api(client)
    for body in webhook_configurations(local_client(url, ca_bundle), excluded):
        await _apply(api, body)


async def remove_configurations(client: ApiClient) -> None:
    """Delete both configurations; absent ones are fine."""
    api = AdmissionregistrationV1Api(client)
    for delete, name in ((api.delete_mutating_webhook_configuration, c.MUTATING_WEBHOOK_CONFIGURATION),
                         (api.delete_validating_webhook_configuration, c.VALIDATING_WEBHOOK_CONFIGURATION)):
        try:
            await delete(name)
        except ApiException as e:
            if e.status != NOT_FOUND:
                raise


@asynccontextmanager
async def registered_webhooks(client: ApiClient, server: AdmissionServer,
                              excluded: tuple[str, ...] = EXCLUDED_NAMESPACES) -> AsyncIterator[None]:
    """While inside: the configurations point at `server` (registered once it listens, so the API
    server never calls a port nobody serves); on exit they are deleted, so a stopped local
    operator leaves no failurePolicy Fail webhook behind."""
    await server.wait_listening()
    try:
        await register_configurations(client, server.url, server.tls.ca_bundle(), excluded)
        yield
    finally:
        await remove_configurations(client)


class DenialsLoggedOnce(logging.Filter):
    """kopf logs every denial (an AdmissionError) as an ERROR of the handler; a denial is a normal
    answer, which the server already logs at INFO with the object, so kopf's line is dropped.
    Unexpected handler exceptions are logged by kopf with other words and stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Webhook ") and " failed permanently: " in message)


class ReviewMemories(ResourceMemories):
    """kopf keeps a memo per object uid for every UPDATE review and forgets it only on a watched
    deletion; an admission-only operator watches nothing, so that would grow with every Job and
    Workload ever updated. tasq's handlers keep no memos: every review gets a fresh one."""

    async def recall_memo(self, raw_body: Any, *, memobase: Any = None, ephemeral: bool = False) -> Any:
        return await super().recall_memo(raw_body, memobase=memobase, ephemeral=True)


def connection_info(client: ApiClient) -> kopf.ConnectionInfo:
    """kopf's credentials from the operator's kubernetes.aio client (one kubeconfig, one identity)."""
    cfg = client.configuration
    token = cfg.api_key.get("BearerToken") or cfg.api_key.get("authorization") or ""
    return kopf.ConnectionInfo(
        server=cfg.host, ca_path=cfg.ssl_ca_cert, insecure=not cfg.verify_ssl,
        token=token.removeprefix("Bearer ").strip() or None,
        certificate_path=cfg.cert_file, private_key_path=cfg.key_file)


def admission_registry(client: ApiClient, server: AdmissionServer) -> kopf.OperatorRegistry:
    """A kopf registry with the admission handlers, a login from `client`, and `server` configured."""
    registry = kopf.OperatorRegistry()
    register_handlers(registry)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(client)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.admission.server = server
        settings.admission.managed = None  # tasq writes its own, tightly scoped configurations
        settings.posting.enabled = False  # verdicts go to the caller and the log, not to Events
    return registry


async def serve_admission(client: ApiClient, server: AdmissionServer, stop: asyncio.Event, *,
                          register_local: bool = False, ready: asyncio.Event | None = None) -> None:
    """Serve the webhooks until `stop` is set. With `register_local`, the configurations point at
    this server while it runs (`registered_webhooks`); `ready` is set once they can be called."""
    objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, DenialsLoggedOnce) for f in objects.filters):
        objects.addFilter(DenialsLoggedOnce())
    operator = asyncio.create_task(kopf.operator(registry=admission_registry(client, server), clusterwide=True,
                                                 standalone=True, stop_flag=stop, memories=ReviewMemories()))
    try:
        waiting = asyncio.create_task(server.wait_listening())
        await asyncio.wait({operator, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if operator.done():
            await operator  # it failed before serving: raise its error
            return
        async with registered_webhooks(client, server) if register_local else nullcontext():
            if ready is not None:
                ready.set()
            await asyncio.wait({operator, asyncio.create_task(stop.wait())}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.set()
        await operator
