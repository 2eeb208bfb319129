"""Per-shape counts kept in the tree: patched from the change logs (not recounted) when a few nodes
or rows changed, on the same Usage, a clone or a sibling clone, and always equal to a recount."""

from __future__ import annotations

import numpy as np

from controller.api import constants as c
from controller.core.topology import FlavorTopology, Usage
from controller.core.topology.candidacy import Signature
from controller.core.topology.counting import ShapeCounts, shape_counts
from tests.builders.cluster import make_pod
from tests.unit.core.topology.scenario import GPU, LEVELS, gpu_node, topology

# Eight 4-GPU hosts, two per rack, two racks per block:
#
#            b0                      b1
#       /         \             /         \
#     r0           r1         r2           r3
#   h0  h1       h2  h3     h4  h5       h6  h7
REQUESTS = {GPU: 1000, c.RESOURCE_PODS: 1000}
SIGNATURE = Signature.of({}, (), ())


def tree() -> FlavorTopology:
    return topology([gpu_node(f"h{i}", f"b{i // 4}", f"r{i // 2}", 4) for i in range(8)])


def sums(entry: ShapeCounts, topo: FlavorTopology) -> list[dict[tuple[str, ...], int]]:
    """Non-zero pod counts per domain key, level by level."""
    return [{key: int(entry.counts[lv][d]) for key, d in topo.domains[lv].id_of.items() if int(entry.counts[lv][d])}
            for lv in range(len(LEVELS))]


def recounted(topo: FlavorTopology, usage: Usage) -> list[dict[tuple[str, ...], int]]:
    """The sums a tree built now, with no kept counts, computes."""
    fresh = topology([v for v in (topo.view(s) for s in range(topo.slots)) if v is not None])
    return sums(shape_counts(fresh, usage, REQUESTS, SIGNATURE), fresh)


def test_a_bound_pod_patches_the_kept_counts() -> None:
    topo, usage = tree(), Usage()
    first = shape_counts(topo, usage, REQUESTS, SIGNATURE)
    usage.add_bound_pod(make_pod("p").requests({GPU: 3}).on("h5").view())
    again = shape_counts(topo, usage, REQUESTS, SIGNATURE)
    assert again is first  # patched in place, not recounted
    assert sums(again, topo) == recounted(topo, usage)
    assert sums(again, topo)[0] == {("b0",): 16, ("b1",): 13}


def test_counts_follow_a_clone_and_then_its_sibling() -> None:
    topo, base = tree(), Usage()
    one = base.clone()
    one.reserve("ns/a", {"h0": {GPU: 4000}})
    entry = shape_counts(topo, one, REQUESTS, SIGNATURE)
    other = base.clone()  # a sibling: h0 is free again there, h7 is not
    other.reserve("ns/b", {"h7": {GPU: 2000}})
    again = shape_counts(topo, other, REQUESTS, SIGNATURE)
    assert again is entry
    assert sums(again, topo)[1] == {("b0", "r0"): 8, ("b0", "r1"): 8, ("b1", "r2"): 8, ("b1", "r3"): 6}
    assert sums(again, topo) == recounted(topo, other)


def test_a_node_joining_under_a_new_name_is_one_patched_slot() -> None:
    topo, usage = tree(), Usage()
    entry = shape_counts(topo, usage, REQUESTS, SIGNATURE)
    topo.upsert_node(gpu_node("h8", "b1", "r9", 2).view())
    topo.remove_node("h0")
    again = shape_counts(topo, usage, REQUESTS, SIGNATURE)
    assert again is entry and again.epoch == topo.epoch
    assert sums(again, topo) == recounted(topo, usage)
    assert sums(again, topo)[1][("b1", "r9")] == 2 and ("b0", "r0") in sums(again, topo)[1]
    assert np.count_nonzero(again.fit) == 8


def test_an_unrelated_usage_is_recounted() -> None:
    topo = tree()
    entry = shape_counts(topo, Usage(), REQUESTS, SIGNATURE)
    elsewhere = Usage(Usage().registry)
    elsewhere.add_bound_pod(make_pod("p").requests({GPU: 4}).on("h1").view())
    again = shape_counts(topo, elsewhere, REQUESTS, SIGNATURE)
    assert again is not entry
    assert ("b0", "r0", "h1") not in sums(again, topo)[2]
