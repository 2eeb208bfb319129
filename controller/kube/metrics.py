"""The operator's Prometheus metrics, the HTTPS server of /metrics and the plain probe server.

Each `Metrics` owns its own registry (not prometheus-client's global one) so tests and two operators
in one process stay apart. The admission loop (its queue status writer drops a deleted ClusterQueue's
series), the TopologyUngater and the eviction (controller.kube.evicting) record into it. `serve_metrics` serves /metrics over TLS, each
request authenticated and authorized by an `AccessReviewer` (TokenReview + SubjectAccessReview);
`serve_probes` serves /healthz and /readyz on their own plain-HTTP port, which the kubelet calls
without a token. `serving_endpoints` runs both for `serve_operator` as `Endpoints` (the flags of
`tasq run`) say; the same HTTPS server carries the visibility API (controller.kube.visibility).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import platform
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography import x509
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from controller.api import constants as c
from controller.cache.cluster import ClusterCache
from controller.core.admission.fragmentation import fragmented_free, largest_gang
from controller.core.request_headers import CONFIG_MAP_NAME, CONFIG_MAP_NAMESPACE, RequestHeaderConfig
from controller.kube.api import CONFIG_MAPS, ApiError, KubeApi
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
# controller-runtime's webhook latency buckets (prometheus' defaults).
_WEBHOOK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def kueue_wait_buckets(count: int) -> tuple[float, ...]:
    """Kueue's wait-time buckets: 1 s, then `count - 1` doubling from 2.5 s."""
    return (1.0, *(2.5 * 2 ** i for i in range(count - 1)))


@dataclass(frozen=True)
class BuildInfo:
    """The labels of kueue_build_info, Kueue's names: go_version carries the Python version and
    compiler the Python implementation (tasq is no Go program)."""

    git_version: str
    git_commit: str
    build_date: str = ""
    go_version: str = field(default_factory=lambda: f"python{platform.python_version()}")
    compiler: str = field(default_factory=platform.python_implementation)
    platform: str = field(default_factory=lambda: f"{sys.platform}/{platform.machine()}")


@dataclass(frozen=True)
class QueueFigures:
    """What one ClusterQueue reports after a cycle: its waiting Workloads split as Kueue's status
    label (`active`: not yet tried; `inadmissible`: told why they wait), its reserving and admitted
    counts (the same in tasq: it has no admission checks), its status, and per (flavor, resource)
    the nominal quota and the usage, in Kueue's units (cores, bytes, units)."""

    cohort: str
    pending_active: int
    pending_inadmissible: int
    admitted: int
    status: str = "active"
    nominal: Mapping[tuple[str, str], float] = field(default_factory=dict)
    usage: Mapping[tuple[str, str], float] = field(default_factory=dict)


def certificate_expiry(path: Path) -> float | None:
    """The notAfter of the PEM certificate at `path` in seconds since the epoch; None when unreadable."""
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None
    return cert.not_valid_after_utc.timestamp()


class Metrics:
    """The operator's metrics in one private registry; methods name what happened. Series under
    Kueue's names carry Kueue's labels, `replica_role` included (`role()` at the time of
    recording); a ClusterQueue's series go when it is deleted."""

    def __init__(self, build: BuildInfo | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.role: Callable[[], str] = lambda: c.REPLICA_ROLE_STANDALONE
        r = self.registry
        role, cq, pc = "replica_role", "cluster_queue", "priority_class"
        resource_labels = ["cohort", cq, "flavor", "resource", role]
        build = build if build is not None else BuildInfo("unknown", "unknown")
        Gauge(c.METRIC_BUILD_INFO, "tasq build information: 1, labelled as Kueue's kueue_build_info.",
              list(BuildInfo.__dataclass_fields__), registry=r).labels(**asdict(build)).set(1)
        self.admission_attempts = Counter(
            c.METRIC_ADMISSION_ATTEMPTS.removesuffix("_total"),
            "Workload admission attempts by result (success or inadmissible).", ["result", role], registry=r)
        self.admission_attempt_duration = Histogram(
            c.METRIC_ADMISSION_ATTEMPT_DURATION, "Time one admission attempt of one Workload took.",
            ["result", role], buckets=_ATTEMPT_BUCKETS, registry=r)
        self.pending_workloads = Gauge(
            c.METRIC_PENDING_WORKLOADS, "Waiting Workloads per ClusterQueue: active (not yet tried) or "
            "inadmissible (told why they wait).", [cq, "status", role], registry=r)
        self.reserving_workloads = Gauge(
            c.METRIC_RESERVING_ACTIVE_WORKLOADS, "Workloads reserving quota per ClusterQueue.", [cq, role], registry=r)
        self.admitted_active_workloads = Gauge(
            c.METRIC_ADMITTED_ACTIVE_WORKLOADS, "Admitted, unfinished Workloads per ClusterQueue.", [cq, role],
            registry=r)
        self.cluster_queue_status = Gauge(
            c.METRIC_CLUSTER_QUEUE_STATUS, "1 for the ClusterQueue's status (pending, active or terminating).",
            [cq, "status", role], registry=r)
        self.quota_reserved = Counter(
            c.METRIC_QUOTA_RESERVED_WORKLOADS.removesuffix("_total"),
            "Workloads that got a quota reservation, per ClusterQueue.", [cq, pc, role], registry=r)
        self.quota_reserved_wait = Histogram(
            c.METRIC_QUOTA_RESERVED_WAIT_TIME, "Time from a Workload's creation (or requeue) to its quota "
            "reservation.", [cq, pc, role], buckets=kueue_wait_buckets(14), registry=r)
        self.admitted = Counter(
            c.METRIC_ADMITTED_WORKLOADS.removesuffix("_total"), "Admitted Workloads per ClusterQueue.",
            [cq, pc, role], registry=r)
        self.admission_wait = Histogram(
            c.METRIC_ADMISSION_WAIT_TIME, "Time from a Workload's creation (or requeue) to its admission.",
            [cq, pc, role], buckets=kueue_wait_buckets(16), registry=r)
        self.resource_usage = Gauge(
            c.METRIC_CLUSTER_QUEUE_RESOURCE_USAGE,
            "Quota in use per ClusterQueue, flavor and resource (cores, bytes or units).", resource_labels, registry=r)
        self.resource_reservation = Gauge(
            c.METRIC_CLUSTER_QUEUE_RESOURCE_RESERVATION,
            "Quota reserved per ClusterQueue, flavor and resource (as usage: tasq has no admission checks).",
            resource_labels, registry=r)
        self.nominal_quota = Gauge(
            c.METRIC_CLUSTER_QUEUE_NOMINAL_QUOTA, "Nominal quota per ClusterQueue, flavor and resource.",
            resource_labels, registry=r)
        self.webhook_requests = Counter(
            c.METRIC_WEBHOOK_REQUESTS.removesuffix("_total"), "Admission requests by webhook path and HTTP code.",
            ["webhook", "code"], registry=r)
        self.webhook_latency = Histogram(
            c.METRIC_WEBHOOK_LATENCY, "Time to answer one admission request.", ["webhook"],
            buckets=_WEBHOOK_BUCKETS, registry=r)
        self.gate_removal_latency = Histogram(
            c.METRIC_GATE_REMOVAL_LATENCY, "Time from a gated pod's creation to its topology gate's removal.",
            buckets=_GATE_BUCKETS, registry=r)
        self.preempted_workloads = Counter(
            c.METRIC_PREEMPTED_WORKLOADS.removesuffix("_total"),
            "Workloads preempted, per ClusterQueue of the preemptor and Preempted reason (InClusterQueue, "
            "InCohortReclamation, InCohortReclaimWhileBorrowing).", ["preempting_cluster_queue", "reason", "replica_role"],
            registry=r)
        self.evicted_workloads = Counter(
            c.METRIC_EVICTED_WORKLOADS.removesuffix("_total"),
            "Workloads evicted, per ClusterQueue of the evicted workload and Evicted reason (Preempted, "
            "Deactivated).", ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
            registry=r)
        self.fragmented_gpus = Gauge(
            c.METRIC_TOPOLOGY_FRAGMENTED_GPUS, "Free GPUs of a topology flavor in domains of one level too "
            "small for the largest waiting gang.", ["flavor", "level"], registry=r)
        self.largest_pending_gang = Gauge(
            c.METRIC_LARGEST_PENDING_GANG_GPUS, "GPUs the largest waiting Workload needs (0: none waits).",
            registry=r)
        self.leader = Gauge(c.METRIC_LEADER, "1 while this replica holds the leader Lease.", registry=r)
        self.certificate_expiry = Gauge(
            c.METRIC_CERTIFICATE_EXPIRY, "notAfter of a serving certificate (webhook, metrics), seconds since "
            "the epoch.", ["certificate"], registry=r)
        self._series: dict[str, set[tuple[Gauge | Counter | Histogram, tuple[str, ...]]]] = {}
        """ClusterQueue -> the (metric, label values) reported for it, so its deletion removes them."""
        self._fragments: set[tuple[str, str]] = set()

    def _track(self, cluster_queue: str, metric: Gauge | Counter | Histogram, *labels: str) -> Any:
        self._series.setdefault(cluster_queue, set()).add((metric, labels))
        return metric.labels(*labels)

    def leading(self, is_leader: Callable[[], bool]) -> None:
        """tasq_leader and replica_role follow `is_leader` (read at each scrape and record)."""
        self.leader.set_function(lambda: 1.0 if is_leader() else 0.0)
        self.role = lambda: c.REPLICA_ROLE_LEADER if is_leader() else c.REPLICA_ROLE_FOLLOWER

    def certificate_watched(self, name: str, cert: Path) -> None:
        """tasq_certificate_expiry_timestamp_seconds{certificate=name} reads `cert` at each scrape
        (a renewed file counts at once); an unreadable file reports 0."""
        self.certificate_expiry.labels(certificate=name).set_function(lambda: certificate_expiry(cert) or 0.0)

    def admission_attempted(self, result: str, seconds: float) -> None:
        """One Workload's admission attempt ended with `result` (ADMISSION_RESULT_*) after `seconds`."""
        role = self.role()
        self.admission_attempts.labels(result, role).inc()
        self.admission_attempt_duration.labels(result, role).observe(seconds)

    def workload_admitted(self, cluster_queue: str, priority_class: str, waited_s: float) -> None:
        """A Workload got its quota reservation, which in tasq is its admission, after `waited_s`."""
        role, waited = self.role(), max(waited_s, 0.0)
        self._track(cluster_queue, self.quota_reserved, cluster_queue, priority_class, role).inc()
        self._track(cluster_queue, self.quota_reserved_wait, cluster_queue, priority_class, role).observe(waited)
        self._track(cluster_queue, self.admitted, cluster_queue, priority_class, role).inc()
        self._track(cluster_queue, self.admission_wait, cluster_queue, priority_class, role).observe(waited)

    def cluster_queue_reported(self, name: str, figures: QueueFigures) -> None:
        """Set a ClusterQueue's gauges; a (flavor, resource) it no longer has stops being reported."""
        role = self.role()
        before = {s for s in self._series.get(name, set()) if isinstance(s[0], Gauge)}
        now: set[tuple[Gauge | Counter | Histogram, tuple[str, ...]]] = set()

        def put(metric: Gauge, value: float, *labels: str) -> None:
            metric.labels(*labels).set(value)
            now.add((metric, labels))
        put(self.pending_workloads, figures.pending_active, name, c.PENDING_STATUS_ACTIVE, role)
        put(self.pending_workloads, figures.pending_inadmissible, name, c.PENDING_STATUS_INADMISSIBLE, role)
        put(self.reserving_workloads, figures.admitted, name, role)
        put(self.admitted_active_workloads, figures.admitted, name, role)
        for status in c.CLUSTER_QUEUE_STATUSES:
            put(self.cluster_queue_status, 1.0 if status == figures.status else 0.0, name, status, role)
        for (flavor, resource) in sorted({*figures.nominal, *figures.usage}):
            labels: tuple[str, ...] = (figures.cohort, name, flavor, resource, role)
            put(self.nominal_quota, figures.nominal.get((flavor, resource), 0.0), *labels)
            put(self.resource_usage, figures.usage.get((flavor, resource), 0.0), *labels)
            put(self.resource_reservation, figures.usage.get((flavor, resource), 0.0), *labels)
        for metric, labels in before - now:
            metric.remove(*labels)
        kept = {s for s in self._series.get(name, set()) if not isinstance(s[0], Gauge)}
        self._series[name] = kept | now

    def cluster_queues_reported(self) -> set[str]:
        """The ClusterQueues with series in this registry."""
        return set(self._series)

    def cluster_queue_deleted(self, cluster_queue: str) -> None:
        """Drop every series of a deleted ClusterQueue so it stops being reported."""
        for metric, labels in self._series.pop(cluster_queue, set()):
            metric.remove(*labels)

    def fragmentation_reported(self, largest_gang_gpus: float, free: Mapping[tuple[str, str], float]) -> None:
        """tasq's fragmentation figures: the largest waiting gang's GPUs and, per (flavor, level),
        the free GPUs in domains too small for it; a (flavor, level) no longer reported is dropped."""
        self.largest_pending_gang.set(largest_gang_gpus)
        for key, value in free.items():
            self.fragmented_gpus.labels(*key).set(value)
        for gone in self._fragments - free.keys():
            self.fragmented_gpus.remove(*gone)
        self._fragments = set(free)

    def webhook_answered(self, path: str, code: int, seconds: float) -> None:
        """One admission request answered (controller-runtime's series; `path` is the webhook's)."""
        self.webhook_requests.labels(path, str(code)).inc()
        self.webhook_latency.labels(path).observe(max(seconds, 0.0))

    def preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        """A workload was preempted (its eviction written) for a workload of `preempting_cluster_queue`."""
        self._track(preempting_cluster_queue, self.preempted_workloads, preempting_cluster_queue, reason,
                    self.role()).inc()

    def evicted(self, cluster_queue: str, reason: str) -> None:
        """A workload admitted in `cluster_queue` was evicted (Evicted=True written) for `reason`."""
        self._track(cluster_queue, self.evicted_workloads, cluster_queue, reason, "", "", self.role()).inc()

    def gate_removed(self, seconds: float) -> None:
        self.gate_removal_latency.observe(max(seconds, 0.0))

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def _parsed(stamp: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(stamp)) if stamp else None
    except ValueError:
        return None


def queued_seconds(workload: Mapping[str, Any], now: datetime) -> float:
    """Seconds a Workload has been queued at `now`: since its last requeue (a Requeued=True
    condition: evicted and queued again) or else since its creation, as Kueue measures wait times."""
    since = _parsed((workload.get("metadata") or {}).get("creationTimestamp"))
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Requeued" and cond.get("status") == "True":
            since = _parsed(cond.get("lastTransitionTime")) or since
    return max((now - since).total_seconds(), 0.0) if since is not None else 0.0


def priority_class_of(workload: Mapping[str, Any]) -> str:
    """The Workload's priority class name (v1beta1 priorityClassName, v1beta2 priorityClassRef), or ""."""
    spec = workload.get("spec") or {}
    ref = spec.get("priorityClassRef") or {}
    return str(spec.get("priorityClassName") or ref.get("name") or "")


def queue_figures(cache: ClusterCache, statuses: Mapping[str, Mapping[str, Any]],
                  waiting: Mapping[str, str]) -> dict[str, QueueFigures]:
    """Each ClusterQueue's figures from the cache after a cycle: `statuses` are the queue statuses
    just computed (name -> status), `waiting` the waiting Workloads (key -> its ClusterQueue). A
    waiting Workload with QuotaReserved=False was told why it waits (inadmissible); one without
    was not tried yet (active)."""
    snapshot = cache.snapshot()
    active: dict[str, int] = {}
    inadmissible: dict[str, int] = {}
    for key, cq in waiting.items():
        entry = cache.workloads.get(key)
        if entry is None:
            continue
        told = entry.obj.condition(c.CONDITION_QUOTA_RESERVED)
        counts = inadmissible if told is not None and told.status == "False" else active
        counts[cq] = counts.get(cq, 0) + 1
    out: dict[str, QueueFigures] = {}
    for name, status in statuses.items():
        quota = snapshot.cluster_queues.get(name)
        model = cache.cluster_queues.get(name)
        nominal = {(flavor.name, resource): amount.nominal / 1000
                   for group in (quota.groups if quota is not None else ())
                   for flavor in group.flavors for resource, amount in flavor.resources.items()}
        usage = {key: milli / 1000 for key, milli in snapshot.quota.used.get(name, {}).items()}
        conditions = status.get("conditions") or []
        is_active = any(cond.get("type") == c.CONDITION_ACTIVE and cond.get("status") == "True"
                        for cond in conditions)
        state = ("terminating" if model is not None and model.metadata.deletion_timestamp
                 else "active" if is_active else "pending")
        out[name] = QueueFigures(cohort=(quota.cohort if quota is not None else None) or "",
                                 pending_active=active.get(name, 0), pending_inadmissible=inadmissible.get(name, 0),
                                 admitted=int(status.get("admittedWorkloads", 0)), status=state,
                                 nominal=nominal, usage=usage)
    return out


def fragmentation(cache: ClusterCache, waiting: Iterable[str]) -> tuple[int, dict[tuple[str, str], float]]:
    """(GPUs the largest waiting Workload needs, (flavor, level) -> GPUs free in domains too small
    for it) over every topology flavor; one numpy pass over each flavor's nodes."""
    snapshot = cache.snapshot()
    infos = [entry.info for key in waiting if (entry := cache.workloads.get(key)) is not None]
    need = largest_gang(infos, c.GPU_RESOURCE)
    free: dict[tuple[str, str], float] = {}
    for name, flavor in snapshot.flavors.items():
        if flavor.topology is not None:
            for level, milli in fragmented_free(flavor.topology, snapshot.usage, c.GPU_RESOURCE, need).items():
                free[(name, level)] = milli / 1000
    return need // 1000, free


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


async def serve_probes(host: str, port: int, not_ready: Callable[[], list[str]]) -> RunningServer:
    """Serve /healthz (the process answers) and /readyz over plain HTTP, unauthenticated (the kubelet
    probes them): 200 "ok" when `not_ready()` names nothing, else 503 with one line per reason (what
    keeps the process from acting, and the fix where there is one). Port 0 picks a free port."""
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        reasons = not_ready()
        if not reasons:
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready:\n" + "".join(f"- {reason}\n" for reason in reasons))

    app = web.Application()
    app.router.add_get(c.PROBE_PATH_HEALTHZ, healthz)
    app.router.add_get(c.PROBE_PATH_READYZ, readyz)
    return await _start(app, host, port, None)


Routes = Callable[[web.Application, AccessReviewer | None], None]
"""Adds more routes to the /metrics server, reviewed by the same reviewer (the visibility API's)."""


async def serve_metrics(host: str, port: int, metrics: Metrics, reviewer: AccessReviewer | None,
                        tls: ReloadingTls | None, reload_interval: float = CERT_RELOAD_INTERVAL_S,
                        routes: Routes | None = None) -> RunningServer:
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
    if routes is not None:
        routes(app, reviewer)
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


async def read_request_header(api: KubeApi) -> RequestHeaderConfig | None:
    """The aggregator's request-header settings from kube-system/extension-apiserver-authentication,
    read once at start; None (logged at WARNING with the reason) when they cannot be read, so requests
    the aggregator forwards (the APIService) are refused while bearer tokens keep working."""
    try:
        config_map = await api.get(CONFIG_MAPS, CONFIG_MAP_NAMESPACE, CONFIG_MAP_NAME)
    except ApiError as e:
        log.warning("Requests through the APIService (aggregator client certificates) are refused: cannot "
                    "read ConfigMap %s/%s: %s", CONFIG_MAP_NAMESPACE, CONFIG_MAP_NAME, e)
        return None
    config = RequestHeaderConfig.from_config_map(config_map.get("data") or {})
    if isinstance(config, str):
        log.warning("Requests through the APIService (aggregator client certificates) are refused: %s", config)
        return None
    log.info("Accepting aggregator client certificates (allowed names: %s; user header %s)",
             ", ".join(config.allowed_names) or "any", ", ".join(config.username_headers))
    return config


@contextlib.asynccontextmanager
async def serving_endpoints(endpoints: Endpoints, api: KubeApi, not_ready: Callable[[], list[str]],
                            metrics: Metrics, routes: Routes | None = None) -> AsyncIterator[tuple[RunningServer | None, RunningServer | None]]:
    """While inside: (metrics server, probe server) as `endpoints` say (None where no port is given);
    both closed on exit. `routes` adds to the metrics server (the visibility API)."""
    with contextlib.ExitStack() as scratch:
        async with contextlib.AsyncExitStack() as stack:
            probes = served = None
            if endpoints.probe_port is not None:
                probes = await serve_probes(endpoints.probe_host, endpoints.probe_port, not_ready)
                stack.push_async_callback(probes.close)
                log.info("Probes (/healthz, /readyz) on http://%s:%d", endpoints.probe_host, probes.port)
            if endpoints.metrics_port is not None:
                if endpoints.metrics_insecure and not is_loopback(endpoints.metrics_host):
                    raise ValueError(f"unauthenticated metrics only on a loopback host, not {endpoints.metrics_host!r}")
                if endpoints.metrics_insecure:
                    served = await serve_metrics(endpoints.metrics_host, endpoints.metrics_port, metrics, None, None,
                                                 routes=routes)
                else:
                    files = metrics_tls(endpoints.metrics_cert_dir, scratch)
                    metrics.certificate_watched("metrics", files.cert)
                    request_header = await read_request_header(api) if routes is not None else None
                    served = await serve_metrics(
                        endpoints.metrics_host, endpoints.metrics_port, metrics,
                        AccessReviewer(api, request_header=request_header),
                        ReloadingTls(files, "metrics", request_header.client_ca if request_header else None),
                        routes=routes)
                stack.push_async_callback(served.close)
                certificate = f"from {endpoints.metrics_cert_dir}" if endpoints.metrics_cert_dir else "self-signed"
                how = ("unauthenticated" if endpoints.metrics_insecure
                       else f"TokenReview + SubjectAccessReview, certificate {certificate}")
                log.info("Metrics on %s://%s:%d/metrics (%s)", served.scheme, endpoints.metrics_host, served.port, how)
            yield served, probes
