"""The pod GC's orphan sweep on a manual clock: pods of a node gone for the 40 s quarantine are failed and deleted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from devcluster.server.apiserver import ApiServer
from devcluster.server.store import StoredEvent
from devcluster.simulated.components import Components, ManualClock
from devcluster.simulated.podgc import PodGC
from tests.builders.cluster import make_node, make_pod

Step = Callable[[ApiServer], Any]


async def delete_node(api: ApiServer) -> None:
    await api.delete(api.resource("v1", "nodes"), "", "n1")


async def recreate_node(api: ApiServer) -> None:
    await api.create(api.resource("v1", "nodes"), "", make_node("n1").build())


@dataclass
class OrphanCase:
    name: str
    node_exists: bool
    phase: str
    after_bind: list[tuple[float, Step]]  # (seconds to advance first, action)
    seconds: float  # then advance this much and sweep
    want_deleted: bool
    want_last_phase: str | None = None  # the phase written just before deletion


CASES = [
    OrphanCase("running_pod_of_a_deleted_node_is_failed_then_deleted_after_40s", True, "Running",
               [(0, delete_node)], 40, want_deleted=True, want_last_phase="Failed"),
    OrphanCase("not_yet_at_39s", True, "Running", [(0, delete_node)], 39, want_deleted=False),
    OrphanCase("succeeded_pod_keeps_its_phase_and_is_deleted", True, "Succeeded", [(0, delete_node)], 40,
               want_deleted=True, want_last_phase="Succeeded"),
    OrphanCase("node_back_within_the_quarantine_keeps_its_pods", True, "Running",
               [(0, delete_node), (30, recreate_node)], 30, want_deleted=False),
    OrphanCase("pod_bound_to_a_node_that_never_existed", False, "Pending", [], 40, want_deleted=True,
               want_last_phase="Failed"),
    OrphanCase("pods_of_live_nodes_are_never_touched", True, "Running", [], 3600, want_deleted=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_orphaned_pods_are_collected_after_the_quarantine(case: OrphanCase) -> None:
    clock = ManualClock()
    api = ApiServer(now=clock)
    if case.node_exists:
        await api.create(api.resource("v1", "nodes"), "", make_node("n1").build())
    gc = PodGC(api).start()
    seen: list[StoredEvent] = []
    api.store.subscribe(("", "pods"), seen.append)
    body = make_pod("p").on("n1", phase=case.phase).build()
    del body["metadata"]["uid"]
    await api.create(api.resource("v1", "pods"), "default", body)
    await api.patch(api.resource("v1", "pods"), "default", "p", "application/merge-patch+json",
                    {"status": {"phase": case.phase}}, subresource="status")
    for seconds, action in case.after_bind:
        clock.advance(seconds)
        await action(api)
        await gc.sync()
    clock.advance(case.seconds)
    await gc.sync()

    remaining = await api.list_objects(api.resource("v1", "pods"), "default")
    assert (len(remaining["items"]) == 0) == case.want_deleted
    if case.want_last_phase is not None:
        last = seen[-2].object  # the status write just before the DELETED event
        assert seen[-1].type == "DELETED"
        assert last["status"]["phase"] == case.want_last_phase
        assert [(cd["reason"], cd["message"]) for cd in last["status"]["conditions"]
                if cd["type"] == "DisruptionTarget"] == [("DeletionByPodGC", "PodGC: node no longer exists")]


async def test_components_advance_stops_at_the_quarantine_and_the_job_replaces_the_pod() -> None:
    clock = ManualClock()
    api = ApiServer(now=clock)
    for name in ("n1", "n2"):
        await api.create(api.resource("v1", "nodes"), "", make_node(name).allocatable(cpu="1", pods="1").build())
    components = Components(api).start()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 3,
                    "template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "main", "image": "img",
                                                          "resources": {"requests": {"cpu": "1"}}}]}}}}
    await api.create(api.resource("batch/v1", "jobs"), "default", job)
    await components.settle()
    first = (await api.list_objects(api.resource("v1", "pods"), "default"))["items"]
    await api.delete(api.resource("v1", "nodes"), "", first[0]["spec"]["nodeName"])

    await components.advance(clock, 60)  # the quarantine, then the Job's 10 s failure backoff

    pods = (await api.list_objects(api.resource("v1", "pods"), "default"))["items"]
    assert [p["metadata"]["name"] for p in pods] != [first[0]["metadata"]["name"]]
    assert [(p["spec"].get("nodeName"), p["status"]["phase"]) for p in pods] == [
        ({"n1": "n2", "n2": "n1"}[first[0]["spec"]["nodeName"]], "Running")]
    status = (await api.get(api.resource("batch/v1", "jobs"), "default", "j"))["status"]
    assert (status.get("failed"), status.get("active")) == (1, 1)
    components.close()
