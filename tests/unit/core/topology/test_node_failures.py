"""Node-failure detection (controller.core.topology.node_failures) with a fake clock: deleted,
not Ready past Kueue's 30 s delay (and the recheck time before it), NoExecute taints."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.api import constants as c
from controller.api.selectors import Toleration
from controller.api.topology_assignment import AssignedDomain, encode
from controller.api.views import NodeView
from controller.api.workload import Admission, PodSetAssignment
from controller.core.topology.node_failures import (
    NODE_FAILURE_DELAY,
    node_health,
    workload_node_failures,
)
from tests.builders.cluster import make_node

T0 = datetime(2026, 11, 27, 6, 0, 0, tzinfo=UTC)
STAMP = "2026-11-27T06:00:00Z"


def not_ready_at(name: str, stamp: str = STAMP) -> NodeView:
    return make_node(name).not_ready(since=stamp).view()


@pytest.mark.parametrize(("seconds_later", "failed"), [(0, False), (29, False), (30, True), (300, True)])
def test_a_not_ready_host_fails_once_the_delay_has_run_out(seconds_later: int, failed: bool) -> None:
    health = node_health(not_ready_at("x1"), T0 + timedelta(seconds=seconds_later))
    assert (health.failed is not None) is failed
    assert health.recheck_at == (None if failed else T0 + NODE_FAILURE_DELAY)


def test_a_deleted_host_or_one_without_a_ready_condition_fails_at_once() -> None:
    assert node_health(None, T0).failed == "deleted"
    assert node_health(make_node("x1").set("status.conditions", []).view(), T0).failed is not None


def test_a_ready_host_is_healthy() -> None:
    assert node_health(make_node("x1").view(), T0).failed is None


def test_a_no_execute_taint_fails_the_host_unless_the_pod_set_tolerates_it() -> None:
    tainted = make_node("x1").taint("maintenance", "now", "NoExecute").view()
    assert node_health(tainted, T0).failed == "tainted maintenance=now:NoExecute"
    assert node_health(tainted, T0, [Toleration("maintenance", "Exists", "", "NoExecute")]).failed is None
    # NoSchedule keeps running pods where they are.
    assert node_health(make_node("x1").taint("maintenance").view(), T0).failed is None


def test_the_lifecycle_controllers_not_ready_taint_waits_for_the_delay() -> None:
    node = make_node("x1").taint("node.kubernetes.io/unreachable", "", "NoExecute").not_ready(STAMP, "Unknown").view()
    assert node_health(node, T0 + timedelta(seconds=10)).failed is None
    assert node_health(node, T0 + timedelta(seconds=31)).failed is not None


def admission(*hosts: tuple[str, int]) -> Admission:
    levels = ["cloud.com/rack", c.LABEL_HOSTNAME]
    ta = encode(levels, [AssignedDomain(("r1", h), n) for h, n in hosts])
    return Admission(cluster_queue="cq", pod_set_assignments=[PodSetAssignment(name="main", topology_assignment=ta)])


def test_a_workload_lists_its_failed_hosts_and_the_earliest_recheck() -> None:
    nodes = {"x1": make_node("x1").view(), "x2": not_ready_at("x2"),
             "x3": not_ready_at("x3", "2026-11-27T06:00:10Z")}
    found = workload_node_failures(admission(("x1", 2), ("x2", 2), ("x3", 2), ("x4", 2)), nodes, {},
                                   T0 + timedelta(seconds=5))
    assert found.failed == {"x4": "deleted"}
    assert found.recheck_at == T0 + NODE_FAILURE_DELAY
    later = workload_node_failures(admission(("x1", 2), ("x2", 2), ("x3", 2)), nodes, {}, T0 + timedelta(seconds=35))
    assert list(later.failed) == ["x2"] and later.recheck_at == T0 + timedelta(seconds=40)
