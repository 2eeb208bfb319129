"""The victim search and the cycle's Preempt decision: every policy, Kueue's candidate order, the
minimal set (fill back), no preemption that cannot help, in-flight victims, flavor fungibility, and
topology-aware victims chosen in one domain."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.api import constants as c
from controller.api.views import NodeView
from controller.core.admission.cycle import (
    AdmissionState,
    Admit,
    Decision,
    Pending,
    Preempt,
    explain_preemption,
    run_until_quiet,
)
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
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"


def job(name: str, gpus: int, priority: int, cq: str = "a", count: int = 1, rack: bool = False) -> WorkloadBuilder:
    """`count` pods of `gpus` GPUs each, in ClusterQueue `cq` (through LocalQueue lq-<cq>)."""
    return make_workload(name).queue(f"lq-{cq}").priority(priority).pod_set(
        "main", count, {GPU: gpus}, required=RACK if rack else None)


def admit_in_order(state: AdmissionState, workloads: list[WorkloadBuilder]) -> None:
    """Admit each workload one after the other (their admission time is their position)."""
    for i, builder in enumerate(workloads):
        state.now = float(i)
        state.submit(workload_info(builder.model(), seq=i))
        decisions = run_until_quiet(state)
        assert [type(d) for d in decisions] == [Admit], decisions
    state.now = None


def try_preemptor(state: AdmissionState, builder: WorkloadBuilder) -> list[Decision]:
    state.submit(workload_info(builder.model(), seq=100))
    return run_until_quiet(state)


def names(keys: tuple[str, ...] | list[str]) -> list[str]:
    return [key.split("/")[1] for key in keys]


def quota_state(*queues: ClusterQueueBuilder) -> AdmissionState:
    """Quota only: flavors `a100` and `v100` without topology (no nodes needed)."""
    return make_admission_state(list(queues), [make_flavor("a100"), make_flavor("v100")])


@dataclass
class PolicyCase:
    name: str
    queues: list[ClusterQueueBuilder]
    admitted: list[WorkloadBuilder]
    preemptor: WorkloadBuilder
    victims: list[str]
    """Names of the victims in the order chosen; empty: no preemption."""
    reasons: list[str] = field(default_factory=list)
    why_not: str = ""
    """A fragment of `explain_preemption` when there is no preemption."""


def lower() -> ClusterQueueBuilder:
    return make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_PRIORITY).flavor("a100", {GPU: 8})


POLICY_CASES = [
    PolicyCase("withinClusterQueue Never (Kueue's default): the urgent one waits",
               [make_cluster_queue("a").flavor("a100", {GPU: 8})], [job("low", 8, 0)], job("hi", 8, 10), [],
               why_not="PreemptionNever"),
    PolicyCase("LowerPriority: the lower-priority workload is evicted",
               [lower()], [job("low", 8, 0)], job("hi", 8, 10), ["low"], [c.REASON_IN_CLUSTER_QUEUE]),
    PolicyCase("LowerPriority: an equal priority is never a victim",
               [lower()], [job("peer", 8, 5)], job("hi", 8, 5), [], why_not="NoPreemptionCandidates"),
    PolicyCase("LowerPriority: a higher priority is never a victim",
               [lower()], [job("boss", 8, 20)], job("hi", 8, 10), [], why_not="NoPreemptionCandidates"),
    PolicyCase("LowerOrNewerEqualPriority: an equal-priority workload created later is a victim",
               [make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_OR_NEWER_EQUAL_PRIORITY)
                .flavor("a100", {GPU: 8})],
               [job("newer", 8, 5).set("metadata.creationTimestamp", "2026-01-02T00:00:00Z")],
               job("older", 8, 5).set("metadata.creationTimestamp", "2026-01-01T00:00:00Z"),
               ["newer"], [c.REASON_IN_CLUSTER_QUEUE]),
    PolicyCase("LowerOrNewerEqualPriority: an equal-priority workload created earlier is not",
               [make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_OR_NEWER_EQUAL_PRIORITY)
                .flavor("a100", {GPU: 8})],
               [job("older", 8, 5).set("metadata.creationTimestamp", "2026-01-01T00:00:00Z")],
               job("newer", 8, 5).set("metadata.creationTimestamp", "2026-01-02T00:00:00Z"), [],
               why_not="NoPreemptionCandidates"),
    PolicyCase("LowerOrNewerEqualPriority: created at the same second is not newer",
               [make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_OR_NEWER_EQUAL_PRIORITY)
                .flavor("a100", {GPU: 8})],
               [job("twin", 8, 5).set("metadata.creationTimestamp", "2026-01-01T00:00:00Z")],
               job("other", 8, 5).set("metadata.creationTimestamp", "2026-01-01T00:00:00Z"), [],
               why_not="NoPreemptionCandidates"),
    PolicyCase("order: the lowest priority goes first, a higher one stays",
               [lower()], [job("p1", 4, 1), job("p0", 4, 0)], job("hi", 4, 10), ["p0"]),
    PolicyCase("order: among equal priorities the most recently admitted goes first",
               [lower()], [job("first", 4, 0), job("second", 4, 0)], job("hi", 4, 10), ["second"]),
    PolicyCase("minimal set: a small victim taken first is put back once a bigger one suffices",
               [lower()], [job("small", 2, 0), job("big", 6, 1)], job("hi", 6, 10), ["big"]),
    PolicyCase("minimal set: two victims when one is not enough",
               [lower()], [job("x", 3, 0), job("y", 3, 0), job("z", 2, 0)], job("hi", 6, 10), ["y", "x"]),
    PolicyCase("ineffective: even every candidate gone leaves too little quota, nothing is evicted",
               [lower()], [job("low", 4, 0)], job("hi", 12, 10), [], why_not="PreemptionIneffective"),
    PolicyCase("ineffective: the higher-priority workload holds what would be needed",
               [lower()], [job("low", 2, 0), job("boss", 6, 20)], job("hi", 4, 10), [],
               why_not="PreemptionIneffective"),
    PolicyCase("reclaimWithinCohort LowerPriority: quota lent to a borrowing queue comes back",
               [make_cluster_queue("a").cohort("co").preemption(reclaim=c.PREEMPTION_LOWER_PRIORITY)
                .flavor("a100", {GPU: 4}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("b-own", 4, 0, cq="b"), job("b-borrowed", 4, 0, cq="b")], job("hi", 4, 10),
               ["b-borrowed"], [c.REASON_IN_COHORT_RECLAMATION]),
    PolicyCase("reclaimWithinCohort Never: the borrower keeps what it borrowed",
               [make_cluster_queue("a").cohort("co").preemption(within=c.PREEMPTION_LOWER_PRIORITY)
                .flavor("a100", {GPU: 4}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("b-own", 4, 0, cq="b"), job("b-borrowed", 4, 0, cq="b")], job("hi", 4, 10), [],
               why_not="NoPreemptionCandidates"),
    PolicyCase("reclaimWithinCohort Any: even a higher priority gives back what it borrowed",
               [make_cluster_queue("a").cohort("co").preemption(reclaim=c.PREEMPTION_ANY).flavor("a100", {GPU: 4}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("b-own", 4, 20, cq="b"), job("b-borrowed", 4, 20, cq="b")], job("hi", 4, 10),
               ["b-borrowed"], [c.REASON_IN_COHORT_RECLAMATION]),
    PolicyCase("reclaim: a queue within its nominal quota is never reclaimed from",
               [make_cluster_queue("a").cohort("co").preemption(reclaim=c.PREEMPTION_ANY).flavor("a100", {GPU: 4}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("a-own", 4, 0, cq="a"), job("b-own", 4, 0, cq="b")], job("hi", 4, 10), [],
               why_not="NoPreemptionCandidates"),
    PolicyCase("borrowWithinCohort LowerPriority: reclaiming while the preemptor borrows",
               [make_cluster_queue("a").cohort("co").preemption(reclaim=c.PREEMPTION_LOWER_PRIORITY,
                                                              borrow=c.PREEMPTION_LOWER_PRIORITY)
                .flavor("a100", {GPU: 2}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("b-own", 2, 0, cq="b"), job("b-borrowed", 4, 0, cq="b")], job("hi", 4, 10),
               ["b-borrowed"], [c.REASON_IN_COHORT_RECLAIM_WHILE_BORROWING]),
    PolicyCase("borrowWithinCohort Never: a preemptor that would borrow reclaims nothing",
               [make_cluster_queue("a").cohort("co").preemption(reclaim=c.PREEMPTION_LOWER_PRIORITY)
                .flavor("a100", {GPU: 2}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("b-own", 2, 0, cq="b"), job("b-borrowed", 4, 0, cq="b")], job("hi", 4, 10), [],
               why_not="PreemptionIneffective"),
    PolicyCase("borrowWithinCohort maxPriorityThreshold: a victim above it is not reclaimed while borrowing",
               [make_cluster_queue("a").cohort("co").preemption(reclaim=c.PREEMPTION_LOWER_PRIORITY,
                                                              borrow=c.PREEMPTION_LOWER_PRIORITY, threshold=3)
                .flavor("a100", {GPU: 2}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 4})],
               [job("b-own", 2, 0, cq="b"), job("b-borrowed", 4, 5, cq="b")], job("hi", 4, 10), [],
               why_not="PreemptionIneffective"),
    PolicyCase("order: a borrowing queue's workload goes before a lower-priority one of the own queue",
               [make_cluster_queue("a").cohort("co").preemption(within=c.PREEMPTION_LOWER_PRIORITY,
                                                              reclaim=c.PREEMPTION_LOWER_PRIORITY)
                .flavor("a100", {GPU: 4}),
                make_cluster_queue("b").cohort("co").flavor("a100", {GPU: 0})],
               [job("a-low", 2, 0, cq="a"), job("b-borrowed", 2, 3, cq="b")], job("hi", 4, 10),
               ["b-borrowed", "a-low"], [c.REASON_IN_COHORT_RECLAMATION, c.REASON_IN_CLUSTER_QUEUE]),
]


@pytest.mark.parametrize("case", POLICY_CASES, ids=lambda case: case.name)
def test_policy(case: PolicyCase) -> None:
    state = quota_state(*case.queues)
    admit_in_order(state, case.admitted)
    decisions = try_preemptor(state, case.preemptor)
    preempts = [d for d in decisions if isinstance(d, Preempt)]
    if not case.victims:
        assert preempts == [] and not state.evicting
        why = explain_preemption(state, "default/" + case.preemptor.obj()["metadata"]["name"])
        assert why is not None and case.why_not in why, why
        return
    (decision,) = preempts
    assert sorted(names([v.key for v in decision.victims])) == sorted(case.victims)
    if case.reasons:
        assert [v.reason for v in decision.victims] == case.reasons
    assert decision.key == "default/" + case.preemptor.obj()["metadata"]["name"] and decision.in_flight == ()
    # The victims keep their quota until released; then the preemptor is admitted.
    assert all(v.key in state.admitted for v in decision.victims)
    for victim in decision.victims:
        state.release(victim.key, requeue=True)
    admitted = [d.key for d in run_until_quiet(state) if isinstance(d, Admit)]
    assert decision.key in admitted


def test_the_preemptor_waits_with_its_victims_in_flight_and_preempts_nothing_more() -> None:
    state = quota_state(lower())
    admit_in_order(state, [job("low", 8, 0)])
    (first,) = try_preemptor(state, job("hi", 8, 10))
    assert isinstance(first, Preempt) and state.evicting == {"default/low": "default/hi"}
    assert state.pending["default/hi"].detail == c.REASON_PREEMPTING
    state.capacity_changed()  # another cycle, the victim still terminating
    (again,) = run_until_quiet(state)
    assert isinstance(again, Pending) and again.detail == c.REASON_PREEMPTING
    assert "(1 already being evicted)" in again.message
    assert "default/low" in state.admitted  # still holds its quota: nothing lands on it early


def test_another_preemptor_never_counts_on_victims_evicted_for_someone_else() -> None:
    state = quota_state(lower())
    admit_in_order(state, [job("low", 4, 0), job("low2", 4, 0)])
    state.submit(workload_info(job("hi", 4, 10).model(), seq=50))
    state.submit(workload_info(job("hi2", 2, 9, count=2).model(), seq=51))  # another shape: tried too
    decisions = [d for d in run_until_quiet(state) if isinstance(d, Preempt)]
    assert [(d.key, names([v.key for v in d.victims])) for d in decisions] == [
        ("default/hi", ["low2"]), ("default/hi2", ["low"])]
    assert state.evicting == {"default/low2": "default/hi", "default/low": "default/hi2"}


def test_an_eviction_known_only_from_the_api_is_counted_on_by_any_preemptor() -> None:
    state = quota_state(lower())
    admit_in_order(state, [job("low", 8, 0)])
    state.mark_evicting("default/low")  # after a restart: Evicted=True and its admission still set
    (decision,) = try_preemptor(state, job("hi", 8, 10))
    assert isinstance(decision, Pending) and decision.detail == c.REASON_PREEMPTING


def test_a_released_victim_waits_in_its_queue_and_is_admitted_again_when_room_exists() -> None:
    state = quota_state(lower())
    admit_in_order(state, [job("low", 8, 0)])
    (decision,) = try_preemptor(state, job("hi", 8, 10))
    assert isinstance(decision, Preempt)
    state.release("default/low", requeue=True)
    outcome = {d.key: type(d) for d in run_until_quiet(state)}
    assert outcome == {"default/hi": Admit, "default/low": Pending}
    state.release("default/hi")
    assert [(d.key, type(d)) for d in run_until_quiet(state)] == [("default/low", Admit)]


def fungible(when_can_preempt: str | None) -> ClusterQueueBuilder:
    cq = make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_PRIORITY).group(GPU)
    cq.flavor("a100", {GPU: 4}).flavor("v100", {GPU: 4})
    return cq if when_can_preempt is None else cq.when_can_preempt(when_can_preempt)


@pytest.mark.parametrize(("policy", "outcome"), [
    (None, "admitted in v100"),
    (c.FUNGIBILITY_TRY_NEXT_FLAVOR, "admitted in v100"),
    ("MayStopSearch", "preempts in a100"),
], ids=["default TryNextFlavor: the next flavor before preempting",
        "TryNextFlavor: the next flavor before preempting",
        "MayStopSearch: preempt in the first flavor rather than move on"])
def test_when_can_preempt(policy: str | None, outcome: str) -> None:
    state = quota_state(fungible(policy))
    admit_in_order(state, [job("low", 4, 0)])
    (decision,) = try_preemptor(state, job("hi", 4, 10))
    if outcome == "admitted in v100":
        assert isinstance(decision, Admit)
        assert decision.admission["podSetAssignments"][0]["flavors"][GPU] == "v100"
    else:
        assert isinstance(decision, Preempt) and names([v.key for v in decision.victims]) == ["low"]
        assert 'in flavor "a100"' in decision.message


def test_flavor_choice_preempts_in_the_first_flavor_where_preemption_helps() -> None:
    # a100 is held by a higher priority, v100 by a lower one: the victim is found in v100.
    state = quota_state(fungible(None))
    admit_in_order(state, [job("boss", 4, 20), job("low", 4, 0)])
    (decision,) = try_preemptor(state, job("hi", 4, 10))
    assert isinstance(decision, Preempt) and names([v.key for v in decision.victims]) == ["low"]
    assert 'in flavor "v100"' in decision.message


# -- topology-aware victims -------------------------------------------------------------------------
#
#            b1                       (flavor h100, Topology block > rack > hostname, 4 GPUs a node)
#      /           \
#     r1            r2
#   /    \        /    \
#  n1    n2      n3    n4
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}


def rack_state(quota: int = 64) -> AdmissionState:
    nodes: list[NodeView] = [make_node(n).labels({BLOCK: "b1", RACK: rack}).allocatable({GPU: "4"}, cpu="32").view()
                             for n, rack in RACKS.items()]
    return make_admission_state(
        [make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_PRIORITY).flavor("h100", {GPU: quota})],
        [make_flavor("h100").topology_name("t")], nodes, [make_topology("t", BLOCK, RACK, HOST)])


def on_node(name: str, node: str, gpus: int, priority: int) -> WorkloadBuilder:
    """One pod pinned to a node (by its hostname label) so each case draws its own layout."""
    return make_workload(name).queue("lq-a").priority(priority).pod_set(
        "main", 1, {GPU: gpus}, node_selector={HOST: node})


@dataclass
class RackCase:
    name: str
    drawing: str
    admitted: list[WorkloadBuilder]
    victims: list[str]
    domain: str = ""


RACK_CASES = [
    RackCase("fragmented: 8 GPUs free in total, none of the racks holds 2 nodes; the lower-priority "
             "rack's workload goes, the other rack is not touched",
             """
             r1: n1 [free]      n2 [x p0]    r2: n3 [free]  n4 [y p3]
             """,
             [on_node("x", "n2", 4, 0), on_node("y", "n4", 4, 3)], ["x"], 'rack "b1/r1"'),
    RackCase("the rack needing victims of lower priority wins over one needing fewer of higher priority",
             """
             r1: n1 [a p0, b p0 (2+2)]  n2 [c p1]     r2: n3 [d p5]  n4 [free]
             """,
             [on_node("a", "n1", 2, 0), on_node("b", "n1", 2, 0), on_node("c", "n2", 4, 1),
              on_node("d", "n3", 4, 5)], ["a", "b", "c"], 'rack "b1/r1"'),
    RackCase("victims only in the chosen rack: a lower-priority workload elsewhere is not touched",
             """
             r1: n1 [a p0]      n2 [free]    r2: n3 [b p1]  n4 [c p1]
             """,
             [on_node("a", "n1", 4, 0), on_node("b", "n3", 4, 1), on_node("c", "n4", 4, 1)], ["a"],
             'rack "b1/r1"'),
    RackCase("a partly used node holds no 4-GPU pod: every sharer in the rack goes, even the 1-GPU one",
             """
             r1: n1 [s p0 (1 of 4), 3 free]  n2 [u p0, v p0 (2+2)]   r2: n3 [w p9]  n4 [z p9]
             """,
             [on_node("s", "n1", 1, 0), on_node("u", "n2", 2, 0), on_node("v", "n2", 2, 0),
              on_node("w", "n3", 4, 9), on_node("z", "n4", 4, 9)], ["u", "v", "s"], 'rack "b1/r1"'),
]


@pytest.mark.parametrize("case", RACK_CASES, ids=lambda case: case.name)
def test_topology_victims_free_one_rack(case: RackCase) -> None:
    state = rack_state()
    admit_in_order(state, case.admitted)
    (decision,) = try_preemptor(state, make_workload("hi").queue("lq-a").priority(10)
                                .pod_set("main", 2, {GPU: 4}, required=RACK))
    assert isinstance(decision, Preempt), decision
    assert sorted(names([v.key for v in decision.victims])) == sorted(case.victims)
    assert case.domain in decision.message and "to fit 2 pod(s)" in decision.message
    for victim in decision.victims:
        state.release(victim.key, requeue=True)
    (admitted,) = [d for d in run_until_quiet(state) if isinstance(d, Admit) and d.key == "default/hi"]
    rack = case.domain.split("/")[-1].rstrip('"')
    slices = label_slices(admitted.admission["podSetAssignments"][0]["topologyAssignment"])
    assert {s["nodeLabels"][RACK] for s in slices} == {rack}


def test_topology_when_no_rack_can_be_freed_nothing_is_evicted() -> None:
    # r1: n1 [a p0]  n2 [boss p20]    r2: n3 [boss2 p20]  n4 [b p0]: each rack keeps a higher priority.
    state = rack_state()
    admit_in_order(state, [on_node("a", "n1", 4, 0), on_node("boss", "n2", 4, 20),
                           on_node("boss2", "n3", 4, 20), on_node("b", "n4", 4, 0)])
    (decision,) = try_preemptor(state, make_workload("hi").queue("lq-a").priority(10)
                                .pod_set("main", 2, {GPU: 4}, required=RACK))
    assert isinstance(decision, Pending) and not state.evicting
    why = explain_preemption(state, "default/hi")
    assert why is not None and "PreemptionIneffective" in why


def test_topology_quota_short_but_nodes_free_takes_victims_anywhere() -> None:
    # Quota 8: a (p0) and b (p1) hold it all, n3 and n4 free: the placement fits, the quota does not.
    state = rack_state(quota=8)
    admit_in_order(state, [on_node("a", "n1", 4, 0), on_node("b", "n2", 4, 1)])
    (decision,) = try_preemptor(state, make_workload("hi").queue("lq-a").priority(10)
                                .pod_set("main", 1, {GPU: 4}, required=RACK))
    assert isinstance(decision, Preempt) and names([v.key for v in decision.victims]) == ["a"]
    assert " in rack" not in decision.message


def test_a_preferred_level_no_domain_can_hold_spreads_and_victims_are_taken_flavor_wide() -> None:
    # r1: n1 [a p0]  n2 [free]    r2: n3 [b p0]  n4 [c p0]: 3 whole nodes fit in no rack.
    state = rack_state()
    admit_in_order(state, [on_node("a", "n1", 4, 0), on_node("b", "n3", 4, 0), on_node("c", "n4", 4, 0)])
    (decision,) = try_preemptor(state, make_workload("hi").queue("lq-a").priority(10)
                                .pod_set("main", 3, {GPU: 4}, preferred=RACK))
    assert isinstance(decision, Preempt) and sorted(names([v.key for v in decision.victims])) == ["b", "c"]
    assert " in rack" not in decision.message
    for victim in decision.victims:
        state.release(victim.key, requeue=True)
    assert "default/hi" in {d.key for d in run_until_quiet(state) if isinstance(d, Admit)}


def test_a_required_level_no_domain_can_hold_is_not_preempted_for() -> None:
    state = rack_state()
    admit_in_order(state, [on_node("a", "n1", 4, 0), on_node("b", "n3", 4, 0), on_node("c", "n4", 4, 0)])
    (decision,) = try_preemptor(state, make_workload("hi").queue("lq-a").priority(10)
                                .pod_set("main", 3, {GPU: 4}, required=RACK))
    assert isinstance(decision, Pending) and not state.evicting
    why = explain_preemption(state, "default/hi")
    assert why is not None and 'at most 2 of the 3 pod(s) of pod set "main" fit in one rack' in why, why
