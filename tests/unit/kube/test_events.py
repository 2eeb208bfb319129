"""Events are a courtesy: whatever posting one raises is logged once, and no background task ends
with an exception (asyncio would report it as never retrieved)."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from controller.kube.api import ApiError
from controller.kube.arrivals import Arrivals
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


class EventsApi:
    """Creates and count patches as the API server would take them; `gone` names Events it expired."""

    def __init__(self) -> None:
        self.created: list[Mapping[str, Any]] = []
        self.patched: list[tuple[str, Mapping[str, Any]]] = []
        self.gone: set[str] = set()

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.created.append(obj)
        return dict(obj)

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any]) -> dict[str, Any]:
        if name in self.gone:
            raise ApiError(404, f'events "{name}" not found')
        self.patched.append((name, patch))
        return dict(patch)


def emit_at(recorder: EventRecorder, now: list[float], times: list[float], message: str = "suspended") -> None:
    async def scenario() -> None:
        for at in times:
            now[0] = at
            recorder.emit(JOB, "Stopped", message)
            while recorder.unsent:
                await asyncio.sleep(0)
    asyncio.run(scenario())


def test_the_same_event_again_patches_the_count_of_the_one_posted() -> None:
    api, now = EventsApi(), [0.0]
    recorder = EventRecorder(api, clock=lambda: now[0])  # type: ignore[arg-type]
    emit_at(recorder, now, [0, 1, 2, 40])

    (event,) = api.created
    ((name, patch),) = api.patched
    assert name == event["metadata"]["name"] and patch["count"] == 4 and "lastTimestamp" in patch
    assert (recorder.posted, recorder.bumped, recorder.dropped) == (1, 1, 2)


def test_a_repeat_of_an_event_the_api_server_expired_is_posted_anew() -> None:
    api, now = EventsApi(), [0.0]
    recorder = EventRecorder(api, clock=lambda: now[0])  # type: ignore[arg-type]
    emit_at(recorder, now, [0])
    api.gone.add(api.created[0]["metadata"]["name"])
    emit_at(recorder, now, [40, 80])

    assert len(api.created) == 2 and api.created[1]["count"] == 1
    assert api.patched[-1][0] == api.created[1]["metadata"]["name"]  # the next repeat bumps the new one


def test_an_event_that_could_not_be_created_is_created_on_its_next_occurrence() -> None:
    api, now = RaisingApi(ApiError(503, "unavailable")), [0.0]
    recorder = EventRecorder(api, clock=lambda: now[0])  # type: ignore[arg-type]
    emit_at(recorder, now, [0])
    api.error = None
    emit_at(recorder, now, [1])
    assert len(api.created) == 1 and recorder.posted == 1


class Whole(dict[str, Any]):
    """An object as read from the API, whose lifetime a test can follow (a dict takes no weakref)."""


def test_an_event_waiting_its_turn_keeps_only_what_it_names_and_posts_the_same_involved_object() -> None:
    async def scenario() -> tuple[bool, list[Mapping[str, Any]]]:
        api = RaisingApi(None)
        recorder = EventRecorder(api)  # type: ignore[arg-type]
        job = Whole({**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "7"},  # type: ignore[dict-item]
                     "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        watched = weakref.ref(job)
        recorder.emit(job, "Started", "Admitted by clusterQueue cq")
        del job
        gc.collect()
        kept_whole = watched() is not None  # the task has not run yet: only what it holds keeps the object
        while recorder.unsent:
            await asyncio.sleep(0)
        return kept_whole, api.created

    kept_whole, created = asyncio.run(scenario())
    assert not kept_whole
    (event,) = created
    assert event["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "namespace": "ns",
                                       "uid": "u1", "resourceVersion": "7"}


def emitted_in_a_burst(now: list[float]) -> tuple[Arrivals, RaisingApi, EventRecorder]:
    """A recorder whose arrivals' gate is shut (an arrival just came, at `now[0]`), one Event emitted."""
    arrivals = Arrivals(lambda: now[0], window_s=0.25, burst_arrivals=1, defer_max_s=5.0)
    api = RaisingApi(None)
    recorder = EventRecorder(api, arrivals=arrivals)  # type: ignore[arg-type]
    arrivals.arrived()
    recorder.emit(JOB, "Started", "Admitted by clusterQueue cq")
    return arrivals, api, recorder


async def test_while_objects_keep_arriving_an_event_is_posted_only_in_the_lull() -> None:
    now = [100.0]
    arrivals, api, recorder = emitted_in_a_burst(now)
    for _ in range(10):
        await asyncio.sleep(0)
    assert api.created == [] and recorder.unsent == 1
    now[0] += 0.3
    arrivals.check()
    while recorder.unsent:
        await asyncio.sleep(0)
    assert [e["reason"] for e in api.created] == ["Started"]


async def test_flushing_waits_for_the_events_being_posted_and_says_how_many_were_left() -> None:
    arrivals, api, recorder = emitted_in_a_burst([100.0])
    assert await recorder.flushed(0.05) == 1  # still waiting for the lull
    arrivals.release()
    assert await recorder.flushed(1.0) == 0
    assert [e["reason"] for e in api.created] == ["Started"]
