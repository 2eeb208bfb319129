"""Each placement policy (required, preferred, auto, unconstrained) and the orderings that match Kueue."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.builders.cluster import make_node
from tests.builders.kueue import label_slices
from tests.unit.core.topology.scenario import (
    BLOCK,
    HOST,
    RACK,
    PodSetBuilder,
    expect_failure,
    expect_success,
    gpu_node,
    make_podset,
    run,
    slice_strings,
)

# Free GPUs per host (1 GPU per pod, so free GPUs = pods that fit):
#
#              b1                     b2
#          /        \                  |
#        r1          r2               r3
#      /    \         |                |
#   x1(3)  x2(3)    x3(2)            x4(1)
TREE = (
    gpu_node("x1", "b1", "r1", 3),
    gpu_node("x2", "b1", "r1", 3),
    gpu_node("x3", "b1", "r2", 2),
    gpu_node("x4", "b2", "r3", 1),
)


@dataclass(frozen=True)
class Case:
    name: str
    podset: PodSetBuilder
    want_slices: tuple[str, ...] = ()
    want_message: str = ""


CASES = [
    Case("required block picks the only block that holds 7, then fills the fuller rack first",
         make_podset(7).require(BLOCK), ("b1/r1/x1=3", "b1/r1/x2=3", "b1/r2/x3=1")),
    Case("required block is BestFit: the tightest block that still holds the pods",
         make_podset(1).require(BLOCK), ("b2/r3/x4=1",)),
    Case("required rack takes the tightest rack holding 2 (r2), not the roomiest",
         make_podset(2).require(RACK), ("b1/r2/x3=2",)),
    Case("required rack of 6 fills r1 exactly",
         make_podset(6).require(RACK), ("b1/r1/x1=3", "b1/r1/x2=3")),
    Case("required host breaks a tie between equally tight hosts by label values",
         make_podset(3).require(HOST), ("b1/r1/x1=3",)),
    Case("required host picks the tightest host",
         make_podset(2).require(HOST), ("b1/r2/x3=2",)),
    Case("required rack fails when no rack holds all pods, naming the best rack",
         make_podset(7).require(RACK), want_message=(
             'topology "gpu" allows to fit only 6 out of 7 pod(s) at level "cloud.com/rack" (best: b1/r1). '
             "Total nodes: 4; excluded: none")),
    Case("required block fails beyond the biggest block",
         make_podset(9).require(BLOCK), want_message=(
             'topology "gpu" allows to fit only 8 out of 9 pod(s) at level "cloud.com/block" (best: b1). '
             "Total nodes: 4; excluded: none")),
    Case("preferred rack falls back to the tightest block when no rack holds the pods",
         make_podset(7).prefer(RACK), ("b1/r1/x1=3", "b1/r1/x2=3", "b1/r2/x3=1")),
    Case("preferred rack stays in one rack when one fits",
         make_podset(5).prefer(RACK), ("b1/r1/x1=3", "b1/r1/x2=2")),
    Case("preferred rack spreads over the fewest blocks when no block holds the pods",
         make_podset(9).prefer(RACK), ("b1/r1/x1=3", "b1/r1/x2=3", "b1/r2/x3=2", "b2/r3/x4=1")),
    Case("preferred host widens to the rack, then uses the fewest hosts in it",
         make_podset(4).prefer(HOST), ("b1/r1/x1=3", "b1/r1/x2=1")),
    Case("preferred auto means the lowest level: one host when one fits",
         make_podset(3).prefer(None), ("b1/r1/x1=3",)),
    Case("required auto is the lowest level too",
         make_podset(2).require(None), ("b1/r2/x3=2",)),
    Case("preferred fails only when the whole topology lacks room",
         make_podset(10).prefer(RACK), want_message=(
             'topology "gpu" allows to fit only 9 out of 10 pod(s) in total. Total nodes: 4; excluded: none')),
    Case("unconstrained fills the least free hosts first; the last takes only the remainder",
         make_podset(7).unconstrained(), ("b1/r1/x1=3", "b1/r1/x2=1", "b1/r2/x3=2", "b2/r3/x4=1")),
    Case("unconstrained keeps the pods on the least free host that holds them all",
         make_podset(2).unconstrained(), ("b1/r2/x3=2",)),
    Case("unconstrained breaks a tie between equally free hosts by label values",
         make_podset(3).unconstrained(), ("b1/r1/x1=3",)),
    Case("unconstrained with a single pod fills the least free host",
         make_podset(1).unconstrained(), ("b2/r3/x4=1",)),
    Case("unconstrained fails when the total is short",
         make_podset(10).unconstrained(), want_message=(
             'topology "gpu" allows to fit only 9 out of 10 pod(s) in total. Total nodes: 4; excluded: none')),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_policy(case: Case) -> None:
    outcome = run(TREE, case.podset)
    if case.want_message:
        assert expect_failure(outcome).message == case.want_message
    else:
        (assignment,) = expect_success(outcome).assignments
        assert tuple(slice_strings(assignment)) == case.want_slices


# The KEP's example, all four hosts in one rack:
#
#                 b1
#                  |
#                 r1
#       /      /      \      \
#    x1(3)  x2(3)   x3(2)   x4(1)
KEP_RACK = (gpu_node("x1", "b1", "r1", 3), gpu_node("x2", "b1", "r1", 3),
            gpu_node("x3", "b1", "r1", 2), gpu_node("x4", "b1", "r1", 1))


@pytest.mark.parametrize(("podset", "want"), [
    pytest.param(make_podset(7).require(RACK), ["b1/r1/x1=3", "b1/r1/x2=3", "b1/r1/x4=1"],
                 id="BestFit takes 3, 3 and then the tightest host, the 1"),
    pytest.param(make_podset(7).unconstrained(), ["b1/r1/x1=3", "b1/r1/x2=1", "b1/r1/x3=2", "b1/r1/x4=1"],
                 id="least free takes 1, 2, 3 and 1 of the last 3"),
])
def test_kep_example_orderings(podset: PodSetBuilder, want: list[str]) -> None:
    (assignment,) = expect_success(run(KEP_RACK, podset)).assignments
    assert slice_strings(assignment) == want


# Rack is the lowest level: slices name racks, and pods still go to nodes one by one.
#
#            b1
#        /        \
#      r1          r2
#    /    \         |
#  n1(4)  n2(1)   n3(4)
RACK_LOWEST = (gpu_node("n1", "b1", "r1", 4), gpu_node("n2", "b1", "r1", 1), gpu_node("n3", "b1", "r2", 4))


def test_slices_stop_at_the_lowest_level_when_it_is_not_hostname() -> None:
    success = expect_success(run(RACK_LOWEST, make_podset(5).require(RACK), levels=(BLOCK, RACK)))
    (assignment,) = success.assignments
    assert assignment.to_dict()["levels"] == [BLOCK, RACK]
    assert label_slices(assignment.to_dict()) == [{"nodeLabels": {BLOCK: "b1", RACK: "r1"}, "count": 5}]
    assert dict(success.placement.pods["main"]) == {"n1": 4, "n2": 1}


@pytest.mark.parametrize(("count", "want"), [
    pytest.param(5, {"n1": 4, "n2": 1}, id="the least free rack holding all 5 pods (r1), not 4 in r2 and 1 in r1"),
    pytest.param(8, {"n1": 4, "n3": 4}, id="no rack holds 8: least free first, all of r2, then 4 of r1 on n1"),
])
def test_unconstrained_at_a_lowest_level_that_is_not_hostname(count: int, want: dict[str, int]) -> None:
    success = expect_success(run(RACK_LOWEST, make_podset(count).unconstrained(), levels=(BLOCK, RACK)))
    assert dict(success.placement.pods["main"]) == want


def test_pods_inside_a_lowest_domain_go_to_the_fewest_nodes() -> None:
    success = expect_success(run(RACK_LOWEST, make_podset(4).require(BLOCK), levels=(BLOCK, RACK)))
    (assignment,) = success.assignments
    # r1 and r2 both hold 5 and 4: BestFit-last takes the tightest rack able to hold 4 (r2).
    assert [s.count for s in assignment.slices] == [4]
    assert dict(success.placement.pods["main"]) == {"n3": 4}


def test_slices_are_sorted_by_label_values_not_by_node_input_order() -> None:
    reversed_tree = tuple(reversed(TREE))
    (assignment,) = expect_success(run(reversed_tree, make_podset(9).prefer(RACK))).assignments
    assert slice_strings(assignment) == ["b1/r1/x1=3", "b1/r1/x2=3", "b1/r2/x3=2", "b2/r3/x4=1"]


# The KEP allows the same rack value under different blocks: they are different racks.
#
#        b1         b2
#        |          |
#        r1         r1
#        |          |
#      x1(4)      x2(4)
SAME_RACK_NAME = (gpu_node("x1", "b1", "r1", 4), gpu_node("x2", "b2", "r1", 4))


@pytest.mark.parametrize(("podset", "want_slices", "want_message"), [
    pytest.param(make_podset(6).require(RACK), [], 'topology "gpu" allows to fit only 4 out of 6 pod(s) at level '
                 '"cloud.com/rack" (best: b1/r1). Total nodes: 2; excluded: none',
                 id="required rack counts each b/r1 apart, never their 8 together"),
    pytest.param(make_podset(6).prefer(RACK), ["b1/r1/x1=4", "b2/r1/x2=2"], "",
                 id="preferred rack spreads over the two racks named r1"),
])
def test_a_rack_value_repeated_under_two_blocks_names_two_racks(podset: PodSetBuilder, want_slices: list[str],
                                                                 want_message: str) -> None:
    outcome = run(SAME_RACK_NAME, podset)
    if want_message:
        assert expect_failure(outcome).message == want_message
    else:
        (assignment,) = expect_success(outcome).assignments
        assert slice_strings(assignment) == want_slices


def test_zero_pods_fit_trivially_with_no_slices() -> None:
    (assignment,) = expect_success(run(TREE, make_podset(0).require(RACK))).assignments
    assert assignment.slices == ()


# Hosts that hold thousands of pods each (only `pods` requested; 3,000 and 2,000 allowed):
#
#             b1
#             |
#             r1
#          /      \
#   w1(3000)    w2(2000)
THOUSANDS = (make_node("w1").labels({BLOCK: "b1", RACK: "r1"}).allocatable(pods=3000),
             make_node("w2").labels({BLOCK: "b1", RACK: "r1"}).allocatable(pods=2000))


@pytest.mark.parametrize(("count", "want"), [
    pytest.param(2500, ["b1/r1/w1=2500"], id="the least free host holding all 2,500 pods"),
    pytest.param(4000, ["b1/r1/w1=2000", "b1/r1/w2=2000"],
                 id="no host holds 4,000: all of w2 (least free), then the remainder on w1"),
])
def test_unconstrained_least_free_when_hosts_hold_thousands_of_pods(count: int, want: list[str]) -> None:
    (assignment,) = expect_success(run(THOUSANDS, make_podset(count).unconstrained().gpus(0))).assignments
    assert slice_strings(assignment) == want
