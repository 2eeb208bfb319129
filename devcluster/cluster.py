"""`DevCluster`: runs the emulated API server on loopback, in the caller's loop or in a thread.

Used by the test fixtures (`tests/e2e/conftest.py`), `tasq dev` and, later, `tasq demo`.
`start()`/`aclose()` for async code; `start_in_thread()`/`stop()` for sync code, with `call()`
to run a coroutine (the in-process API) on the server's loop from another thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from devcluster.front.serving import BOOKMARK_INTERVAL, HttpFrontend
from devcluster.server.apiserver import ApiServer
from devcluster.server.clock import Clock, utc_now
from devcluster.server.faults import Faults
from devcluster.server.store import HISTORY_LIMIT
from devcluster.webhooking.admission import WebhookChain
from devcluster.webhooking.conversion import ConversionWebhooks

T = TypeVar("T")

# How often history is compacted, as kube-apiserver's --etcd-compaction-interval (5 min by default;
# hack/realcluster/up runs 10 s, and so does the devcluster, so both answer an old watch alike).
COMPACTION_SECONDS = 10.0


class DevCluster:
    """One API server plus its HTTP front end, bound to 127.0.0.1 (port 0 = a free port)."""

    CONTEXT = "devcluster"  # the cluster, user and context name in the kubeconfigs it writes

    def __init__(self, *, port: int = 0, now: Clock = utc_now, history_limit: int = HISTORY_LIMIT,
                 bookmark_interval: float = BOOKMARK_INTERVAL,
                 compaction_seconds: float | None = COMPACTION_SECONDS) -> None:
        self.api = ApiServer(now=now, history_limit=history_limit)
        self.faults = Faults(self.api).install()
        self.webhooks = WebhookChain(self.api, faults=self.faults).install()
        self.conversions = ConversionWebhooks(self.api, self.webhooks.services).install()
        self.http = HttpFrontend(self.api, bookmark_interval)
        self.http.debug_handlers["faults"] = self.faults.serve_http
        self._port = port
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.compaction_seconds = compaction_seconds
        self._compactor: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---------------------------------------------------------------- in the caller's loop

    async def start(self) -> DevCluster:
        self._loop = asyncio.get_running_loop()
        await self._listen(self._port)
        if self.compaction_seconds:
            self._compactor = asyncio.create_task(self._compacting(self.compaction_seconds))
        return self

    async def restart(self, down_seconds: float = 0.0) -> None:
        """What clients see of a kube-apiserver restart: watches ended, requests in flight given a
        second to finish, every connection closed, nothing listening for `down_seconds`, then the same
        port served again. The stored objects stay, as etcd keeps them."""
        self.http.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        await asyncio.sleep(down_seconds)
        await self._listen(self.port)

    async def _listen(self, port: int) -> None:
        self._runner = web.AppRunner(self.http.app(), access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        server = site._server  # aiohttp exposes the bound socket only here
        assert isinstance(server, asyncio.base_events.Server)
        self.port = int(server.sockets[0].getsockname()[1])
        self.http.address = f"127.0.0.1:{self.port}"

    async def _compacting(self, seconds: float) -> None:
        """Each tick compacts to the revision of the tick before, as the apiserver's compactor does:
        a resourceVersion stays watchable for one to two intervals, then a watch from it is 410 Gone."""
        previous = self.api.store.revision
        while True:
            await asyncio.sleep(seconds)
            self.api.store.compact_to(previous)
            previous = self.api.store.revision

    async def aclose(self) -> None:
        if self._compactor is not None:
            self._compactor.cancel()
            self._compactor = None
        self.http.close_watches()
        await self.webhooks.aclose()
        await self.conversions.aclose()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DevCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---------------------------------------------------------------- in a background thread

    def start_in_thread(self) -> DevCluster:
        """Run the server on its own event loop in a daemon thread; returns once it listens."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as e:
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.aclose())
            loop.close()

        self._thread = threading.Thread(target=run, name="devcluster", daemon=True)
        self._thread.start()
        ready.wait()
        if errors:
            raise errors[0]
        return self

    def call(self, factory: Callable[[], Coroutine[Any, Any, T]] | Awaitable[T], timeout: float = 30.0) -> T:
        """Run a coroutine on the server's loop from another thread and return its result."""
        assert self._loop is not None
        coro = factory() if callable(factory) else factory

        async def wrap() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrap(), self._loop).result(timeout)

    def stop(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self.http.close_watches)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._thread = None

    # ---------------------------------------------------------------- clients

    def kubeconfig(self, context: str = CONTEXT) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": context, "preferences": {},
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "devcluster"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                       "namespace": "default"}}],
        }

    def write_kubeconfig(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        return target
