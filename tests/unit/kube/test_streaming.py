"""A watch stream's states against a scripted API: it watches from the priming version and on from
the last one it saw (bookmarks included), lists again page by page on 410 (deleting what vanished),
backs off on failures (doubling, reset by a watch that delivers), holds a refusal only an
administrator can fix for /readyz until a request works, and splits a watch's bytes into events
whatever their chunking. No time passes: the backoff's sleep is a recording stand-in."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest

from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.kube import streaming
from controller.kube.api import ApiError
from controller.kube.routing import EventRouter, Loop
from controller.kube.streaming import ListPage, WatchStream
from controller.kube.watching import apply_event, blocking_problem
from tests.builders.cluster import make_node

NODES = ("v1", "nodes")


class ScriptOver(Exception):
    """The scripted API has nothing more to answer: ends the stream's endless loop."""


Answer = list[dict[str, Any]] | ApiError
"""One scripted watch request: its events, or the error it fails with."""


class ScriptedSource:
    """A WatchSource answering each watch request with the next of `watches` and each list with the
    page `pages` has for its token (or the next of `list_errors` first); records what was asked."""

    def __init__(self, watches: Sequence[Answer], pages: Mapping[str, ListPage] | None = None,
                 list_errors: list[ApiError] | None = None) -> None:
        self.watches, self.pages, self.list_errors = list(watches), dict(pages or {}), list(list_errors or [])
        self.watched_from: list[str] = []
        self.listed: list[str] = []
        self.closed = 0
        """Watch requests closed (a 410 or an error leaves none open)."""

    async def list_page(self, resource: tuple[str, str], token: str) -> ListPage:
        self.listed.append(token)
        if self.list_errors:
            raise self.list_errors.pop(0)
        return self.pages[token]

    async def watch(self, resource: tuple[str, str], since: str) -> AsyncGenerator[dict[str, Any], None]:
        if not self.watches:
            raise ScriptOver()
        self.watched_from.append(since)
        answer = self.watches.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        try:
            for event in answer:
                yield event
        finally:
            self.closed += 1


def node(name: str, rv: int, *, unschedulable: bool = False) -> dict[str, Any]:
    obj = make_node(name).obj()
    obj["metadata"]["resourceVersion"] = str(rv)
    obj["spec"]["unschedulable"] = unschedulable
    return obj


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(rv: int) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {"resourceVersion": str(rv)}}}


def gone() -> dict[str, Any]:
    return {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}


class Harness:
    """A stream over nodes with a recording router (woken node names) and sleep (delays)."""

    def __init__(self, source: ScriptedSource, *, optional: bool = False) -> None:
        self.woken: list[str] = []
        self.slept: list[float] = []
        self.cache = ClusterCache()

        def waker(loop: Loop) -> Callable[[str, Mapping[str, Any]], None]:
            def wake(kind: str, obj: Mapping[str, Any]) -> None:
                if loop is Loop.ADMISSION:  # one entry per change (a node wakes two loops)
                    self.woken.append(str(obj["metadata"]["name"]))
            return wake

        async def sleep(delay: float) -> None:
            self.slept.append(delay)

        self.router = EventRouter(self.cache, {loop: waker(loop) for loop in Loop})
        self.stream = WatchStream(KIND_NODE, NODES, source, self.router, apply=apply_event,
                                  problem_of=blocking_problem, optional=optional, sleep=sleep)

    async def run(self, since: str | None) -> None:
        with pytest.raises(ScriptOver):
            await self.stream.run(since)


async def test_it_watches_on_from_the_last_version_seen_bookmarks_included_and_skips_echoes() -> None:
    source = ScriptedSource([
        [event("ADDED", node("a", 11)), event("MODIFIED", node("a", 11))],  # the second: an echo
        [bookmark(15)],
        [event("MODIFIED", node("a", 16, unschedulable=True)), event("DELETED", node("a", 17))],
    ])
    harness = Harness(source)
    await harness.run("10")
    assert source.watched_from == ["10", "11", "15"]
    assert harness.woken == ["a", "a", "a"] and "a" not in harness.cache.nodes
    assert (harness.stream.events, harness.stream.relists, source.listed, harness.slept) == (4, 0, [], [])


async def test_a_410_lists_again_page_by_page_deleting_what_vanished_and_watches_from_the_lists_version() -> None:
    source = ScriptedSource(
        [[gone()], [event("MODIFIED", node("b", 31, unschedulable=True))]],
        pages={"": ListPage([node("b", 20)], "29", "p2"), "p2": ListPage([node("c", 25)], "30", "")})
    harness = Harness(source)
    for name, rv in (("a", 5), ("b", 20)):  # primed; "a" is deleted while the watch is away
        harness.cache.upsert(KIND_NODE, node(name, rv))
    await harness.run("5")
    assert source.listed == ["", "p2"] and source.watched_from == ["5", "30"]
    assert sorted(harness.cache.nodes) == ["b", "c"] and harness.cache.nodes["b"].unschedulable
    # "b" at the version the cache had woke nobody; the new "c", the deleted "a", the changed "b" did
    assert harness.woken == ["c", "a", "b"] and harness.stream.relists == 1
    assert source.closed == 2
    # An answer to a write sent before "a" went (older than the list) cannot bring it back.
    assert harness.cache.upsert(KIND_NODE, node("a", 28)) is False and "a" not in harness.cache.nodes


async def test_a_stream_without_a_version_lists_first() -> None:
    source = ScriptedSource([[]], pages={"": ListPage([node("a", 3)], "4", "")})
    harness = Harness(source)
    await harness.run(None)
    assert source.watched_from == ["4"] and list(harness.cache.nodes) == ["a"]


async def test_failures_back_off_doubling_up_to_the_cap_and_a_delivering_watch_resets_it(
        caplog: pytest.LogCaptureFixture) -> None:
    dropped = ApiError(0, "GET /api/v1/nodes: ServerDisconnectedError")
    answers: list[Answer] = [dropped] * 8
    source = ScriptedSource([*answers, [bookmark(9)], dropped])
    harness = Harness(source)
    with caplog.at_level(logging.INFO, logger="controller.kube.streaming"):
        await harness.run("1")
    assert harness.slept == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 0.1]
    assert source.watched_from == ["1"] * 9 + ["9"]
    # said once while it repeats, once when it works again, once as it fails anew
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO", "WARNING"]
    assert "watching nodes failed (0: GET /api/v1/nodes: ServerDisconnectedError)" in caplog.records[0].getMessage()
    assert harness.stream.problem is None


async def test_a_forbidden_watch_is_held_for_readyz_with_the_fix_until_a_watch_works(
        caplog: pytest.LogCaptureFixture) -> None:
    forbidden = ApiError(403, 'nodes is forbidden: User "tasq" cannot watch resource "nodes"')
    source = ScriptedSource([forbidden, forbidden])
    harness = Harness(source)
    with caplog.at_level(logging.WARNING, logger="controller.kube.streaming"):
        await harness.run("1")
    assert harness.stream.problem is not None and "grant tasq's ClusterRole" in harness.stream.problem
    assert [r.getMessage() for r in caplog.records] == [
        f"tasq cannot watch nodes, so it does not report ready: {harness.stream.problem}"]
    source.watches = [[bookmark(2)]]
    await harness.run("1")
    assert harness.stream.problem is None


async def test_an_optional_kind_without_its_crd_is_said_once_at_info_and_listed_again_slowly(
        caplog: pytest.LogCaptureFixture) -> None:
    missing = ApiError(404, "the server could not find the requested resource")
    source = ScriptedSource([[]], pages={"": ListPage([node("a", 3)], "4", "")}, list_errors=[missing, missing])
    harness = Harness(source, optional=True)
    with caplog.at_level(logging.INFO, logger="controller.kube.streaming"):
        await harness.run(None)
    assert harness.slept == [streaming.OPTIONAL_RETRY_S] * 2 and harness.stream.problem is None
    assert [r.levelname for r in caplog.records] == ["INFO", "INFO"]  # not served; then watching again
    assert list(harness.cache.nodes) == ["a"] and source.watched_from == ["4"]


async def test_another_watch_error_event_backs_off_and_watches_again_from_the_same_version() -> None:
    failed = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "etcd is unhappy"}}
    source = ScriptedSource([[failed], []])
    harness = Harness(source)
    await harness.run("8")
    assert harness.slept == [0.1] and source.watched_from == ["8", "8"] and source.listed == []


class Chunks:
    """An aiohttp StreamReader stand-in that hands over `chunks` as they are."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


async def test_a_watchs_bytes_are_split_into_events_whatever_their_chunks_and_size() -> None:
    big = b'{"type":"ADDED","object":{"x":"' + b"y" * 300_000 + b'"}}'
    chunks = [big[:100_000], big[100_000:] + b"\n" + b'{"a":', b"1}\n\n", b'{"b":2}']
    lines = [line async for line in streaming._lines(Chunks(chunks))]  # type: ignore[arg-type]
    assert lines == [big, b'{"a":1}', b'{"b":2}']
