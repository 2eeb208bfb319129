"""Watch events into the cache through the router: changes wake their loops, versions already
applied are skipped, the state is frozen out of the garbage collector once kopf has replayed the
primed objects; kopf keeps no diff base; priming waits out a missing CRD or a forbidden list,
saying once what to do."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import pytest

from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.kube import watching
from controller.kube.api import ApiError
from controller.kube.routing import EventRouter, Loop
from controller.kube.watching import NoDiffBaseStorage, apply_event, prime
from tests.builders.cluster import make_node


def node(name: str, rv: int) -> dict[str, Any]:
    obj = make_node(name).obj()
    obj["metadata"]["resourceVersion"] = str(rv)
    return obj


def test_replayed_objects_are_skipped_and_the_state_frozen_once_the_replay_is_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    changes: list[tuple[str, str]] = []

    def woken(loop: Loop) -> Callable[[str, Mapping[str, Any]], None]:
        return lambda kind, obj: changes.append((loop.name, obj["metadata"]["name"]))

    cache = ClusterCache()
    router = EventRouter(cache, {loop: woken(loop) for loop in Loop})
    for name in ("a", "b"):  # what the priming read put in the cache
        cache.upsert(KIND_NODE, node(name, 1))
    cache.primed = 2
    apply_event(router, KIND_NODE, None, node("a", 1))  # kopf's listing: one it had
    assert (changes, freezes) == ([], [])
    apply_event(router, KIND_NODE, None, node("b", 1))  # the last one: replay over
    assert (changes, freezes) == ([], [1])
    apply_event(router, KIND_NODE, "MODIFIED", node("a", 2))
    apply_event(router, KIND_NODE, "MODIFIED", node("a", 2))  # an echo, after the replay
    # a node concerns admission and the Workloads placed on it
    assert (changes, freezes) == ([("ADMISSION", "a"), ("NODE_FAILURES", "a")], [1])
    apply_event(router, KIND_NODE, "DELETED", node("a", 2))
    assert changes[-2:] == [("ADMISSION", "a"), ("NODE_FAILURES", "a")] and "a" not in cache.nodes


def test_kopf_is_given_an_empty_essence_and_nothing_is_stored_on_the_object() -> None:
    storage = NoDiffBaseStorage()
    body = kopf.Body({"metadata": {"name": "n", "annotations": {}}, "spec": {"x": 1}})
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence={})
    assert not patch


def quiet_router() -> EventRouter:
    """A router over an empty cache whose wakers do nothing."""
    return EventRouter(ClusterCache(), {loop: lambda kind, obj: None for loop in Loop})


class ListingApi:
    """A KubeApi stand-in whose `list` answers from `refusals` (status codes, in order) for one
    resource before answering with nothing."""

    def __init__(self, plural: str, refusals: list[int]) -> None:
        self.plural, self.refusals = plural, refusals
        self.lists: list[str] = []

    async def list(self, resource: tuple[str, str]) -> list[dict[str, Any]]:
        self.lists.append(resource[1])
        if resource[1] == self.plural and self.refusals:
            raise ApiError(self.refusals.pop(0), f"refused {resource[1]}")
        return []


@pytest.mark.parametrize(("plural", "status", "says"), [
    ("workloads", 404, "the API server does not serve workloads.kueue.x-k8s.io: tasq's CRDs are not installed; "
                       "install them with `kubectl apply --server-side -k config/crd` (or `-f crds/`)"),
    ("nodes", 403, "forbidden to list nodes (refused nodes); grant tasq's ClusterRole (config/rbac/role.yaml) "
                   "to its identity"),
], ids=["a-missing-crd", "a-forbidden-list"])
async def test_priming_waits_out_a_refusal_only_an_administrator_can_fix_saying_once_what_to_do(
        plural: str, status: int, says: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(watching, "BLOCKED_RETRY_S", 0)
    api = ListingApi(plural, [status] * 3)
    with caplog.at_level(logging.WARNING, logger="controller.kube.watching"):
        await prime(quiet_router(), api)  # type: ignore[arg-type]  # a stand-in for KubeApi
    assert api.lists.count(plural) == 4
    assert [r.getMessage() for r in caplog.records] == [
        f"tasq cannot start, so it does not report ready: {says}",
        f"{plural}{'.kueue.x-k8s.io' if status == 404 else ''}: listed now; tasq goes on starting"]
    assert set(api.lists) == {plural for _, _, plural in watching.RESOURCES.values()}  # and then the rest


async def test_priming_gives_up_on_a_refusal_that_no_waiting_fixes() -> None:
    with pytest.raises(ApiError, match="400: refused pods"):
        await prime(quiet_router(), ListingApi("pods", [400]))  # type: ignore[arg-type]  # a stand-in for KubeApi


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


@pytest.mark.parametrize(("message", "kept"), [
    ("Unresolved resources cannot be served (try creating their CRDs): "
     "Selector(group='jobset.x-k8s.io', version='v1alpha2', any_name='jobsets')", False),
    ("Unresolved resources cannot be served (try creating their CRDs): "
     "Selector(group='kueue.x-k8s.io', version='v1beta2', any_name='workloads'), "
     "Selector(group='jobset.x-k8s.io', version='v1alpha2', any_name='jobsets')", True),
    ("something else entirely", True),
], ids=["only-jobset-missing", "tasqs-own-crd-missing-too", "another-warning"])
def test_kopfs_unresolved_warning_is_dropped_only_for_optional_kinds(message: str, kept: bool) -> None:
    record = logging.LogRecord("kopf._core.reactor.observation", logging.WARNING, __file__, 1, message, None, None)
    assert watching._OptionalKindsUnresolved().filter(record) is kept
