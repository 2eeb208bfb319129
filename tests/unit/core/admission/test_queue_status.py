"""Queue statuses from plain inputs: counts, flavor usage and borrowing per ClusterQueue and
LocalQueue, their Active conditions, and the transition times stamped on write."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.flavor import ResourceFlavor
from controller.api.meta import Condition
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.core.admission.queue_status import (
    QueuedWorkload,
    QueueInputs,
    cohort_statuses,
    queue_statuses,
    stamp_conditions,
)
from controller.core.admission.quota import ClusterQueueQuota, CohortQuota, CohortTree
from tests.builders.kueue import make_cluster_queue, make_cohort, make_flavor, make_local_queue, make_topology

GPU = "nvidia.com/gpu"
FlavorUse = Mapping[tuple[str, str], int]


def inputs(cqs: Sequence[dict[str, Any]] = (), lqs: Sequence[dict[str, Any]] = (),
           flavors: Sequence[dict[str, Any]] = (), topologies: Sequence[dict[str, Any]] = (),
           used: Mapping[str, FlavorUse] | None = None, workloads: Sequence[QueuedWorkload] = ()) -> QueueInputs:
    """QueueInputs from manifests (each queue's quota from its spec) and what is used and held."""
    cluster_queues = {o["metadata"]["name"]: ClusterQueue.from_dict(o) for o in cqs}
    return QueueInputs(
        cluster_queues=cluster_queues,
        local_queues={f"{o['metadata']['namespace']}/{o['metadata']['name']}": LocalQueue.from_dict(o) for o in lqs},
        flavors={o["metadata"]["name"]: ResourceFlavor.from_dict(o) for o in flavors},
        topologies={o["metadata"]["name"]: Topology.from_dict(o) for o in topologies},
        quotas={name: ClusterQueueQuota.from_model(cq) for name, cq in cluster_queues.items()},
        used=used or {}, workloads=workloads)


def test_counts_and_usage_follow_admissions_and_waiting_workloads() -> None:
    # cq (gpu: 100 cpu, 16 GPUs) <- default/lq and other/idle; "a" holds 12 GPUs, "b" waits in cq.
    held = {("gpu", GPU): 12_000}
    state = inputs(cqs=[make_cluster_queue("cq").flavor("gpu", {"cpu": 100, GPU: 16}).obj()],
                   lqs=[make_local_queue("lq", "cq").obj(), make_local_queue("idle", "cq", namespace="other").obj()],
                   flavors=[make_flavor("gpu").node_label("gpu", "yes").obj()], used={"cq": held},
                   workloads=[QueuedWorkload("default/a", "default/lq", True, "cq", held),
                              QueuedWorkload("default/b", "default/lq", False)])
    cqs, lqs = queue_statuses(state, {"default/b": "cq"})
    assert (cqs["cq"]["pendingWorkloads"], cqs["cq"]["admittedWorkloads"], cqs["cq"]["reservingWorkloads"]) == (1, 1, 1)
    usage = {r["name"]: r["total"] for f in cqs["cq"]["flavorsUsage"] for r in f["resources"]}
    assert usage == {"cpu": "0", GPU: "12"}  # every quota resource is listed, used or not
    assert (lqs["default/lq"]["pendingWorkloads"], lqs["default/lq"]["admittedWorkloads"]) == (1, 1)
    assert {r["name"]: r["total"] for f in lqs["default/lq"]["flavorsUsage"] for r in f["resources"]} == {GPU: "12"}
    assert {k: v for k, v in lqs["other/idle"].items() if k != "conditions"} == {
        "pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0,
        "flavorsReservation": [], "flavorsUsage": []}
    assert {r["name"]: r["borrowed"] for f in cqs["cq"]["flavorsUsage"] for r in f["resources"]} == {
        "cpu": "0", GPU: "0"}  # 12 of a nominal 16: nothing borrowed
    assert all("borrowed" not in r for f in lqs["default/lq"]["flavorsUsage"] for r in f["resources"])


@pytest.mark.parametrize(("workload", "waiting", "cq_counts", "lq_counts"), [
    pytest.param(QueuedWorkload("default/w", "default/lq", True), {}, (0, 0), (0, 1),
                 id="admission-recorded-not-yet-reserved-counts-for-its-local-queue-only"),
    pytest.param(QueuedWorkload("default/w", "default/lq", False), {}, (0, 0), (0, 0),
                 id="neither-admitted-nor-waiting-finished-or-inactive-is-not-counted"),
    pytest.param(QueuedWorkload("default/w", "default/lq", False), {"default/w": "elsewhere"}, (0, 0), (1, 0),
                 id="waiting-in-an-unknown-cluster-queue-counts-for-its-local-queue"),
    pytest.param(QueuedWorkload("default/w", "other/nowhere", True, "cq", {("gpu", GPU): 1000}), {}, (0, 1), None,
                 id="held-through-an-unknown-local-queue-counts-for-its-cluster-queue"),
])
def test_each_workload_is_counted_where_it_stands(workload: QueuedWorkload, waiting: dict[str, str],
                                                  cq_counts: tuple[int, int], lq_counts: tuple[int, int] | None) -> None:
    state = inputs(cqs=[make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj()],
                   lqs=[make_local_queue("lq", "cq").obj()], flavors=[make_flavor("gpu").obj()], workloads=[workload])
    cqs, lqs = queue_statuses(state, waiting)
    assert (cqs["cq"]["pendingWorkloads"], cqs["cq"]["admittedWorkloads"]) == cq_counts
    assert set(lqs) == {"default/lq"}
    if lq_counts is not None:
        assert (lqs["default/lq"]["pendingWorkloads"], lqs["default/lq"]["admittedWorkloads"]) == lq_counts


def test_borrowed_is_the_usage_above_the_nominal_quota() -> None:
    # cohort "pool": team (8 GPUs nominal) borrows 4 from lender (16 GPUs nominal, unused).
    state = inputs(cqs=[make_cluster_queue("team").cohort("pool").flavor("gpu", {GPU: 8}).obj(),
                        make_cluster_queue("lender").cohort("pool").flavor("gpu", {GPU: 16}).obj()],
                   flavors=[make_flavor("gpu").obj()], used={"team": {("gpu", GPU): 12_000}})
    cqs, _ = queue_statuses(state, {})
    assert cqs["team"]["flavorsUsage"] == [{"name": "gpu", "resources": [
        {"name": GPU, "total": "12", "borrowed": "4"}]}]
    assert cqs["lender"]["flavorsUsage"] == [{"name": "gpu", "resources": [
        {"name": GPU, "total": "0", "borrowed": "0"}]}]


def test_usage_of_a_resource_without_quota_is_listed_after_the_spec_and_borrowed_whole() -> None:
    state = inputs(cqs=[make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj()], flavors=[make_flavor("gpu").obj()],
                   used={"cq": {("gpu", GPU): 2000, ("gpu", "cpu"): 3000}})
    cqs, _ = queue_statuses(state, {})
    assert cqs["cq"]["flavorsUsage"] == [{"name": "gpu", "resources": [
        {"name": GPU, "total": "2", "borrowed": "0"}, {"name": "cpu", "total": "3", "borrowed": "3"}]}]


def active_of(status: dict[str, Any]) -> tuple[str, str, str]:
    (cond,) = status["conditions"]
    assert cond["type"] == c.CONDITION_ACTIVE
    return cond["status"], cond["reason"], cond["message"]


def configured(*, flavor: bool = True, topology: bool = True, stop_policy: str | None = None,
               lq_target: str = "cq", cycle: tuple[str, ...] | None = None, deleted: bool = False,
               lq_stop_policy: str | None = None) -> QueueInputs:
    """ClusterQueue cq over flavor "gpu" (which names Topology "dc"), LocalQueue default/lq -> `lq_target`
    (its stopPolicy `lq_stop_policy`)."""
    cq = make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj()
    if deleted:
        cq["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if stop_policy is not None:
        cq["spec"]["stopPolicy"] = stop_policy
    if cycle is not None:
        cq["spec"]["cohortName"] = cycle[0]
    lq = make_local_queue("lq", lq_target)
    if lq_stop_policy is not None:
        lq.set("spec.stopPolicy", lq_stop_policy)
    state = inputs(cqs=[cq], lqs=[lq.obj()],
                   flavors=[make_flavor("gpu").topology_name("dc").obj()] if flavor else [],
                   topologies=[make_topology("dc", "example.com/rack").obj()] if topology else [])
    return state if cycle is None else replace(state, cohort_cycles={"cq": cycle})


@pytest.mark.parametrize(("state", "cq_active", "lq_active"), [
    pytest.param(configured(), ("True", c.REASON_READY, "Can admit new Workloads"),
                 ("True", c.REASON_READY, "Can submit new Workloads to ClusterQueue cq"), id="all-present-ready"),
    pytest.param(configured(flavor=False),
                 ("False", c.REASON_FLAVOR_NOT_FOUND, "Cannot admit new Workloads: missing ResourceFlavor(s) gpu"),
                 ("False", c.REASON_CLUSTER_QUEUE_IS_INACTIVE,
                  "Cannot submit new Workloads: ClusterQueue cq is inactive (FlavorNotFound)"),
                 id="flavor-missing-both-inactive"),
    pytest.param(configured(topology=False),
                 ("False", c.REASON_TOPOLOGY_NOT_FOUND,
                  "Cannot admit new Workloads: missing Topology dc (of ResourceFlavor gpu)"),
                 ("False", c.REASON_CLUSTER_QUEUE_IS_INACTIVE,
                  "Cannot submit new Workloads: ClusterQueue cq is inactive (TopologyNotFound)"),
                 id="flavor-topology-missing"),
    pytest.param(configured(stop_policy="Hold"),
                 ("False", c.REASON_STOPPED, "Cannot admit new Workloads: stopPolicy is Hold"),
                 ("False", c.REASON_CLUSTER_QUEUE_IS_INACTIVE,
                  "Cannot submit new Workloads: ClusterQueue cq is inactive (Stopped)"),
                 id="stopped-queue"),
    pytest.param(configured(lq_stop_policy="Hold"), ("True", c.REASON_READY, "Can admit new Workloads"),
                 ("False", c.REASON_STOPPED, "Cannot admit new Workloads: stopPolicy is Hold"),
                 id="local-queue-on-hold-its-cluster-queue-active"),
    pytest.param(configured(lq_stop_policy="HoldAndDrain", stop_policy="Hold"),
                 ("False", c.REASON_STOPPED, "Cannot admit new Workloads: stopPolicy is Hold"),
                 ("False", c.REASON_STOPPED, "Cannot admit new Workloads: stopPolicy is HoldAndDrain"),
                 id="local-queue-stopped-says-its-own-policy-before-its-cluster-queues"),
    pytest.param(configured(lq_stop_policy="None"), ("True", c.REASON_READY, "Can admit new Workloads"),
                 ("True", c.REASON_READY, "Can submit new Workloads to ClusterQueue cq"),
                 id="local-queue-policy-none-runs"),
    pytest.param(configured(deleted=True, stop_policy="Hold"),
                 ("False", c.REASON_TERMINATING, "Cannot admit new Workloads: the ClusterQueue is terminating"),
                 ("False", c.REASON_CLUSTER_QUEUE_IS_INACTIVE,
                  "Cannot submit new Workloads: ClusterQueue cq is inactive (Terminating)"),
                 id="deleted-queue-waiting-for-its-finalizer"),
    pytest.param(configured(lq_target="nowhere"), ("True", c.REASON_READY, "Can admit new Workloads"),
                 ("False", c.REASON_CLUSTER_QUEUE_DOES_NOT_EXIST,
                  "Cannot submit new Workloads: ClusterQueue nowhere does not exist"),
                 id="local-queue-points-at-no-cluster-queue"),
    pytest.param(configured(cycle=("x", "y")),
                 ("False", c.REASON_COHORT_HAS_CYCLE,
                  "Cannot admit new Workloads: cohort x is in or under a cycle of cohorts (x -> y -> x)"),
                 ("False", c.REASON_CLUSTER_QUEUE_IS_INACTIVE,
                  "Cannot submit new Workloads: ClusterQueue cq is inactive (CohortHasCycle)"),
                 id="cohort-cycle"),
])
def test_active_condition_names_what_is_missing(state: QueueInputs, cq_active: tuple[str, str, str],
                                                lq_active: tuple[str, str, str]) -> None:
    cqs, lqs = queue_statuses(state, {})
    assert active_of(cqs["cq"]) == cq_active
    assert active_of(lqs["default/lq"]) == lq_active


NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _previous(status: str) -> list[Condition]:
    return [Condition(type=c.CONDITION_ACTIVE, status=status, reason="Any", message="",
                      last_transition_time="2026-01-01T00:00:00Z")]


@pytest.mark.parametrize(("previous", "expected"), [
    pytest.param([], "2026-01-02T03:04:05Z", id="first-write-now"),
    pytest.param(_previous("True"), "2026-01-01T00:00:00Z", id="same-status-keeps-its-time"),
    pytest.param(_previous("False"), "2026-01-02T03:04:05Z", id="status-flipped-now"),
])
def test_stamping_keeps_the_time_of_the_last_transition(previous: list[Condition], expected: str) -> None:
    status: dict[str, Any] = {"pendingWorkloads": 0, "conditions": [
        {"type": c.CONDITION_ACTIVE, "status": "True", "reason": c.REASON_READY, "message": "m"}]}
    stamped = stamp_conditions(status, previous, NOW)
    assert stamped["conditions"][0]["lastTransitionTime"] == expected
    assert stamped["pendingWorkloads"] == 0
    assert "lastTransitionTime" not in status["conditions"][0]  # the compared form is left as it was


def test_each_cohort_says_whether_its_tree_can_admit() -> None:
    """
        ghost (no Cohort object)     loop-a <-> loop-b
          |                             |
        team                          under
    """
    cohorts = {b.model().name: b.model() for b in (
        make_cohort("team").parent("ghost"), make_cohort("root"), make_cohort("loop-a").parent("loop-b"),
        make_cohort("loop-b").parent("loop-a"), make_cohort("under").parent("loop-a"))}
    tree = CohortTree.build({}, {name: CohortQuota.from_model(co) for name, co in cohorts.items()})
    active = {name: active_of(status) for name, status in cohort_statuses(cohorts, tree).items()}
    assert active == {
        "team": ("True", c.REASON_PARENT_NOT_FOUND,
                 "Parent cohort ghost has no Cohort object: it acts as a root with no quota of its own and no limits"),
        "root": ("True", c.REASON_READY, "Can admit new Workloads"),
        **{name: ("False", c.REASON_COHORT_HAS_CYCLE, "Cannot admit new Workloads in this cohort tree: cohort "
                  f"{name} is in or under a cycle of cohorts (loop-a -> loop-b -> loop-a)")
           for name in ("loop-a", "loop-b", "under")},
    }
