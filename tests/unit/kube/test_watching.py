"""Watch events into the cache through the router: changes wake their loops, versions already
applied are skipped; priming lists page by page, returns each list's version and freezes what it
primed out of the garbage collector; watch events are counted by kind and outcome; it waits out a missing CRD or a forbidden list, saying once
what to do; one stream per watched resource."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.kube import watching
from controller.kube.api import ApiError
from controller.kube.routing import EventRouter, Loop
from controller.kube.streaming import ListPage
from controller.kube.watching import apply_event, prime, watch_streams
from tests.builders.cluster import make_node


def node(name: str, rv: int) -> dict[str, Any]:
    obj = make_node(name).obj()
    obj["metadata"]["resourceVersion"] = str(rv)
    return obj


def test_echoes_are_skipped_and_changes_and_deletions_wake_the_loops_a_node_concerns() -> None:
    changes: list[tuple[str, str]] = []

    def woken(loop: Loop) -> Callable[[str, Mapping[str, Any]], None]:
        return lambda kind, obj: changes.append((loop.name, obj["metadata"]["name"]))

    cache = ClusterCache()
    router = EventRouter(cache, {loop: woken(loop) for loop in Loop})
    cache.upsert(KIND_NODE, node("a", 1))  # what the priming read put in the cache
    apply_event(router, KIND_NODE, "ADDED", node("a", 1))  # a relist: one it had
    assert changes == []
    beat = node("a", 2)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-27T09:00:00Z"
    apply_event(router, KIND_NODE, "MODIFIED", beat)  # a status beat: nothing the cache keeps
    assert changes == [] and cache.unchanged_nodes == 1
    cordoned = node("a", 3)
    cordoned["spec"]["unschedulable"] = True
    apply_event(router, KIND_NODE, "MODIFIED", cordoned)
    apply_event(router, KIND_NODE, "MODIFIED", cordoned)  # an echo
    # a node concerns admission and the Workloads placed on it
    assert changes == [("ADMISSION", "a"), ("NODE_FAILURES", "a")] and cache.nodes["a"].unschedulable
    apply_event(router, KIND_NODE, "DELETED", cordoned)
    assert changes[-2:] == [("ADMISSION", "a"), ("NODE_FAILURES", "a")] and "a" not in cache.nodes
    # counted by outcome (the operator logs them when it stops)
    assert router.watched == {(KIND_NODE, watching.WATCHED_ECHO): 3, (KIND_NODE, watching.WATCHED_NEWS): 1,
                              (KIND_NODE, watching.WATCHED_DELETED): 1}


def quiet_router() -> EventRouter:
    """A router over an empty cache whose wakers do nothing."""
    return EventRouter(ClusterCache(), {loop: lambda kind, obj: None for loop in Loop})


class ListingSource:
    """A WatchSource stand-in whose `list_page` answers from `refusals` (status codes, in order) for
    one resource before answering with `pages` of it (nothing for the others)."""

    def __init__(self, plural: str, refusals: list[int], pages: dict[str, ListPage] | None = None) -> None:
        self.plural, self.refusals, self.pages = plural, refusals, pages or {}
        self.lists: list[str] = []

    async def list_page(self, resource: tuple[str, str], token: str) -> ListPage:
        self.lists.append(resource[1])
        if resource[1] == self.plural and self.refusals:
            raise ApiError(self.refusals.pop(0), f"refused {resource[1]}")
        if resource[1] == self.plural and token in self.pages:
            return self.pages[token]
        return ListPage([], "7", "")

    def watch(self, resource: tuple[str, str], since: str) -> Any:
        raise AssertionError("priming does not watch")


@pytest.mark.parametrize(("plural", "status", "says"), [
    ("workloads", 404, "the API server does not serve workloads.kueue.x-k8s.io: tasq's CRDs are not installed; "
                       "install them with `kubectl apply --server-side -k config/crd` (or `-f crds/`)"),
    ("nodes", 403, "forbidden to list nodes (refused nodes); grant tasq's ClusterRole (config/rbac/role.yaml) "
                   "to its identity"),
], ids=["a-missing-crd", "a-forbidden-list"])
async def test_priming_waits_out_a_refusal_only_an_administrator_can_fix_saying_once_what_to_do(
        plural: str, status: int, says: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(watching, "BLOCKED_RETRY_S", 0)
    api = ListingSource(plural, [status] * 3)
    held: list[tuple[str, str]] = []

    class Blocked(dict[str, str]):
        def __setitem__(self, key: str, value: str) -> None:
            held.append((key, value))
            super().__setitem__(key, value)
    blocked = Blocked()
    with caplog.at_level(logging.WARNING, logger="controller.kube.watching"):
        await prime(quiet_router(), api, blocked)
    assert api.lists.count(plural) == 4
    assert held == [(plural, says)] * 3  # what /readyz said meanwhile
    assert blocked == {}  # listed at last: nothing holds it back any more
    assert [r.getMessage() for r in caplog.records] == [
        f"tasq cannot start, so it does not report ready: {says}",
        f"{plural}{'.kueue.x-k8s.io' if status == 404 else ''}: listed now; tasq goes on starting"]
    assert set(api.lists) == {plural for _, _, plural in watching.RESOURCES.values()}  # and then the rest


async def test_priming_gives_up_on_a_refusal_that_no_waiting_fixes() -> None:
    with pytest.raises(ApiError, match="400: refused pods"):
        await prime(quiet_router(), ListingSource("pods", [400]))


def test_a_malformed_object_is_logged_with_its_field_path_and_reported_to_no_loop(
        caplog: pytest.LogCaptureFixture) -> None:
    changes: list[str] = []
    cache = ClusterCache()
    router = EventRouter(cache, {loop: lambda kind, obj: changes.append(kind) for loop in Loop})
    bad = node("a", 3)
    bad["status"] = {"allocatable": {"cpu": "lots"}}
    with caplog.at_level(logging.WARNING, logger="controller.kube.routing"):
        apply_event(router, KIND_NODE, "ADDED", bad)
    assert changes == [] and "a" not in cache.nodes
    (record,) = caplog.records
    assert "Node a (resourceVersion 3) refused" in record.getMessage() and "lots" in record.getMessage()


async def test_priming_follows_the_pages_and_returns_each_lists_version_to_watch_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    router = quiet_router()
    source = ListingSource("nodes", [], {"": ListPage([node("a", 3)], "40", "next"),
                                         "next": ListPage([node("b", 4)], "41", "")})
    versions = await prime(router, source)
    assert sorted(router.cache.nodes) == ["a", "b"] and router.cache.primed == 2
    assert versions[KIND_NODE] == "41" and versions["Pod"] == "7"
    # A freeze after each page of every resource (the one listed on two pages, each other on one), and at the end.
    assert len(freezes) == len(watching.RESOURCES) + 1 + 1


async def test_priming_applies_each_page_as_it_comes_and_a_retried_list_drops_what_its_success_lacks() -> None:
    router = quiet_router()
    cached_when_asked: list[list[str]] = []

    class BreakingOnce(ListingSource):
        """Nodes on two pages; the first attempt's first page also holds "gone" (deleted before the
        retry) and its second page fails with a 500."""

        attempt = 0

        async def list_page(self, resource: tuple[str, str], token: str) -> ListPage:
            if resource[1] != "nodes":
                return await super().list_page(resource, token)
            if token == "":
                self.attempt += 1
                return ListPage([node("a", 3), node("gone", 2)] if self.attempt == 1 else [node("a", 3)], "40", "next")
            cached_when_asked.append(sorted(router.cache.nodes))
            if self.attempt == 1:
                raise ApiError(500, "the connection broke")
            return ListPage([node("b", 4)], "41", "")

    versions = await prime(router, BreakingOnce("nodes", []))
    # Each attempt's first page was in the cache before its second page was asked for.
    assert cached_when_asked == [["a", "gone"], ["a", "gone"]]
    # "gone" was only in the failed attempt: deleted once the retried list succeeded without it.
    assert sorted(router.cache.nodes) == ["a", "b"] and versions[KIND_NODE] == "41"


async def test_an_optional_kind_not_served_is_primed_as_none_and_its_stream_lists_it_later() -> None:
    optional = sorted(watching.OPTIONAL_KINDS)
    assert optional, "the JobSet integration is optional"
    _, _, plural = watching.RESOURCES[optional[0]]
    versions = await prime(quiet_router(), ListingSource(plural, [404]))
    assert versions[optional[0]] is None
    streams = {stream.kind: stream for stream in watch_streams(quiet_router(), ListingSource(plural, []))}
    assert set(streams) == set(watching.RESOURCES)
    assert streams[optional[0]].optional and not streams[KIND_NODE].optional
