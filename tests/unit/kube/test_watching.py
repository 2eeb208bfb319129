"""Watch events into the cache: changes reported, versions already applied skipped, the state
frozen out of the garbage collector once kopf has replayed the primed objects; kopf keeps no diff base."""

from __future__ import annotations

import gc
import logging
from collections.abc import Mapping
from typing import Any

import kopf
import pytest

from controller.cache.cluster import KIND_NODE, ClusterCache
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

    def on_change(kind: str, event_type: str, obj: Mapping[str, Any]) -> None:
        changes.append((event_type, obj["metadata"]["name"]))

    cache = ClusterCache()
    for name in ("a", "b"):  # what the priming read put in the cache
        cache.upsert(KIND_NODE, node(name, 1))
    cache.primed = 2
    apply_event(cache, KIND_NODE, None, node("a", 1), on_change)  # kopf's listing: one it had
    assert (changes, freezes) == ([], [])
    apply_event(cache, KIND_NODE, None, node("b", 1), on_change)  # the last one: replay over
    assert (changes, freezes) == ([], [1])
    apply_event(cache, KIND_NODE, "MODIFIED", node("a", 2), on_change)
    apply_event(cache, KIND_NODE, "MODIFIED", node("a", 2), on_change)  # an echo, after the replay
    assert (changes, freezes) == ([("MODIFIED", "a")], [1])


def test_kopf_is_given_an_empty_essence_and_nothing_is_stored_on_the_object() -> None:
    storage = NoDiffBaseStorage()
    body = kopf.Body({"metadata": {"name": "n", "annotations": {}}, "spec": {"x": 1}})
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence={})
    assert not patch


def test_a_malformed_object_is_logged_with_its_field_path_and_reported_to_no_loop(
        caplog: pytest.LogCaptureFixture) -> None:
    changes: list[str] = []
    cache = ClusterCache()
    bad = node("a", 3)
    bad["status"] = {"allocatable": {"cpu": "lots"}}
    with caplog.at_level(logging.WARNING, logger="controller.kube.watching"):
        apply_event(cache, KIND_NODE, "ADDED", bad, lambda kind, event_type, obj: changes.append(event_type))
    assert changes == [] and "a" not in cache.nodes
    (record,) = caplog.records
    assert "Node a (resourceVersion 3) refused" in record.getMessage() and "lots" in record.getMessage()
