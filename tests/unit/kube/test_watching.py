"""Watch events into the cache through the router: changes wake their loops, versions already
applied are skipped, the state is frozen out of the garbage collector once kopf has replayed the
primed objects; kopf keeps no diff base."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import pytest

from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.kube.routing import EventRouter, Loop
from controller.kube.watching import NoDiffBaseStorage, apply_event
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
    assert (changes, freezes) == ([("ADMISSION", "a")], [1])  # a node concerns admission alone
    apply_event(router, KIND_NODE, "DELETED", node("a", 2))
    assert changes[-1] == ("ADMISSION", "a") and "a" not in cache.nodes


def test_kopf_is_given_an_empty_essence_and_nothing_is_stored_on_the_object() -> None:
    storage = NoDiffBaseStorage()
    body = kopf.Body({"metadata": {"name": "n", "annotations": {}}, "spec": {"x": 1}})
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence={})
    assert not patch
