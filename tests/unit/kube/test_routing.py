"""The one route of a change: each kind wakes exactly the loops the table lists, whether the change
is a watch event or our own write; a version the cache already holds (the watch echoing our write,
a stale answer) wakes nobody; one the cache refuses as malformed wakes nobody and is reported; a pod
change wakes admission only when it changes what the pod takes from its node; the Operator's wakers
find the Job or Workload concerned."""

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
    KIND_POD: lambda: make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w").on("h1").obj(),
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


def _gated() -> dict[str, Any]:
    pod = make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w").requests(cpu=1).obj()
    pod["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_TOPOLOGY}]
    return pod


def _ungated() -> dict[str, Any]:
    pod = _gated()
    pod["spec"]["schedulingGates"] = []
    pod["spec"]["nodeSelector"] = {"example.com/rack": "r1"}
    return pod


def _bound(phase: str = "Pending") -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        pod = _ungated()
        pod["spec"]["nodeName"] = "h1"
        pod["status"]["phase"] = phase
        return pod
    return make


def _resized() -> dict[str, Any]:
    pod = _bound("Running")()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    return pod


def _renamed_annotation() -> dict[str, Any]:
    pod = _bound("Running")()
    pod["metadata"]["annotations"][c.ANNOTATION_TOPOLOGY_WORKLOAD] = "other"
    return pod


# (before, after): the lifecycle of a Job's pod, one step at a time; whether the step changes what the
# pod takes from its node (so may change an admission decision) and wakes the admission loop.
POD_STEPS = [
    pytest.param(None, _gated, False, id="created gated: takes no node"),
    pytest.param(_gated, _ungated, False, id="ungated into its slice, not yet bound"),
    pytest.param(_ungated, _bound(), True, id="bound to a node by the scheduler"),
    pytest.param(_bound(), _bound("Running"), False, id="bound pod starts running"),
    pytest.param(_bound("Running"), _resized, True, id="a bound pod's requests change"),
    pytest.param(_bound("Running"), _renamed_annotation, True, id="a bound pod names another Workload"),
    pytest.param(_bound("Running"), _bound("Succeeded"), True, id="a bound pod ends: its node is freed"),
    pytest.param(_bound("Succeeded"), _bound("Failed"), False, id="an ended pod changes again"),
]


@pytest.mark.parametrize(("before", "after", "wakes_admission"), POD_STEPS)
def test_a_pod_change_wakes_admission_only_when_what_it_takes_from_its_node_changes(
        before: Callable[[], dict[str, Any]] | None, after: Callable[[], dict[str, Any]], wakes_admission: bool) -> None:
    woken = Woken()
    cache = ClusterCache()
    router = woken.router(cache)
    if before is not None:
        router.applied(KIND_POD, versioned(before(), 5))
    woken.calls.clear()
    generation = cache.generation
    assert router.applied(KIND_POD, versioned(after(), 6))
    assert woken.loops() == ({ADMISSION, JOBS, UNGATER} if wakes_admission else {JOBS, UNGATER})
    assert cache.generation > generation  # the cache holds the new version either way


@pytest.mark.parametrize(("pod", "wakes_admission"), [
    pytest.param(_bound("Running"), True, id="a running pod's deletion frees its node"),
    pytest.param(_bound("Succeeded"), False, id="an ended pod's deletion frees nothing"),
    pytest.param(_gated, False, id="a gated pod's deletion frees nothing"),
])
def test_a_pod_deletion_wakes_admission_only_when_the_pod_took_a_node(
        pod: Callable[[], dict[str, Any]], wakes_admission: bool) -> None:
    woken = Woken()
    router = woken.router()
    router.applied(KIND_POD, versioned(pod(), 5))
    woken.calls.clear()
    router.deleted(KIND_POD, versioned(pod(), 5))
    assert woken.loops() == ({ADMISSION, JOBS, UNGATER} if wakes_admission else {JOBS, UNGATER})


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

        pod = versioned(make_pod("p", namespace="ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, name).on("h1").obj(), 7)
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


@pytest.mark.parametrize("kind", sorted(OBJECTS))
def test_only_the_first_version_of_a_workload_or_a_job_is_an_arrival(kind: str) -> None:
    arrivals: list[str] = []
    router = EventRouter(ClusterCache(), {loop: lambda kind, obj: None for loop in Loop},
                         arrived=lambda: arrivals.append(kind))
    router.applied(kind, versioned(OBJECTS[kind](), 1))
    router.applied(kind, versioned(OBJECTS[kind](), 2))
    router.applied(kind, versioned(OBJECTS[kind](), 2))
    arriving = kind in (c.KIND_WORKLOAD, c.KIND_JOB, c.KIND_JOBSET)
    assert arrivals == ([kind] if arriving else [])
