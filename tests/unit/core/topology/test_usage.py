"""Usage: incremental pod and node updates, reservations and their conversion, clones, sharing."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.core.topology import FlavorTopology, Usage, assign
from controller.core.topology.tree import DEAD_DOMAIN_SLACK
from controller.core.topology.usage import GONE_ROW_SLACK
from tests.builders.cluster import make_pod
from tests.unit.core.topology.scenario import (
    GPU,
    RACK,
    expect_failure,
    expect_success,
    gpu_node,
    make_podset,
    slice_strings,
    topology,
)

# One rack of two 4-GPU hosts:
#
#        b1
#         |
#        r1
#      /    \
#   h1(4)  h2(4)


def rack() -> FlavorTopology:
    return topology([gpu_node("h1", "b1", "r1", 4), gpu_node("h2", "b1", "r1", 4)])


def fit_in_rack(topo: FlavorTopology, usage: Usage, count: int = 9) -> int:
    """How many 1-GPU pods the rack still holds (asked for more than it can, so it fails)."""
    return expect_failure(assign(topo, usage, [make_podset(count).require(RACK).build()])).fit


def test_adding_and_removing_a_bound_pod_changes_free_capacity() -> None:
    topo, usage = rack(), Usage()
    pod = make_pod("p").requests({GPU: "3"}).on("h1").view()
    usage.add_bound_pod(pod)
    assert fit_in_rack(topo, usage) == 5
    usage.add_bound_pod(pod)  # the same pod again replaces, never double counts
    assert fit_in_rack(topo, usage) == 5
    usage.remove_bound_pod(pod)
    assert fit_in_rack(topo, usage) == 8


def test_a_pod_turning_terminal_stops_counting() -> None:
    usage = Usage()
    usage.add_bound_pod(make_pod("p").requests({GPU: "3"}).on("h1").view())
    usage.add_bound_pod(make_pod("p").requests({GPU: "3"}).on("h1", "Succeeded").view())
    assert usage.used("h1") == {}


def test_reservation_holds_capacity_until_released() -> None:
    topo, usage = rack(), Usage()
    success = expect_success(assign(topo, usage, [make_podset(3).require(RACK).build()]))
    assert fit_in_rack(topo, usage) == 8  # assign never mutates the usage
    usage.reserve("ns/w1", success.placement.resources)
    assert fit_in_rack(topo, usage) == 5
    usage.release("ns/w1")
    assert fit_in_rack(topo, usage) == 8


def test_binding_pods_convert_the_reservation_instead_of_counting_twice() -> None:
    topo, usage = rack(), Usage()
    usage.reserve("ns/w1", {"h1": {GPU: 3000, c.RESOURCE_PODS: 3000}})
    usage.add_bound_pod(make_pod("a", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w1")
                        .requests({GPU: "1"}).on("h1").view())
    usage.add_bound_pod(make_pod("b", "ns").requests({GPU: "1"}).on("h1").view(), workload_key="ns/w1")
    assert usage.used("h1") == {GPU: 3000, c.RESOURCE_PODS: 3000}
    assert usage.reserved("ns/w1") == {"h1": {GPU: 1000, c.RESOURCE_PODS: 1000}}
    usage.release("ns/w1")  # the workload finished: only its still-bound pods count
    assert usage.used("h1") == {GPU: 2000, c.RESOURCE_PODS: 2000}
    assert fit_in_rack(topo, usage) == 6


def test_updates_of_a_bound_pod_convert_its_share_of_the_reservation_only_once() -> None:
    usage = Usage()
    usage.reserve("ns/w1", {"h1": {GPU: 3000, c.RESOURCE_PODS: 3000}})
    pod = make_pod("a", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w1").requests({GPU: "1"})
    for phase in ("Pending", "Running", "Running"):  # bound, then status updates of the same pod
        usage.add_bound_pod(pod.on("h1", phase).view())
    assert usage.used("h1") == {GPU: 3000, c.RESOURCE_PODS: 3000}
    assert usage.reserved("ns/w1") == {"h1": {GPU: 2000, c.RESOURCE_PODS: 2000}}
    usage.add_bound_pod(pod.requests({GPU: "2"}).on("h1").view())  # resized in place: its own amounts change
    assert usage.used("h1") == {GPU: 4000, c.RESOURCE_PODS: 3000}
    usage.add_bound_pod(pod.on("h1", "Succeeded").view())  # finished: its share is not reserved again
    assert usage.used("h1") == {GPU: 2000, c.RESOURCE_PODS: 2000}


def test_a_pod_of_another_workload_does_not_consume_the_reservation() -> None:
    usage = Usage()
    usage.reserve("ns/w1", {"h1": {GPU: 2000}})
    usage.add_bound_pod(make_pod("x", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w2")
                        .requests({GPU: "1"}).on("h1").view())
    assert usage.used("h1") == {GPU: 3000, c.RESOURCE_PODS: 1000}


def test_a_workload_taken_away_whole_frees_its_reservation_and_bound_pods_on_a_clone_only() -> None:
    topo, usage = rack(), Usage()
    usage.reserve("ns/w1", {"h1": {GPU: 3000, c.RESOURCE_PODS: 3000}})
    usage.add_bound_pod(make_pod("a", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w1")
                        .requests({GPU: "1"}).on("h1").view())
    usage.add_bound_pod(make_pod("b", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w1")
                        .requests({GPU: "1"}).on("h2").view())  # bound outside its reservation's node
    usage.add_bound_pod(make_pod("x", "ns").requests({GPU: "1"}).on("h2").view())  # no workload
    gpu = usage.registry.cols[GPU]
    footprint = usage.footprint("ns/w1")
    by_node = {name: footprint.get(row, {}).get(gpu, 0) for name, row in usage.registry.rows.items()}
    # b took its share of the reservation from h1 (its own node held none): 1 reserved + a on h1, b on h2
    assert by_node == {"h1": 2000, "h2": 1000}
    twin = usage.clone()
    twin.remove_workload("ns/w1")
    assert twin.used("h1") == {} and twin.used("h2") == {GPU: 1000, c.RESOURCE_PODS: 1000}
    assert twin.footprint("ns/w1") == {}
    assert usage.used("h1")[GPU] == 2000 and usage.used("h2")[GPU] == 2000  # the original keeps it
    usage.remove_bound_pod("ns/b")  # a pod gone one event at a time leaves the workload's footprint
    assert usage.footprint("ns/w1").get(usage.registry.rows["h2"]) is None
    assert fit_in_rack(topo, twin) == 7


def test_clones_are_independent_both_ways() -> None:
    topo, base = rack(), Usage()
    base.add_bound_pod(make_pod("p").requests({GPU: "1"}).on("h1").view())
    base.reserve("ns/w", {"h2": {GPU: 1000}})
    twin = base.clone()
    twin.add_bound_pod(make_pod("q").requests({GPU: "2"}).on("h2").view())
    twin.release("ns/w")
    base.remove_bound_pod("default/p")
    assert (fit_in_rack(topo, base), fit_in_rack(topo, twin)) == (7, 5)
    assert base.reserved("ns/w") == {"h2": {GPU: 1000}}


def test_removing_a_node_drops_its_usage() -> None:
    usage = Usage()
    usage.add_bound_pod(make_pod("p").requests({GPU: "1"}).on("h1").view())
    usage.reserve("ns/w", {"h1": {GPU: 1000}})
    usage.remove_node("h1")
    assert usage.used("h1") == {}
    assert usage.reserved("ns/w") == {}


def test_one_usage_serves_flavors_whose_nodes_overlap() -> None:
    # Flavor "a" sees h1(3) and h2(4); flavor "b" sees h2 and h3(4). Only h2 holds 4 pods, so a
    # reservation made through "a" lands on h2, and "b" must see it.
    h1 = gpu_node("h1", "b1", "r1", 3).view()
    h2, h3 = (gpu_node(n, "b1", "r1", 4).view() for n in ("h2", "h3"))
    a, b = topology([h1, h2], name="a"), topology([h3, h2], name="b")
    usage = Usage()
    success = expect_success(assign(a, usage, [make_podset(4).require("kubernetes.io/hostname").build()]))
    assert success.placement.pods == {"main": {"h2": 4}}
    usage.reserve("ns/w", success.placement.resources)
    assert fit_in_rack(b, usage) == 4


def test_tree_patches_follow_node_changes() -> None:
    topo, usage = rack(), Usage()
    v0 = topo.version
    topo.upsert_node(gpu_node("h1", "b1", "r1", 4).view())  # unchanged: a no-op
    assert topo.version == v0
    topo.upsert_node(gpu_node("h3", "b1", "r2", 4).view())
    topo.upsert_node(gpu_node("h1", "b1", "r2", 4).view())  # h1 moves to r2
    (assignment,) = expect_success(assign(topo, usage, [make_podset(8).require(RACK).build()])).assignments
    assert slice_strings(assignment) == ["b1/r2/h1=4", "b1/r2/h3=4"]
    topo.remove_node("h3")
    assert fit_in_rack(topo, usage) == 4
    topo.upsert_node(gpu_node("h4", "b1", "r1", 2).view())  # reuses h3's slot
    assert fit_in_rack(topo, usage) == 6
    assert topo.node_count == 3


def test_a_reused_slot_reads_its_new_node_usage_not_the_old_one() -> None:
    topo, usage = rack(), Usage()
    usage.add_bound_pod(make_pod("p").requests({GPU: "4"}).on("h1").view())
    assert fit_in_rack(topo, usage) == 4  # caches the slot -> usage row mapping
    topo.remove_node("h1")
    topo.upsert_node(gpu_node("h9", "b1", "r1", 4).view())  # takes h1's slot
    assert fit_in_rack(topo, usage) == 8
    usage.add_bound_pod(make_pod("q").requests({GPU: "1"}).on("h9").view())
    assert fit_in_rack(topo, usage) == 7


def test_a_pod_bound_elsewhere_in_the_domain_consumes_the_workloads_reservation_there() -> None:
    # Reserved 2 GPUs on h1, but kube-scheduler put one pod on h2 (same lowest domain).
    usage = Usage()
    usage.reserve("ns/w1", {"h1": {GPU: 2000, c.RESOURCE_PODS: 2000}})
    usage.add_bound_pod(make_pod("a", "ns").requests({GPU: "1"}).on("h2").view(), workload_key="ns/w1")
    assert usage.used("h1") == {GPU: 1000, c.RESOURCE_PODS: 1000}
    assert usage.used("h2") == {GPU: 1000, c.RESOURCE_PODS: 1000}
    assert usage.reserved("ns/w1") == {"h1": {GPU: 1000, c.RESOURCE_PODS: 1000}}


def test_node_churn_does_not_grow_the_domain_tables() -> None:
    # Hosts come and go under fresh names (autoscaling), one rack each time being emptied:
    #
    #          b1
    #       /      \
    #     r1        r{i}  (a new rack per round, holding the new host g{i}; g{i-1} leaves)
    #     |          |
    #   h1(4)      g{i}(2)
    topo = topology([gpu_node("h1", "b1", "r1", 4)])
    podsets = [make_podset(5).require("cloud.com/block").build()]
    for i in range(3 * DEAD_DOMAIN_SLACK):
        topo.upsert_node(gpu_node(f"g{i}", "b1", f"r{i + 2}", 2).view())
        if i:
            topo.remove_node(f"g{i - 1}")
        assert len(topo.domains[-1].keys) <= 2 * topo.node_count + DEAD_DOMAIN_SLACK
        assert len(topo.domains[1].keys) <= 2 * topo.node_count + DEAD_DOMAIN_SLACK + 1
    last = f"g{3 * DEAD_DOMAIN_SLACK - 1}"
    fresh = topology([gpu_node("h1", "b1", "r1", 4), gpu_node(last, "b1", f"r{3 * DEAD_DOMAIN_SLACK + 1}", 2)])
    assert assign(topo, Usage(), podsets) == assign(fresh, Usage(), podsets)
    (assignment,) = expect_success(assign(topo, Usage(), podsets)).assignments
    assert slice_strings(assignment) == ["b1/r1/h1=4", f"b1/r{3 * DEAD_DOMAIN_SLACK + 1}/{last}=1"]


def test_node_churn_does_not_grow_the_usage_rows_and_renumbering_keeps_what_is_used() -> None:
    topo, usage = rack(), Usage()

    def churn(first: int, last: int) -> None:  # short-lived nodes under fresh names, each with a pod
        for i in range(first, last):
            usage.add_bound_pod(make_pod(f"q{i}").requests({GPU: "1"}).on(f"spot-{i}").view())
            usage.remove_node(f"spot-{i}")
            assert len(usage.registry.rows) <= 2 * 2 + GONE_ROW_SLACK

    churn(0, 5)  # h1 and h2 get rows after these, so renumbering really moves them
    usage.add_bound_pod(make_pod("p").requests({GPU: "1"}).on("h1").view())
    usage.reserve("ns/w", {"h2": {GPU: 2000}})
    assert fit_in_rack(topo, usage) == 5
    before = usage.clone()
    churn(5, 3 * GONE_ROW_SLACK)
    assert usage.registry is not before.registry  # renumbered onto a fresh registry
    assert (usage.used("h1"), usage.reserved("ns/w")) == ({GPU: 1000, c.RESOURCE_PODS: 1000}, {"h2": {GPU: 2000}})
    assert (fit_in_rack(topo, usage), fit_in_rack(topo, before)) == (5, 5)
    usage.remove_bound_pod("default/p")
    usage.release("ns/w")
    assert (fit_in_rack(topo, usage), fit_in_rack(topo, before)) == (8, 5)


@dataclass
class ReAddCase:
    name: str
    steps: list[tuple[str, str]]
    """(action, pod uid): "bind" adds the pod bound on h1, "drop" removes it by key."""
    want_used: dict[str, int]
    want_reserved: dict[str, dict[str, int]]


A_GPU = {GPU: 1000, c.RESOURCE_PODS: 1000}
RE_ADD_CASES = [
    ReAddCase("a bound pod converts its share of the reservation", [("bind", "u1")],
              want_used={GPU: 3000, c.RESOURCE_PODS: 3000}, want_reserved={"h1": {GPU: 2000, c.RESOURCE_PODS: 2000}}),
    ReAddCase("removed then re-added (a relist) it does not consume the reservation again",
              [("bind", "u1"), ("drop", "u1"), ("bind", "u1")],
              want_used={GPU: 3000, c.RESOURCE_PODS: 3000}, want_reserved={"h1": {GPU: 2000, c.RESOURCE_PODS: 2000}}),
    ReAddCase("removed and re-added many times it still converts once",
              [("bind", "u1"), ("drop", "u1")] * 3 + [("bind", "u1")],
              want_used={GPU: 3000, c.RESOURCE_PODS: 3000}, want_reserved={"h1": {GPU: 2000, c.RESOURCE_PODS: 2000}}),
    ReAddCase("a replacement pod under the same name (new uid) converts its own share",
              [("bind", "u1"), ("drop", "u1"), ("bind", "u2")],
              want_used={GPU: 2000, c.RESOURCE_PODS: 2000}, want_reserved={"h1": A_GPU}),
    ReAddCase("a removed pod not re-added leaves only the rest of the reservation",
              [("bind", "u1"), ("drop", "u1")],
              want_used={GPU: 2000, c.RESOURCE_PODS: 2000}, want_reserved={"h1": {GPU: 2000, c.RESOURCE_PODS: 2000}}),
]


@pytest.mark.parametrize("case", RE_ADD_CASES, ids=lambda case: case.name)
def test_reservation_conversion_is_once_per_pod_uid(case: ReAddCase) -> None:
    usage = Usage()
    usage.reserve("ns/w1", {"h1": {GPU: 3000, c.RESOURCE_PODS: 3000}})
    pod = make_pod("a", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w1").requests({GPU: "1"}).on("h1")
    for action, uid in case.steps:
        if action == "bind":
            usage.add_bound_pod(pod.uid(uid).view())
        else:
            usage.remove_bound_pod("ns/a")
    assert usage.used("h1") == case.want_used
    assert usage.reserved("ns/w1") == case.want_reserved


def test_reserving_again_starts_a_fresh_conversion() -> None:
    # Evicted and re-admitted: the new reservation is consumed by the pods bound from then on.
    usage = Usage()
    pod = make_pod("a", "ns").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "w1").requests({GPU: "1"}).on("h1")
    usage.reserve("ns/w1", {"h1": {GPU: 2000}})
    usage.add_bound_pod(pod.view())
    usage.remove_bound_pod("ns/a")
    usage.reserve("ns/w1", {"h1": {GPU: 2000}})
    usage.add_bound_pod(pod.view())
    assert usage.reserved("ns/w1") == {"h1": {GPU: 1000}}


# A random history of pod binds, unbinds, node removals and clones, checked against a plain model:
# the used capacity of a node is the sum of the pods bound on it since it was last removed.
NODES = ("n0", "n1", "n2", "n3")
usage_ops = st.lists(st.one_of(
    st.tuples(st.just("bind"), st.integers(0, 7), st.sampled_from(NODES), st.integers(1, 4)),
    st.tuples(st.just("unbind"), st.integers(0, 7), st.just(""), st.just(0)),
    st.tuples(st.just("remove_node"), st.just(0), st.sampled_from(NODES), st.just(0)),
    st.tuples(st.just("clone"), st.just(0), st.just(""), st.just(0)),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(usage_ops)
def test_incremental_usage_matches_a_model_of_bound_pods(ops: list[tuple[str, int, str, int]]) -> None:
    usage, model = Usage(), dict[str, tuple[str, int]]()
    frozen: list[tuple[Usage, dict[str, tuple[str, int]]]] = []
    for op, pod, node, gpus in ops:
        if op == "bind":
            usage.add_bound_pod(make_pod(f"p{pod}").requests({GPU: gpus}).on(node).view())
            model[f"default/p{pod}"] = (node, gpus)
        elif op == "unbind":
            usage.remove_bound_pod(f"default/p{pod}")
            model.pop(f"default/p{pod}", None)
        elif op == "remove_node":
            usage.remove_node(node)
            model = {key: (n, g) for key, (n, g) in model.items() if n != node}
        else:  # keep writing to a clone; the original must stay as it was
            frozen.append((usage, dict(model)))
            usage = usage.clone()
    for used, want in [(usage, model), *frozen]:
        for node in NODES:
            pods = [g for n, g in want.values() if n == node]
            expected = {GPU: 1000 * sum(pods), c.RESOURCE_PODS: 1000 * len(pods)} if pods else {}
            assert used.used(node) == expected, node
