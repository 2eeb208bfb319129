"""Queue and Cohort status writes: none is sent when the cached object has that status already
(a restarted or newly elected operator recomputes every status; most are unchanged)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from controller.kube.statuses import write_cohort_status, write_queue_status

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
