"""Fixtures of the conformance suite: the e2e cluster fixtures (devcluster or, with `--cluster=real`, the
real control plane) and the official `kubernetes` client's APIs on that cluster's kubeconfig. The
devcluster here is what `tasq dev --no-tasq` serves: its Job controller, scheduler and kubelet running
in real time and the same sample nodes `hack/realcluster/up` creates.

Conformance tests talk to the cluster only through kubectl and the client, so one test checks the same
Kubernetes behaviour on both control planes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client

from devcluster.cluster import DevCluster
from devcluster.simulated.components import Components
from devcluster.simulated.nodes import create_nodes, parse_shape, topology_nodes
from tests.e2e.conftest import apply_yaml, kubeconfig, kubectl, namespace  # noqa: F401 (fixtures)
from tests.retrying_client import new_client

SAMPLE_TOPOLOGY = "2x4x4x8"  # `tasq dev`'s default, as hack/realcluster/up creates it
NODE_PREFIX = "gpu-"

T = TypeVar("T")


@pytest.fixture(scope="module")
def devcluster() -> Iterator[DevCluster]:
    cluster = DevCluster(bookmark_interval=0.5).start_in_thread()
    started: list[Components] = []

    async def start() -> None:
        components = Components(cluster.api).start()
        components.run_in_background()
        started.append(components)
        await create_nodes(cluster.api, topology_nodes(parse_shape(SAMPLE_TOPOLOGY), NODE_PREFIX))

    async def close() -> None:
        for components in started:
            components.close()
    try:
        cluster.call(start)
        yield cluster
    finally:
        cluster.call(close)
        cluster.stop()


@pytest.fixture(scope="module")
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:  # noqa: F811 (the imported fixture)
    with new_client(kubeconfig) as api:
        yield api


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture(scope="module")
def extensions(api_client: client.ApiClient) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api_client)


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 60, interval: float = 0.2) -> T:
    """The first truthy value of `probe()`; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(interval)


def status_body(error: Any) -> dict[str, Any]:
    """The Status object of an ApiException."""
    import json

    body: dict[str, Any] = json.loads(error.body)
    return body
