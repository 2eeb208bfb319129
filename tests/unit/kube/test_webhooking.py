"""The webhook side of the operator: review memos that are not kept, local TLS files, and the local
webhook configurations and CRD conversion written through the door and shared by replicas (against
the devcluster)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.aio import config as aconfig
from kubernetes.aio.client import ApiClient

from controller.api import constants as c
from controller.api.crds import all_crds
from controller.kube.api import (
    CUSTOM_RESOURCE_DEFINITIONS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiError,
    KubeApi,
    path,
)
from controller.kube.webhooking import (
    CONVERTED_CRDS,
    ReviewMemories,
    joined,
    left,
    listening,
    local_tls,
    register_configurations,
    register_conversion,
    release_configurations,
    release_conversion,
    remove_configurations,
    sharing_servers,
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
    """Each configuration is read first: created when absent, else replaced at its resourceVersion
    (a previous run's); deleting absent ones is fine; a 500 on the way is retried."""
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
    assert api.seen == [("GET", mutating), ("POST", MUTATING), ("GET", validating), ("POST", VALIDATING),
                        ("GET", mutating), ("PUT", mutating),
                        ("GET", validating), ("PUT", validating), ("PUT", validating),
                        ("DELETE", mutating), ("DELETE", validating), ("DELETE", mutating), ("DELETE", validating)]


async def test_a_leaving_replica_hands_the_configurations_to_one_still_listening_and_the_last_deletes_them(
        cluster_client: tuple[DevCluster, ApiClient]) -> None:
    _, client = cluster_client
    api = KubeApi(client)
    up = {"https://127.0.0.1:1", "https://127.0.0.1:2"}

    async def alive(url: str) -> bool:
        return url in up

    async def served_by() -> set[str]:
        found = set()
        for resource, name in ((MUTATING_WEBHOOK_CONFIGURATIONS, c.MUTATING_WEBHOOK_CONFIGURATION),
                               (VALIDATING_WEBHOOK_CONFIGURATIONS, c.VALIDATING_WEBHOOK_CONFIGURATION)):
            try:
                current = await api.get(resource, None, name)
            except ApiError:
                continue
            found |= {w["clientConfig"]["url"].rsplit("/", 1)[0] for w in current["webhooks"]}
        return found

    for port in (1, 2, 3):
        await register_configurations(api, f"https://127.0.0.1:{port}", "Y2E=")
    assert await served_by() == {"https://127.0.0.1:3"}  # the newest
    await release_configurations(api, "https://127.0.0.1:9", alive=alive)  # not listed: left alone
    assert await served_by() == {"https://127.0.0.1:3"}
    await release_configurations(api, "https://127.0.0.1:3", alive=alive)
    assert await served_by() == {"https://127.0.0.1:2"}
    up.discard("https://127.0.0.1:1")  # killed: listed, no longer listening
    await release_configurations(api, "https://127.0.0.1:2", alive=alive)
    assert await served_by() == set()  # the last one listening left: deleted


# -- configurations shared by local replicas -------------------------------------------------------

A = {"url": "https://127.0.0.1:9443", "caBundle": "QQ=="}
B = {"url": "https://127.0.0.1:9444", "caBundle": "Qg=="}


def configuration(annotation: str | None) -> dict[str, Any]:
    """A configuration as read: only what `sharing_servers` reads."""
    annotations = None if annotation is None else {c.ANNOTATION_LOCAL_WEBHOOK_SERVERS: annotation}
    return {"metadata": {"name": "x", "annotations": annotations}}


@pytest.mark.parametrize(("annotation", "servers"), [
    (None, []),                                                     # an in-cluster install's: nobody listed
    (json.dumps([A, B]), [A, B]),
    ("not json", []),                                               # edited by hand: treated as no list
    (json.dumps({"url": "x"}), []),                                 # not a list
    (json.dumps([A, {"caBundle": "no url"}, "junk"]), [A]),        # malformed entries dropped
])
def test_the_listed_servers_are_read_leniently(annotation: str | None, servers: list[dict[str, str]]) -> None:
    assert sharing_servers(configuration(annotation)) == servers
    assert sharing_servers(None) == []


def test_a_replica_joining_is_listed_once_and_last_and_leaving_removes_only_it() -> None:
    assert joined([], A) == [A]
    assert joined([A, B], A) == [B, A]  # re-registered (a restart on the same port): moves last
    restarted = {**A, "caBundle": "new"}
    assert joined([A, B], restarted) == [B, restarted]  # a new CA replaces the old entry
    assert left([A, B], A["url"]) == [B]
    assert left([B], A["url"]) == [B]


async def test_a_listening_server_is_told_from_a_closed_port() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    assert await listening(f"https://127.0.0.1:{port}")
    server.close()
    await server.wait_closed()
    assert not await listening(f"https://127.0.0.1:{port}")


# -- the CRDs' conversion ----------------------------------------------------------------------------

async def converting_to(api: KubeApi, name: str) -> tuple[str, str, list[str]]:
    """(strategy, the webhook's URL, the URLs the CRD lists) of one CRD."""
    crd = await api.get(CUSTOM_RESOURCE_DEFINITIONS, None, name)
    conversion = crd["spec"].get("conversion") or {}
    url = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("url", "")
    return conversion.get("strategy", ""), url, [s["url"] for s in sharing_servers(crd)]


async def test_local_replicas_share_the_crds_conversion_and_the_last_leaves_it_in_place(
        cluster_client: tuple[DevCluster, ApiClient], caplog: pytest.LogCaptureFixture) -> None:
    """Every tasq CRD converts through the newest registered server's /convert
    (ConversionReview v1, its CA); a leaving replica hands it to one still listening; the last one
    leaves it (objects cannot be served unconverted) and logs that."""
    _, client = cluster_client
    api = KubeApi(client)
    for crd in all_crds().values():
        await api.create(CUSTOM_RESOURCE_DEFINITIONS, None, crd)
    assert set(CONVERTED_CRDS) == {crd["metadata"]["name"] for crd in all_crds().values()}
    up = {"https://127.0.0.1:1", "https://127.0.0.1:2"}

    async def alive(url: str) -> bool:
        return url in up

    for port in (1, 2, 3):
        await register_conversion(api, f"https://127.0.0.1:{port}", "Y2E=")
    listed = ["https://127.0.0.1:1", "https://127.0.0.1:2", "https://127.0.0.1:3"]
    for name in CONVERTED_CRDS:
        assert await converting_to(api, name) == ("Webhook", "https://127.0.0.1:3/convert", listed)
        crd = await api.get(CUSTOM_RESOURCE_DEFINITIONS, None, name)
        assert crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"] == ["v1"]
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == "Y2E="
    await release_conversion(api, "https://127.0.0.1:3", alive=alive)
    await release_conversion(api, "https://127.0.0.1:9", alive=alive)  # never listed: nothing changes
    for name in CONVERTED_CRDS:
        assert await converting_to(api, name) == ("Webhook", "https://127.0.0.1:2/convert", listed[:2])
    up.clear()
    caplog.set_level(logging.INFO, logger="controller.kube.webhooking")
    await release_conversion(api, "https://127.0.0.1:2", alive=alive)
    for name in CONVERTED_CRDS:
        assert await converting_to(api, name) == ("Webhook", "https://127.0.0.1:2/convert", listed[:2])
        assert f"{name}: conversion left pointing at https://127.0.0.1:2" in caplog.text


async def test_registering_the_conversion_of_a_crd_not_installed_says_so(
        cluster_client: tuple[DevCluster, ApiClient], caplog: pytest.LogCaptureFixture) -> None:
    _, client = cluster_client
    await register_conversion(KubeApi(client), "https://127.0.0.1:1", "Y2E=", crds=("widgets.example.io",))
    assert "CRD widgets.example.io is not installed" in caplog.text
