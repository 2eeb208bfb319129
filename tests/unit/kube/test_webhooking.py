"""The webhook side of the operator: review memos that are not kept, local TLS files, denials
logged once, and the list of local replicas sharing the configurations."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from controller.api import constants as c
from controller.kube.webhooking import (
    DenialsLoggedOnce,
    ReviewMemories,
    joined,
    left,
    listening,
    local_tls,
    sharing_servers,
)


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


# -- configurations shared by local replicas -------------------------------------------------------

A = {"url": "https://127.0.0.1:9443", "caBundle": "QQ=="}
B = {"url": "https://127.0.0.1:9444", "caBundle": "Qg=="}


def configuration(annotation: str | None) -> SimpleNamespace:
    """A configuration as the client models it: only what `sharing_servers` reads."""
    annotations = None if annotation is None else {c.ANNOTATION_LOCAL_WEBHOOK_SERVERS: annotation}
    return SimpleNamespace(metadata=SimpleNamespace(annotations=annotations))


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
