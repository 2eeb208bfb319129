"""Queue statuses computed from the cache: counts and flavor usage per ClusterQueue and LocalQueue."""

from __future__ import annotations

from controller.api import constants as c
from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.core.admission.cycle import run_until_quiet
from controller.kube.statuses import queue_statuses
from tests.builders.cluster import make_node
from tests.builders.kueue import make_cluster_queue, make_flavor, make_local_queue, make_workload

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
    assert lqs["other/idle"] == {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0,
                                 "flavorsReservation": [], "flavorUsage": []}
