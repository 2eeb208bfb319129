"""controller.cache.backlog: a waiting Workload's status read once per version, and the state
`ClusterCache.admission_state` builds with those reads kept across cycles equal to one built by a
cache that never read anything before, after any sequence of events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.workload import Workload
from controller.cache.backlog import BacklogReads, said
from controller.cache.cluster import ClusterCache
from controller.core.admission.conditions import mark_finished, mark_pending
from controller.core.admission.cycle import resolve_cluster_queue
from tests.builders.kueue import make_cluster_queue, make_flavor, make_local_queue, make_workload

GPU = "nvidia.com/gpu"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_version_is_read_once_and_a_new_version_read_again() -> None:
    reads = BacklogReads()
    first = Workload.from_dict(make_workload("w").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    assert reads.says("default/w", first) is None
    mark_pending(first, c.REASON_INADMISSIBLE, "held", T0)  # in place: the same version, not read again
    assert reads.says("default/w", first) is None
    told = first.model_copy(deep=True)
    assert reads.says("default/w", told) == (c.REASON_INADMISSIBLE, "held")


def test_what_a_pass_did_not_ask_about_is_forgotten() -> None:
    reads = BacklogReads()
    wl = Workload.from_dict(make_workload("w").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    reads.says("default/a", wl)
    reads.says("default/b", wl)
    reads.forget_unseen()
    reads.says("default/a", wl)
    reads.forget_unseen()
    assert len(reads) == 1


@pytest.mark.parametrize(("status", "older_generation", "expected"), [
    pytest.param("False", False, (c.REASON_INADMISSIBLE, "held"), id="false-for-this-generation"),
    pytest.param("False", True, None, id="false-for-an-older-generation"),
    pytest.param("True", False, None, id="quota-reserved"),
])
def test_said_is_a_quota_reserved_false_of_the_current_generation(
        status: str, older_generation: bool, expected: tuple[str, str] | None) -> None:
    wl = Workload.from_dict(make_workload("w").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    wl.set_condition(c.CONDITION_QUOTA_RESERVED, status, c.REASON_INADMISSIBLE, "held", T0)  # type: ignore[arg-type]
    if older_generation:
        wl.metadata.generation = (wl.metadata.generation or 0) + 1
    assert said(wl) == expected


# -- property: incremental equals from scratch -------------------------------------------------

_QUEUES = ("lq", "held", "missing")
"""LocalQueues the Workloads name: lq runs (ClusterQueue cq), held may be stopped, missing does not exist."""

Event = tuple[Any, ...]
events = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 5), st.sampled_from(_QUEUES)),
    st.tuples(st.just("tell"), st.integers(0, 5)),
    st.tuples(st.just("touch"), st.integers(0, 5)),
    st.tuples(st.just("finish"), st.integers(0, 5)),
    st.tuples(st.just("deactivate"), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("stop"), st.sampled_from(("Hold", "None"))),
    st.tuples(st.just("cycle"),),
), max_size=30)


class World:
    """The objects as the API holds them, fed to a cache one event at a time."""

    def __init__(self) -> None:
        self.version = 0
        self.config: list[tuple[str, dict[str, Any]]] = []
        self.workloads: dict[str, dict[str, Any]] = {}
        self.cache = ClusterCache()
        self.put(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").obj())
        self.put(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj())
        self.put(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
        self.put(c.KIND_LOCAL_QUEUE, make_local_queue("held", "cq").obj())

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if kind == c.KIND_WORKLOAD:
            self.workloads[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
        else:
            self.config = [(k, o) for k, o in self.config if (k, o["metadata"]["name"]) != (kind, obj["metadata"]["name"])]
            self.config.append((kind, obj))
        self.cache.upsert(kind, obj)

    def changed(self, key: str, change: Any) -> None:
        obj = self.workloads.get(key)
        if obj is not None:
            model = Workload.from_dict(obj)
            change(model)
            self.put(c.KIND_WORKLOAD, model.to_dict())

    def apply(self, event: Event) -> None:
        kind = event[0]
        if kind == "add":
            self.put(c.KIND_WORKLOAD, make_workload(f"w{event[1]}").queue(event[2]).pod_set("main", 1, {GPU: 1}).obj())
        elif kind == "tell":  # what the admission loop writes: the reason a fresh cycle gives
            why = self.cache.admission_state(0.0).pending.get(f"default/w{event[1]}")
            if why is not None:
                self.changed(why.key, lambda m: mark_pending(m, why.reason, why.message, T0))
        elif kind == "touch":  # a new version that changes nothing admission reads
            self.changed(f"default/w{event[1]}", lambda m: None)
        elif kind == "finish":
            self.changed(f"default/w{event[1]}", lambda m: mark_finished(m, True, "done", T0))
        elif kind == "deactivate":
            self.changed(f"default/w{event[1]}", lambda m: setattr(m.spec, "active", False))
        elif kind == "delete":
            obj = self.workloads.pop(f"default/w{event[1]}", None)
            if obj is not None:
                self.cache.delete(c.KIND_WORKLOAD, obj)
        elif kind == "stop":
            lq = make_local_queue("held", "cq").obj()
            lq["spec"]["stopPolicy"] = event[1]
            self.put(c.KIND_LOCAL_QUEUE, lq)
        else:
            self.cache.admission_state(0.0)

    def from_scratch(self) -> ClusterCache:
        """A cache fed the objects as they are now, in their arrival order: it never read anything."""
        fresh = ClusterCache()
        for kind, obj in self.config:
            fresh.upsert(kind, obj)
        for obj in self.workloads.values():
            fresh.upsert(c.KIND_WORKLOAD, obj)
        return fresh


def _brute_force_waiting(world: World) -> set[str]:
    """The Workloads a cycle must decide or explain: every active, unfinished one, except one that
    cannot be queued whose QuotaReserved=False already says exactly why."""
    fresh = world.from_scratch()
    snapshot = fresh.snapshot()
    out = set()
    for key, obj in world.workloads.items():
        model = Workload.from_dict(obj)
        if model.is_finished or not model.active:
            continue
        queue = model.spec.queue_name
        if queue == "lq":
            out.add(key)
            continue
        stopped = any(k == c.KIND_LOCAL_QUEUE and o["metadata"]["name"] == "held"
                      and o["spec"].get("stopPolicy", "None") != "None" for k, o in world.config)
        if queue == "held" and not stopped:
            out.add(key)
            continue
        told = model.condition(c.CONDITION_QUOTA_RESERVED)
        _, why = resolve_cluster_queue(snapshot, fresh.workloads[key].info)
        says = told is not None and told.status == "False" and why is not None \
            and (told.reason, told.message) == (why.reason, why.message)
        if not says:
            out.add(key)
    return out


@settings(max_examples=150, deadline=None)
@given(events)
def test_the_state_after_any_events_equals_the_state_built_from_scratch(steps: list[Event]) -> None:
    world = World()
    for step in steps:
        world.apply(step)
        kept = world.cache.admission_state(0.0)
        scratch = world.from_scratch().admission_state(0.0)
        assert kept.waiting() == scratch.waiting()
        assert kept.pending == scratch.pending
        assert kept.queue_of == scratch.queue_of
        assert {n: list(q.members) for n, q in kept.queues.queues.items()} == \
            {n: list(q.members) for n, q in scratch.queues.queues.items()}
        assert set(kept.waiting()) == _brute_force_waiting(world)
