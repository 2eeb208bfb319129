"""tasq's whole process: the operator on one event loop and, optionally, its admission webhooks.

`serve_tasq` runs `serve_operator` with its `OperatorOptions` (with `Webhooks`, the webhooks are
served beside it by a supervised process of their own, `WebhookProcess`, or on the operator's loop
with `own_process=False`) and `publish_webhooks` side by side until `stop` is set or either ends;
`ready` is set once both serve. SIGINT/SIGTERM set `stop` (`embedding.run_kopf` keeps it so), which stops
every part. Used by `tasq run`, `tasq dev` and `tasq demo`.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from kubernetes.aio import client

from controller.kube.operating import Operator, OperatorOptions, serve_operator
from controller.kube.webhook_serving import WebhookProcess
from controller.kube.webhooking import WebhookServer, local_tls, publish_webhooks, serving_files
from webhooks.serving import AdmissionServer


@dataclass(frozen=True)
class Webhooks:
    """How to serve the webhooks: `cert_dir` holds tls.crt/tls.key/ca.crt (a mounted Secret), or,
    with `local`, a fresh CA is generated and the configurations point at 127.0.0.1:`port`.
    `own_process`: served by a child process (off the operator's event loop), else on that loop."""

    local: bool = False
    cert_dir: Path | None = None
    addr: str = "127.0.0.1"
    port: int = 0
    own_process: bool = True


async def serve_tasq(api_client: client.ApiClient, stop: asyncio.Event, options: OperatorOptions | None = None, *,
                     webhooks: Webhooks | None = None, ready: asyncio.Event | None = None) -> None:
    """See the module docstring; returns once every part stopped (webhook configurations removed)."""
    options = options if options is not None else OperatorOptions()
    operator_ready = asyncio.Event()
    hooks_ready = asyncio.Event()
    operators: list[Operator] = []
    started = options.started

    def on_started(operator: Operator) -> None:
        operators.append(operator)
        if started is not None:
            started(operator)

    with contextlib.ExitStack() as scratch:
        server: WebhookServer | None = None
        if webhooks is not None:
            if webhooks.local:
                directory = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="tasq-webhooks-")))
                tls = local_tls(directory, datetime.now(UTC))
            else:
                assert webhooks.cert_dir is not None
                tls = serving_files(webhooks.cert_dir)
            server = (WebhookProcess(tls, addr=webhooks.addr, port=webhooks.port) if webhooks.own_process
                      else AdmissionServer(tls, addr=webhooks.addr, port=webhooks.port))
        # With local webhooks the CRDs' conversion is registered only once the server listens; until
        # then this replica must not write (an object stored as v1beta1 would lose renamed fields).
        hold = hooks_ready if webhooks is not None and webhooks.local else options.campaign_after
        parts = [asyncio.create_task(serve_operator(api_client, stop,
                                                    replace(options, started=on_started, campaign_after=hold),
                                                    admission=server))]
        if webhooks is not None and server is not None:
            parts.append(asyncio.create_task(publish_webhooks(api_client, server, stop, register_local=webhooks.local,
                                                              ready=hooks_ready)))
        else:
            hooks_ready.set()
        waiter = asyncio.create_task(_when_ready(operators, operator_ready, hooks_ready, ready))
        try:
            await asyncio.wait(parts, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()
            waiter.cancel()
            results = await asyncio.gather(*parts, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result


async def _when_ready(operators: list[Operator], operator_ready: asyncio.Event, hooks_ready: asyncio.Event,
                      ready: asyncio.Event | None) -> None:
    while not operators:
        await asyncio.sleep(0.01)
    await operators[0].ready.wait()
    operator_ready.set()
    await hooks_ready.wait()
    if ready is not None:
        ready.set()
