"""The storage layer: one revision counter, bounded history with compaction, owner index."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.server.errors import ETCD_MAX_REQUEST_BYTES, ETCD_MAX_SEND_BYTES, ApiError
from devcluster.server.store import (
    ADDED,
    DELETED,
    MODIFIED,
    Compacted,
    Store,
    StoredEvent,
    etcd_request_bytes,
)

PODS = ("", "pods")
CMS = ("", "configmaps")


def obj(name: str, uid: str = "", owners: tuple[str, ...] = ()) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}"}
    if owners:
        meta["ownerReferences"] = [{"uid": o} for o in owners]
    return {"metadata": meta}


def test_every_write_takes_the_next_global_revision() -> None:
    store = Store()
    a = store.put(PODS, obj("a"))
    b = store.put(CMS, obj("b"))
    c = store.put(PODS, obj("a"))
    assert [int(x["metadata"]["resourceVersion"]) for x in (a, b, c)] == [2, 3, 4]
    removed = store.remove(PODS, ("ns", "a"))
    assert removed is not None and removed["metadata"]["resourceVersion"] == "5"


def test_events_since_replays_only_later_events_of_that_resource() -> None:
    store = Store()
    first = int(store.put(PODS, obj("a"))["metadata"]["resourceVersion"])
    store.put(CMS, obj("x"))
    store.put(PODS, obj("a"))
    store.remove(PODS, ("ns", "a"))
    assert [e.type for e in store.events_since(PODS, first)] == [MODIFIED, DELETED]
    assert [e.type for e in store.events_since(PODS, first - 1)] == [ADDED, MODIFIED, DELETED]


def test_history_beyond_the_limit_is_compacted() -> None:
    store = Store(history_limit=2)
    revisions = [int(store.put(PODS, obj(f"p{i}"))["metadata"]["resourceVersion"]) for i in range(4)]
    assert len(store.events_since(PODS, revisions[1])) == 2
    with pytest.raises(Compacted) as gone:
        store.events_since(PODS, revisions[0])
    assert gone.value.oldest == revisions[1]


def test_explicit_compaction_expires_every_older_revision() -> None:
    store = Store()
    rv = int(store.put(PODS, obj("a"))["metadata"]["resourceVersion"])
    store.put(PODS, obj("b"))
    store.compact()
    with pytest.raises(Compacted):
        store.events_since(PODS, rv)
    assert store.events_since(PODS, store.revision) == []


def test_compacting_to_a_revision_expires_only_what_is_at_or_before_it() -> None:
    store = Store()
    first = int(store.put(PODS, obj("a"))["metadata"]["resourceVersion"])
    mark = int(store.put(CMS, obj("x"))["metadata"]["resourceVersion"])
    store.put(PODS, obj("b"))
    store.compact_to(mark)
    with pytest.raises(Compacted):
        store.events_since(PODS, first)
    assert [e.object["metadata"]["name"] for e in store.events_since(PODS, mark)] == ["b"]
    assert store.events_since(CMS, mark) == []


def test_subscribers_see_writes_synchronously_with_the_previous_object() -> None:
    store = Store()
    seen: list[StoredEvent] = []
    unsubscribe = store.subscribe(PODS, seen.append)
    store.put(PODS, {**obj("a"), "spec": 1})
    store.put(PODS, {**obj("a"), "spec": 2})
    unsubscribe()
    store.put(PODS, obj("c"))
    assert [(e.type, e.object.get("spec"), (e.old or {}).get("spec")) for e in seen] == [
        (ADDED, 1, None), (MODIFIED, 2, 1)]


def test_dependents_follow_owner_references_through_updates_and_removal() -> None:
    store = Store()
    store.put(PODS, obj("p1", owners=("job-1",)))
    store.put(PODS, obj("p2", owners=("job-1", "job-2")))
    assert [d["metadata"]["name"] for _k, d in store.dependents("job-1")] == ["p1", "p2"]
    store.put(PODS, obj("p2", owners=("job-2",)))
    assert [d["metadata"]["name"] for _k, d in store.dependents("job-1")] == ["p1"]
    store.remove(PODS, ("ns", "p1"))
    assert store.dependents("job-1") == []
    found = store.by_uid("uid-p2")
    assert found is not None and found[1]["metadata"]["name"] == "p2"


def test_per_namespace_counts_follow_creates_and_removals() -> None:
    store = Store()
    store.put(PODS, obj("a"))
    store.put(PODS, obj("a"))  # an update does not count twice
    store.put(PODS, {"metadata": {"name": "b", "namespace": "other", "uid": "u-b"}})
    assert (store.count(PODS, "ns"), store.count(PODS, "other"), store.count(PODS)) == (1, 1, 2)
    store.remove(PODS, ("ns", "a"))
    assert (store.count(PODS, "ns"), store.count(PODS)) == (0, 1)


@pytest.mark.parametrize(("padding", "want"), [
    (ETCD_MAX_REQUEST_BYTES - 2048, None),
    (ETCD_MAX_REQUEST_BYTES + 1, "etcdserver: request is too large"),
    (ETCD_MAX_SEND_BYTES + 1, "rpc error: code = ResourceExhausted desc = trying to send message larger than max ("),
], ids=["just under etcd's limit", "over etcd's limit", "over the etcd client's send limit"])
def test_a_write_too_large_for_etcd_is_refused_and_stores_nothing(padding: int, want: str | None) -> None:
    store = Store()
    big = {**obj("big"), "data": {"blob": "x" * padding}}
    seen: list[StoredEvent] = []
    store.subscribe(CMS, seen.append)
    before = store.revision
    if want is None:
        store.put(CMS, big)
        assert etcd_request_bytes(CMS, big) <= ETCD_MAX_REQUEST_BYTES and len(seen) == 1
        return
    with pytest.raises(ApiError) as refused:
        store.put(CMS, big)
    assert (refused.value.code, refused.value.status()["message"].startswith(want)) == (500, True)
    assert "reason" not in refused.value.status()
    assert (store.revision, seen, store.get(CMS, ("ns", "big"))) == (before, [], None)
