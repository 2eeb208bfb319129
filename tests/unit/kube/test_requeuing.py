"""The re-queueing discipline's parts: per-key backoff and one log line per failure at the right level."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest

from controller.kube.api import ApiError
from controller.kube.requeuing import BASE_S, Backoff, WorkQueue, log_failure


def test_a_keys_delay_doubles_per_consecutive_failure_up_to_the_cap_and_resets_on_success() -> None:
    backoff = Backoff(base_s=0.2, max_s=1.0)

    delays = [backoff.failed("a") for _ in range(5)]
    other = backoff.failed("b")
    backoff.succeeded("a")

    assert delays == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert other == 0.2  # keys back off on their own
    assert (backoff.failures("a"), backoff.failures("b")) == (0, 1)
    assert backoff.failed("a") == 0.2


def test_a_key_failing_for_hours_stays_at_the_cap() -> None:
    backoff = Backoff(base_s=0.2, max_s=10.0)
    for _ in range(5000):
        delay = backoff.failed("a")
    assert delay == 10.0


@pytest.mark.parametrize(("error", "level", "traceback", "text"), [
    (ApiError(409, "the object has been modified"), logging.DEBUG, False, "the object has been modified"),
    (ApiError(503, "etcd unavailable"), logging.WARNING, False, "503: etcd unavailable"),
    (ApiError(0, "GET /x: ServerDisconnectedError"), logging.WARNING, False, "ServerDisconnectedError"),
    (aiohttp.ServerDisconnectedError(), logging.WARNING, False, "ServerDisconnectedError: Server disconnected"),
    (ConnectionResetError("reset by peer"), logging.WARNING, False, "ConnectionResetError: reset by peer"),
    (KeyError("metadata"), logging.ERROR, True, "job ns/j failed"),
], ids=["conflict-is-debug", "server-error", "no-answer-api-error", "dropped-connection", "reset",
        "a-bug-with-its-traceback"])
def test_each_failure_is_logged_once_at_its_level(
        caplog: pytest.LogCaptureFixture, error: Exception, level: int, traceback: bool, text: str) -> None:
    log = logging.getLogger("tasq.test.requeuing")
    caplog.set_level(logging.DEBUG, logger=log.name)

    log_failure(log, "job ns/j", error, 0.4)

    (record,) = caplog.records
    assert record.levelno == level
    assert text in record.getMessage() and "retrying in 0.4s" in record.getMessage()
    assert (record.exc_info is not None) == traceback


async def test_a_work_queue_never_works_a_key_twice_at_once_and_retries_a_failure_after_its_backoff() -> None:
    started: list[str] = []
    release = asyncio.Event()
    failures = {"b": 1}

    async def work(key: str) -> None:
        started.append(key)
        if key == "a":
            await release.wait()
        if failures.get(key):
            failures[key] -= 1
            raise RuntimeError("boom")

    queue: WorkQueue[str] = WorkQueue(work, logging.getLogger("test"), lambda key: f"key {key}", workers=2)
    runner = asyncio.create_task(queue.run())
    queue.notify("a")
    await asyncio.sleep(0.01)
    queue.notify("a")  # changed while being worked: waits for the first run
    queue.notify("b")  # the second worker takes it; it fails once, then succeeds after the backoff
    await asyncio.sleep(0.01)
    assert started == ["a", "b"]
    release.set()
    await asyncio.sleep(BASE_S + 0.1)
    runner.cancel()
    assert sorted(started) == ["a", "a", "b", "b"] and started[:2] == ["a", "b"]


async def test_a_burst_of_keys_is_worked_once_each_by_every_worker_at_once() -> None:
    running, most, worked = 0, 0, []
    gate = asyncio.Event()

    async def work(key: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await gate.wait()
        worked.append(key)
        running -= 1

    queue: WorkQueue[int] = WorkQueue(work, logging.getLogger("test"), str, workers=16)
    runner = asyncio.create_task(queue.run())
    await asyncio.sleep(0)
    for key in range(500):
        queue.notify(key)
    await asyncio.sleep(0.01)
    assert running == 16  # every worker took a key, though only one was woken per change
    gate.set()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if len(worked) == 500:
            break
    runner.cancel()
    assert sorted(worked) == list(range(500)) and most == 16


async def test_a_change_wakes_one_idle_worker_not_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = 0
    idle = WorkQueue._idle_until_woken

    async def counted(self: WorkQueue[str]) -> None:
        nonlocal waits
        waits += 1
        await idle(self)

    monkeypatch.setattr(WorkQueue, "_idle_until_woken", counted)
    worked: list[str] = []

    async def work(key: str) -> None:
        worked.append(key)

    queue: WorkQueue[str] = WorkQueue(work, logging.getLogger("test"), str, workers=100)
    runner = asyncio.create_task(queue.run())
    await asyncio.sleep(0.01)
    assert waits == 100
    for key in ("a", "b", "c"):
        queue.notify(key)
        await asyncio.sleep(0.01)
    runner.cancel()
    # one task woke for each change and went idle again; the other 99 never stirred
    assert worked == ["a", "b", "c"] and waits == 103
