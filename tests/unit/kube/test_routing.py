"""The one route of a change: each kind wakes exactly the loops the table lists, whether the change
is a watch event or our own write; a version the cache already holds (the watch echoing our write,
a stale answer) wakes nobody; one the cache refuses as malformed wakes nobody and is reported; the
Operator's wakers find the Job or Workload concerned."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from kubernetes.aio import client

from controller.api import constants as c
from controller.cache.cluster import KIND_NAMESPACE, KIND_NODE, KIND_POD, KIND_PRIORITY_CLASS, ClusterCache
from controller.core.jobs.batch_job import workload_from_job
from controller.kube.operating import Operator
from controller.kube.routing import WAKES, EventRouter, Loop
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import (
    make_cluster_queue,
    make_cohort,
    make_flavor,
    make_job,
    make_local_queue,
    make_priority_class,
    make_topology,
    make_workload,
)

ADMISSION, JOBS, UNGATER, NODES = Loop.ADMISSION, Loop.JOBS, Loop.UNGATER, Loop.NODE_FAILURES


def versioned(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


OBJECTS: dict[str, Callable[[], dict[str, Any]]] = {
    c.KIND_CLUSTER_QUEUE: lambda: make_cluster_queue("cq").flavor("gpu", {"cpu": 8}).obj(),
    c.KIND_LOCAL_QUEUE: lambda: make_local_queue("lq", "cq").obj(),
    c.KIND_RESOURCE_FLAVOR: lambda: make_flavor("gpu").obj(),
    c.KIND_TOPOLOGY: lambda: make_topology("dc", "example.com/rack").obj(),
    KIND_NAMESPACE: lambda: {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
    KIND_PRIORITY_CLASS: lambda: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                  "metadata": {"name": "high"}, "value": 100},
    KIND_NODE: lambda: make_node("h1").obj(),
    KIND_POD: lambda: make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w").obj(),
    c.KIND_WORKLOAD: lambda: make_workload("w").queue("lq").pod_set("main", 1, {"cpu": 1}).obj(),
    c.KIND_JOB: lambda: make_job("train").queue("lq").obj(),
    c.KIND_JOBSET: lambda: {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                            "metadata": {"name": "train", "namespace": "default", "labels": {c.LABEL_QUEUE_NAME: "lq"}},
                            "spec": {"replicatedJobs": []}},
    c.KIND_COHORT: lambda: make_cohort("org").flavor("gpu", {"cpu": 8}).obj(),
    c.KIND_WORKLOAD_PRIORITY_CLASS: lambda: make_priority_class("urgent", 1000).obj(),
}

# Written out, not read from WAKES: the table in docs/architecture.md, row by row.
EXPECTED: list[tuple[str, set[Loop]]] = [
    (c.KIND_CLUSTER_QUEUE, {ADMISSION}),
    (c.KIND_LOCAL_QUEUE, {ADMISSION}),
    (c.KIND_RESOURCE_FLAVOR, {ADMISSION}),
    (c.KIND_TOPOLOGY, {ADMISSION}),
    (KIND_NAMESPACE, {ADMISSION}),
    (KIND_PRIORITY_CLASS, set()),
    (KIND_NODE, {ADMISSION, NODES}),
    (KIND_POD, {ADMISSION, JOBS, UNGATER}),
    (c.KIND_WORKLOAD, {ADMISSION, JOBS, UNGATER, NODES}),
    (c.KIND_JOB, {JOBS}),
    (c.KIND_JOBSET, {JOBS}),
    (c.KIND_COHORT, {ADMISSION}),
    (c.KIND_WORKLOAD_PRIORITY_CLASS, set()),
]


class Woken:
    """Recording wakers: (loop, kind, name) per wake."""

    def __init__(self) -> None:
        self.calls: list[tuple[Loop, str, str]] = []

    def waker(self, loop: Loop) -> Callable[[str, Mapping[str, Any]], None]:
        return lambda kind, obj: self.calls.append((loop, kind, obj["metadata"]["name"]))

    def router(self, cache: ClusterCache | None = None) -> EventRouter:
        return EventRouter(cache or ClusterCache(), {loop: self.waker(loop) for loop in Loop})

    def loops(self) -> set[Loop]:
        return {loop for loop, _, _ in self.calls}


def test_every_watched_kind_has_a_row_and_every_case_a_kind() -> None:
    assert set(WAKES) == {kind for kind, _ in EXPECTED} == set(OBJECTS)


@pytest.mark.parametrize(("kind", "loops"), [pytest.param(k, v, id=k) for k, v in EXPECTED])
def test_an_own_write_of_each_kind_wakes_exactly_the_listed_loops_once(kind: str, loops: set[Loop]) -> None:
    woken = Woken()
    router = woken.router()
    assert router.applied(kind, versioned(OBJECTS[kind](), 5))
    assert woken.loops() == loops
    assert len(woken.calls) == len(loops)  # each once


@pytest.mark.parametrize(("kind", "loops"), [pytest.param(k, v, id=k) for k, v in EXPECTED])
def test_an_echoed_or_stale_write_wakes_nobody_and_leaves_the_cache_alone(kind: str, loops: set[Loop]) -> None:
    del loops
    woken = Woken()
    cache = ClusterCache()
    router = woken.router(cache)
    router.applied(kind, versioned(OBJECTS[kind](), 5))
    woken.calls.clear()
    generation = cache.generation
    assert not router.applied(kind, versioned(OBJECTS[kind](), 5))  # the watch echoes our own write
    assert not router.applied(kind, versioned(OBJECTS[kind](), 4))  # an older answer arrives late
    assert (woken.calls, cache.generation) == ([], generation)


@pytest.mark.parametrize(("kind", "loops"), [pytest.param(k, v, id=k) for k, v in EXPECTED])
def test_a_deletion_wakes_the_same_loops(kind: str, loops: set[Loop]) -> None:
    woken = Woken()
    router = woken.router()
    router.applied(kind, versioned(OBJECTS[kind](), 5))
    woken.calls.clear()
    router.deleted(kind, versioned(OBJECTS[kind](), 5))
    assert woken.loops() == loops


def test_a_malformed_answer_wakes_nobody_keeps_the_version_before_and_is_reported_once(
        caplog: pytest.LogCaptureFixture) -> None:
    woken = Woken()
    cache = ClusterCache()
    router = woken.router(cache)
    router.applied(c.KIND_WORKLOAD, versioned(OBJECTS[c.KIND_WORKLOAD](), 5))
    woken.calls.clear()
    bad = versioned(OBJECTS[c.KIND_WORKLOAD](), 6)
    bad["spec"]["podSets"][0]["count"] = "lots"
    with caplog.at_level(logging.WARNING, logger="controller.kube.routing"):
        assert not router.applied(c.KIND_WORKLOAD, bad)
        assert router.refused(c.KIND_WORKLOAD, bad)
        assert not router.applied(c.KIND_WORKLOAD, versioned(OBJECTS[c.KIND_WORKLOAD](), 5))  # a stale echo
        assert not router.refused(c.KIND_WORKLOAD, versioned(OBJECTS[c.KIND_WORKLOAD](), 5))
    assert woken.calls == []
    assert cache.workloads["default/w"].obj.metadata.resource_version == "5"
    (record,) = caplog.records
    assert record.getMessage().startswith("Workload default/w (resourceVersion 6) refused") \
        and "spec.podSets.0.count" in record.getMessage()


def test_a_router_missing_a_waker_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no waker for Job reconciler"):
        EventRouter(ClusterCache(), {Loop.ADMISSION: lambda kind, obj: None, Loop.UNGATER: lambda kind, obj: None})


async def test_the_operators_wakers_find_the_job_and_workload_concerned() -> None:
    # No API is called: building the Operator and routing changes only touches its loops' queues.
    api_client = client.ApiClient()
    try:
        operator = Operator(api_client)
        job = versioned(make_job("train", namespace="ns").queue("lq").obj(), 3)
        job["metadata"]["uid"] = "u1"
        workload = versioned(workload_from_job(job), 4)
        name = workload["metadata"]["name"]
        operator.admission._wake.clear()
        woken: dict[tuple[str, str], None] = {}  # the owners the Job reconciler is told of, in order
        operator.jobs.notify = lambda key, kind=c.KIND_JOB: woken.__setitem__((kind, key), None)  # type: ignore[method-assign]
        assert operator.router.applied(c.KIND_WORKLOAD, workload)
        assert list(woken) == [(c.KIND_JOB, "ns/train")]  # its owner
        assert set(operator.ungater._due) == {("ns", name)}
        assert operator.admission._wake.is_set()

        woken.clear()
        operator.ungater._due.clear()
        operator.admission._wake.clear()
        assert operator.router.applied(c.KIND_JOB, {**job, "metadata": {**job["metadata"], "resourceVersion": "6"}})
        assert list(woken) == [(c.KIND_JOB, "ns/train")]
        assert not operator.admission._wake.is_set() and not operator.ungater._due

        pod = versioned(make_pod("p", namespace="ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, name).obj(), 7)
        assert operator.router.applied(KIND_POD, pod)
        assert set(operator.ungater._due) == {("ns", name)}
        assert operator.admission._wake.is_set()
        operator.ungater._due.clear()
        assert operator.router.applied(KIND_POD, versioned(make_pod("loose", namespace="ns").obj(), 8))
        assert not operator.ungater._due  # a pod of no Workload concerns no ungating
        assert not operator.router.applied(KIND_POD, pod)  # echoed: nobody

        # A pod of the Job: it wakes the reconciler only while the Job waits for its pods to go.
        owned = make_pod("train-0", namespace="ns").obj()
        owned["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": True}]
        woken.clear()
        assert operator.router.applied(KIND_POD, versioned(owned, 9))
        assert not woken  # the Job runs (not suspended) and has its Workload
        operator.router.applied(c.KIND_JOB, {**job, "spec": {**job["spec"], "suspend": True},
                                             "metadata": {**job["metadata"], "resourceVersion": "10"}})
        woken.clear()
        assert operator.router.applied(KIND_POD, versioned(owned, 11))
        assert list(woken) == [(c.KIND_JOB, "ns/train")]  # suspended: its pods must be gone first
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated
