"""Flavor membership: a flavor's tree holds only the nodes carrying every flavor nodeLabel with its
value (Kueue's semantics), so "Total nodes" counts them alone and flavor labels are never exclusions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.core.topology import AssignmentOutcome, FlavorTopology, Usage, assign
from tests.builders.cluster import NodeBuilder, make_node, make_pod
from tests.unit.core.topology.scenario import (
    BLOCK,
    RACK,
    expect_failure,
    expect_success,
    gpu_node,
    make_podset,
    slice_strings,
    topology,
)

KIND = "cloud.com/gpu"

# Six nodes, two GPU kinds (free GPUs in brackets); h5 lacks its rack label, h4 any kind label:
#
#                  b1                            b2
#            /            \                  /        \
#          r1              r2              r3        (no rack)
#        /    \          /    \             |           |
#  h1(2,h100) h2(4,a100) h3(8,h100) h6(8,a100) h4(8,-)  h5(8,h100)
#                        not ready  not ready
def nodes() -> list[NodeBuilder]:
    return [
        gpu_node("h1", "b1", "r1", 2).label(KIND, "h100"),
        gpu_node("h2", "b1", "r1", 4).label(KIND, "a100"),
        gpu_node("h3", "b1", "r2", 8).label(KIND, "h100").not_ready(),
        gpu_node("h6", "b1", "r2", 8).label(KIND, "a100").not_ready(),
        gpu_node("h4", "b2", "r3", 8),
        gpu_node("h5", "b2", "r9", 8).label(KIND, "h100").without_label(RACK),
    ]


@dataclass(frozen=True)
class Case:
    name: str
    node_labels: dict[str, str]
    want_total: int
    want_message: str


UNFIT = 'topology "gpu" allows to fit only {fit} out of 9 pod(s) at level "cloud.com/rack"'
CASES = [
    Case("the h100 flavor counts its three nodes; the level-less one is counted and excluded", {KIND: "h100"}, 3,
         UNFIT.format(fit=2) + ' (best: b1/r1). Total nodes: 3; excluded: not ready: 1, '
         'missing label "cloud.com/rack": 1'),
    Case("the a100 flavor counts its two nodes; h100 and unlabelled nodes are not exclusions", {KIND: "a100"}, 2,
         UNFIT.format(fit=4) + " (best: b1/r1). Total nodes: 2; excluded: not ready: 1"),
    Case("two nodeLabels: a node needs both", {KIND: "h100", BLOCK: "b2"}, 1,
         UNFIT.format(fit=0) + ". Total nodes: 1; excluded: missing label \"cloud.com/rack\": 1"),
    Case("no nodeLabels: every node is the flavor's", {}, 6,
         UNFIT.format(fit=8) + ' (best: b2/r3). Total nodes: 6; excluded: not ready: 2, '
         'missing label "cloud.com/rack": 1'),
    Case("a value no node carries: an empty tree", {KIND: "b200"}, 0,
         UNFIT.format(fit=0) + ". Total nodes: 0; excluded: none"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_flavor_counts_only_its_own_nodes(case: Case) -> None:
    topo = topology(nodes(), node_labels=case.node_labels)
    assert topo.node_count == case.want_total
    failure = expect_failure(assign(topo, Usage(), [make_podset(9).require(RACK).build()]))
    assert failure.total_nodes == case.want_total
    assert failure.message == case.want_message


def test_two_flavors_with_disjoint_nodes_share_one_usage_yet_count_apart() -> None:
    # h100 sees h1, h3, h5; a100 sees h2, h6. A pod bound on h2 (the cluster-wide usage) shrinks
    # the a100 flavor only.
    h100 = topology(nodes(), node_labels={KIND: "h100"})
    a100 = topology(nodes(), node_labels={KIND: "a100"})
    usage = Usage()
    (h100_slices,) = expect_success(assign(h100, usage, [make_podset(2).require(RACK).build()])).assignments
    (a100_slices,) = expect_success(assign(a100, usage, [make_podset(4).require(RACK).build()])).assignments
    assert (slice_strings(h100_slices), slice_strings(a100_slices)) == (["b1/r1/h1=2"], ["b1/r1/h2=4"])
    usage.add_bound_pod(make_pod("p").requests({"nvidia.com/gpu": "3"}).on("h2").view())
    assert expect_failure(assign(a100, usage, [make_podset(4).require(RACK).build()])).fit == 1
    assert assign(h100, usage, [make_podset(2).require(RACK).build()]).ok
    assert (h100.node_count, a100.node_count) == (3, 2)


def relabelled(name: str, kind: str | None) -> NodeBuilder:
    """Node `name` of `nodes()` with its kind label set to `kind` (None: removed)."""
    (builder,) = (n for n in nodes() if n.view().name == name)
    return builder.without_label(KIND) if kind is None else builder.label(KIND, kind)


@dataclass(frozen=True)
class RelabelCase:
    name: str
    steps: tuple[tuple[str, str | None], ...]
    """(node, its new kind label or None), applied in order to the h100 flavor's tree."""
    want_total: int


RELABELS = [
    RelabelCase("an a100 node relabelled h100 moves in", (("h2", "h100"),), 4),
    RelabelCase("an unlabelled node labelled h100 moves in", (("h4", "h100"),), 4),
    RelabelCase("an h100 node relabelled a100 moves out", (("h1", "a100"),), 2),
    RelabelCase("an h100 node losing the label moves out", (("h1", None),), 2),
    RelabelCase("out and back in again", (("h1", None), ("h1", "h100")), 3),
    RelabelCase("one out, another in, reusing its slot", (("h1", "a100"), ("h2", "h100"), ("h4", "h100")), 4),
    RelabelCase("a node outside stays outside when relabelled to another kind", (("h2", "b200"),), 3),
]


def outcomes(topo: FlavorTopology) -> list[AssignmentOutcome]:
    """Assignments that exercise every level, the candidacy masks and the usage rows."""
    podsets = [make_podset(4).require(RACK), make_podset(6).prefer(RACK), make_podset(3).unconstrained(),
               make_podset(12).require(BLOCK)]
    return [assign(topo, Usage(), [ps.build()]) for ps in podsets]


@pytest.mark.parametrize("case", RELABELS, ids=lambda c: c.name)
def test_a_relabelled_node_moves_in_or_out_incrementally_as_a_fresh_build_would_have_it(
        case: RelabelCase) -> None:
    topo = topology(nodes(), node_labels={KIND: "h100"})
    outcomes(topo)  # caches masks and usage rows, which the moves must patch
    current = {n.view().name: n for n in nodes()}
    slots = topo.slots
    for name, kind in case.steps:
        current[name] = relabelled(name, kind)
        topo.upsert_node(current[name].view())
    fresh = topology(current.values(), node_labels={KIND: "h100"})
    assert topo.node_count == fresh.node_count == case.want_total
    assert outcomes(topo) == outcomes(fresh)
    # Patched in place: a node moving in takes a freed slot before the table grows.
    assert topo.slots <= max(slots, case.want_total)


def test_a_node_outside_the_flavor_is_not_in_its_tree() -> None:
    topo = topology(nodes(), node_labels={KIND: "h100"})
    assert [topo.slot_of(n) is not None for n in ("h1", "h2", "h3", "h4", "h5", "h6")] == [
        True, False, True, False, True, False]
    topo.remove_node("h2")  # removing a node the flavor never held is a no-op
    topo.upsert_node(make_node("h7").label(KIND, "a100").view())
    assert topo.node_count == 3
