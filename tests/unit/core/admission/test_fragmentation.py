"""Fragmentation: free GPUs in domains too small for the largest waiting gang, per topology level,
checked on a drawn tree and against a brute-force sum over the nodes (hypothesis)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.views import PodView
from controller.core.admission.fragmentation import fragmented_free, gang_request, largest_gang
from controller.core.admission.workloads import workload_info
from controller.core.topology import Usage
from tests.builders.cluster import make_pod
from tests.builders.kueue import make_workload
from tests.unit.core.topology.scenario import BLOCK, GPU, HOST, RACK, gpu_node, topology

# Two blocks; GPUs free per node after the pods below (8-GPU nodes):
#
#               b1                       b2
#          /         \                    |
#        r1           r2                 r3
#      /    \       /    \             /    \
#    h1:8  h2:2   h3:3   h4:0       h5:1   h6:1
#
# rack free: r1 10, r2 3, r3 2; block free: b1 13, b2 2; host free as drawn.
NODES = [gpu_node("h1", "b1", "r1"), gpu_node("h2", "b1", "r1"), gpu_node("h3", "b1", "r2"),
         gpu_node("h4", "b1", "r2"), gpu_node("h5", "b2", "r3"), gpu_node("h6", "b2", "r3")]
USED = {"h2": 6, "h3": 5, "h4": 8, "h5": 7, "h6": 7}


def used(taken: dict[str, int]) -> Usage:
    pods: list[PodView] = [make_pod(f"p-{node}").requests({GPU: gpus}).on(node).view()
                           for node, gpus in taken.items() if gpus]
    return Usage.from_pods(pods)


def test_free_gpus_in_domains_smaller_than_the_gang_are_summed_per_level() -> None:
    tree = topology(NODES)
    # a gang of 4 GPUs: hosts with 1-3 free (h2 2, h3 3, h5 1, h6 1) strand 7; racks r3 (2) and r2
    # (3) strand 5; block b2 (2) strands 2; h1 (8), r1 (10), b1 (13) can hold it; h4 (0) holds nothing
    assert fragmented_free(tree, used(USED), GPU, 4000) == {BLOCK: 2000, RACK: 5000, HOST: 7000}


def test_nothing_is_stranded_without_a_waiting_gang() -> None:
    assert fragmented_free(topology(NODES), used(USED), GPU, 0) == {BLOCK: 0, RACK: 0, HOST: 0}


def test_a_gang_larger_than_every_domain_strands_all_free_gpus() -> None:
    got = fragmented_free(topology(NODES), used(USED), GPU, 100_000)
    assert got == {BLOCK: 15000, RACK: 15000, HOST: 15000}


def test_the_largest_gang_counts_every_pod_of_every_pod_set() -> None:
    big = workload_info(make_workload("big").queue("q").pod_set("workers", 4, {GPU: 8})
                        .pod_set("driver", 1, {GPU: 1}).model())
    small = workload_info(make_workload("small").queue("q").pod_set("main", 2, {GPU: 8}).model())
    cpu = workload_info(make_workload("cpu").queue("q").pod_set("main", 64, {"cpu": 1}).model())
    assert gang_request(big, GPU) == 33000
    assert largest_gang([small, big, cpu], GPU) == 33000
    assert largest_gang([cpu], GPU) == 0
    assert largest_gang([], GPU) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 8)), min_size=1, max_size=12),
       st.integers(0, 40))
def test_matches_a_brute_force_sum_over_nodes(nodes: list[tuple[int, int, int]], need_gpus: int) -> None:
    builders = [gpu_node(f"n{i}", f"b{b}", f"r{b}-{r}") for i, (b, r, _) in enumerate(nodes)]
    taken = {f"n{i}": gpus for i, (_, _, gpus) in enumerate(nodes)}
    free = {f"n{i}": 8 - gpus for i, (_, _, gpus) in enumerate(nodes)}
    def domain(level: str, i: int) -> str:
        block, rack, _ = nodes[i]
        return {BLOCK: f"b{block}", RACK: f"r{block}-{rack}", HOST: f"n{i}"}[level]
    want: dict[str, int] = {}
    for level in (BLOCK, RACK, HOST):
        per: dict[str, int] = defaultdict(int)
        for i in range(len(nodes)):
            per[domain(level, i)] += free[f"n{i}"]
        want[level] = 1000 * sum(v for v in per.values() if 0 < v < need_gpus)
    assert fragmented_free(topology(builders), used(taken), GPU, need_gpus * 1000) == want
