"""The webhook side of the operator: review memos that are not kept, local TLS files, and denials
logged once."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from controller.api import constants as c
from controller.kube.webhooking import DenialsLoggedOnce, ReviewMemories, local_tls


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
