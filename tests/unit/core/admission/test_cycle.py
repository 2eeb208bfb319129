"""The admission cycle: flavor fallback, ordering, queueing strategies, cohorts, all-or-nothing, release."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.views import NodeView
from controller.core.admission.cycle import (
    AdmissionState,
    Admit,
    Pending,
    explain,
    run_cycle,
    run_until_quiet,
)
from controller.core.admission.workloads import WorkloadInfo, workload_info
from tests.builders.cluster import NodeBuilder, make_node
from tests.builders.kueue import (
    ClusterQueueBuilder,
    ResourceFlavorBuilder,
    TopologyBuilder,
    WorkloadBuilder,
    label_slices,
    make_admission_state,
    make_cluster_queue,
    make_flavor,
    make_local_queue,
    make_topology,
    make_workload,
)

GPU = "nvidia.com/gpu"
BLOCK, RACK = "cloud.com/block", "cloud.com/rack"


# The topology cases' nodes (flavor `h100`, Topology `racks` of levels block > rack; 4 GPUs a node):
#
#        b1
#      /    \
#    r1      r2
#   /  \      |
# n1(4) n2(4) n3(4)
LAYOUT = (("n1", "r1"), ("n2", "r1"), ("n3", "r2"))


def gpu_node(name: str, rack: str) -> NodeBuilder:
    """A 4-GPU node of the h100 flavor in `rack` of block b1."""
    return make_node(name).labels({BLOCK: "b1", RACK: rack, "gpu": "h100"}).allocatable({GPU: "4"}, cpu="32",
                                                                                      memory="128Gi")


def gpu_nodes() -> list[NodeView]:
    return [gpu_node(name, rack).view() for name, rack in LAYOUT]


def topologies() -> list[TopologyBuilder]:
    return [make_topology("racks", BLOCK, RACK)]


def flavors() -> list[ResourceFlavorBuilder]:
    return [make_flavor("h100").node_labels({"gpu": "h100"}).topology_name("racks"),
            make_flavor("a100"), make_flavor("spot").node_labels({"capacity": "spot"}),
            make_flavor("reserved").taint("reserved", "team-x"),
            make_flavor("tolerant").taint("reserved", "team-x").toleration("reserved", "team-x")]


def wl(name: str, gpus: int, count: int = 1, cq: str = "a", **kw: Any) -> WorkloadBuilder:
    return make_workload(name).queue(f"lq-{cq}").pod_set("main", count, {GPU: gpus}, **kw)


def submit_all(state: AdmissionState, workloads: list[WorkloadBuilder]) -> list[WorkloadInfo]:
    infos = [workload_info(b.model(), seq=i) for i, b in enumerate(workloads)]
    for info in infos:
        state.submit(info)
    return infos


@dataclass
class CycleCase:
    name: str
    queues: list[ClusterQueueBuilder]
    workloads: list[WorkloadBuilder]
    want_admitted: dict[str, str]
    """workload name -> the flavor its GPUs got."""
    want_pending: dict[str, str] = field(default_factory=dict)
    """workload name -> a fragment of its message."""


CASES = [
    CycleCase("quota: fits the nominal quota exactly",
              [make_cluster_queue("a").flavor("a100", {GPU: 8})], [wl("w1", 8)], {"w1": "a100"}),
    CycleCase("quota: the deadlock pair, one gets all, the other holds nothing",
              [make_cluster_queue("a").flavor("a100", {GPU: 150})], [wl("w1", 1, 100), wl("w2", 1, 100)],
              {"w1": "a100"},
              {"w2": 'insufficient quota for nvidia.com/gpu in flavor "a100": requests 100, available 50 '
                     "(nominal 150, used 100)"}),
    CycleCase("flavor fallback: the first flavor lacks quota, the second has it",
              [make_cluster_queue("a").flavor("a100", {GPU: 4}).flavor("spot", {GPU: 8})], [wl("w1", 6)],
              {"w1": "spot"}),
    CycleCase("flavor fallback: the topology flavor has quota but its nodes hold only 3 of 4 pods",
              [make_cluster_queue("a").flavor("h100", {GPU: 100}).flavor("a100", {GPU: 100})],
              [wl("w1", 4, 4)], {"w1": "a100"}),
    CycleCase("a required level never falls back to a flavor without topology",
              [make_cluster_queue("a").flavor("h100", {GPU: 100}).flavor("a100", {GPU: 100})],
              [wl("w1", 4, 3, required=RACK)], {},
              {"w1": 'flavor "h100": can never fit: the largest rack has 8 nvidia.com/gpu, pod set "main" needs '
                     '12; topology "racks" allows to fit only 2 out of 3 pod(s) at level '
                     '"cloud.com/rack" (best: b1/r1). Total nodes: 3; excluded: none; needs nvidia.com/gpu 12; '
                     'free on 3 candidate node(s): nvidia.com/gpu 12; flavor "a100" has no '
                     'topology for the requested required level "cloud.com/rack"'}),
    CycleCase("topology flavor: two pods of 4 GPUs fit rack r1",
              [make_cluster_queue("a").flavor("h100", {GPU: 100})], [wl("w1", 4, 2, required=RACK)],
              {"w1": "h100"}),
    CycleCase("topology flavor: usage from the first admission is seen by the second",
              [make_cluster_queue("a").flavor("h100", {GPU: 100})],
              [wl("w1", 4, 2, required=RACK), wl("w2", 4, 2, required=RACK)], {"w1": "h100"},
              {"w2": "allows to fit only 1 out of 2 pod(s)"}),
    CycleCase("priority: the later but higher-priority workload goes first",
              [make_cluster_queue("a").flavor("a100", {GPU: 8})],
              [wl("low", 8).created("2026-01-01T00:00:00Z"), wl("high", 8).priority(10).created("2026-01-02T00:00:00Z")],
              {"high": "a100"}, {"low": "available 0"}),
    CycleCase("creation time: the older of two equal-priority workloads goes first",
              [make_cluster_queue("a").flavor("a100", {GPU: 8})],
              [wl("young", 8).created("2026-01-02T00:00:00Z"), wl("old", 8).created("2026-01-01T00:00:00Z")],
              {"old": "a100"}, {"young": "available 0"}),
    CycleCase("BestEffortFIFO: a head that does not fit lets a smaller, later workload in",
              [make_cluster_queue("a").flavor("a100", {GPU: 8})],
              [wl("big", 16).created("2026-01-01T00:00:00Z"), wl("small", 8).created("2026-01-02T00:00:00Z")],
              {"small": "a100"}, {"big": "requests 16, available 8"}),
    CycleCase("StrictFIFO: a head that does not fit blocks the later workload",
              [make_cluster_queue("a").strategy(c.QUEUEING_STRICT_FIFO).flavor("a100", {GPU: 8})],
              [wl("big", 16).created("2026-01-01T00:00:00Z"), wl("small", 8).created("2026-01-02T00:00:00Z")],
              {}, {"big": "requests 16, available 8",
                   "small": 'StrictFIFO: waiting behind "default/big" in ClusterQueue "a"'}),
    CycleCase("cohort: a queue borrows its idle neighbour's quota",
              [make_cluster_queue("a").cohort("c").flavor("a100", {GPU: 4}),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("w1", 12)], {"w1": "a100"}),
    CycleCase("cohort: borrowingLimit stops the borrowing",
              [make_cluster_queue("a").cohort("c").flavor("a100", {GPU: 4}).limits("a100", GPU, borrowing=2),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("w1", 12)], {}, {"w1": "requests 12, available 6"}),
    CycleCase("cohort: the lender's own workload fits within nominal, so it goes before an older borrower",
              [make_cluster_queue("a").cohort("c").flavor("a100", {GPU: 4}),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("borrower", 10).created("2026-01-01T00:00:00Z"),
               wl("lender", 4, cq="b").created("2026-01-02T00:00:00Z")],
              {"lender": "a100"}, {"borrower": "requests 10, available 8"}),
    CycleCase("cohort: a borrower with higher priority still goes after a head within nominal",
              [make_cluster_queue("a").cohort("c").flavor("a100", {GPU: 4}),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("borrower", 8).priority(100), wl("small", 6, cq="b")],
              {"small": "a100"}, {"borrower": "requests 8, available 6"}),
    CycleCase("flavorFungibility Borrow (default): the first flavor, borrowing from the cohort",
              [make_cluster_queue("a").cohort("c").flavor("a100", {GPU: 4}).flavor("spot", {GPU: 8}),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("w1", 6)], {"w1": "a100"}),
    CycleCase("flavorFungibility TryNextFlavor: a later flavor that fits without borrowing wins",
              [make_cluster_queue("a").cohort("c").when_can_borrow("TryNextFlavor")
               .flavor("a100", {GPU: 4}).flavor("spot", {GPU: 8}),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("w1", 6)], {"w1": "spot"}),
    CycleCase("flavorFungibility TryNextFlavor: borrows when no flavor fits within nominal",
              [make_cluster_queue("a").cohort("c").when_can_borrow("TryNextFlavor")
               .flavor("a100", {GPU: 4}).flavor("spot", {GPU: 2}),
               make_cluster_queue("b").cohort("c").flavor("a100", {GPU: 8})],
              [wl("w1", 6)], {"w1": "a100"}),
    CycleCase("all-or-nothing: the second pod set does not fit, so the first holds nothing",
              [make_cluster_queue("a").flavor("a100", {GPU: 10})],
              [wl("w1", 4, 2).pod_set("workers", 3, {GPU: 1}), wl("w2", 10)],
              {"w2": "a100"}, {"w1": 'pod set "workers"'}),
    CycleCase("all-or-nothing across topology pod sets: the nodes of the first are given back",
              [make_cluster_queue("a").flavor("h100", {GPU: 100})],
              [wl("w1", 4, 2, required=RACK).pod_set("workers", 3, {GPU: 4}, required=RACK),
               wl("w2", 4, 3, required=BLOCK)],
              {"w2": "h100"}, {"w1": 'pod set "workers"'}),
    CycleCase("flavor rules: a flavor taint the pod does not tolerate is skipped",
              [make_cluster_queue("a").flavor("reserved", {GPU: 8}).flavor("a100", {GPU: 8})], [wl("w1", 1)],
              {"w1": "a100"}),
    CycleCase("flavor rules: the flavor's own toleration covers its taint",
              [make_cluster_queue("a").flavor("tolerant", {GPU: 8}).flavor("a100", {GPU: 8})], [wl("w1", 1)],
              {"w1": "tolerant"}),
    CycleCase("flavor rules: a nodeSelector contradicting the flavor's nodeLabels is skipped",
              [make_cluster_queue("a").flavor("spot", {GPU: 8}).flavor("a100", {GPU: 8})],
              [wl("w1", 1, node_selector={"capacity": "on-demand"}), wl("w2", 1, node_selector={"capacity": "spot"})],
              {"w1": "a100", "w2": "spot"}),
    CycleCase("flavor rules: every reason is listed when no flavor suits",
              [make_cluster_queue("a").flavor("reserved", {GPU: 8}).flavor("spot", {GPU: 8})],
              [wl("w1", 1, node_selector={"capacity": "on-demand"})], {},
              {"w1": 'flavor "reserved": untolerated taint "reserved=team-x:NoSchedule"; flavor "spot": '
                     "nodeSelector capacity=on-demand does not match the flavor's nodeLabels (capacity=spot)"}),
    CycleCase("a resource the ClusterQueue does not cover",
              [make_cluster_queue("a").flavor("a100", {"cpu": 8})], [wl("w1", 1)], {},
              {"w1": 'resource "nvidia.com/gpu" unavailable in ClusterQueue "a"'}),
    CycleCase("a topology request on a flavor without topology is skipped",
              [make_cluster_queue("a").flavor("a100", {GPU: 8})], [wl("w1", 1, required=RACK)], {},
              {"w1": 'flavor "a100" has no topology'}),
    CycleCase("namespaceSelector left unset selects no namespace (Kueue)",
              [make_cluster_queue("a").namespace_selector(None).flavor("a100", {GPU: 8})], [wl("w1", 1)], {},
              {"w1": 'namespace "default" doesn\'t match the namespaceSelector of ClusterQueue "a"'}),
    CycleCase("a queue name without a LocalQueue",
              [make_cluster_queue("a").flavor("a100", {GPU: 8})], [wl("w1", 1, cq="nope")], {},
              {"w1": 'LocalQueue "lq-nope" doesn\'t exist in namespace "default"'}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_cycle(case: CycleCase) -> None:
    state = make_admission_state(case.queues, flavors(), gpu_nodes(), topologies())
    submit_all(state, case.workloads)
    decisions = run_until_quiet(state)
    admitted = {d.key.split("/")[1]: d for d in decisions if isinstance(d, Admit)}
    assert {name: d.admission["podSetAssignments"][0]["flavors"][GPU] for name, d in admitted.items()} \
        == case.want_admitted
    assert set(state.waiting()) == {f"default/{name}" for name in case.want_pending}
    first_pending: dict[str, Pending] = {}
    for d in decisions:
        if isinstance(d, Pending):
            first_pending.setdefault(d.key.split("/")[1], d)
    first_pending.update({k.split("/")[1]: p for k, p in state.pending.items() if p.reason == c.REASON_INADMISSIBLE})
    for name, fragment in case.want_pending.items():
        why = first_pending.get(name) or explain(state, f"default/{name}")
        assert why is not None and fragment in why.message, why


def test_all_or_nothing_leaves_no_quota_or_node_usage_behind() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: 100})], flavors(), gpu_nodes(),
                                 topologies())
    submit_all(state, [wl("w1", 4, 2, required=RACK).pod_set("workers", 3, {GPU: 4}, required=RACK)])
    [decision] = run_until_quiet(state)
    assert isinstance(decision, Pending)
    assert state.snapshot.quota.availability("a", "h100", GPU).available == 100_000
    assert all(state.snapshot.usage.used(n) == {} for n in ("n1", "n2", "n3"))


def test_release_on_finish_admits_the_waiting_workload() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: 100})], flavors(), gpu_nodes(),
                                 topologies())
    first, second = submit_all(state, [wl("w1", 4, 2, required=RACK), wl("w2", 4, 2, required=RACK)])
    run_until_quiet(state)
    assert set(state.admitted) == {first.key} and state.waiting() == [second.key]
    assert state.release(first.key)
    [decision] = run_until_quiet(state)
    assert isinstance(decision, Admit) and decision.key == second.key
    slices = label_slices(decision.admission["podSetAssignments"][0]["topologyAssignment"])
    assert slices == [{"nodeLabels": {BLOCK: "b1", RACK: "r1"}, "count": 2}]


def test_strict_fifo_unblocks_when_capacity_is_released() -> None:
    state = make_admission_state(
        [make_cluster_queue("a").strategy(c.QUEUEING_STRICT_FIFO).flavor("a100", {GPU: 8})], flavors())
    running, head, later = submit_all(state, [wl("running", 8).created("2026-01-01T00:00:00Z"),
                                              wl("head", 8).created("2026-01-02T00:00:00Z"),
                                              wl("later", 1).created("2026-01-03T00:00:00Z")])
    run_until_quiet(state)
    assert set(state.admitted) == {running.key}
    state.release(running.key)
    run_until_quiet(state)
    assert set(state.admitted) == {head.key} and state.waiting() == [later.key]


def test_admission_status_carries_flavors_usage_and_count() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("a100", {GPU: 8, "cpu": 16})], flavors())
    submit_all(state, [make_workload("w").queue("lq-a").pod_set("main", 3, {GPU: 2, "cpu": "1500m"})])
    [decision] = run_until_quiet(state)
    assert isinstance(decision, Admit)
    assert decision.admission == {"clusterQueue": "a", "podSetAssignments": [{
        "name": "main", "count": 3, "flavors": {"cpu": "a100", GPU: "a100"},
        "resourceUsage": {"cpu": "4500m", GPU: "6"}}]}


def test_explain_recomputes_the_numbers_against_current_usage() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("a100", {GPU: 8})], flavors())
    _, waiting, _ = submit_all(state, [wl("first", 4).created("2026-01-01T00:00:00Z"),
                                       wl("waiting", 6).created("2026-01-02T00:00:00Z"),
                                       wl("third", 4).created("2026-01-03T00:00:00Z")])
    decisions = run_until_quiet(state)
    at_decision = next(d for d in decisions if isinstance(d, Pending) and d.key == waiting.key)
    assert "available 4 (nominal 8, used 4)" in at_decision.message
    now = explain(state, waiting.key)
    assert now is not None and "available 0 (nominal 8, used 8)" in now.message


def test_one_cycle_tries_only_the_head_of_each_cluster_queue() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("a100", {GPU: 8}),
                                  make_cluster_queue("b").flavor("spot", {GPU: 8})], flavors())
    submit_all(state, [wl("a1", 1), wl("a2", 1), wl("b1", 1, cq="b"), wl("b2", 1, cq="b")])
    decisions = run_cycle(state)
    assert sorted(d.key for d in decisions) == ["default/a1", "default/b1"]
    assert sorted(d.key for d in run_cycle(state)) == ["default/a2", "default/b2"]
    assert run_cycle(state) == []


def test_releasing_a_waiting_workload_forgets_it_without_freeing_anything() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("a100", {GPU: 8})], flavors())
    running, waiting = submit_all(state, [wl("running", 8).created("2026-01-01T00:00:00Z"),
                                          wl("waiting", 8).created("2026-01-02T00:00:00Z")])
    run_until_quiet(state)
    assert not state.release(waiting.key)
    assert state.waiting() == [] and set(state.admitted) == {running.key}
    assert state.snapshot.quota.availability("a", "a100", GPU).available == 0
    assert not state.release("default/unknown")


def test_namespace_selector_matches_namespace_labels() -> None:
    cq = make_cluster_queue("a").namespace_selector({"matchLabels": {"team": "ml"}}).flavor("a100", {GPU: 8})
    state = make_admission_state([cq], flavors(), local_queues=[make_local_queue("lq-a", "a", "ml-ns"),
                                                                 make_local_queue("lq-a", "a", "web")],
                                 namespaces={"ml-ns": {"team": "ml"}, "web": {"team": "web"}})
    ok = workload_info(make_workload("w", "ml-ns").queue("lq-a").pod_set("main", 1, {GPU: 1}).model(), seq=0)
    refused = workload_info(make_workload("w", "web").queue("lq-a").pod_set("main", 1, {GPU: 1}).model(), seq=1)
    assert state.submit(ok) is None
    problem = state.submit(refused)
    assert problem is not None and problem.detail == c.REASON_NAMESPACE_MISMATCH
    assert problem.message == 'namespace "web" doesn\'t match the namespaceSelector of ClusterQueue "a"'
    assert [d.key for d in run_until_quiet(state)] == ["ml-ns/w"]


def test_a_terminating_cluster_queue_admits_nothing_new() -> None:
    """Kueue: a ClusterQueue being deleted keeps what it admitted but admits nothing, so its
    resource-in-use finalizer can go once those finish."""
    cq = make_cluster_queue("a").flavor("a100", {GPU: 8}).deleted()
    state = make_admission_state([cq], flavors(), local_queues=[make_local_queue("lq-a", "a")])
    problem = state.submit(workload_info(make_workload("w").queue("lq-a").pod_set("main", 1, {GPU: 1}).model(), seq=0))
    assert problem is not None and problem.detail == c.REASON_INADMISSIBLE
    assert problem.message == 'ClusterQueue "a" is terminating'
    assert run_until_quiet(state) == []


@pytest.mark.parametrize(("lq_policy", "cq_policy", "want_message"), [
    pytest.param("Hold", None, 'LocalQueue "lq-a" in namespace "default" is stopped (stopPolicy Hold)',
                 id="local-queue-on-hold"),
    pytest.param("HoldAndDrain", None, 'LocalQueue "lq-a" in namespace "default" is stopped (stopPolicy HoldAndDrain)',
                 id="local-queue-draining"),
    pytest.param("HoldAndDrain", "Hold", 'LocalQueue "lq-a" in namespace "default" is stopped (stopPolicy '
                 'HoldAndDrain)', id="both-stopped-the-local-queue-is-named-first-as-kueue-asks-it-first"),
    pytest.param(None, "HoldAndDrain", 'ClusterQueue "a" is stopped', id="cluster-queue-draining"),
])
def test_a_stopped_queue_admits_none_of_its_workloads_and_says_why(
        lq_policy: str | None, cq_policy: str | None, want_message: str) -> None:
    # lq-a (stopped or not) and lq-b both feed ClusterQueue "a" (8 GPUs): only lq-b's Workload is admitted.
    cq = make_cluster_queue("a").flavor("a100", {GPU: 8})
    if cq_policy is not None:
        cq.set("spec.stopPolicy", cq_policy)
    held_queue = make_local_queue("lq-a", "a")
    if lq_policy is not None:
        held_queue.set("spec.stopPolicy", lq_policy)
    state = make_admission_state([cq], flavors(), local_queues=[held_queue, make_local_queue("lq-b", "a")])
    held, other = submit_all(state, [wl("held", 1).queue("lq-a"), wl("other", 1).queue("lq-b")])
    decisions = run_until_quiet(state)
    if cq_policy is None:
        assert [d.key for d in decisions if isinstance(d, Admit)] == [other.key]
    why = explain(state, held.key)  # what `tasq explain` and the pending write say
    assert why is not None and why == state.pending[held.key]
    assert (why.reason, why.message) == (c.REASON_INADMISSIBLE, want_message)
    assert held.key in state.waiting() and held.key not in state.queue_of


def test_a_local_queue_running_again_lets_its_workloads_be_admitted() -> None:
    """The same Workload, resubmitted to a state built once its LocalQueue's stopPolicy is None again
    (the operator rebuilds the state every cycle), is admitted without any change of its own."""
    held_queue = make_local_queue("lq-a", "a").set("spec.stopPolicy", "Hold")
    workload = wl("w", 1)
    state = make_admission_state([make_cluster_queue("a").flavor("a100", {GPU: 8})], flavors(),
                                 local_queues=[held_queue])
    submit_all(state, [workload])
    assert run_until_quiet(state) == []
    running = make_admission_state([make_cluster_queue("a").flavor("a100", {GPU: 8})], flavors(),
                                   local_queues=[held_queue.set("spec.stopPolicy", "None")])
    submit_all(running, [workload])
    assert [d.key for d in run_until_quiet(running) if isinstance(d, Admit)] == ["default/w"]


@dataclass
class NeedsCase:
    name: str
    workloads: list[WorkloadBuilder]
    """All but the last are admitted first; the last one waits."""
    want_clause: str
    pods_per_node: int = 110


NEEDS_CASES = [
    NeedsCase("a gang deadlock names the shortage: 8 GPUs needed, 4 free",
              [wl("first", 4, 2, required=BLOCK), wl("second", 4, 2, required=BLOCK)],
              "needs nvidia.com/gpu 8; free on 3 candidate node(s): nvidia.com/gpu 4"),
    NeedsCase("fragmentation: 12 GPUs free in total, yet no node holds two 3-GPU pods",
              [wl("w1", 3, 4, required=BLOCK)],
              "needs nvidia.com/gpu 12; free on 3 candidate node(s): nvidia.com/gpu 12"),
    NeedsCase("pods are shown only when they are what is short",
              [wl("w1", 1, 7, required=BLOCK)],
              "needs nvidia.com/gpu 7, pods 7; free on 3 candidate node(s): nvidia.com/gpu 12, pods 6",
              pods_per_node=2),
    NeedsCase("nodes the pod set's nodeSelector rules out are not counted as free",
              [wl("w1", 4, 3, required=BLOCK, node_selector={RACK: "r1"})],
              "needs nvidia.com/gpu 12; free on 2 candidate node(s): nvidia.com/gpu 8"),
]


@pytest.mark.parametrize("case", NEEDS_CASES, ids=lambda case: case.name)
def test_a_topology_unfit_message_ends_with_needs_and_free(case: NeedsCase) -> None:
    nodes = [gpu_node(name, rack).allocatable({c.RESOURCE_PODS: case.pods_per_node}).view() for name, rack in LAYOUT]
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: 100})], flavors(), nodes,
                                 topologies())
    *admitted, waiting = submit_all(state, case.workloads)
    decisions = run_until_quiet(state)
    assert {d.key for d in decisions if isinstance(d, Admit)} == {w.key for w in admitted}
    why = explain(state, waiting.key)
    assert why is not None and why.detail == c.REASON_POD_SET_TOPOLOGY_UNFIT
    assert why.message.endswith(case.want_clause), why.message


def test_a_node_added_outside_admission_lets_the_parked_workload_in_once_capacity_changed_is_called() -> None:
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: 100})], flavors(), gpu_nodes(),
                                 topologies())
    [big] = submit_all(state, [wl("big", 4, 3, required=RACK)])
    [first] = run_until_quiet(state)
    assert isinstance(first, Pending) and state.waiting() == [big.key]
    topology = state.snapshot.flavors["h100"].topology
    assert topology is not None
    topology.upsert_node(gpu_node("n4", "r1").view())
    assert run_until_quiet(state) == [], "parked until told that capacity changed"
    state.capacity_changed()
    [decision] = run_until_quiet(state)
    assert isinstance(decision, Admit)
    assert label_slices(decision.admission["podSetAssignments"][0]["topologyAssignment"]) == [
        {"nodeLabels": {BLOCK: "b1", RACK: "r1"}, "count": 3}]


@dataclass
class GroupCase:
    name: str
    requests: dict[str, Any]
    want_flavors: dict[str, str] | None
    """resource -> flavor when admitted; None when the workload must wait."""
    want_message: str = ""


GROUP_CASES = [
    GroupCase("each resource group picks its own flavor: cpu falls back to the second, GPUs take the only one",
              {"cpu": 6, GPU: 1}, {"cpu": "tolerant", GPU: "a100"}),
    GroupCase("the first cpu flavor when its quota covers the pod set",
              {"cpu": 3, GPU: 1}, {"cpu": "spot", GPU: "a100"}),
    GroupCase("the second group failing fails the pod set, and the first group keeps no quota",
              {"cpu": 6, GPU: 9}, None,
              'couldn\'t assign flavors to pod set "main": insufficient quota for nvidia.com/gpu in flavor '
              '"a100": requests 9, available 8 (nominal 8, used 0)'),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=lambda case: case.name)
def test_resource_groups_are_assigned_independently(case: GroupCase) -> None:
    cq = (make_cluster_queue("a").group("cpu").flavor("spot", {"cpu": 4}).flavor("tolerant", {"cpu": 16})
          .group(GPU).flavor("a100", {GPU: 8}))
    state = make_admission_state([cq], flavors())
    submit_all(state, [make_workload("w").queue("lq-a").pod_set("main", 1, case.requests)])
    [decision] = run_until_quiet(state)
    if case.want_flavors is None:
        assert isinstance(decision, Pending) and decision.message == case.want_message
        assert all(state.snapshot.quota.availability("a", flavor, "cpu").used == 0 for flavor in ("spot", "tolerant"))
        return
    assert isinstance(decision, Admit)
    assert decision.admission["podSetAssignments"][0]["flavors"] == case.want_flavors


@dataclass
class ReasonCase:
    name: str
    queue: ClusterQueueBuilder
    workload: WorkloadBuilder
    want_detail: str
    want_fragment: str


REASON_CASES = [
    ReasonCase("a ClusterQueue naming a flavor that does not exist",
               make_cluster_queue("a").flavor("ghost", {GPU: 8}), wl("w1", 1),
               c.REASON_FLAVOR_NOT_FOUND, 'flavor "ghost" not found'),
    ReasonCase("a flavor whose Topology does not exist",
               make_cluster_queue("a").flavor("lost", {GPU: 8}), wl("w1", 1, required=RACK),
               c.REASON_TOPOLOGY_NOT_FOUND, 'flavor "lost": topology "nowhere" not found'),
    ReasonCase("a required level the flavor's topology lacks",
               make_cluster_queue("a").flavor("h100", {GPU: 8}), wl("w1", 1, required="cloud.com/zone"),
               c.REASON_TOPOLOGY_LEVEL_MISSING, 'topology "racks" has no level "cloud.com/zone"'),
    ReasonCase("only placement is missing",
               make_cluster_queue("a").flavor("h100", {GPU: 100}), wl("w1", 4, 4, required=BLOCK),
               c.REASON_POD_SET_TOPOLOGY_UNFIT, "allows to fit only 3 out of 4 pod(s)"),
    ReasonCase("one flavor lacks room and the other quota: the quota reason",
               make_cluster_queue("a").flavor("h100", {GPU: 100}).flavor("a100", {GPU: 4}),
               wl("w1", 4, 4),
               c.REASON_QUOTA_EXCEEDED, 'insufficient quota for nvidia.com/gpu in flavor "a100"'),
]


@pytest.mark.parametrize("case", REASON_CASES, ids=lambda case: case.name)
def test_the_pending_detail_names_the_flavors_common_cause(case: ReasonCase) -> None:
    all_flavors = [*flavors(), make_flavor("lost").topology_name("nowhere")]
    state = make_admission_state([case.queue], all_flavors, gpu_nodes(), topologies())
    submit_all(state, [case.workload])
    [decision] = run_until_quiet(state)
    assert isinstance(decision, Pending)
    assert decision.detail == case.want_detail
    assert case.want_fragment in decision.message
