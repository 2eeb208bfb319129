"""The visibility handlers on an insecure loopback server, answered from a ClusterCache: which
workloads wait, Kueue's Status errors, paging. (Authorization: test_authorizing; HTTPS with tokens on
both clusters: tests/e2e/test_visibility.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import aiohttp

from controller.api import constants as c
from controller.cache.cluster import ClusterCache
from controller.kube.metrics import Metrics, serve_metrics
from controller.kube.visibility import PREFIX, cache_routes, queued_in
from tests.builders.kueue import ClusterQueueBuilder, LocalQueueBuilder, WorkloadBuilder


def queued_cache() -> ClusterCache:
    """cq <- team/red: `second` (priority 5) before `first` (0); `done` admitted, `off` stopped,
    `astray` in a LocalQueue that does not exist."""
    cache = ClusterCache()
    cache.upsert(c.KIND_CLUSTER_QUEUE, ClusterQueueBuilder("cq").build())
    cache.upsert(c.KIND_LOCAL_QUEUE, LocalQueueBuilder("red", "cq", "team").build())
    for builder in (WorkloadBuilder("first", "team").queue("red"),
                    WorkloadBuilder("second", "team").queue("red").priority(5),
                    WorkloadBuilder("done", "team").queue("red").admitted("cq").assignment(
                        "main", 1, ({}, 1), cluster_queue="cq"),
                    WorkloadBuilder("off", "team").queue("red").set("spec.active", False),
                    WorkloadBuilder("astray", "team").queue("nowhere")):
        cache.upsert(c.KIND_WORKLOAD, builder.pod_set("main").build())
    return cache


def test_only_active_workloads_without_quota_in_an_existing_queue_wait() -> None:
    assert sorted((info.name, cq) for info, cq in queued_in(queued_cache())) == [("first", "cq"), ("second", "cq")]


@asynccontextmanager
async def served(cache: ClusterCache) -> AsyncIterator[str]:
    server = await serve_metrics("127.0.0.1", 0, Metrics(), None, None, routes=partial(cache_routes, cache=cache))
    try:
        yield f"http://127.0.0.1:{server.port}{PREFIX}"
    finally:
        await server.close()


async def fetch(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(url) as answer:
        return answer.status, await answer.json()


async def test_queues_answer_with_positions_and_errors_are_kubernetes_statuses() -> None:
    async with served(queued_cache()) as base:
        status, body = await fetch(f"{base}/clusterqueues/cq/pendingworkloads")
        assert status == 200
        assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]] == [
            ("second", 0), ("first", 1)]
        status, body = await fetch(f"{base}/namespaces/team/localqueues/red/pendingworkloads?offset=1")
        assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["first"]
        status, body = await fetch(f"{base}/namespaces/other/localqueues/red/pendingworkloads")
        assert (status, body["kind"], body["reason"]) == (404, "Status", "NotFound")
        assert body["message"] == 'localqueues.visibility.kueue.x-k8s.io "red" in namespace "other" not found'
        status, body = await fetch(f"{base}/clusterqueues/cq/pendingworkloads?offset=x")
        assert (status, body["reason"], body["message"]) == (400, "BadRequest", "offset: 'x' is not an integer")
