"""The operator's Prometheus metrics and its probe server (/metrics, /healthz, /readyz).

Each `Metrics` owns its own registry (not prometheus-client's global one) so tests and two operators
in one process stay apart. The admission loop (its queue status writer drops a deleted ClusterQueue's
series) and the TopologyUngater record into it; `serve_operator` starts `serve_probes` on the metrics
port of `tasq run`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
        self._queues: set[str] = set()  # the label sets reported, so a deleted queue's can be removed
        self._usage: set[tuple[str, str, str]] = set()

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
        return self._queues | {queue for queue, _, _ in self._usage}

    def cluster_queue_deleted(self, cluster_queue: str) -> None:
        """Drop every series of a deleted ClusterQueue so it stops being reported."""
        if cluster_queue in self._queues:
            self._queues.discard(cluster_queue)
            self.pending_workloads.remove(cluster_queue)
            self.admitted_workloads.remove(cluster_queue)
        for labels in [u for u in self._usage if u[0] == cluster_queue]:
            self._usage.discard(labels)
            self.resource_usage.remove(*labels)

    def gate_removed(self, seconds: float) -> None:
        self.gate_removal_latency.observe(max(seconds, 0.0))

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


@dataclass
class ProbeServer:
    """A running probe server; `port` is the bound port (useful when 0 was asked for)."""

    runner: web.AppRunner
    port: int

    async def close(self) -> None:
        await self.runner.cleanup()


async def serve_probes(host: str, port: int, ready: Callable[[], bool],
                       metrics: Metrics | None = None) -> ProbeServer:
    """Serve /healthz (the process answers), /readyz (200 when `ready()`, else 503) and /metrics.

    /metrics answers 404 when no `metrics` is given. Port 0 picks a free port (see `ProbeServer.port`).
    """
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        ok = ready()
        return web.Response(status=200 if ok else 503, text="ok" if ok else "not ready")

    async def scrape(_: web.Request) -> web.Response:
        if metrics is None:
            raise web.HTTPNotFound(text="no metrics registry")
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get(c.PROBE_PATH_HEALTHZ, healthz)
    app.router.add_get(c.PROBE_PATH_READYZ, readyz)
    app.router.add_get(c.PROBE_PATH_METRICS, scrape)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return ProbeServer(runner, int(runner.addresses[0][1]))
