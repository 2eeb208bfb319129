"""Free capacity: several resources, `pods` exhaustion, other pods' usage, several pod sets in order."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.api import constants as c
from controller.api.views import PodView
from tests.builders.cluster import make_pod
from tests.unit.core.topology.scenario import (
    BLOCK,
    GPU,
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

# One rack of two 8-GPU hosts (64 cpu, 110 pods each, unless a case changes them):
#
#        b1
#         |
#        r1
#      /    \
#    h1      h2


@dataclass(frozen=True)
class Case:
    name: str
    podset: PodSetBuilder
    pods: tuple[PodView, ...] = ()
    h1_allocatable: dict[str, str] = field(default_factory=dict)
    want_slices: tuple[str, ...] = ()
    want_fit: int | None = None


CASES = [
    Case("cpu is the binding resource when it runs out before GPUs",
         make_podset(8).require(RACK).gpus(1).requests(cpu="16"),
         want_slices=("b1/r1/h1=4", "b1/r1/h2=4")),
    Case("one pod more than cpu allows does not fit",
         make_podset(9).require(RACK).gpus(1).requests(cpu="16"), want_fit=8),
    Case("the pods resource caps a node even with GPUs left",
         make_podset(10).require(RACK).gpus(1), h1_allocatable={"pods": "2"},
         want_slices=("b1/r1/h1=2", "b1/r1/h2=8")),
    Case("a resource the node does not have fits nothing there",
         make_podset(1).require(RACK).gpus(0).requests(**{"example.com/fpga": "1"}), want_fit=0),
    Case("bound pods of any kind use capacity, 1 pods each",
         make_podset(13).require(RACK).gpus(1),
         pods=(make_pod("ds-a", "kube-system").requests({GPU: "3"}).on("h1").view(),
               make_pod("other").requests({GPU: "1"}).on("h2").view()),
         want_fit=12),
    Case("terminal pods free their capacity",
         make_podset(16).require(RACK).gpus(1),
         pods=(make_pod("done").requests({GPU: "8"}).on("h1", "Succeeded").view(),
               make_pod("failed").requests({GPU: "8"}).on("h2", "Failed").view()),
         want_slices=("b1/r1/h1=8", "b1/r1/h2=8")),
    Case("pending unbound pods use nothing",
         make_podset(16).require(RACK).gpus(1), pods=(make_pod("waiting").requests({GPU: "8"}).view(),),
         want_slices=("b1/r1/h1=8", "b1/r1/h2=8")),
    Case("many small pods exhaust the pods resource",
         make_podset(1).require(RACK).gpus(0), h1_allocatable={"pods": "1"},
         pods=(make_pod("tiny").on("h1").view(),),
         want_slices=("b1/r1/h2=1",)),
    Case("allocatable beyond int64 milli is clamped, still holding what fits below the clamp",
         make_podset(2).require(RACK).gpus(0).requests(**{"ephemeral-storage": "1Pi"}),
         h1_allocatable={"ephemeral-storage": "100Ei"}, want_slices=("b1/r1/h1=2",)),
    Case("a request beyond int64 milli never fits rather than over-committing",
         make_podset(1).require(RACK).gpus(0).requests(**{"ephemeral-storage": "1Ei"}),
         h1_allocatable={"ephemeral-storage": "100Ei"}, want_fit=0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_capacity(case: Case) -> None:
    nodes = [gpu_node("h1", "b1", "r1").allocatable(case.h1_allocatable), gpu_node("h2", "b1", "r1")]
    outcome = run(nodes, case.podset, pods=case.pods)
    if case.want_fit is not None:
        assert expect_failure(outcome).fit == case.want_fit
        return
    (assignment,) = expect_success(outcome).assignments
    assert tuple(slice_strings(assignment)) == case.want_slices


def test_pods_per_node_are_summed_never_divided_from_the_rack_total() -> None:
    # Each host has 3 cpu: a rack "has" 6 cpu but holds only 2 pods of 2 cpu.
    #
    #       b1
    #        |
    #       r1
    #     /    \
    #   h1(3c) h2(3c)
    nodes = [gpu_node("h1", "b1", "r1").allocatable(cpu="3"), gpu_node("h2", "b1", "r1").allocatable(cpu="3")]
    failure = expect_failure(run(nodes, make_podset(3).require(RACK).gpus(0).requests(cpu="2")))
    assert failure.fit == 2


# Two racks of one 4-GPU host each, for several pod sets of one workload:
#
#          b1
#       /      \
#     r1        r2
#     |          |
#   h1(4)      h2(4)
TWO_RACKS = (gpu_node("h1", "b1", "r1", 4), gpu_node("h2", "b1", "r2", 4))


def test_later_pod_sets_see_what_earlier_ones_took() -> None:
    success = expect_success(run(TWO_RACKS, make_podset(3, "leader").require(RACK),
                                 make_podset(3, "workers").require(RACK)))
    assert [slice_strings(a) for a in success.assignments] == [["b1/r1/h1=3"], ["b1/r2/h2=3"]]
    assert success.placement.pods == {"leader": {"h1": 3}, "workers": {"h2": 3}}
    assert success.placement.resources == {"h1": {GPU: 3000, c.RESOURCE_PODS: 3000},
                                           "h2": {GPU: 3000, c.RESOURCE_PODS: 3000}}


def test_pod_sets_sharing_a_node_sum_their_resources_in_the_placement() -> None:
    success = expect_success(run(TWO_RACKS, make_podset(1, "a").require(HOST), make_podset(2, "b").require(HOST)))
    assert [slice_strings(a) for a in success.assignments] == [["b1/r1/h1=1"], ["b1/r1/h1=2"]]
    assert success.placement.resources == {"h1": {GPU: 3000, c.RESOURCE_PODS: 3000}}


def test_a_later_pod_set_that_no_longer_fits_fails_the_whole_workload() -> None:
    failure = expect_failure(run(TWO_RACKS, make_podset(3, "leader").require(RACK),
                                 make_podset(2, "workers").require(BLOCK).gpus(3)))
    assert failure.podset == "workers"
    assert failure.message == (
        'topology "gpu" allows to fit only 1 out of 2 pod(s) at level "cloud.com/block" (best: b1). '
        'Total nodes: 2; excluded: resource "nvidia.com/gpu": 1')


@pytest.mark.parametrize("podset", [make_podset(1).require("cloud.com/zone"),
                                    make_podset(1).prefer("cloud.com/zone")], ids=["required", "preferred"])
def test_a_level_the_topology_lacks_rejects_the_flavor(podset: PodSetBuilder) -> None:
    failure = expect_failure(run(TWO_RACKS, podset))
    assert failure.reason == c.REASON_TOPOLOGY_LEVEL_MISSING
    assert failure.message == ('topology "gpu" has no level "cloud.com/zone"; its levels: '
                               '"cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"')


def test_nothing_fitting_anywhere_names_no_best_domain() -> None:
    nodes = [gpu_node("h1", "b1", "r1").not_ready()]
    failure = expect_failure(run(nodes, make_podset(2).require(RACK)))
    assert failure.reason == c.REASON_POD_SET_TOPOLOGY_UNFIT
    assert (failure.fit, failure.best, failure.domain_fits) == (0, None, ())
    assert failure.message == ('topology "gpu" allows to fit only 0 out of 2 pod(s) at level '
                               '"cloud.com/rack". Total nodes: 1; excluded: not ready: 1')
