"""Partial admission: the largest count in [minCount, count) that fits, quota and topology included,
in Kueue's order (whole first, then preemption at the full count, then a reduced count).

Nodes of flavor `h100` (Topology levels block > rack > host; one GPU a pod):

          b1
        /    \\
      r1      r2
     /  \\      |
  n1(4) n2(2) n3(4)

Rack r1 has room for 6 pods, rack r2 for 4, the block for 10.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.features import FeatureGates
from controller.core.admission.cycle import (
    AdmissionState,
    Admit,
    Pending,
    Preempt,
    explain,
    run_until_quiet,
)
from controller.core.admission.reducing import largest_passing, reducible
from controller.core.admission.workloads import workload_info
from tests.builders.cluster import make_node
from tests.builders.kueue import (
    ClusterQueueBuilder,
    WorkloadBuilder,
    label_slices,
    make_admission_state,
    make_cluster_queue,
    make_flavor,
    make_topology,
    make_workload,
)

GPU = "nvidia.com/gpu"
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", c.LABEL_HOSTNAME
NODES = {"n1": ("r1", 4), "n2": ("r1", 2), "n3": ("r2", 4)}


def make_state(cq: ClusterQueueBuilder | None = None, gates: dict[str, bool] | None = None) -> AdmissionState:
    nodes = [make_node(n).labels({BLOCK: "b1", RACK: rack}).allocatable({GPU: str(g)}, cpu="32").view()
             for n, (rack, g) in NODES.items()]
    state = make_admission_state([cq or make_cluster_queue("a").flavor("h100", {GPU: 100})],
                                 [make_flavor("h100").topology_name("t")], nodes,
                                 [make_topology("t", BLOCK, RACK, HOST)])
    if gates is not None:
        state.snapshot.features = FeatureGates(gates)
    return state


def partial_job(name: str = "train", count: int = 8, min_count: int | None = 4, **fields: Any) -> WorkloadBuilder:
    """A Job-like Workload: one pod set `main` of `count` one-GPU pods with minCount `min_count`."""
    extra = dict(fields)
    if min_count is not None:
        extra["minCount"] = min_count
    return make_workload(name).queue("lq-a").pod_set("main", count, {GPU: 1}, **extra)


def decide(state: AdmissionState, *builders: WorkloadBuilder) -> dict[str, Any]:
    for n, builder in enumerate(builders):
        state.submit(workload_info(builder.model(), seq=n))
    return {d.key: d for d in run_until_quiet(state)}


def admitted_count(decision: Any) -> int:
    assert isinstance(decision, Admit), decision
    return int(decision.admission["podSetAssignments"][0]["count"])


@dataclass(frozen=True)
class Case:
    name: str
    count: int
    min_count: int | None
    topology: dict[str, Any] = field(default_factory=dict)
    quota: int = 100
    want: int | None = None
    """The admitted count; None: it waits."""


CASES = [
    Case("the whole count fits the block: no reduction", 8, 4, {"required": BLOCK}, want=8),
    Case("a rack holds 6 of 8: the largest count that fits in one rack", 8, 4, {"required": RACK}, want=6),
    Case("quota for 5 GPUs: 5 pods, wherever they fit", 8, 4, {"required": BLOCK}, quota=5, want=5),
    Case("quota below minCount: nothing is admitted", 8, 6, {"required": BLOCK}, quota=5),
    Case("no rack holds the minCount: it waits", 8, 7, {"required": RACK}),
    Case("without minCount a Workload is all or nothing", 8, None, {"required": RACK}),
    Case("slices of 4 per host: 6 would break a slice, so 4", 8, 2,
         {"required": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 4}, want=4),
    Case("slices of 2 per rack: 6 in r1 keeps every slice whole", 8, 2,
         {"required": RACK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 2}, want=6),
    Case("preferred rack: the block takes all 10 at once", 10, 2, {"preferred": RACK}, want=10),
    Case("more than the block: the block's 10 of 12", 12, 2, {"preferred": RACK}, want=10),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_partial_admission_takes_the_largest_count_that_fits(case: Case) -> None:
    state = make_state(make_cluster_queue("a").flavor("h100", {GPU: case.quota}))
    job = partial_job(count=case.count, min_count=case.min_count, topologyRequest=case.topology)
    decision = decide(state, job)["default/train"]
    if case.want is None:
        assert isinstance(decision, Pending)
        assert "default/train" not in state.admitted
        assert state.snapshot.usage.used("n1") == {}
    else:
        assert admitted_count(decision) == case.want
        psa = decision.admission["podSetAssignments"][0]
        assert sum(s["count"] for s in label_slices(psa["topologyAssignment"])) == case.want
        assert psa["resourceUsage"][GPU] == str(case.want)
        assert state.snapshot.quota.availability("a", "h100", GPU).used == case.want * 1000


def test_a_reduced_admission_stays_in_one_rack() -> None:
    state = make_state()
    decision = decide(state, partial_job(topologyRequest={"required": RACK}))["default/train"]
    slices = label_slices(decision.admission["podSetAssignments"][0]["topologyAssignment"])
    assert {s["nodeLabels"][RACK] for s in slices} == {"r1"}
    assert {s["nodeLabels"][HOST]: s["count"] for s in slices} == {"n1": 4, "n2": 2}


def test_the_message_says_how_far_the_partial_search_went() -> None:
    state = make_state()
    decision = decide(state, partial_job(min_count=7, topologyRequest={"required": RACK}))["default/train"]
    assert isinstance(decision, Pending)
    assert decision.detail == c.REASON_POD_SET_TOPOLOGY_UNFIT
    assert decision.message.endswith('; partial admission: not even 7 of the 8 pod(s) of pod set "main" fit '
                                     "(minCount 7)")


def test_with_the_gate_off_min_count_is_ignored() -> None:
    state = make_state(gates={c.FEATURE_PARTIAL_ADMISSION: False})
    decision = decide(state, partial_job(topologyRequest={"required": RACK}))["default/train"]
    assert isinstance(decision, Pending)
    assert "partial admission" not in decision.message


def test_others_admitted_first_leave_less_for_the_reduced_count() -> None:
    # `other` takes 5 GPUs of r1 (the only rack with room), so r1 keeps 1 and r2 4: the rack count is 4.
    state = make_state()
    other = make_workload("other").queue("lq-a").priority(10).pod_set("main", 5, {GPU: 1}, required=RACK)
    decisions = decide(state, other, partial_job(min_count=2, topologyRequest={"required": RACK}))
    assert admitted_count(decisions["default/other"]) == 5
    assert admitted_count(decisions["default/train"]) == 4


def test_preemption_at_the_full_count_comes_before_a_reduced_count() -> None:
    # Quota 8: a low-priority Workload holds 4. Kueue tries preemption for all 8 before reducing.
    cq = make_cluster_queue("a").flavor("h100", {GPU: 8}).preemption(within="LowerPriority")
    state = make_state(cq)
    low = make_workload("low").queue("lq-a").priority(0).pod_set("main", 4, {GPU: 1})
    assert admitted_count(decide(state, low)["default/low"]) == 4
    decision = decide(state, partial_job(min_count=2, topologyRequest={"preferred": BLOCK}).priority(5))
    assert isinstance(decision["default/train"], Preempt)
    assert [v.key for v in decision["default/train"].victims] == ["default/low"]


def test_without_a_victim_the_reduced_count_is_admitted_in_a_preempting_queue() -> None:
    cq = make_cluster_queue("a").flavor("h100", {GPU: 8}).preemption(within="LowerPriority")
    state = make_state(cq)
    high = make_workload("high").queue("lq-a").priority(9).pod_set("main", 4, {GPU: 1})
    assert admitted_count(decide(state, high)["default/high"]) == 4
    assert admitted_count(decide(state, partial_job(min_count=2).priority(5))["default/train"]) == 4


def test_a_pod_set_group_shrinks_its_reduced_member_so_the_group_shares_a_rack() -> None:
    # leader (1) + workers (8, minCount 2) in one rack: r1 has 6 slots, so 5 workers beside the leader.
    group = {"required": RACK, "podSetGroupName": "g"}
    job = (make_workload("train").queue("lq-a").pod_set("leader", 1, {GPU: 1}, topologyRequest=group)
           .pod_set("workers", 8, {GPU: 1}, minCount=2, topologyRequest=group))
    decision = decide(make_state(), job)["default/train"]
    assert isinstance(decision, Admit)
    counts = {psa["name"]: psa["count"] for psa in decision.admission["podSetAssignments"]}
    assert counts == {"leader": 1, "workers": 5}
    racks = {s["nodeLabels"][RACK] for psa in decision.admission["podSetAssignments"]
             for s in label_slices(psa["topologyAssignment"])}
    assert racks == {"r1"}


def test_explain_says_it_fits_at_the_reduced_count() -> None:
    state = make_state()
    state.submit(workload_info(partial_job(topologyRequest={"required": RACK}).model()))
    why = explain(state, "default/train")
    assert why is not None
    assert why.message == ('fits now with 6 of the 8 pod(s) of pod set "main" (partial admission); '
                           "waiting for the next admission cycle")
    assert state.snapshot.usage.used("n1") == {}


@pytest.mark.parametrize(("min_count", "count", "size", "want"), [
    (4, 8, None, (4, 5, 6, 7)),
    (2, 8, 4, (4,)),
    (3, 12, 3, (3, 6, 9)),
    (5, 8, 4, ()),
])
def test_candidate_counts_keep_slices_whole(min_count: int, count: int, size: int | None,
                                            want: tuple[int, ...]) -> None:
    topology: dict[str, Any] = {"required": RACK}
    if size is not None:
        topology |= {"podSetSliceRequiredTopology": HOST, "podSetSliceSize": size}
    wl = workload_info(partial_job(count=count, min_count=min_count, topologyRequest=topology).model())
    found = reducible(wl)
    assert (found.counts if found is not None else ()) == want


@pytest.mark.parametrize("threshold", range(0, 9))
def test_largest_passing_finds_the_edge_of_a_monotone_predicate(threshold: int) -> None:
    counts = list(range(1, 9))
    tried: list[int] = []

    def passes(k: int) -> bool:
        tried.append(k)
        return k <= threshold

    assert largest_passing(counts, passes) == (threshold or None)
    assert len(tried) <= 4  # log2(8) + 1 probes, not a scan
