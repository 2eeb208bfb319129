"""Flavor assignment passing Kueue 0.19's TAS requests to the topology engine: pod-set groups placed
together in one flavor and domain, slices from Workload fields, implicit TAS on a topology-only
ClusterQueue, and the TASBalancedPlacement gate carried by the snapshot."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.api.features import parse_feature_gates
from controller.api.views import NodeView
from controller.core.admission.cycle import Admit, Decision, Pending, run_until_quiet
from controller.core.admission.workloads import workload_info
from tests.builders.cluster import make_node
from tests.builders.kueue import (
    label_slices,
    make_admission_state,
    make_cluster_queue,
    make_flavor,
    make_topology,
    make_workload,
)

GPU = "nvidia.com/gpu"
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"

# Flavor `h100` (Topology block > rack > host), free GPUs per node:
#
#              b1                     b2
#        /           \                |
#      r1             r2              r3
#    /    \         /    \            |
#  n1(8)  n2(7)   n3(8)  n4(7)      n5(8)
LAYOUT = (("n1", "b1", "r1", 8), ("n2", "b1", "r1", 7), ("n3", "b1", "r2", 8), ("n4", "b1", "r2", 7),
          ("n5", "b2", "r3", 8))


def nodes() -> list[NodeView]:
    return [make_node(name).labels({BLOCK: b, RACK: r, "gpu": "h100"}).allocatable({GPU: str(g)}, cpu="64").view()
            for name, b, r, g in LAYOUT]


def admit(*podsets: tuple[str, int, dict[str, Any]], gates: str = "") -> Decision:
    """One Workload of 1-GPU pod sets (name, count, topologyRequest) on the h100 ClusterQueue."""
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: 100})],
                                 [make_flavor("h100").node_labels({"gpu": "h100"}).topology_name("t")],
                                 nodes(), [make_topology("t", BLOCK, RACK, HOST)])
    state.snapshot = replace(state.snapshot, features=parse_feature_gates(gates))
    workload = make_workload("w").queue("lq-a")
    for name, count, request in podsets:
        if request:
            workload = workload.pod_set(name, count, {GPU: 1}, topologyRequest=request)
        else:
            workload = workload.pod_set(name, count, {GPU: 1})
    state.submit(workload_info(workload.model()))
    (decision, *_) = run_until_quiet(state)
    return decision


def slices_of(decision: Decision) -> list[list[str]]:
    """Per pod set, `host=count` of its topology assignment."""
    assert isinstance(decision, Admit), decision.message
    return [[f"{s['nodeLabels'][HOST]}={s['count']}" for s in label_slices(psa["topologyAssignment"])]
            for psa in decision.admission["podSetAssignments"]]


def test_a_pod_set_group_lands_in_one_rack_with_its_leader() -> None:
    group = {"required": RACK, "podSetGroupName": "g"}
    # 1 + 14 fit only a rack of 15: r1 (before r2 by label values), the leader on its tightest host.
    assert slices_of(admit(("leader", 1, group), ("workers", 14, group))) == [["n2=1"], ["n1=8", "n2=6"]]


def test_three_pod_sets_in_one_group_share_one_rack() -> None:
    group = {"required": RACK, "podSetGroupName": "g"}
    got = slices_of(admit(("leader", 1, group), ("a", 6, group), ("b", 8, group)))
    hosts = {entry.split("=")[0] for podset in got for entry in podset}
    assert hosts <= {"n1", "n2"} or hosts <= {"n3", "n4"}
    assert sum(int(entry.split("=")[1]) for podset in got for entry in podset) == 15


def test_a_group_that_no_rack_holds_waits_with_the_group_in_the_message() -> None:
    group = {"required": RACK, "podSetGroupName": "g"}
    decision = admit(("leader", 1, group), ("workers", 15, group))
    assert isinstance(decision, Pending)
    assert 'allows to fit only 15 out of 16 pod(s) of pod-set group "g" at level "cloud.com/rack"' in decision.message


def test_slices_from_the_workload_fields() -> None:
    request = {"required": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 4}
    # Hosts hold 2 (n1, n3, n5) or 1 (n2, n4) slices of 4: r1 holds 3, the tightest rack: 8 on n1, 4 on n2.
    assert slices_of(admit(("main", 12, request))) == [["n1=8", "n2=4"]]


def test_multi_layer_slices_from_the_workload_field() -> None:
    request = {"required": BLOCK,
               "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 8}, {"topology": HOST, "size": 4}]}
    # Racks count whole groups of 4 per host: r1 8 + 4, r2 8 + 4; 16 pods = one rack slice in each.
    assert slices_of(admit(("main", 16, request))) == [["n1=8", "n3=8"]]


def test_a_pod_set_without_a_request_is_placed_on_a_topology_only_queue() -> None:
    """Kueue's implicit TAS: unconstrained at the lowest level, the least free host holding it."""
    assert slices_of(admit(("main", 7, {}))) == [["n2=7"]]


def test_the_balanced_gate_reaches_the_engine() -> None:
    request = {"preferred": RACK}
    assert slices_of(admit(("main", 25, request), gates="TASBalancedPlacement=true")) == \
        [["n1=8", "n2=5", "n3=8", "n4=4"]]
    assert slices_of(admit(("main", 25, request))) == [["n1=8", "n2=7", "n3=8", "n4=2"]]


def test_multi_layer_slices_wait_when_their_gate_is_off() -> None:
    request = {"required": BLOCK,
               "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 8}, {"topology": HOST, "size": 4}]}
    decision = admit(("main", 16, request), gates="TASMultiLayerTopology=false")
    assert isinstance(decision, Pending)
    assert 'flavor "h100": multi-layer slices need the TASMultiLayerTopology feature gate' in decision.message


def test_a_flavor_whose_nodelabels_no_node_carries_says_so_and_how_to_check() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("h200", {GPU: 100})],
                                 [make_flavor("h200").node_labels({"gpu": "h200", "zone": "z1"}).topology_name("t")],
                                 nodes(), [make_topology("t", BLOCK, RACK, HOST)])
    state.submit(workload_info(make_workload("w").queue("lq-a").pod_set("main", 1, {GPU: 1}).model()))
    (decision, *_) = run_until_quiet(state)
    assert isinstance(decision, Pending)
    assert decision.message == (
        'couldn\'t assign flavors to pod set "main": flavor "h200": no node carries flavor "h200"\'s '
        "nodeLabels gpu=h200,zone=z1 (label the nodes, or fix the flavor; kubectl get nodes -l gpu=h200,zone=z1)")


def test_a_rack_smaller_than_the_pod_set_names_the_largest_rack_first() -> None:
    decision = admit(("main", 16, {"required": RACK}))
    assert isinstance(decision, Pending)
    assert decision.message.startswith(
        'couldn\'t assign flavors to pod set "main": flavor "h100": can never fit: the largest rack has '
        '15 nvidia.com/gpu, pod set "main" needs 16; topology "t" allows to fit only 15 out of 16 pod(s)')
