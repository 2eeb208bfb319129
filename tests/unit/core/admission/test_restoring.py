"""Restoring the node holdings of a Workload admitted to a rack before tasq saw it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.api.views import NodeView, PodView
from controller.core.admission.cycle import AdmissionState
from controller.core.admission.restoring import domain_holdings
from controller.core.admission.workloads import workload_info
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import (
    make_admission_state,
    make_cluster_queue,
    make_flavor,
    make_topology,
    make_workload,
)

BLOCK, RACK, GPU = "cloud.com/block", "cloud.com/rack", "nvidia.com/gpu"

# Racks without a host level (free GPUs in brackets; n2 runs a foreign 2-GPU pod):
#
#               b1
#          /         \
#        r1           r2
#      /    \          |
#   n1(4)  n2(2)     n3(4)


@dataclass
class RestoreCase:
    name: str
    slices: list[tuple[dict[str, str], int]]
    bound_on_n1: int
    """Pods of the admitted workload itself already bound on n1 (counted as pods already)."""
    want_gpus: dict[str, int]
    """What the workload holds per node afterwards, in GPUs (placed plus its bound pods' share)."""


CASES = [
    RestoreCase("3 pods fit on the most free node of the rack alone", [({BLOCK: "b1", RACK: "r1"}, 3)], 0,
                want_gpus={"n1": 3}),
    RestoreCase("5 pods take the most free node, then the next", [({BLOCK: "b1", RACK: "r1"}, 5)], 0,
                want_gpus={"n1": 4, "n2": 1}),
    RestoreCase("a slice larger than what the rack still holds keeps as many as fit",
                [({BLOCK: "b1", RACK: "r1"}, 9)], 0, want_gpus={"n1": 4, "n2": 2}),
    RestoreCase("two racks: each slice stays in its own rack, on the tightest node that holds it",
                [({BLOCK: "b1", RACK: "r1"}, 2), ({BLOCK: "b1", RACK: "r2"}, 3)], 0,
                want_gpus={"n2": 2, "n3": 3}),
    RestoreCase("bound pods are part of the slice: only the rest is placed, beside them",
                [({BLOCK: "b1", RACK: "r1"}, 5)], 2, want_gpus={"n1": 4, "n2": 1}),
    RestoreCase("a slice naming a host holds nothing here (fit_from_admission holds it)",
                [({BLOCK: "b1", RACK: "r1", c.LABEL_HOSTNAME: "n1"}, 2)], 0, want_gpus={}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_domain_slices_take_the_fewest_most_free_nodes_of_their_domain(case: RestoreCase) -> None:
    nodes = [make_node(name).labels({BLOCK: "b1", RACK: rack}).allocatable({GPU: 4}).view()
             for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2"))]
    pods = [make_pod("foreign").requests({GPU: 2}).on("n2").view()]
    pods += [make_pod(f"own-{i}").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "wl").requests({GPU: 1}).on("n1").view()
             for i in range(case.bound_on_n1)]
    state = make_admission_state_with_pods(nodes, pods)
    total = sum(n for _, n in case.slices)
    workload = make_workload("wl").queue("lq-cq").pod_set("main", total, {GPU: 1}, required=RACK) \
        .admitted("cq").assignment("main", total, *case.slices, cluster_queue="cq", flavors={GPU: "gpu"}).model()
    info = workload_info(workload)
    assert workload.reserved_admission is not None
    held = domain_holdings(state.snapshot, info, workload.reserved_admission, pods,
                           {node.name: node for node in nodes})
    assert {node: vector[GPU] // 1000 for node, vector in held.items()} == case.want_gpus
    assert all(vector[c.RESOURCE_PODS] == vector[GPU] for vector in held.values())
    # What was placed (not the bound pods' share, which the pods already take) is held in the usage.
    own = {"n1": case.bound_on_n1} if case.bound_on_n1 else {}
    for node in ("n1", "n2", "n3"):
        foreign = 2 if node == "n2" else 0
        placed = case.want_gpus.get(node, 0) - own.get(node, 0)
        assert state.snapshot.usage.used(node).get(GPU, 0) // 1000 == foreign + own.get(node, 0) + placed


def make_admission_state_with_pods(nodes: list[NodeView], pods: list[PodView]) -> AdmissionState:
    """One ClusterQueue `cq` (100 GPUs) over the racks flavor `gpu`, with these pods bound."""
    state = make_admission_state([make_cluster_queue("cq").flavor("gpu", {GPU: 100})],
                                 [make_flavor("gpu").node_labels({BLOCK: "b1"}).topology_name("racks")],
                                 nodes, [make_topology("racks", BLOCK, RACK)])
    for pod in pods:
        state.snapshot.usage.add_bound_pod(pod)
    return state
