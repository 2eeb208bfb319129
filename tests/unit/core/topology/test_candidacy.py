"""Node filters: each excluded node of the flavor is tallied under the first reason that excludes it.
(Nodes outside the flavor are not in its tree at all: see test_membership.)"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.api.selectors import Toleration
from controller.core.topology import Usage, assign
from controller.core.topology.tree import MAX_MASKS
from tests.builders.cluster import NodeBuilder
from tests.unit.core.topology.scenario import (
    RACK,
    PodSetBuilder,
    expect_failure,
    expect_success,
    gpu_node,
    make_podset,
    run,
    slice_strings,
    topology,
)

# Every case: one rack r1 of two 1-GPU hosts, `good` always usable and `odd` changed by the case;
# the pod set asks for 2 pods in one rack, so it fits exactly when `odd` stays a candidate.
#
#        b1
#         |
#        r1
#      /    \
#   good(1) odd(1)        good: zone=a, gen=5; odd: zone=b


def odd() -> NodeBuilder:
    return gpu_node("odd", "b1", "r1", 1).label("zone", "b")


@dataclass(frozen=True)
class Case:
    name: str
    odd: NodeBuilder
    podset: PodSetBuilder = field(default_factory=lambda: make_podset(2).require(RACK))
    node_labels: dict[str, str] = field(default_factory=dict)
    flavor_tolerations: tuple[Toleration, ...] = ()
    want_excluded: tuple[tuple[str, int], ...] = ()


ODD_OUT = (("node affinity", 1),)
CASES = [
    Case("a node that is not ready is excluded", odd().not_ready(), want_excluded=(("not ready", 1),)),
    Case("a cordoned node is excluded", odd().unschedulable(), want_excluded=(("unschedulable", 1),)),
    Case("a node without a level label is excluded", odd().without_label(RACK),
         want_excluded=(('missing label "cloud.com/rack"', 1),)),
    Case("a not-ready node lacking a level label is tallied as not ready", odd().not_ready().without_label(RACK),
         want_excluded=(("not ready", 1),)),
    Case("a cordoned node lacking a level label is tallied as cordoned", odd().unschedulable().without_label(RACK),
         want_excluded=(("unschedulable", 1),)),
    Case("nodes carrying the flavor's nodeLabels stay", odd(), node_labels={"cloud.com/block": "b1"}),
    Case("an untolerated NoSchedule taint excludes", odd().taint("gpu", "bad", "NoSchedule"),
         want_excluded=(('taint "gpu=bad:NoSchedule"', 1),)),
    Case("an untolerated NoExecute taint excludes", odd().taint("maint", "", "NoExecute"),
         want_excluded=(('taint "maint:NoExecute"', 1),)),
    Case("a PreferNoSchedule taint does not exclude", odd().taint("soft", "x", "PreferNoSchedule")),
    Case("the pod's toleration lets a tainted node stay", odd().taint("gpu", "bad"),
         podset=make_podset(2).require(RACK).tolerate("gpu", "bad", "NoSchedule")),
    Case("a toleration for another value does not", odd().taint("gpu", "bad"),
         podset=make_podset(2).require(RACK).tolerate("gpu", "good", "NoSchedule"),
         want_excluded=(('taint "gpu=bad:NoSchedule"', 1),)),
    Case("the flavor's toleration lets a tainted node stay", odd().taint("gpu", "bad"),
         flavor_tolerations=(Toleration("gpu", "Exists", "", ""),)),
    Case("a nodeSelector the node does not match excludes", odd(),
         podset=make_podset(2).require(RACK).selector("zone", "a"),
         want_excluded=(("node selector", 1),)),
    Case("affinity In excludes nodes with other values", odd(),
         podset=make_podset(2).require(RACK).affinity("zone", "In", "a", "c"), want_excluded=ODD_OUT),
    Case("affinity NotIn excludes the listed value", odd(),
         podset=make_podset(2).require(RACK).affinity("zone", "NotIn", "b"), want_excluded=ODD_OUT),
    Case("affinity Exists excludes nodes without the key", odd(),
         podset=make_podset(2).require(RACK).affinity("gen", "Exists"), want_excluded=ODD_OUT),
    Case("affinity DoesNotExist excludes nodes with the key", odd().label("spot", "true"),
         podset=make_podset(2).require(RACK).affinity("spot", "DoesNotExist"), want_excluded=ODD_OUT),
    Case("affinity Gt compares integers", odd().label("gen", "3"),
         podset=make_podset(2).require(RACK).affinity("gen", "Gt", "4"), want_excluded=ODD_OUT),
    Case("affinity Lt compares integers", odd().label("gen", "7"),
         podset=make_podset(2).require(RACK).affinity("gen", "Lt", "6"), want_excluded=ODD_OUT),
    Case("affinity terms are ORed", odd(),
         podset=make_podset(2).require(RACK).affinity("zone", "In", "a").affinity("zone", "In", "b")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_filter(case: Case) -> None:
    good = gpu_node("good", "b1", "r1", 1).label("zone", "a").label("gen", "5")
    outcome = run([good, case.odd], case.podset, node_labels=case.node_labels,
                  tolerations=case.flavor_tolerations)
    if not case.want_excluded:
        (assignment,) = expect_success(outcome).assignments
        assert slice_strings(assignment) == ["b1/r1/good=1", "b1/r1/odd=1"]
        return
    failure = expect_failure(outcome)
    assert failure.excluded == case.want_excluded
    assert failure.total_nodes == 2


def test_tally_lists_reasons_in_check_order_then_by_name() -> None:
    # One rack, seven 1-GPU hosts; the pod set wants 8 GPUs' worth of pods (2 GPUs each on h7).
    #
    #                       b1
    #                        |
    #                       r1
    #     /     /     /     |     \      \      \
    #   h1     h2    h3    h4     h5     h6     h7
    #  (nr)  (cord) (tz)  (ta)  (sel)  (0gpu)  (ok)
    nodes = [
        gpu_node("h1", "b1", "r1").not_ready(),
        gpu_node("h2", "b1", "r1").unschedulable(),
        gpu_node("h3", "b1", "r1").taint("z", "1"),
        gpu_node("h4", "b1", "r1").taint("a", "1"),
        gpu_node("h5", "b1", "r1").label("pool", "other"),
        gpu_node("h6", "b1", "r1", 0).label("pool", "main"),
        gpu_node("h7", "b1", "r1", 2).label("pool", "main"),
    ]
    failure = expect_failure(run(nodes, make_podset(8).require(RACK).selector("pool", "main")))
    assert failure.message == (
        'topology "gpu" allows to fit only 2 out of 8 pod(s) at level "cloud.com/rack" (best: b1/r1). '
        'Total nodes: 7; excluded: not ready: 1, unschedulable: 1, taint "a=1:NoSchedule": 1, '
        'taint "z=1:NoSchedule": 1, node selector: 1, resource "nvidia.com/gpu": 1')
    assert failure.domain_fits == (("b1/r1", 2),)


def test_masks_follow_node_changes_after_first_use() -> None:
    good, bad = gpu_node("good", "b1", "r1", 1), gpu_node("odd", "b1", "r1", 1)
    topo = topology([good, bad])
    podsets = [make_podset(2).require(RACK).build()]
    assert assign(topo, Usage(), podsets).ok
    topo.upsert_node(bad.not_ready().view())
    assert expect_failure(assign(topo, Usage(), podsets)).excluded == (("not ready", 1),)
    topo.upsert_node(gpu_node("odd", "b1", "r1", 1).view())
    assert assign(topo, Usage(), podsets).ok


def test_mask_cache_is_bounded_and_evicted_masks_are_rebuilt_correctly() -> None:
    topo = topology([gpu_node("good", "b1", "r1", 1).label("zone", "a"),
                     gpu_node("odd", "b1", "r1", 1).label("zone", "a")])
    first = [make_podset(2).require(RACK).selector("zone", "a").build()]
    assert assign(topo, Usage(), first).ok
    for i in range(MAX_MASKS):
        assign(topo, Usage(), [make_podset(1).require(RACK).selector("zone", f"z{i}").build()])
    assert topo.cached_masks == MAX_MASKS
    topo.upsert_node(gpu_node("odd", "b1", "r1", 1).label("zone", "b").view())
    assert expect_failure(assign(topo, Usage(), first)).excluded == (("node selector", 1),)
