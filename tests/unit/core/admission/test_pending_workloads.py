"""Pending positions per ClusterQueue and LocalQueue, and Kueue's limit/offset paging of them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.api import constants as c
from controller.core.admission.pending_workloads import (
    DEFAULT_LIMIT,
    Paging,
    of_local_queue,
    paging,
    pending_positions,
    queued_objects,
    summary,
)
from controller.core.admission.workloads import WorkloadInfo
from tests.builders.kueue import make_cluster_queue, make_local_queue, make_workload


def wl(name: str, queue: str = "lq", priority: int = 0, created: float = 0.0, ns: str = "team", seq: int = 0
       ) -> WorkloadInfo:
    return WorkloadInfo(ns, name, queue, priority, created, seq, ())


def test_higher_priority_goes_first_then_the_older_and_each_local_queue_counts_from_zero() -> None:
    rows = pending_positions([
        (wl("late-low", "a", 0, created=30), "cq"),
        (wl("early-low", "b", 0, created=10), "cq"),
        (wl("urgent", "b", 100, created=50), "cq"),
        (wl("elsewhere", "c", 5, created=1), "other-cq"),
    ])
    table = [(r.cluster_queue, r.name, r.position_in_cluster_queue, r.position_in_local_queue) for r in rows]
    assert table == [
        ("cq", "urgent", 0, 0),        # lq b, first of all
        ("cq", "early-low", 1, 1),     # lq b, second in b
        ("cq", "late-low", 2, 0),      # lq a, first in a
        ("other-cq", "elsewhere", 0, 0),
    ]


def test_the_summary_has_kueues_fields_and_pages_with_offset_and_limit() -> None:
    rows = pending_positions([(wl(f"w{i}", created=i), "cq") for i in range(5)])
    page = summary(rows, Paging(limit=2, offset=1))
    assert page["kind"] == "PendingWorkloadsSummary"
    assert page["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert [item["metadata"]["name"] for item in page["items"]] == ["w1", "w2"]
    assert page["items"][0] == {
        "metadata": {"name": "w1", "namespace": "team", "creationTimestamp": "1970-01-01T00:00:01Z"},
        "priority": 0, "localQueueName": "lq", "positionInClusterQueue": 1, "positionInLocalQueue": 1}
    assert summary(rows, Paging(limit=10, offset=7))["items"] == []


def test_paging_takes_kueues_defaults_and_names_a_bad_parameter() -> None:
    assert paging({}) == Paging(DEFAULT_LIMIT, 0)
    assert paging({"limit": "3", "offset": "2"}) == Paging(3, 2)
    assert paging({"limit": "ten"}) == "limit: 'ten' is not an integer"
    assert paging({"offset": "-1"}) == "offset: -1 is negative; a count of 0 or more is allowed"


workloads = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-2, 2), st.integers(0, 3),
                               st.sampled_from(["cq1", "cq2"])), max_size=25)


@given(workloads)
def test_positions_match_a_brute_force_ranking(specs: list[tuple[str, int, int, str]]) -> None:
    queued = [(wl(f"w{i}", lq, prio, created, seq=i), cq) for i, (lq, prio, created, cq) in enumerate(specs)]
    rows = pending_positions(queued)
    assert len(rows) == len(queued)
    for info, cq in queued:
        ahead_in_cq = [o for o, ocq in queued if ocq == cq and o.order_key() < info.order_key()]
        ahead_in_lq = [o for o in ahead_in_cq if o.queue_name == info.queue_name]
        row = next(r for r in rows if r.name == info.name)
        assert (row.position_in_cluster_queue, row.position_in_local_queue) == (len(ahead_in_cq), len(ahead_in_lq))
    for lq in "abc":  # a LocalQueue's rows (one ClusterQueue each here) come in its own order
        for cq in ("cq1", "cq2"):
            mine = [r.position_in_local_queue for r in of_local_queue(rows, "team", lq) if r.cluster_queue == cq]
            assert mine == list(range(len(mine)))


@pytest.mark.parametrize(("policy", "queued"), [
    pytest.param(None, ["w"], id="no-stop-policy-queued"),
    pytest.param("None", ["w"], id="policy-none-queued"),
    pytest.param("Hold", [], id="held-in-no-queue-as-kueue-takes-a-stopped-local-queue-out"),
    pytest.param("HoldAndDrain", [], id="draining-in-no-queue"),
])
def test_a_stopped_local_queues_workloads_are_listed_in_no_queue(policy: str | None, queued: list[str]) -> None:
    lq = make_local_queue("lq", "cq")
    if policy is not None:
        lq.set("spec.stopPolicy", policy)
    objects = [{**make_cluster_queue("cq").obj(), "kind": c.KIND_CLUSTER_QUEUE}, {**lq.obj(), "kind": c.KIND_LOCAL_QUEUE},
               {**make_workload("w").queue("lq").pod_set("main", 1, {"cpu": 1}).obj(), "kind": c.KIND_WORKLOAD}]
    assert [info.name for info, _ in queued_objects(objects)] == queued
