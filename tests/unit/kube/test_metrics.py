"""The operator's metrics and probe server, scraped over HTTP as Prometheus would."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controller.api import constants as c
from controller.kube.metrics import Metrics, serve_probes


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value for every sample in a scrape."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_probes_answer_and_metrics_scrape_what_was_recorded() -> None:
    metrics = Metrics()
    ready = {"now": False}
    server = await serve_probes("127.0.0.1", 0, lambda: ready["now"], metrics)
    try:
        metrics.admission_attempted(c.ADMISSION_RESULT_SUCCESS, 0.02)
        metrics.admission_attempted(c.ADMISSION_RESULT_INADMISSIBLE, 0.3)
        metrics.admission_attempted(c.ADMISSION_RESULT_INADMISSIBLE, 0.4)
        metrics.cluster_queue_counted("team-a", pending=3, admitted=2)
        metrics.resource_used("team-a", "h100", "nvidia.com/gpu", 64)
        metrics.gate_removed(1.2)
        base = f"http://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/healthz") as r:
                assert r.status == 200
            async with http.get(base + "/readyz") as r:
                assert r.status == 503
            ready["now"] = True
            async with http.get(base + "/readyz") as r:
                assert r.status == 200
            async with http.get(base + "/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain")
                got = samples(await r.text())
    finally:
        await server.close()
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


def test_two_metrics_objects_do_not_share_series() -> None:
    one, two = Metrics(), Metrics()
    one.cluster_queue_counted("q", 5, 0)
    assert b'tasq_pending_workloads{cluster_queue="q"} 5.0' in one.exposition()
    assert b"cluster_queue=" not in two.exposition()


def test_a_deleted_cluster_queue_stops_being_reported() -> None:
    metrics = Metrics()
    metrics.cluster_queue_counted("gone", 1, 1)
    metrics.resource_used("gone", "f", "cpu", 2)
    metrics.cluster_queue_counted("kept", 1, 1)
    metrics.cluster_queue_deleted("gone")
    metrics.cluster_queue_deleted("never-seen")
    text = metrics.exposition().decode()
    assert 'cluster_queue="gone"' not in text
    assert 'tasq_pending_workloads{cluster_queue="kept"} 1.0' in text


async def test_metrics_path_is_not_found_without_a_registry() -> None:
    server = await serve_probes("127.0.0.1", 0, lambda: True)
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{server.port}/metrics") as r:
            assert r.status == 404
    finally:
        await server.close()
