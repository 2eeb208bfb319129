"""Events are a courtesy: whatever posting one raises is logged once, and no background task ends
with an exception (asyncio would report it as never retrieved)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from controller.kube.api import ApiError
from controller.kube.events import EventRecorder

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "u1"}}


class RaisingApi:
    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.created: list[Mapping[str, Any]] = []

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        self.created.append(obj)
        return dict(obj)


@pytest.mark.parametrize(("error", "traceback"), [
    (aiohttp.ServerDisconnectedError(), False),
    (ApiError(403, 'events is forbidden: User "tasq" cannot create resource "events"'), False),
    (ConnectionResetError("reset by peer"), False),
    (ValueError("a bug"), True),
], ids=["dropped-connection", "refused", "reset", "a-bug-with-its-traceback"])
def test_an_event_that_cannot_be_posted_is_logged_once_and_never_raised(
        caplog: pytest.LogCaptureFixture, error: Exception, traceback: bool) -> None:
    async def scenario() -> EventRecorder:
        recorder = EventRecorder(RaisingApi(error))  # type: ignore[arg-type]
        recorder.emit(JOB, "Started", "Admitted by clusterQueue cq")
        while recorder.unsent:
            await asyncio.sleep(0)
        gc.collect()  # a task that ended with an exception is reported when it is collected
        return recorder

    caplog.set_level(logging.WARNING)
    recorder = asyncio.run(scenario())

    (record,) = caplog.records
    assert record.name == "controller.kube.events" and record.levelno == logging.WARNING
    assert record.getMessage().startswith("cannot post event Started on Job ns/j: ")
    assert bool(record.exc_info) == traceback
    assert recorder.posted == 0


def test_a_posted_event_names_its_object() -> None:
    api = RaisingApi(None)

    async def scenario() -> None:
        await EventRecorder(api).post(JOB, "Started", "Admitted by clusterQueue cq")  # type: ignore[arg-type]
    asyncio.run(scenario())

    (event,) = api.created
    assert event["involvedObject"]["uid"] == "u1" and event["reason"] == "Started"
