"""Queue statuses computed from the cache: counts, flavor usage and borrowing per ClusterQueue and
LocalQueue, their Active conditions, and the transition times stamped on write."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.meta import Condition
from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.core.admission.cycle import run_until_quiet
from controller.kube.statuses import queue_statuses, stamp_conditions
from tests.builders.cluster import make_node
from tests.builders.kueue import (
    make_cluster_queue,
    make_flavor,
    make_local_queue,
    make_topology,
    make_workload,
)

GPU = "nvidia.com/gpu"


def test_counts_and_usage_follow_admissions_and_waiting_workloads() -> None:
    cache = ClusterCache()
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {"cpu": 100, GPU: 16}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("idle", "cq", namespace="other").obj())
    cache.upsert(KIND_NODE, make_node("h1").labels({"gpu": "yes"}).allocatable({GPU: 64, "cpu": 64}).obj())
    for name in ("a", "b"):
        cache.upsert(c.KIND_WORKLOAD, make_workload(name).queue("lq").pod_set("main", 1, {GPU: 12}).obj())
    state = cache.admission_state()
    run_until_quiet(state)
    (admitted,) = state.admitted
    cache.record_admission(admitted, state.admitted[admitted])
    waiting = {key: state.queue_of[key] for key in state.waiting()}
    cqs, lqs = queue_statuses(cache, waiting)
    assert (cqs["cq"]["pendingWorkloads"], cqs["cq"]["admittedWorkloads"], cqs["cq"]["reservingWorkloads"]) == (1, 1, 1)
    usage = {r["name"]: r["total"] for f in cqs["cq"]["flavorsUsage"] for r in f["resources"]}
    assert usage == {"cpu": "0", GPU: "12"}  # every quota resource is listed, used or not
    assert (lqs["default/lq"]["pendingWorkloads"], lqs["default/lq"]["admittedWorkloads"]) == (1, 1)
    assert {r["name"]: r["total"] for f in lqs["default/lq"]["flavorUsage"] for r in f["resources"]} == {GPU: "12"}
    assert {k: v for k, v in lqs["other/idle"].items() if k != "conditions"} == {
        "pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0,
        "flavorsReservation": [], "flavorUsage": []}
    assert {r["name"]: r["borrowed"] for f in cqs["cq"]["flavorsUsage"] for r in f["resources"]} == {
        "cpu": "0", GPU: "0"}  # 12 of a nominal 16: nothing borrowed
    assert all("borrowed" not in r for f in lqs["default/lq"]["flavorUsage"] for r in f["resources"])


def admitted_in(cache: ClusterCache) -> list[str]:
    """Run one admission cycle over the cache and record its admissions there (as the loop does)."""
    state = cache.admission_state()
    run_until_quiet(state)
    for key, fit in state.admitted.items():
        cache.record_admission(key, fit)
    return sorted(state.admitted)


def test_borrowed_is_the_usage_above_the_nominal_quota() -> None:
    # cohort "pool": team (8 GPUs nominal) borrows from lender (16 GPUs nominal, unused).
    cache = ClusterCache()
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("team").cohort("pool").flavor("gpu", {GPU: 8}).obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("lender").cohort("pool").flavor("gpu", {GPU: 16}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "team").obj())
    cache.upsert(KIND_NODE, make_node("h1").labels({"gpu": "yes"}).allocatable({GPU: 64, "cpu": 64}).obj())
    cache.upsert(c.KIND_WORKLOAD, make_workload("big").queue("lq").pod_set("main", 1, {GPU: 12}).obj())
    assert admitted_in(cache) == ["default/big"]
    cqs, _ = queue_statuses(cache, {})
    assert cqs["team"]["flavorsUsage"] == [{"name": "gpu", "resources": [
        {"name": GPU, "total": "12", "borrowed": "4"}]}]
    assert cqs["lender"]["flavorsUsage"] == [{"name": "gpu", "resources": [
        {"name": GPU, "total": "0", "borrowed": "0"}]}]


def active_of(status: dict[str, Any]) -> tuple[str, str, str]:
    (cond,) = status["conditions"]
    assert cond["type"] == c.CONDITION_ACTIVE
    return cond["status"], cond["reason"], cond["message"]


def configured(*, flavor: bool = True, topology: bool = True, stop_policy: str | None = None,
               lq_target: str = "cq") -> ClusterCache:
    """ClusterQueue cq over flavor "gpu" (which names Topology "dc"), LocalQueue default/lq -> `lq_target`."""
    cache = ClusterCache()
    if flavor:
        cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").topology_name("dc").obj())
    if topology:
        cache.upsert(c.KIND_TOPOLOGY, make_topology("dc", "example.com/rack").obj())
    cq = make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj()
    if stop_policy is not None:
        cq["spec"]["stopPolicy"] = stop_policy
    cache.upsert(c.KIND_CLUSTER_QUEUE, cq)
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", lq_target).obj())
    return cache


@pytest.mark.parametrize(("cache", "cq_active", "lq_active"), [
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
    pytest.param(configured(lq_target="nowhere"), ("True", c.REASON_READY, "Can admit new Workloads"),
                 ("False", c.REASON_CLUSTER_QUEUE_DOES_NOT_EXIST,
                  "Cannot submit new Workloads: ClusterQueue nowhere does not exist"),
                 id="local-queue-points-at-no-cluster-queue"),
])
def test_active_condition_names_what_is_missing(cache: ClusterCache, cq_active: tuple[str, str, str],
                                                lq_active: tuple[str, str, str]) -> None:
    cqs, lqs = queue_statuses(cache, {})
    assert active_of(cqs["cq"]) == cq_active
    assert active_of(lqs["default/lq"]) == lq_active


def test_a_queue_turns_active_once_its_flavor_appears() -> None:
    cache = configured(flavor=False)
    assert active_of(queue_statuses(cache, {})[0]["cq"])[0] == "False"
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").topology_name("dc").obj())
    cqs, lqs = queue_statuses(cache, {})
    assert active_of(cqs["cq"])[:2] == ("True", c.REASON_READY)
    assert active_of(lqs["default/lq"])[:2] == ("True", c.REASON_READY)


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
