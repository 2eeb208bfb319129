"""Kueue 0.19's TAS requests beyond one level: pod-set slices (and their remainder), multi-layer
slices, pod-set groups, balanced placement and implicit TAS, each with its failures and messages."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.core.topology import PodSetRequest, TopologyRequest
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

# Free GPUs per host (1 GPU per pod):
#
#                 b1                          b2
#          /             \                    |
#        r1               r2                 r3
#     /      \          /     \            /     \
#  x1(4)   x2(3)     x3(2)   x4(2)      x5(4)   x6(4)
TREE = (
    gpu_node("x1", "b1", "r1", 4), gpu_node("x2", "b1", "r1", 3),
    gpu_node("x3", "b1", "r2", 2), gpu_node("x4", "b1", "r2", 2),
    gpu_node("x5", "b2", "r3", 4), gpu_node("x6", "b2", "r3", 4),
)


@dataclass(frozen=True)
class Case:
    name: str
    podsets: tuple[PodSetBuilder, ...]
    want_slices: tuple[tuple[str, ...], ...] = ()
    want_message: str = ""
    want_reason: str = c.REASON_POD_SET_TOPOLOGY_UNFIT
    balanced: bool = False


CASES = [
    # -- pod-set slices --------------------------------------------------------------------------
    Case("slices of 3 on hosts: r1 holds 2 slices (x1 1, x2 1) and is the tightest rack; 3 per host, not 4+2",
         (make_podset(6).require(RACK).slices(HOST, 3),), (("b1/r1/x1=3", "b1/r1/x2=3"),)),
    Case("without slices the same 6 pods fill x1 first",
         (make_podset(6).require(RACK),), (("b1/r1/x1=4", "b1/r1/x2=2"),)),
    Case("slices of 2 on racks inside a required block: BestFit block by slices (b2 holds 4, b1 5)",
         (make_podset(4).require(BLOCK).slices(RACK, 2),), (("b2/r3/x5=4",),)),
    Case("a slice-only request (no level) starts at the widest level and keeps slices whole",
         (make_podset(4).unconstrained().slices(HOST, 4),), (("b1/r1/x1=4",),)),
    Case("too few slices in any rack: Kueue's message in slices, naming the best rack",
         (make_podset(9).require(RACK).slices(HOST, 3),), want_message=(
             'topology "gpu" allows to fit only 2 out of 3 slice(s) at level "cloud.com/rack" (best: b1/r1). '
             "Total nodes: 6; excluded: none")),
    Case("preferred rack with slices widens to the block, then spreads over the fewest blocks",
         (make_podset(12).prefer(RACK).slices(HOST, 4),),
         (("b1/r1/x1=4", "b2/r3/x5=4", "b2/r3/x6=4"),)),
    # -- the remainder of an uneven split --------------------------------------------------------
    Case("7 pods in slices of 3: 2 whole slices, and the 1 left over goes inside the same rack",
         (make_podset(7).require(RACK).slices(HOST, 3),), (("b1/r1/x1=4", "b1/r1/x2=3"),)),
    Case("a rack with enough slices but too few pods for the remainder is not chosen (r2: 2 slices of 2, 4 pods)",
         (make_podset(5).require(RACK).slices(HOST, 2),), (("b1/r1/x1=4", "b1/r1/x2=1"),)),
    Case("slices fit but no rack also holds the remainder: the message counts pods in the racks with the slices",
         (make_podset(9).require(RACK).slices(HOST, 4),), want_message=(
             'topology "gpu" allows to fit only 8 out of 9 pod(s) at level "cloud.com/rack" (best: b2/r3). '
             "Total nodes: 6; excluded: none")),
    # -- slice level checks ----------------------------------------------------------------------
    Case("a slice level above the pod set's level is refused with Kueue's words",
         (make_podset(4).require(HOST).slices(RACK, 2),), want_reason=c.REASON_SLICE_TOPOLOGY_INVALID,
         want_message='topology "gpu": podset slice topology cloud.com/rack is above the podset topology '
                      "kubernetes.io/hostname"),
    Case("a slice level the topology lacks rejects the flavor",
         (make_podset(4).require(RACK).slices("cloud.com/pod", 2),), want_reason=c.REASON_TOPOLOGY_LEVEL_MISSING,
         want_message='topology "gpu" has no slice level "cloud.com/pod"; its levels: "cloud.com/block", '
                      '"cloud.com/rack", "kubernetes.io/hostname"'),
    # -- multi-layer slices ----------------------------------------------------------------------
    Case("layers rack/4 then host/2: racks count whole host pairs (r1: 4+2, r2: 2+2), each rack gets one slice",
         (make_podset(8).require(BLOCK).layers((RACK, 4), (HOST, 2)),),
         (("b1/r1/x1=4", "b1/r2/x3=2", "b1/r2/x4=2"),)),
    Case("multi-layer failure: per layer, the slices that fit in the best block",
         (make_podset(12).require(BLOCK).layers((RACK, 4), (HOST, 2)),), want_message=(
             "topology \"gpu\" doesn't allow to fit; 2/3 slice(s) fit on level cloud.com/rack; "
             "5/6 slice(s) fit on level kubernetes.io/hostname. Total nodes: 6; excluded: none")),
    Case("an inner layer above the outer one is refused",
         (make_podset(8).require(BLOCK).layers((HOST, 4), (RACK, 2)),), want_reason=c.REASON_SLICE_TOPOLOGY_INVALID,
         want_message='topology "gpu": additional slice layer topology cloud.com/rack must be at a lower level '
                      "than kubernetes.io/hostname"),
    Case("an inner size that does not divide the outer one is refused",
         (make_podset(8).require(BLOCK).layers((RACK, 4), (HOST, 3)),), want_reason=c.REASON_SLICE_TOPOLOGY_INVALID,
         want_message='topology "gpu": additional slice layer size 3 must evenly divide parent layer size 4'),
    # -- pod-set groups --------------------------------------------------------------------------
    Case("leader and workers in one rack: 1 + 6 fit only r1 (7), the leader on the tightest host",
         (make_podset(1, "leader").require(RACK).group("g"), make_podset(6, "workers").require(RACK).group("g")),
         (("b1/r1/x2=1",), ("b1/r1/x1=4", "b1/r1/x2=2"))),
    Case("three pod sets in one group (beyond Kueue's two): the tightest rack holding all 6",
         (make_podset(1, "leader").require(RACK).group("g"), make_podset(2, "a").require(RACK).group("g"),
          make_podset(3, "b").require(RACK).group("g")),
         (("b1/r1/x2=1",), ("b1/r1/x2=2",), ("b1/r1/x1=3",))),
    Case("a group no rack holds together fails, though each member alone fits r3",
         (make_podset(1, "leader").require(RACK).group("g"), make_podset(8, "workers").require(RACK).group("g")),
         want_message=('topology "gpu" allows to fit only 8 out of 9 pod(s) of pod-set group "g" at level '
                       '"cloud.com/rack" (best: b2/r3). Total nodes: 6; excluded: none')),
    Case("a preferred group falls back to one block",
         (make_podset(1, "leader").prefer(RACK).group("g"), make_podset(8, "workers").prefer(RACK).group("g")),
         (("b1/r2/x3=1",), ("b1/r1/x1=4", "b1/r1/x2=3", "b1/r2/x3=1"))),
    Case("pod sets without a group are placed one after the other, each in its tightest rack",
         (make_podset(1, "leader").require(RACK), make_podset(6, "workers").require(RACK)),
         (("b1/r2/x3=1",), ("b1/r1/x1=4", "b1/r1/x2=2"))),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kueue_request(case: Case) -> None:
    outcome = run(TREE, *case.podsets, balanced=case.balanced)
    if case.want_message:
        failure = expect_failure(outcome)
        assert (failure.reason, failure.message) == (case.want_reason, case.want_message)
    else:
        success = expect_success(outcome)
        assert tuple(tuple(slice_strings(a)) for a in success.assignments) == case.want_slices


# Balanced placement: two racks of 15 under b1, one of 8 under b2.
#
#                b1                      b2
#          /            \                |
#        r1              r2              r3
#      /    \          /    \            |
#   h1(8)  h2(7)    h3(8)  h4(7)       h5(8)
BALANCED_TREE = (
    gpu_node("h1", "b1", "r1", 8), gpu_node("h2", "b1", "r1", 7),
    gpu_node("h3", "b1", "r2", 8), gpu_node("h4", "b1", "r2", 7),
    gpu_node("h5", "b2", "r3", 8),
)


@pytest.mark.parametrize(("podset", "balanced", "want"), [
    pytest.param(make_podset(25).prefer(RACK), True, ["b1/r1/h1=8", "b1/r1/h2=5", "b1/r2/h3=8", "b1/r2/h4=4"],
                 id="gate on: 25 pods over the two racks of 15 as 13 and 12"),
    pytest.param(make_podset(25).prefer(RACK), False, ["b1/r1/h1=8", "b1/r1/h2=7", "b1/r2/h3=8", "b1/r2/h4=2"],
                 id="gate off: BestFit fills r1 and puts the rest in r2"),
    pytest.param(make_podset(10).prefer(RACK), True, ["b1/r1/h1=8", "b1/r1/h2=2"],
                 id="gate on but one rack holds all: BestFit"),
    pytest.param(make_podset(25).require(BLOCK), True, ["b1/r1/h1=8", "b1/r1/h2=7", "b1/r2/h3=8", "b1/r2/h4=2"],
                 id="gate on, required: never balanced (Kueue balances preferred only)"),
    pytest.param(make_podset(16).prefer(RACK).slices(HOST, 4), True, ["b1/r1/h1=8", "b1/r2/h3=8"],
                 id="gate on with slices: 4 slices of 4 over r1 and r2 (3 each) as 2 and 2"),
    pytest.param(make_podset(16).prefer(RACK).slices(HOST, 4), False, ["b1/r1/h1=8", "b1/r2/h3=8"],
                 id="gate off with slices: down to the slice level Kueue pools the block's hosts, most free first"),
    pytest.param(make_podset(25).prefer(HOST), True, ["b1/r1/h1=8", "b1/r1/h2=7", "b1/r2/h3=8", "b1/r2/h4=2"],
                 id="gate on, preferred host: no rack holds 25, so nothing to balance: BestFit"),
])
def test_balanced_placement(podset: PodSetBuilder, balanced: bool, want: list[str]) -> None:
    (assignment,) = expect_success(run(BALANCED_TREE, podset, balanced=balanced)).assignments
    assert slice_strings(assignment) == want


def test_implied_topology_is_placed_as_unconstrained() -> None:
    """Kueue's implicit TAS: a pod set with no annotation in a TAS-only ClusterQueue still gets
    a placement, exactly the unconstrained one (least free host holding it)."""
    plain = make_podset(2).unconstrained().build()
    implied = PodSetRequest(plain.name, plain.count, plain.requests, TopologyRequest("unconstrained", implied=True))
    (got,) = expect_success(run(TREE, implied)).assignments
    (want,) = expect_success(run(TREE, plain)).assignments
    assert slice_strings(got) == slice_strings(want) == ["b1/r2/x3=2"]


def test_pods_requesting_nothing_order_huge_counts_without_a_histogram_of_them() -> None:
    """A pod set that requests nothing fits FIT_CAP (2^20) pods on every node, so block sums reach
    2^21 here (and 2^33 on a real cluster): ordering them partitions directly, ties by label values."""
    wide = [gpu_node(f"n{b:02d}{r}", f"b{b:02d}", f"r{b:02d}{r}", 1) for b in range(30) for r in range(2)]
    nothing = PodSetRequest("main", 10**8, {}, TopologyRequest("preferred", RACK))
    failure = expect_failure(run(wide, nothing))
    assert failure.fit == 30 * 2 * 2**20
    assert failure.domain_fits == tuple((f"b{b:02d}", 2 * 2**20) for b in range(16))
