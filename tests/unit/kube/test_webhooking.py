"""The webhook side of the operator: review memos that are not kept, local TLS files, denials
logged once, and the local webhook configurations written through the door (against the devcluster)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes.aio import config as aconfig
from kubernetes.aio.client import ApiClient

from controller.api import constants as c
from controller.kube.api import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    KubeApi,
    path,
)
from controller.kube.webhooking import (
    DenialsLoggedOnce,
    ReviewMemories,
    local_tls,
    register_configurations,
    remove_configurations,
)
from devcluster.cluster import DevCluster
from devcluster.server.faults import ERROR
from tests.unit.kube.recording import RecordingApi


async def test_update_reviews_leave_no_memo_behind() -> None:
    memories = ReviewMemories()
    for i in range(100):
        await memories.recall_memo({"metadata": {"uid": f"job-{i}"}}, ephemeral=False)
    assert len(memories._items) == 0


def test_local_tls_writes_the_three_files(tmp_path: Path) -> None:
    tls = local_tls(tmp_path, datetime.now(UTC))
    assert (tls.cert.name, tls.key.name) == (c.WEBHOOK_CERT_FILE, c.WEBHOOK_KEY_FILE)
    assert tls.ca is not None and tls.ca.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")
    tls.context()  # the pair loads


def _record(level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)


def test_kopfs_denial_lines_are_dropped_but_handler_crashes_stay() -> None:
    drop = DenialsLoggedOnce()
    assert not drop.filter(_record(logging.ERROR, "Webhook 'validate-batch-v1-job' failed permanently: Job.batch ..."))
    assert drop.filter(_record(logging.ERROR, "Webhook 'validate-batch-v1-job' failed with an exception and will "
                                              "stop now: boom"))
    assert drop.filter(_record(logging.ERROR, "Handler 'x' failed permanently: y"))


@pytest.fixture
async def cluster_client(tmp_path: Path) -> AsyncIterator[tuple[DevCluster, ApiClient]]:
    async with DevCluster() as cluster:
        client = await aconfig.new_client_from_config(config_file=str(cluster.write_kubeconfig(tmp_path / "kc")))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
        async with client:
            yield cluster, client


MUTATING = path(*MUTATING_WEBHOOK_CONFIGURATIONS)
VALIDATING = path(*VALIDATING_WEBHOOK_CONFIGURATIONS)


async def test_configurations_are_created_replaced_and_deleted_through_the_door(
        cluster_client: tuple[DevCluster, ApiClient]) -> None:
    """A previous run's configurations (409 on create) are read and replaced at their
    resourceVersion; deleting absent ones is fine; a 500 on the way is retried."""
    cluster, client = cluster_client
    api = RecordingApi(client)
    await register_configurations(api, "https://127.0.0.1:1", "Y2E=")
    cluster.faults.inject(ERROR, "update", "validatingwebhookconfigurations", count=1)
    await register_configurations(api, "https://127.0.0.1:2", "Y2E=")
    current = await KubeApi(client).get(VALIDATING_WEBHOOK_CONFIGURATIONS, None, c.VALIDATING_WEBHOOK_CONFIGURATION)
    assert {w["clientConfig"]["url"].split("/")[2] for w in current["webhooks"]} == {"127.0.0.1:2"}
    await remove_configurations(api)
    await remove_configurations(api)  # both gone already: nothing raised
    mutating, validating = f"{MUTATING}/{c.MUTATING_WEBHOOK_CONFIGURATION}", f"{VALIDATING}/{c.VALIDATING_WEBHOOK_CONFIGURATION}"
    assert api.seen == [("POST", MUTATING), ("POST", VALIDATING),
                        ("POST", MUTATING), ("GET", mutating), ("PUT", mutating),
                        ("POST", VALIDATING), ("GET", validating), ("PUT", validating), ("PUT", validating),
                        ("DELETE", mutating), ("DELETE", validating), ("DELETE", mutating), ("DELETE", validating)]
