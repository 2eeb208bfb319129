"""The operator's metrics, scraped as Prometheus would: over HTTPS with a bearer token that a fake API
server reviews (200 for a metrics reader, 403 for another user, 401 without a valid token), the
certificate reloaded when its files change, plain HTTP only where asked; and the probes on their own
plain port."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from controller.api import constants as c
from controller.kube.authorizing import AccessReviewer
from controller.kube.metrics import (
    Endpoints,
    Metrics,
    RunningServer,
    is_loopback,
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
    metrics = Metrics()
    metrics.admission_attempted(c.ADMISSION_RESULT_SUCCESS, 0.02)
    metrics.admission_attempted(c.ADMISSION_RESULT_INADMISSIBLE, 0.3)
    metrics.admission_attempted(c.ADMISSION_RESULT_INADMISSIBLE, 0.4)
    metrics.cluster_queue_counted("team-a", pending=3, admitted=2)
    metrics.resource_used("team-a", "h100", "nvidia.com/gpu", 64)
    metrics.gate_removed(1.2)
    async with secured(tmp_path, metrics, ReviewingApi()) as (server, ca, _), aiohttp.ClientSession() as http, \
            http.get(f"https://127.0.0.1:{server.port}/metrics", ssl=trusting(ca.cert_pem),
                     headers={"Authorization": "Bearer reader-token"}) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        got = samples(await r.text())
    assert got[("tasq_admission_attempts_total", (("result", "success"),))] == 1
    assert got[("tasq_admission_attempts_total", (("result", "inadmissible"),))] == 2
    assert got[("tasq_admission_attempt_duration_seconds_count", (("result", "inadmissible"),))] == 2
    assert got[("tasq_admission_attempt_duration_seconds_sum", (("result", "inadmissible"),))] == 0.7
    assert got[("tasq_admission_attempt_duration_seconds_bucket", (("le", "0.25"), ("result", "inadmissible")))] == 0
    assert got[("tasq_pending_workloads", (("cluster_queue", "team-a"),))] == 3
    assert got[("tasq_admitted_workloads", (("cluster_queue", "team-a"),))] == 2
    assert got[("tasq_cluster_queue_resource_usage",
                (("cluster_queue", "team-a"), ("flavor", "h100"), ("resource", "nvidia.com/gpu")))] == 64
    assert got[("tasq_gate_removal_latency_seconds_bucket", (("le", "1.5"),))] == 1
    assert got[("tasq_gate_removal_latency_seconds_bucket", (("le", "1.0"),))] == 0


@pytest.mark.parametrize(("token", "status", "words"), [
    pytest.param("reader-token", 200, "tasq_admission_attempts_total", id="a metrics reader"),
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
        assert "tasq_" not in text


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
    ready = {"now": False}
    server = await serve_probes("127.0.0.1", 0, lambda: ready["now"])
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/healthz") as r:
                assert r.status == 200
            async with http.get(base + "/readyz") as r:
                assert r.status == 503
            ready["now"] = True
            async with http.get(base + "/readyz") as r:
                assert r.status == 200
            async with http.get(base + "/metrics") as r:
                assert r.status == 404
    finally:
        await server.close()


async def test_the_endpoints_serve_https_metrics_and_plain_probes_on_two_ports() -> None:
    api = ReviewingApi()
    endpoints = Endpoints(metrics_host="127.0.0.1", metrics_port=0, probe_host="127.0.0.1", probe_port=0)
    async with serving_endpoints(endpoints, api, lambda: True, Metrics()) as (metrics_server, probes):
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
        async with serving_endpoints(endpoints, ReviewingApi(), lambda: True, Metrics()):
            pass


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
    ("10.0.0.1", False), ("::", False), ("example.com", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_two_metrics_objects_do_not_share_series() -> None:
    one, two = Metrics(), Metrics()
    one.cluster_queue_counted("q", 5, 0)
    assert b'tasq_pending_workloads{cluster_queue="q"} 5.0' in one.exposition()
    assert b"cluster_queue=" not in two.exposition()


def test_a_deleted_cluster_queue_stops_being_reported() -> None:
    metrics = Metrics()
    metrics.cluster_queue_counted("gone", 1, 1)
    metrics.resource_used("gone", "f", "cpu", 2)
    metrics.evicted("gone", "Preempted")
    metrics.cluster_queue_counted("kept", 1, 1)
    metrics.evicted("kept", "Preempted")
    metrics.cluster_queue_deleted("gone")
    metrics.cluster_queue_deleted("never-seen")
    text = metrics.exposition().decode()
    assert 'cluster_queue="gone"' not in text
    assert 'tasq_pending_workloads{cluster_queue="kept"} 1.0' in text
    assert 'tasq_evicted_workloads_total{cluster_queue="kept",reason="Preempted"} 1.0' in text


def test_preemptions_and_evictions_are_counted_with_kueues_labels() -> None:
    metrics = Metrics()
    metrics.preempted("high-cq", "InCohortReclamation")
    metrics.preempted("high-cq", "InCohortReclamation")
    metrics.evicted("low-cq", "Preempted")
    text = metrics.exposition().decode()
    assert 'tasq_preempted_workloads_total{preempting_cluster_queue="high-cq",reason="InCohortReclamation"} 2.0' in text
    assert 'tasq_evicted_workloads_total{cluster_queue="low-cq",reason="Preempted"} 1.0' in text
