"""Occupancy per domain and node from the static tree and a Usage: sums, Workloads, order, and the
hostname level drawn as nodes."""

from __future__ import annotations

from controller.core.topology.occupancy import headline_resource, occupancy_of
from controller.core.topology.usage import Usage
from tests.builders.cluster import make_node
from tests.unit.core.topology.scenario import GPU, gpu_node, topology

# Two blocks; w1 holds 6 GPUs on h1 and 2 on h2, w2 1 on h2 (free GPUs after them in brackets):
#
#            b1                b2
#          /    \               |
#        r1      r2            r3
#       /  \      |             |
#   h1(2/8) h2(5/8) h3(8/8)   h4(8/8)
NODES = (gpu_node("h1", "b1", "r1"), gpu_node("h2", "b1", "r1"), gpu_node("h3", "b1", "r2"),
         gpu_node("h4", "b2", "r3"))


def usage() -> Usage:
    held = Usage()
    held.reserve("ns/w1", {"h1": {GPU: 6000}, "h2": {GPU: 2000}})
    held.reserve("ns/w2", {"h2": {GPU: 1000}})
    return held


def test_sums_per_domain_and_the_workloads_there() -> None:
    occ = occupancy_of("h100", topology(NODES), usage(), ["ns/w1", "ns/w2"])
    assert (occ.resource, occ.capacity, occ.used, occ.node_count, occ.unplaced) == (GPU, 32000, 9000, 4, 0)
    assert occ.levels == ("cloud.com/block", "cloud.com/rack")  # hostname: the nodes themselves
    b1, b2 = occ.domains
    assert (b1.name, b1.capacity, b1.used, b1.node_count, b1.workloads) == ("b1", 24000, 9000, 3, ("ns/w1", "ns/w2"))
    assert (b2.name, b2.used, b2.workloads) == ("b2", 0, ())
    r1, r2 = b1.children
    assert [(n.name, n.used, n.free, n.workloads) for n in r1.nodes] == [
        ("h1", 6000, 2000, ("ns/w1",)), ("h2", 3000, 5000, ("ns/w1", "ns/w2"))]
    assert (r2.path, r2.used, r2.nodes[0].workloads) == (("b1", "r2"), 0, ())


def test_a_workload_not_asked_for_uses_capacity_but_is_not_named() -> None:
    occ = occupancy_of("h100", topology(NODES), usage(), ["ns/w2"])
    assert occ.used == 9000
    assert occ.domains[0].workloads == ("ns/w2",)


def test_domains_in_label_order_whatever_the_node_order() -> None:
    occ = occupancy_of("h100", topology(tuple(reversed(NODES))), usage(), [])
    assert [d.name for d in occ.domains] == ["b1", "b2"]
    assert [n.name for n in occ.domains[0].children[0].nodes] == ["h1", "h2"]


def test_a_node_without_level_labels_is_counted_apart() -> None:
    bare = make_node("h5").label("cloud.com/block", "b1").allocatable({GPU: 8}, cpu="64")  # no rack label
    occ = occupancy_of("h100", topology((*NODES, bare)), usage(), [])
    assert (occ.node_count, occ.unplaced, occ.capacity) == (5, 1, 32000)


def test_the_headline_resource_is_a_gpu_when_nodes_have_one() -> None:
    assert headline_resource(topology(NODES)) == GPU
    assert headline_resource(topology(())) == "cpu"


def test_used_beyond_allocatable_shows_full() -> None:
    over = Usage()
    over.reserve("ns/w", {"h1": {GPU: 12000}})
    h1 = occupancy_of("h100", topology(NODES), over, ["ns/w"]).domains[0].children[0].nodes[0]
    assert (h1.used, h1.free) == (8000, 0)
