"""The webhook side of the operator: kopf login from the operator's client, review memos that are
not kept, and local TLS files."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from kubernetes.aio import client as aclient

from controller.api import constants as c
from controller.kube.webhooking import DenialsLoggedOnce, ReviewMemories, connection_info, local_tls


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
