"""Placements kept per shape (`assigning._recall`): a pod set placed whole on one node is placed
there again, without a fresh search, while nothing changed but that node, and the kept answer is
always the one a tree built fresh (no kept counts, no kept placements) gives."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.topology import (
    AssignmentSuccess,
    PodSetRequest,
    TopologyRequest,
    Usage,
    assign,
    assigning,
)
from tests.builders.cluster import NodeBuilder, make_pod
from tests.unit.core.topology.scenario import (
    GPU,
    LEVELS,
    expect_success,
    gpu_node,
    make_podset,
    slice_strings,
    topology,
)

# Two racks of two hosts; h0 is the tightest (2 free GPUs), then h1 (3), h2 and h3 (4 each):
#
#             b0
#        /          \
#      r0            r1
#   h0(2)  h1(3)  h2(4)  h3(4)
FREE = {"h0": 2, "h1": 3, "h2": 4, "h3": 4}


def hosts() -> list[NodeBuilder]:
    return [gpu_node(name, "b0", f"r{i // 2}", gpus) for i, (name, gpus) in enumerate(FREE.items())]


def recalls() -> tuple[list[bool], mock._patch[object]]:
    """Whether each assignment's search was skipped for a kept placement, and the patch recording it."""
    seen: list[bool] = []

    def spy(*args: Any) -> Any:
        result = original(*args)
        seen.append(result is not None)
        return result

    original = assigning._recall
    return seen, mock.patch.object(assigning, "_recall", spy)


def test_a_placement_is_kept_while_only_its_node_fills() -> None:
    seen, spying = recalls()
    with spying:
        tree, usage = topology(hosts()), Usage()
        request = make_podset(1).prefer(LEVELS[1]).build()
        placed = []
        for i in range(5):
            outcome = expect_success(assign(tree, usage, [request]))
            usage.reserve(f"ns/w{i}", outcome.placement.resources)
            placed.extend(slice_strings(outcome.assignments[0]))
    # BestFit: rack r0 (5 free) before r1 (8), and in it h0 until full, then h1.
    assert placed == ["b0/r0/h0=1", "b0/r0/h0=1", "b0/r0/h1=1", "b0/r0/h1=1", "b0/r0/h1=1"]
    # The second pod on h0 and the two after the first on h1 came from the kept placement.
    assert seen == [False, True, False, True, True]


def test_a_change_on_another_node_voids_the_kept_placement() -> None:
    seen, spying = recalls()
    with spying:
        tree, usage = topology(hosts()), Usage()
        request = make_podset(1).prefer(LEVELS[1]).build()
        first = expect_success(assign(tree, usage, [request]))
        usage.reserve("ns/w0", first.placement.resources)
        # h1 loses two GPUs to a bound pod: r0 holds 1 + 1 now, still the tightest rack, and h1
        # (1 free) is now tighter than h0 (1 free, ties by name: h0 first).
        usage.add_bound_pod(make_pod("other").requests({GPU: 2}).on("h1").view())
        second = expect_success(assign(tree, usage, [request]))
    assert slice_strings(second.assignments[0]) == ["b0/r0/h0=1"]
    assert seen == [False, False]


def test_a_node_that_frees_up_voids_the_placement_kept_on_it() -> None:
    seen, spying = recalls()
    with spying:
        tree, usage = topology(hosts()), Usage()
        usage.add_bound_pod(make_pod("x").requests({GPU: 2}).on("h1").view())
        request = make_podset(1).prefer(LEVELS[1]).build()
        # h1 has 1 free GPU, h0 2: h1 is the tightest of rack r0 (3 free, r1 has 8).
        first = expect_success(assign(tree, usage, [request]))
        usage.remove_bound_pod("default/x")
        # h1 now has 3 free: h0 (2) is the tightest; the placement kept on h1 grew looser.
        second = expect_success(assign(tree, usage, [request]))
    assert slice_strings(first.assignments[0]) == ["b0/r0/h1=1"]
    assert slice_strings(second.assignments[0]) == ["b0/r0/h0=1"]
    assert seen == [False, False]


def test_a_pod_set_spread_over_nodes_is_not_kept() -> None:
    seen, spying = recalls()
    with spying:
        tree, usage = topology(hosts()), Usage()
        request = make_podset(5).prefer(LEVELS[1]).build()  # r0 holds exactly 5: h0 and h1
        for i in range(2):
            outcome = expect_success(assign(tree, usage, [request]))
            assert slice_strings(outcome.assignments[0]) == (
                ["b0/r0/h0=2", "b0/r0/h1=3"] if i == 0 else ["b0/r1/h2=4", "b0/r1/h3=1"])
            usage.reserve(f"ns/w{i}", outcome.placement.resources)
    assert seen == [False, False]


modes = st.sampled_from([
    TopologyRequest("required", LEVELS[1]), TopologyRequest("required", LEVELS[2]),
    TopologyRequest("preferred", LEVELS[0]), TopologyRequest("preferred", LEVELS[1]),
    TopologyRequest("preferred", None), TopologyRequest("unconstrained", None)])

admission_ops = st.lists(st.tuples(
    st.sampled_from(["admit", "admit", "admit", "admit", "other", "release", "bind", "unbind", "upsert", "remove"]),
    st.integers(0, 5),  # node number / reservation key / bound pod
    st.integers(1, 4),  # pods (other) or GPUs
    modes,  # the mode of "other"
), max_size=50)


@settings(max_examples=300, deadline=None)
@given(ops=admission_ops, count=st.integers(1, 3), mode=modes, gpus_per_pod=st.integers(1, 2),
       balanced=st.booleans())
def test_kept_placements_equal_fresh_ones_as_admissions_fill_the_nodes(
        ops: list[tuple[str, int, int, TopologyRequest]], count: int, mode: TopologyRequest, gpus_per_pod: int,
        balanced: bool) -> None:
    """One pod set admitted again and again (each admission holding its placement), with other pod
    sets admitted, releases, pods bound and gone, and node changes between them: every answer of
    the tree that keeps counts and placements equals that of a tree built fresh on the same usage."""
    nodes = {f"h{i}": gpu_node(f"h{i}", "b0" if i < 3 else "b1", f"r{i % 3}", 4 + i % 3).view() for i in range(6)}
    tree, usage = topology(list(nodes.values())), Usage()
    held: list[str] = []
    bound: list[str] = []
    for i, (op, n, amount, other) in enumerate(ops):
        name = f"h{n}"
        if op in ("admit", "other"):
            pods, how = (count, mode) if op == "admit" else (amount, other)
            request = [PodSetRequest("main", pods, {GPU: 1000 * gpus_per_pod, "pods": 1000}, how)]
            outcome = assign(tree, usage, request, balanced=balanced)
            assert outcome == assign(topology(list(nodes.values())), usage, request, balanced=balanced)
            if isinstance(outcome, AssignmentSuccess):
                usage.reserve(f"ns/w{i}", outcome.placement.resources)
                held.append(f"ns/w{i}")
        elif op == "release" and held:
            usage.release(held.pop(n % len(held)))
        elif op == "bind" and name in nodes:
            usage.add_bound_pod(make_pod(f"p{i}").requests({GPU: amount}).on(name).view())
            bound.append(f"default/p{i}")
        elif op == "unbind" and bound:
            usage.remove_bound_pod(bound.pop(n % len(bound)))
        elif op == "upsert":
            nodes[name] = gpu_node(name, "b0" if n < 3 else "b1", f"r{amount % 3}", 2 + amount).view()
            tree.upsert_node(nodes[name])
        elif op == "remove":
            nodes.pop(name, None)
            tree.remove_node(name)
