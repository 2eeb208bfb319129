"""Status writes: a queue's or Cohort's is not sent when the cached object has it already (a
restarted or newly elected operator recomputes every status; most are unchanged); an eviction's
only to a Workload that still holds a reservation and is not finished."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.api.workload import Workload
from controller.kube.statuses import write_cohort_status, write_queue_status, write_reserved_status
from tests.builders.kueue import make_workload

STATUS = {"pendingWorkloads": 0, "admittedWorkloads": 2,
          "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads",
                          "lastTransitionTime": "2026-11-27T09:00:00Z"}]}


class PatchesApi:
    def __init__(self) -> None:
        self.patched: list[tuple[str, str | None, str, Mapping[str, Any], str | None]] = []

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        self.patched.append((resource[1], namespace, name, patch, subresource))
        return dict(patch)


@pytest.mark.parametrize(("cached", "sent"), [
    (None, 1),
    ({"metadata": {"name": "cq"}}, 1),
    ({"metadata": {"name": "cq"}, "status": {**STATUS, "admittedWorkloads": 1}}, 1),
    ({"metadata": {"name": "cq"}, "status": STATUS}, 0),
    ({"metadata": {"name": "cq"}, "status": {**STATUS, "flavorsUsage": []}}, 0),
], ids=["nothing-cached", "no-status-yet", "another-count", "the-same-status", "the-same-and-more-fields"])
def test_a_queue_status_the_cache_holds_already_is_not_written(cached: dict[str, Any] | None, sent: int) -> None:
    api = PatchesApi()
    asyncio.run(write_queue_status(api, False, "cq", STATUS, cached))  # type: ignore[arg-type]
    asyncio.run(write_queue_status(api, True, "ns/lq", STATUS, cached))  # type: ignore[arg-type]
    assert len(api.patched) == 2 * sent
    if sent:
        assert [(p[0], p[1], p[2], p[4]) for p in api.patched] == [
            ("clusterqueues", None, "cq", "status"), ("localqueues", "ns", "lq", "status")]


def test_a_cohort_status_the_cache_holds_already_is_not_written() -> None:
    api = PatchesApi()
    asyncio.run(write_cohort_status(api, "all", STATUS, {"status": STATUS}))  # type: ignore[arg-type]
    assert api.patched == []
    asyncio.run(write_cohort_status(api, "all", STATUS, {"status": {}}))  # type: ignore[arg-type]
    assert len(api.patched) == 1


def evicted(model: Workload) -> bool:
    return model.set_condition("Evicted", "True", "Preempted", "to make room", datetime(2026, 11, 27, tzinfo=UTC))


def reserving(finished: bool = False) -> dict[str, Any]:
    """A Workload holding a reservation in ClusterQueue cq (Finished=True as well with `finished`)."""
    obj = make_workload("w").pod_set("main", 1, {"cpu": "1"}).admitted("cq").assignment(
        "main", 1, cluster_queue="cq").obj()
    if finished:
        obj["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                            "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    return obj


@pytest.mark.parametrize(("workload", "sent"), [
    (reserving(), 1),
    (make_workload("w").pod_set("main", 1, {"cpu": "1"}).obj(), 0),
    (reserving(finished=True), 0),
], ids=["holding-a-reservation", "waiting", "finished"])
def test_an_eviction_is_written_only_to_a_workload_holding_a_reservation_and_not_finished(
        workload: dict[str, Any], sent: int) -> None:
    api = PatchesApi()
    written = asyncio.run(write_reserved_status(api, Workload.from_dict(workload), evicted))  # type: ignore[arg-type]
    assert len(api.patched) == sent and (written is not None) == bool(sent)
