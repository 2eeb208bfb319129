"""The operator's metrics, scraped as Prometheus would: over HTTPS with a bearer token that a fake API
server reviews (200 for a metrics reader, 403 for another user, 401 without a valid token), the
certificate reloaded when its files change, plain HTTP only where asked; and the probes on their own
plain port."""

from __future__ import annotations

import asyncio
import contextlib
import platform
import ssl
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from controller.api import constants as c
from controller.kube.api import ApiError, KubeApi
from controller.kube.authorizing import AccessReviewer
from controller.kube.metrics import (
    BuildInfo,
    Endpoints,
    Metrics,
    QueueFigures,
    RunningServer,
    is_loopback,
    kueue_wait_buckets,
    priority_class_of,
    queued_seconds,
    read_request_header,
    serve_metrics,
    serve_probes,
    serving_endpoints,
)
from tests.unit.kube.test_authorizing import ReviewingApi
from webhooks.certificates import CertificateAuthority, write_serving_files
from webhooks.serving import ReloadingTls, TlsFiles


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value for every sample in a scrape."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def tls_files(directory: Path) -> TlsFiles:
    return TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)


def trusting(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


async def scrape(server: RunningServer, ca: CertificateAuthority, token: str | None,
                 path: str = "/metrics") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as http, http.get(
            f"https://127.0.0.1:{server.port}{path}", headers=headers, ssl=trusting(ca.cert_pem)) as r:
        return r.status, await r.text()


@contextlib.asynccontextmanager
async def secured(tmp_path: Path, metrics: Metrics, api: ReviewingApi,
                  reload_interval: float = 10.0) -> AsyncIterator[tuple[RunningServer, CertificateAuthority, ReloadingTls]]:
    ca = write_serving_files(tmp_path, datetime.now(UTC))
    tls = ReloadingTls(tls_files(tmp_path), "metrics")
    server = await serve_metrics("127.0.0.1", 0, metrics, AccessReviewer(api), tls, reload_interval=reload_interval)
    try:
        yield server, ca, tls
    finally:
        await server.close()


async def test_a_metrics_reader_scrapes_what_was_recorded(tmp_path: Path) -> None:
    metrics = Metrics(BuildInfo("0.1.0", "abc123"))
    metrics.admission_attempted(c.ADMISSION_RESULT_SUCCESS, 0.02)
    metrics.admission_attempted(c.ADMISSION_RESULT_INADMISSIBLE, 0.3)
    metrics.admission_attempted(c.ADMISSION_RESULT_INADMISSIBLE, 0.4)
    metrics.cluster_queue_reported("team-a", QueueFigures(
        cohort="all", pending_active=1, pending_inadmissible=2, admitted=2,
        nominal={("h100", "nvidia.com/gpu"): 128}, usage={("h100", "nvidia.com/gpu"): 64}))
    metrics.workload_admitted("team-a", "high", 3.0)
    metrics.gate_removed(1.2)
    metrics.webhook_answered("/mutate-batch-v1-job", 200, 0.004)
    async with secured(tmp_path, metrics, ReviewingApi()) as (server, ca, _), aiohttp.ClientSession() as http, \
            http.get(f"https://127.0.0.1:{server.port}/metrics", ssl=trusting(ca.cert_pem),
                     headers={"Authorization": "Bearer reader-token"}) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        got = samples(await r.text())
    role = ("replica_role", "standalone")
    build = next(labels for (name, labels) in got if name == "kueue_build_info")
    assert dict(build) == {"git_version": "0.1.0", "git_commit": "abc123", "build_date": "",
                           "go_version": f"python{platform.python_version()}",
                           "compiler": platform.python_implementation(),
                           "platform": f"{sys.platform}/{platform.machine()}"}
    assert got[("kueue_build_info", build)] == 1
    assert got[("kueue_admission_attempts_total", (role, ("result", "success")))] == 1
    assert got[("kueue_admission_attempts_total", (role, ("result", "inadmissible")))] == 2
    assert got[("kueue_admission_attempt_duration_seconds_count", (role, ("result", "inadmissible")))] == 2
    assert got[("kueue_admission_attempt_duration_seconds_sum", (role, ("result", "inadmissible")))] == 0.7
    assert got[("kueue_admission_attempt_duration_seconds_bucket",
                (("le", "0.25"), role, ("result", "inadmissible")))] == 0
    queue = ("cluster_queue", "team-a")
    assert got[("kueue_pending_workloads", (queue, role, ("status", "active")))] == 1
    assert got[("kueue_pending_workloads", (queue, role, ("status", "inadmissible")))] == 2
    assert got[("kueue_admitted_active_workloads", (queue, role))] == 2
    assert got[("kueue_reserving_active_workloads", (queue, role))] == 2
    assert got[("kueue_cluster_queue_status", (queue, role, ("status", "active")))] == 1
    assert got[("kueue_cluster_queue_status", (queue, role, ("status", "pending")))] == 0
    gpus = (queue, ("cohort", "all"), ("flavor", "h100"), role, ("resource", "nvidia.com/gpu"))
    assert got[("kueue_cluster_queue_resource_usage", tuple(sorted(gpus)))] == 64
    assert got[("kueue_cluster_queue_resource_reservation", tuple(sorted(gpus)))] == 64
    assert got[("kueue_cluster_queue_nominal_quota", tuple(sorted(gpus)))] == 128
    admitted = tuple(sorted((queue, ("priority_class", "high"), role)))
    assert got[("kueue_admitted_workloads_total", admitted)] == 1
    assert got[("kueue_quota_reserved_workloads_total", admitted)] == 1
    # Kueue's buckets: 1, 2.5, 5, 10, ...
    assert got[("kueue_admission_wait_time_seconds_bucket", tuple(sorted((*admitted, ("le", "2.5")))))] == 0
    assert got[("kueue_admission_wait_time_seconds_bucket", tuple(sorted((*admitted, ("le", "5.0")))))] == 1
    assert got[("kueue_quota_reserved_wait_time_seconds_count", admitted)] == 1
    assert got[("controller_runtime_webhook_requests_total",
                (("code", "200"), ("webhook", "/mutate-batch-v1-job")))] == 1
    assert got[("tasq_gate_removal_latency_seconds_bucket", (("le", "1.5"),))] == 1
    assert got[("tasq_gate_removal_latency_seconds_bucket", (("le", "1.0"),))] == 0


def test_kueue_wait_buckets_start_at_one_second_then_double_from_two_and_a_half() -> None:
    assert kueue_wait_buckets(5) == (1.0, 2.5, 5.0, 10.0, 20.0)
    assert len(kueue_wait_buckets(16)) == 16 and kueue_wait_buckets(16)[-1] == 2.5 * 2 ** 14


def test_the_leader_gauge_and_the_replica_role_follow_the_lease() -> None:
    metrics = Metrics()
    holding = [False]
    metrics.leading(lambda: holding[0])
    metrics.admission_attempted(c.ADMISSION_RESULT_SUCCESS, 0.1)
    holding[0] = True
    metrics.admission_attempted(c.ADMISSION_RESULT_SUCCESS, 0.1)
    got = samples(metrics.exposition().decode())
    assert got[("tasq_leader", ())] == 1
    assert got[("kueue_admission_attempts_total", (("replica_role", "follower"), ("result", "success")))] == 1
    assert got[("kueue_admission_attempts_total", (("replica_role", "leader"), ("result", "success")))] == 1
    holding[0] = False
    assert samples(metrics.exposition().decode())[("tasq_leader", ())] == 0


def test_the_certificate_expiry_is_read_from_the_file_at_each_scrape(tmp_path: Path) -> None:
    metrics = Metrics()
    write_serving_files(tmp_path, datetime(2030, 1, 1, tzinfo=UTC))
    cert = tmp_path / c.WEBHOOK_CERT_FILE
    metrics.certificate_watched("webhook", cert)
    first = samples(metrics.exposition().decode())[("tasq_certificate_expiry_timestamp_seconds",
                                                    (("certificate", "webhook"),))]
    assert first == x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc.timestamp()
    write_serving_files(tmp_path, datetime(2031, 1, 1, tzinfo=UTC))  # renewed
    second = samples(metrics.exposition().decode())[("tasq_certificate_expiry_timestamp_seconds",
                                                     (("certificate", "webhook"),))]
    assert second > first
    cert.unlink()
    assert samples(metrics.exposition().decode())[("tasq_certificate_expiry_timestamp_seconds",
                                                   (("certificate", "webhook"),))] == 0


@pytest.mark.parametrize(("workload", "waited"), [
    pytest.param({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}, 90.0, id="since creation"),
    pytest.param({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
                  "status": {"conditions": [{"type": "Requeued", "status": "True",
                                             "lastTransitionTime": "2026-01-01T00:01:00Z"}]}},
                 30.0, id="since its last requeue"),
    pytest.param({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
                  "status": {"conditions": [{"type": "Requeued", "status": "False",
                                             "lastTransitionTime": "2026-01-01T00:01:00Z"}]}},
                 90.0, id="a requeue not in force counts from creation"),
    pytest.param({"metadata": {}}, 0.0, id="no timestamp"),
    pytest.param({"metadata": {"creationTimestamp": "2026-01-01T00:02:00Z"}}, 0.0, id="a clock behind never negative"),
])
def test_queued_seconds_count_from_creation_or_the_last_requeue(workload: dict[str, Any], waited: float) -> None:
    assert queued_seconds(workload, datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)) == waited


def test_the_priority_class_is_read_from_either_api_version() -> None:
    assert priority_class_of({"spec": {"priorityClassName": "high"}}) == "high"
    assert priority_class_of({"spec": {"priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "low"}}}) == "low"
    assert priority_class_of({"spec": {}}) == ""


@pytest.mark.parametrize(("token", "status", "words"), [
    pytest.param("reader-token", 200, "kueue_admission_attempts_total", id="a metrics reader"),
    pytest.param("stranger-token", 403, "may not get /metrics", id="a valid token without the role"),
    pytest.param("forged", 401, "not accepted", id="a token the API server refuses"),
    pytest.param(None, 401, "no bearer token", id="no token"),
])
async def test_each_scraper_gets_its_status(tmp_path: Path, token: str | None, status: int, words: str) -> None:
    metrics = Metrics()
    metrics.admission_attempted(c.ADMISSION_RESULT_SUCCESS, 0.02)
    async with secured(tmp_path, metrics, ReviewingApi()) as (server, ca, _):
        got_status, text = await scrape(server, ca, token)
    assert got_status == status and words in text
    if status != 200:
        assert "tasq_" not in text and "kueue_" not in text


async def test_repeated_scrapes_cost_two_reviews_and_a_refused_one_none_of_the_metrics(tmp_path: Path) -> None:
    api = ReviewingApi()
    async with secured(tmp_path, Metrics(), api) as (server, ca, _):
        for _ in range(5):
            assert (await scrape(server, ca, "reader-token"))[0] == 200
        assert (await scrape(server, ca, "reader-token", "/other"))[0] == 404
    assert len(api.sent) == 2


async def test_plain_http_is_refused_on_the_tls_port(tmp_path: Path) -> None:
    async with secured(tmp_path, Metrics(), ReviewingApi()) as (server, _, _):
        with pytest.raises(aiohttp.ClientError):
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{server.port}/metrics") as r:
                await r.read()


async def test_new_certificate_files_are_served_without_a_restart(tmp_path: Path) -> None:
    async with secured(tmp_path, Metrics(), ReviewingApi(), reload_interval=0.05) as (server, _, tls):
        new_ca = write_serving_files(tmp_path, datetime.now(UTC))
        for _ in range(100):
            if tls.reloads:
                break
            await asyncio.sleep(0.05)
        assert tls.reloads == 1
        assert (await scrape(server, new_ca, "reader-token"))[0] == 200  # verified against the new CA
        _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=trusting(new_ca.cert_pem))
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
        assert x509.load_der_x509_certificate(der).issuer == new_ca.certificate.subject


async def test_insecure_metrics_are_plain_and_open() -> None:
    server = await serve_metrics("127.0.0.1", 0, Metrics(), None, None)
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{server.port}/metrics") as r:
            assert r.status == 200
    finally:
        await server.close()


async def test_probes_answer_on_their_own_plain_port_without_metrics() -> None:
    reasons = ["the cache is not primed yet", "forbidden to list nodes; grant it"]
    server = await serve_probes("127.0.0.1", 0, lambda: reasons)
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/healthz") as r:
                assert r.status == 200
            async with http.get(base + "/readyz") as r:
                assert (r.status, await r.text()) == (
                    503, "not ready:\n- the cache is not primed yet\n- forbidden to list nodes; grant it\n")
            reasons.clear()
            async with http.get(base + "/readyz") as r:
                assert (r.status, await r.text()) == (200, "ok")
            async with http.get(base + "/metrics") as r:
                assert r.status == 404
    finally:
        await server.close()


async def test_the_endpoints_serve_https_metrics_and_plain_probes_on_two_ports() -> None:
    api = ReviewingApi()
    endpoints = Endpoints(metrics_host="127.0.0.1", metrics_port=0, probe_host="127.0.0.1", probe_port=0)
    async with serving_endpoints(endpoints, api, lambda: [], Metrics()) as (metrics_server, probes):
        assert metrics_server is not None and probes is not None
        assert metrics_server.port != probes.port and metrics_server.scheme == "https"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{probes.port}/readyz") as r:
                assert r.status == 200
            # the generated certificate is self-signed: this client does not verify it
            async with http.get(f"https://127.0.0.1:{metrics_server.port}/metrics", ssl=False,
                                headers={"Authorization": "Bearer stranger-token"}) as r:
                assert r.status == 403


async def test_unauthenticated_metrics_are_refused_off_loopback() -> None:
    endpoints = Endpoints(metrics_host="0.0.0.0", metrics_port=0, metrics_insecure=True)
    with pytest.raises(ValueError, match="loopback"):
        async with serving_endpoints(endpoints, ReviewingApi(), lambda: [], Metrics()):
            pass


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
    ("10.0.0.1", False), ("::", False), ("example.com", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_two_metrics_objects_do_not_share_series() -> None:
    one, two = Metrics(), Metrics()
    one.cluster_queue_reported("q", QueueFigures(cohort="", pending_active=5, pending_inadmissible=0, admitted=0))
    assert b'kueue_pending_workloads{cluster_queue="q",replica_role="standalone",status="active"} 5.0' \
        in one.exposition()
    assert b"cluster_queue=" not in two.exposition()


def test_a_deleted_cluster_queue_stops_being_reported() -> None:
    metrics = Metrics()
    figures = QueueFigures(cohort="", pending_active=1, pending_inadmissible=0, admitted=1,
                           nominal={("f", "cpu"): 4}, usage={("f", "cpu"): 2})
    metrics.cluster_queue_reported("gone", figures)
    metrics.workload_admitted("gone", "", 1.0)
    metrics.evicted("gone", "Preempted")
    metrics.cluster_queue_reported("kept", figures)
    metrics.evicted("kept", "Preempted")
    metrics.cluster_queue_deleted("gone")
    metrics.cluster_queue_deleted("never-seen")
    text = metrics.exposition().decode()
    assert 'cluster_queue="gone"' not in text
    assert 'kueue_pending_workloads{cluster_queue="kept",replica_role="standalone",status="active"} 1.0' in text
    assert metrics.cluster_queues_reported() == {"kept"}
    assert 'kueue_evicted_workloads_total{cluster_queue="kept",priority_class="",reason="Preempted",' \
           'replica_role="standalone",underlying_cause=""} 1.0' in text


def test_a_flavor_resource_the_queue_no_longer_has_stops_being_reported() -> None:
    metrics = Metrics()
    metrics.cluster_queue_reported("q", QueueFigures(cohort="", pending_active=0, pending_inadmissible=0, admitted=0,
                                                     nominal={("a100", "cpu"): 4, ("h100", "cpu"): 8}))
    metrics.workload_admitted("q", "", 1.0)
    metrics.cluster_queue_reported("q", QueueFigures(cohort="", pending_active=0, pending_inadmissible=0, admitted=0,
                                                     nominal={("h100", "cpu"): 8}))
    text = metrics.exposition().decode()
    assert 'flavor="a100"' not in text and 'flavor="h100"' in text
    assert 'kueue_admitted_workloads_total{cluster_queue="q"' in text  # counters stay until the queue goes


def test_fragmentation_series_follow_the_flavors_reported() -> None:
    metrics = Metrics()
    metrics.fragmentation_reported(64, {("h100", "rack"): 24, ("a100", "rack"): 8})
    metrics.fragmentation_reported(16, {("h100", "rack"): 4})
    got = samples(metrics.exposition().decode())
    assert got[("tasq_largest_pending_gang_gpus", ())] == 16
    assert got[("tasq_topology_fragmented_free_gpus", (("flavor", "h100"), ("level", "rack")))] == 4
    assert ("tasq_topology_fragmented_free_gpus", (("flavor", "a100"), ("level", "rack"))) not in got


def test_preemptions_and_evictions_are_counted_with_kueues_labels() -> None:
    metrics = Metrics()
    metrics.preempted("high-cq", "InCohortReclamation")
    metrics.preempted("high-cq", "InCohortReclamation")
    metrics.evicted("low-cq", "Preempted")
    got = samples(metrics.exposition().decode())
    assert got[("kueue_preempted_workloads_total", (("preempting_cluster_queue", "high-cq"),
                                                    ("reason", "InCohortReclamation"),
                                                    ("replica_role", "standalone")))] == 2
    assert got[("kueue_evicted_workloads_total", (("cluster_queue", "low-cq"), ("priority_class", ""),
                                                  ("reason", "Preempted"), ("replica_role", "standalone"),
                                                  ("underlying_cause", "")))] == 1


class ConfigMapApi(KubeApi):
    """Answers GET of one ConfigMap with `data`, or fails as `error` says."""

    def __init__(self, data: dict[str, str] | None = None, error: ApiError | None = None) -> None:
        self.data, self.error, self.asked = data, error, ""

    async def request(self, method: str, url: str, body: Any = None, content_type: str = "application/json",
                      query: Any = None) -> dict[str, Any]:
        self.asked = f"{method} {url}"
        if self.error is not None:
            raise self.error
        return {"kind": "ConfigMap", "data": self.data}


FRONT_PROXY_DATA = {"requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
                    "requestheader-allowed-names": '["front-proxy-client"]',
                    "requestheader-username-headers": '["X-Remote-User"]'}


async def test_request_header_settings_are_read_from_kube_system(caplog: pytest.LogCaptureFixture) -> None:
    api = ConfigMapApi(FRONT_PROXY_DATA)
    config = await read_request_header(api)
    assert api.asked == "GET /api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
    assert config is not None and config.allowed_names == ("front-proxy-client",)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.parametrize(("api", "why"), [
    (ConfigMapApi(error=ApiError(403, 'configmaps "extension-apiserver-authentication" is forbidden')),
     "cannot read ConfigMap kube-system/extension-apiserver-authentication: "),
    (ConfigMapApi({"client-ca-file": "x"}), "has no requestheader-client-ca-file"),
], ids=["no RBAC to read it", "kube-apiserver runs without requestheader flags"])
async def test_unreadable_request_header_settings_refuse_the_aggregator_with_a_warning(
        api: ConfigMapApi, why: str, caplog: pytest.LogCaptureFixture) -> None:
    assert await read_request_header(api) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and why in warnings[0]
    assert warnings[0].startswith("Requests through the APIService (aggregator client certificates) are refused")
