"""The TopologyUngater: releases an admitted Workload's gated pods into their topology slices.

The operator's EventRouter calls `notify(namespace, workload)` on every change of a Workload or of
one of its pods; `run()` gathers those for
`batch_seconds` per Workload, asks `source` for an `UngatingInput`, plans with the pure
`plan_ungating` and sends one strategic-merge patch per pod (remove only our gate, add the slice's
nodeSelector) with at most `parallelism` in flight, as raw JSON over the kubernetes.aio client's
connections (`RawPodPatcher`). Only runs while the leader gate is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes.aio.client import ApiClient, CoreV1Api
from yarl import URL

from controller.api import constants as c
from controller.core.ungating import Ungate, UngatingInput, plan_ungating
from controller.kube.metrics import Metrics

log = logging.getLogger(__name__)

WorkloadKey = tuple[str, str]  # (namespace, workload name)
Source = Callable[[str, str], UngatingInput | None]

# Errors after which the same plan may succeed on a fresh look (conflict, throttling, server trouble).
_RETRIABLE = frozenset({409, 429, 500, 502, 503, 504})


PATCH_TIMEOUT_S = 30.0
"""Give up on one pod patch after this long (then it is retried like a 503)."""


def ungate_patch(ungate: Ungate) -> dict[str, Any]:
    """The one patch that releases a pod: our gate removed (other gates kept), the slice's labels added.

    The uid makes the patch apply only to the pod that was planned, not a namesake created since.
    """
    return {
        "metadata": {"uid": ungate.uid},
        "spec": {
            "schedulingGates": [{"name": c.SCHEDULING_GATE_TOPOLOGY, "$patch": "delete"}],
            "nodeSelector": dict(ungate.node_selector),
        },
    }


class PatchBodies:
    """`ungate_patch` as JSON bytes, the slice's part encoded once per slice and reused for its pods.

    Equal to `json.dumps(ungate_patch(u))` byte for byte (tests check it); per pod only the uid is encoded.
    """

    def __init__(self) -> None:
        self._spec: dict[tuple[tuple[str, str], ...], bytes] = {}

    def body(self, ungate: Ungate) -> bytes:
        key = tuple(ungate.node_selector.items())
        spec = self._spec.get(key)
        if spec is None:
            whole = json.dumps(ungate_patch(ungate)).encode()
            spec = self._spec[key] = whole[whole.index(b', "spec": '):]
        return b'{"metadata": {"uid": ' + json.dumps(ungate.uid).encode() + b"}" + spec


class PodPatching(Protocol):
    """Where ungate patches go: `RawPodPatcher` in the operator, a fake in unit tests."""

    async def refresh(self) -> None:
        """Called once before each batch of patches (credentials may have rotated)."""

    async def patch_namespaced_pod(self, name: str, namespace: str, body: bytes) -> tuple[int, str]:
        """One strategic-merge PATCH of a pod: the HTTP status and, when it is not 2xx, the answer's text."""

    async def close(self) -> None:
        """Release what the patcher holds (not the ApiClient's connections); it may be used again after."""


class RawPodPatcher:
    """Sends prepared strategic-merge patch bytes over the connection pool of a kubernetes.aio ApiClient.

    The generated `CoreV1Api.patch_namespaced_pod` serialises the body through the client's models,
    and the client's session (trust_env) looks up proxies and netrc in a worker thread per request:
    at thousands of patches per Workload that was most of the ungater's CPU (bench/ungating.py).
    Here the proxy is resolved once (netrc is not read: the kubeconfig's credentials are what the API
    server checks), the auth headers once per batch (`refresh`, which runs the client's token refresh
    hook), and the body goes out as is. TLS settings and connections are the client's own (its
    connector, shared); closing the ApiClient closes them.
    """

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client
        config = api_client.configuration
        self.base = str(config.host).rstrip("/")
        self._extra: dict[str, Any] = {}
        if config.tls_server_name:
            self._extra["server_hostname"] = config.tls_server_name
        proxy: Any = config.proxy
        if proxy is None:
            with contextlib.suppress(LookupError):
                proxy, self._extra["proxy_auth"] = get_env_proxy_for_url(URL(self.base))
        if proxy is not None:
            self._extra["proxy"] = proxy
            if config.proxy_headers:
                self._extra["proxy_headers"] = config.proxy_headers
        self._headers: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None

    async def refresh(self) -> None:
        """The headers the client would send now: its defaults, cookie, bearer token, our content type."""
        headers = {str(k): str(v) for k, v in self.api_client.default_headers.items()}
        if self.api_client.cookie:
            headers["Cookie"] = str(self.api_client.cookie)
        for auth in (await self.api_client.configuration.auth_settings()).values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[str(auth["key"])] = str(auth["value"])
        headers["Content-Type"] = c.CONTENT_TYPE_STRATEGIC_MERGE_PATCH
        headers["Accept"] = "application/json"
        self._headers = headers

    def _session_now(self) -> aiohttp.ClientSession:
        """A session on the ApiClient's connector (created here if the client has sent nothing yet)."""
        if self._session is None or self._session.closed:
            rest = self.api_client.rest_client
            if rest.pool_manager is None:
                rest.pool_manager = rest._create_pool_manager()
            self._session = aiohttp.ClientSession(
                connector=rest.pool_manager.connector, connector_owner=False, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=PATCH_TIMEOUT_S))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def patch_namespaced_pod(self, name: str, namespace: str, body: bytes) -> tuple[int, str]:
        if not self._headers:
            await self.refresh()
        url = f"{self.base}/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        async with self._session_now().patch(url, data=body, headers=self._headers, **self._extra) as response:
            # Read the answer even on success: a connection goes back to the pool only once it is read.
            raw = await response.read()
            return response.status, ("" if 200 <= response.status < 300 else raw.decode("utf-8", "replace"))


def _utc_now() -> datetime:
    return datetime.now(UTC)


class TopologyUngater:
    """Batches pod events per Workload and ungates its pods; see the module docstring.

    `expectations[(namespace, workload)][uid]` holds the node selector of each pod patched but not
    yet seen ungated in the cache: the planner counts those slots as taken, so a lagging cache
    never causes a second ungate. An entry goes when the cache shows the pod ungated, terminated or
    gone, or when its patch fails. `patches` and `failures` count the API calls made (benchmarks).
    """

    def __init__(self, api: CoreV1Api | PodPatching, source: Source, metrics: Metrics | None = None,
                 batch_seconds: float = 1.0, parallelism: int = 16, *, leader: asyncio.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], datetime] = _utc_now) -> None:
        self.patcher: PodPatching = RawPodPatcher(api.api_client) if isinstance(api, CoreV1Api) else api
        self.source, self.metrics = source, metrics
        self.batch_seconds = batch_seconds
        self.leader = leader
        self.clock, self.wall_clock = clock, wall_clock
        self.expectations: dict[WorkloadKey, dict[str, Mapping[str, str]]] = {}
        self.patches = 0
        self.failures = 0
        self._semaphore = asyncio.Semaphore(parallelism)
        self._due: dict[WorkloadKey, float] = {}
        self._syncing: set[WorkloadKey] = set()
        self._heap: list[tuple[float, WorkloadKey]] = []
        self._wake = asyncio.Event()
        self._active = asyncio.Event()
        self._active.set()

    def notify(self, namespace: str, workload: str) -> None:
        """Something about this Workload or its pods changed: look at it once the batch window closes."""
        key = (namespace, workload)
        if key in self._due:
            return
        due = self.clock() + self.batch_seconds
        self._due[key] = due
        heapq.heappush(self._heap, (due, key))
        self._wake.set()

    def pause(self) -> None:
        """Stop ungating (notifications are still gathered) until `resume()`."""
        self._active.clear()

    def resume(self) -> None:
        self._active.set()

    async def run(self) -> None:
        """Until cancelled: wait for due Workloads (and the leader gate) and start a sync for each.

        Syncs of different Workloads overlap (the semaphore bounds their patches together); a
        Workload whose previous sync is still running is looked at again one batch window later.
        """
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                await self._wait_until_allowed()
                for key in self._pop_due():
                    if key in self._syncing:
                        self.notify(*key)
                        continue
                    task = asyncio.create_task(self._sync_logged(key))
                    running.add(task)
                    task.add_done_callback(running.discard)
                self._wake.clear()
                timeout = self._heap[0][0] - self.clock() if self._heap else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await self.close()

    async def close(self) -> None:
        """Close the patcher's session (`run` does on its way out; a caller of `sync` alone calls it)."""
        await self.patcher.close()

    async def _sync_logged(self, key: WorkloadKey) -> None:
        """`sync` for `run`: an unexpected error is logged and the Workload retried, never fatal."""
        self._syncing.add(key)
        try:
            await self.sync(*key)
        except Exception:
            log.exception("ungating Workload %s/%s failed; retrying", *key)
            self.notify(*key)
        finally:
            self._syncing.discard(key)

    async def _wait_until_allowed(self) -> None:
        """Return once not paused and (with a leader gate) leading; either may flip while waiting."""
        while not (self._active.is_set() and (self.leader is None or self.leader.is_set())):
            await self._active.wait()
            if self.leader is not None:
                await self.leader.wait()

    def _pop_due(self) -> list[WorkloadKey]:
        """The Workloads whose batch window has closed, removed from the queue."""
        now = self.clock()
        keys = []
        while self._heap and self._heap[0][0] <= now:
            _, key = heapq.heappop(self._heap)
            self._due.pop(key, None)
            keys.append(key)
        return keys

    async def sync(self, namespace: str, workload: str) -> int:
        """Plan and patch one Workload now; returns how many pods were ungated."""
        key = (namespace, workload)
        inp = self.source(namespace, workload)
        if inp is None:
            self.expectations.pop(key, None)
            return 0
        expected = self._observe(key, inp)
        plan = plan_ungating(inp, expected)
        if not plan.ungate:
            if not expected:
                del self.expectations[key]  # nothing in flight: keep no entry per Workload ever seen
            return 0
        created = {p.uid: p.created for p in inp.pods}
        for u in plan.ungate:
            expected[u.uid] = u.node_selector
        bodies = PatchBodies()
        await self.patcher.refresh()
        results = await asyncio.gather(*(self._patch(namespace, key, u, created[u.uid], bodies.body(u))
                                         for u in plan.ungate))
        if any(r is None for r in results):
            self.notify(namespace, workload)
        return sum(1 for r in results if r)

    def _observe(self, key: WorkloadKey, inp: UngatingInput) -> dict[str, Mapping[str, str]]:
        """Drop the expectations the cache has caught up with (pod ungated, terminated or gone)."""
        expected = self.expectations.setdefault(key, {})
        if expected:
            still_gated = {p.uid for p in inp.pods if p.gated and not p.terminated}
            for uid in [u for u in expected if u not in still_gated]:
                del expected[uid]
        return expected

    async def _patch(self, namespace: str, key: WorkloadKey, u: Ungate, created: str, body: bytes) -> bool | None:
        """Send one ungate patch. True: sent; False: failed for good (404, 422...); None: worth a retry.

        A failed patch changed nothing on the pod (one patch is atomic), so its expectation goes.
        """
        async with self._semaphore:
            if self.leader is not None and not self.leader.is_set():
                # Leadership was lost during the batch: the new leader plans this pod itself.
                self.expectations.get(key, {}).pop(u.uid, None)
                return False
            self.patches += 1
            try:
                status, text = await self.patcher.patch_namespaced_pod(u.pod, namespace, body)
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                return self._failed(key, u, 503, f"{type(e).__name__}: {e}")
            if not 200 <= status < 300:
                return self._failed(key, u, status, f"{status} {text}")
        if self.metrics is not None:
            self.metrics.gate_removed(self._age_seconds(created))
        return True

    def _failed(self, key: WorkloadKey, u: Ungate, status: int, why: str) -> bool | None:
        self.failures += 1
        self.expectations.get(key, {}).pop(u.uid, None)
        retriable = status in _RETRIABLE
        log.log(logging.INFO if retriable else logging.WARNING,
                "ungating pod %s/%s of Workload %s failed: %s", key[0], u.pod, key[1], why)
        return None if retriable else False

    def _age_seconds(self, created: str) -> float:
        try:
            born = datetime.fromisoformat(created)
        except ValueError:
            return 0.0
        return (self.wall_clock() - born).total_seconds()
