"""The operator's Prometheus metrics, the HTTPS server of /metrics and the plain probe server.

Each `Metrics` owns its own registry (not prometheus-client's global one) so tests and two operators
in one process stay apart. The admission loop (its queue status writer drops a deleted ClusterQueue's
series), the TopologyUngater and the eviction (controller.kube.evicting) record into it. `serve_metrics` serves /metrics over TLS, each
request authenticated and authorized by an `AccessReviewer` (TokenReview + SubjectAccessReview);
`serve_probes` serves /healthz and /readyz on their own plain-HTTP port, which the kubelet calls
without a token. `serving_endpoints` runs both for `serve_operator` as `Endpoints` (the flags of
`tasq run`) say.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from controller.api import constants as c
from controller.kube.api import KubeApi
from controller.kube.authorizing import AccessReviewer
from webhooks.certificates import write_serving_files
from webhooks.serving import ReloadingTls, TlsFiles

log = logging.getLogger(__name__)

METRICS_VERB = "get"
"""The SubjectAccessReview verb of a scrape: the lowercased method, as kube-apiserver names the verb
of a non-resource request (only GET is served)."""
CERT_RELOAD_INTERVAL_S = 10.0

# Admission cycles take milliseconds to about a second at 10,000 nodes; gate removal up to minutes.
_ATTEMPT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_GATE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """The operator's metrics in one private registry; methods name what happened."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.admission_attempts = Counter(
            c.METRIC_ADMISSION_ATTEMPTS.removesuffix("_total"),
            "Workload admission attempts by result (success or inadmissible).", ["result"], registry=r)
        self.admission_attempt_duration = Histogram(
            c.METRIC_ADMISSION_ATTEMPT_DURATION, "Time one admission attempt of one Workload took.",
            ["result"], buckets=_ATTEMPT_BUCKETS, registry=r)
        self.pending_workloads = Gauge(
            c.METRIC_PENDING_WORKLOADS, "Workloads waiting for admission per ClusterQueue.",
            ["cluster_queue"], registry=r)
        self.admitted_workloads = Gauge(
            c.METRIC_ADMITTED_WORKLOADS, "Admitted, unfinished Workloads per ClusterQueue.",
            ["cluster_queue"], registry=r)
        self.resource_usage = Gauge(
            c.METRIC_CLUSTER_QUEUE_RESOURCE_USAGE,
            "Quota in use per ClusterQueue, flavor and resource (cores, bytes or units).",
            ["cluster_queue", "flavor", "resource"], registry=r)
        self.gate_removal_latency = Histogram(
            c.METRIC_GATE_REMOVAL_LATENCY, "Time from a gated pod's creation to its topology gate's removal.",
            buckets=_GATE_BUCKETS, registry=r)
        self.preempted_workloads = Counter(
            c.METRIC_PREEMPTED_WORKLOADS.removesuffix("_total"),
            "Workloads preempted, per ClusterQueue of the preemptor and Preempted reason (InClusterQueue, "
            "InCohortReclamation, InCohortReclaimWhileBorrowing).", ["preempting_cluster_queue", "reason"], registry=r)
        self.evicted_workloads = Counter(
            c.METRIC_EVICTED_WORKLOADS.removesuffix("_total"),
            "Workloads evicted, per ClusterQueue of the evicted workload and Evicted reason (Preempted, "
            "Deactivated).", ["cluster_queue", "reason"], registry=r)
        self._queues: set[str] = set()  # the label sets reported, so a deleted queue's can be removed
        self._usage: set[tuple[str, str, str]] = set()
        self._evicted: set[tuple[str, str]] = set()

    def admission_attempted(self, result: str, seconds: float) -> None:
        """One Workload's admission attempt ended with `result` (ADMISSION_RESULT_*) after `seconds`."""
        self.admission_attempts.labels(result=result).inc()
        self.admission_attempt_duration.labels(result=result).observe(seconds)

    def cluster_queue_counted(self, cluster_queue: str, pending: int, admitted: int) -> None:
        self._queues.add(cluster_queue)
        self.pending_workloads.labels(cluster_queue=cluster_queue).set(pending)
        self.admitted_workloads.labels(cluster_queue=cluster_queue).set(admitted)

    def resource_used(self, cluster_queue: str, flavor: str, resource: str, amount: float) -> None:
        self._usage.add((cluster_queue, flavor, resource))
        self.resource_usage.labels(cluster_queue=cluster_queue, flavor=flavor, resource=resource).set(amount)

    def cluster_queues_reported(self) -> set[str]:
        """The ClusterQueues with series in this registry (counts or usage)."""
        return self._queues | {queue for queue, _, _ in self._usage} | {queue for queue, _ in self._evicted}

    def cluster_queue_deleted(self, cluster_queue: str) -> None:
        """Drop every series of a deleted ClusterQueue so it stops being reported."""
        if cluster_queue in self._queues:
            self._queues.discard(cluster_queue)
            self.pending_workloads.remove(cluster_queue)
            self.admitted_workloads.remove(cluster_queue)
        for labels in [u for u in self._usage if u[0] == cluster_queue]:
            self._usage.discard(labels)
            self.resource_usage.remove(*labels)
        for pair in [e for e in self._evicted if e[0] == cluster_queue]:
            self._evicted.discard(pair)
            self.evicted_workloads.remove(*pair)

    def preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        """A workload was preempted (its eviction written) for a workload of `preempting_cluster_queue`."""
        self.preempted_workloads.labels(preempting_cluster_queue=preempting_cluster_queue, reason=reason).inc()

    def evicted(self, cluster_queue: str, reason: str) -> None:
        """A workload admitted in `cluster_queue` was evicted (Evicted=True written) for `reason`."""
        self._evicted.add((cluster_queue, reason))
        self.evicted_workloads.labels(cluster_queue=cluster_queue, reason=reason).inc()

    def gate_removed(self, seconds: float) -> None:
        self.gate_removal_latency.observe(max(seconds, 0.0))

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


@dataclass
class RunningServer:
    """A running HTTP(S) server; `port` is the bound port (useful when 0 was asked for)."""

    runner: web.AppRunner
    port: int
    scheme: str = "http"
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.runner.cleanup()


async def _start(app: web.Application, host: str, port: int, tls: ReloadingTls | None) -> RunningServer:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls.front() if tls is not None else None)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return RunningServer(runner, int(runner.addresses[0][1]), "https" if tls is not None else "http")


async def serve_probes(host: str, port: int, ready: Callable[[], bool]) -> RunningServer:
    """Serve /healthz (the process answers) and /readyz (200 when `ready()`, else 503) over plain
    HTTP, unauthenticated (the kubelet probes them). Port 0 picks a free port."""
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        ok = ready()
        return web.Response(status=200 if ok else 503, text="ok" if ok else "not ready")

    app = web.Application()
    app.router.add_get(c.PROBE_PATH_HEALTHZ, healthz)
    app.router.add_get(c.PROBE_PATH_READYZ, readyz)
    return await _start(app, host, port, None)


async def serve_metrics(host: str, port: int, metrics: Metrics, reviewer: AccessReviewer | None,
                        tls: ReloadingTls | None, reload_interval: float = CERT_RELOAD_INTERVAL_S) -> RunningServer:
    """Serve /metrics: over `tls` (its files re-read every `reload_interval` s) with every request
    reviewed by `reviewer` (401 without a valid token, 403 without `get /metrics`); with neither,
    plain and open (`tasq run --metrics-insecure`, loopback only). Port 0 picks a free port."""
    async def scrape(request: web.Request) -> web.Response:
        if reviewer is not None:
            verdict = await reviewer.review(request.headers.get("Authorization"), METRICS_VERB, request.path)
            if not verdict.allowed:
                log.info("Metrics request from %s refused %d %s: %s", request.remote, verdict.status, verdict.reason,
                         verdict.message)
                headers = {"WWW-Authenticate": 'Bearer realm="tasq metrics"'} if verdict.status == 401 else {}
                return web.Response(status=verdict.status, text=verdict.message + "\n", headers=headers)
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get(c.PROBE_PATH_METRICS, scrape, allow_head=False)
    server = await _start(app, host, port, tls)
    if tls is not None:
        server.tasks.append(asyncio.create_task(_reload_every(tls, reload_interval), name="tasq-metrics-cert"))
    return server


async def _reload_every(tls: ReloadingTls, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        tls.reload_if_changed()


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Endpoints:
    """Where and how the operator serves /metrics and the probes (`tasq run`'s flags). A port of
    None serves nothing. `metrics_cert_dir` holds tls.crt/tls.key (a mounted Secret); without it a
    self-signed certificate for 127.0.0.1/localhost is generated. `metrics_insecure` serves plain,
    unauthenticated HTTP and is only allowed on a loopback `metrics_host`."""

    metrics_host: str = "0.0.0.0"
    metrics_port: int | None = None
    metrics_cert_dir: Path | None = None
    metrics_insecure: bool = False
    probe_host: str = "0.0.0.0"
    probe_port: int | None = None


def metrics_tls(cert_dir: Path | None, scratch: contextlib.ExitStack) -> TlsFiles:
    """The certificate /metrics is served with: tls.crt/tls.key in `cert_dir` (a mounted Secret), or
    a fresh self-signed pair for 127.0.0.1/localhost in a directory `scratch` removes (a process run
    outside a cluster, as the local webhooks do)."""
    if cert_dir is not None:
        return TlsFiles(cert_dir / c.WEBHOOK_CERT_FILE, cert_dir / c.WEBHOOK_KEY_FILE)
    directory = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="tasq-metrics-")))
    write_serving_files(directory, datetime.now(UTC))
    return TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)


@contextlib.asynccontextmanager
async def serving_endpoints(endpoints: Endpoints, api: KubeApi, ready: Callable[[], bool],
                            metrics: Metrics) -> AsyncIterator[tuple[RunningServer | None, RunningServer | None]]:
    """While inside: (metrics server, probe server) as `endpoints` say (None where no port is given);
    both closed on exit."""
    with contextlib.ExitStack() as scratch:
        async with contextlib.AsyncExitStack() as stack:
            probes = served = None
            if endpoints.probe_port is not None:
                probes = await serve_probes(endpoints.probe_host, endpoints.probe_port, ready)
                stack.push_async_callback(probes.close)
                log.info("Probes (/healthz, /readyz) on http://%s:%d", endpoints.probe_host, probes.port)
            if endpoints.metrics_port is not None:
                if endpoints.metrics_insecure and not is_loopback(endpoints.metrics_host):
                    raise ValueError(f"unauthenticated metrics only on a loopback host, not {endpoints.metrics_host!r}")
                if endpoints.metrics_insecure:
                    served = await serve_metrics(endpoints.metrics_host, endpoints.metrics_port, metrics, None, None)
                else:
                    files = metrics_tls(endpoints.metrics_cert_dir, scratch)
                    served = await serve_metrics(endpoints.metrics_host, endpoints.metrics_port, metrics,
                                                 AccessReviewer(api), ReloadingTls(files, "metrics"))
                stack.push_async_callback(served.close)
                certificate = f"from {endpoints.metrics_cert_dir}" if endpoints.metrics_cert_dir else "self-signed"
                how = ("unauthenticated" if endpoints.metrics_insecure
                       else f"TokenReview + SubjectAccessReview, certificate {certificate}")
                log.info("Metrics on %s://%s:%d/metrics (%s)", served.scheme, endpoints.metrics_host, served.port, how)
            yield served, probes
