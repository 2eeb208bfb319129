"""kopf embedded in tasq's loop: its login from the operator's client, and which tasks it may stop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from kopf._cogs.aiokits.aioadapters import wait_flag
from kubernetes.aio import client as aclient

from controller.kube.embedding import NotKopfs, connection_info, spawned_by_kopf
from controller.kube.webhooking import local_tls


def test_kopf_logs_in_with_the_operators_credentials(tmp_path: Path) -> None:
    tls = local_tls(tmp_path, datetime.now(UTC))
    configuration = aclient.Configuration(host="https://10.0.0.1:6443")
    configuration.api_key = {"BearerToken": "Bearer s3cret"}
    configuration.ssl_ca_cert = str(tls.ca)
    info = connection_info(aclient.ApiClient(configuration))
    assert (info.server, info.token, info.ca_path, info.insecure) == ("https://10.0.0.1:6443", "s3cret",
                                                                     str(tls.ca), False)


def test_client_certificates_and_no_token(tmp_path: Path) -> None:
    tls = local_tls(tmp_path, datetime.now(UTC))
    configuration = aclient.Configuration(host="https://127.0.0.1:6443")
    configuration.cert_file, configuration.key_file, configuration.verify_ssl = str(tls.cert), str(tls.key), False
    info = connection_info(aclient.ApiClient(configuration))
    assert (info.token, info.certificate_path, info.private_key_path, info.insecure) == (
        None, str(tls.cert), str(tls.key), True)


async def test_kopf_may_stop_only_its_own_tasks_spawned_after_it_started() -> None:
    flag = asyncio.Event()
    kopfs_before = asyncio.create_task(wait_flag(flag))
    ignored = NotKopfs(asyncio.all_tasks())
    kopfs_later = asyncio.create_task(wait_flag(flag))  # a kopf coroutine, as its watchers and workers are
    ours_later = asyncio.create_task(flag.wait())  # tasq's loops, the devcluster's connections
    assert spawned_by_kopf(kopfs_later) and not spawned_by_kopf(ours_later)
    assert kopfs_before in ignored and ours_later in ignored
    assert kopfs_later not in ignored
    flag.set()
    await asyncio.gather(kopfs_before, kopfs_later, ours_later)
