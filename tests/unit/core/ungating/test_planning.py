"""The ungating planner: slots per slice, kept pods, replacements, completion-index order, determinism.

Table cases with narrative names, then hypothesis properties against a brute-force oracle that expands
every slice into its slots one by one.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.topology_assignment import DomainPods
from controller.api.workload import PodSetTopologyRequest
from controller.core.ungating.planning import PodState, UngatingInput, UngatingPlan, plan_ungating, pod_rank

BLOCK, RACK = "cloud.com/block", "cloud.com/rack"


def rack(block: str, name: str, count: int) -> DomainPods:
    return DomainPods(node_labels={BLOCK: block, RACK: name}, count=count)


@dataclass
class PodBuilder:
    """A pod of the Workload under construction: gated and running unless a step says otherwise."""

    name: str
    pod_set: str = "main"
    index: int | None = None
    gated: bool = True
    assigned: dict[str, str] | None = None
    terminated: bool = False
    created: str = "2026-01-01T00:00:00Z"

    def at(self, index: int) -> PodBuilder:
        self.index = index
        return self

    def released_to(self, block: str, name: str) -> PodBuilder:
        self.gated, self.assigned = False, {BLOCK: block, RACK: name, "other": "kept"}
        return self

    def finished(self) -> PodBuilder:
        self.terminated = True
        return self

    def of(self, pod_set: str) -> PodBuilder:
        self.pod_set = pod_set
        return self

    def born(self, second: int) -> PodBuilder:
        self.created = f"2026-01-01T00:00:{second:02d}Z"
        return self

    def state(self) -> PodState:
        return PodState(self.name, f"uid-{self.name}", self.pod_set, self.index, self.gated,
                        self.assigned, self.terminated, self.created)


def pod(name: str) -> PodBuilder:
    return PodBuilder(name)


def plan(slices: Sequence[DomainPods], pods: Sequence[PodBuilder],
         in_flight: Mapping[str, Mapping[str, str]] | None = None,
         by_pod_set: Mapping[str, Sequence[DomainPods]] | None = None) -> UngatingPlan:
    inp = UngatingInput("ns", "wl", by_pod_set or {"main": slices}, [p.state() for p in pods])
    return plan_ungating(inp, in_flight or {})


def placed(result: UngatingPlan) -> dict[str, str]:
    """pod name -> "block/rack" of the slice it is released into."""
    return {u.pod: f"{u.node_selector[BLOCK]}/{u.node_selector[RACK]}" for u in result.ungate}


# The slices of an 8-pod admission in block b1 (slots numbered in slice order):
#
#              b1
#         /          \
#   r3 (slots 0-5)  r4 (slots 6-7)
R3_R4 = (rack("b1", "r3", 6), rack("b1", "r4", 2))


@dataclass(frozen=True)
class Case:
    name: str
    slices: Sequence[DomainPods]
    pods: Sequence[PodBuilder]
    want: Mapping[str, str]
    held: int = 0
    in_flight: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


CASES = [
    Case("a fresh indexed Job: consecutive indexes fill r3 then r4",
         R3_R4, [pod(f"p{i}").at(i) for i in range(8)],
         {**{f"p{i}": "b1/r3" for i in range(6)}, "p6": "b1/r4", "p7": "b1/r4"}),
    Case("indexes arriving out of order still go to the slice holding their slot",
         R3_R4, [pod("p7").at(7), pod("p0").at(0), pod("p6").at(6)],
         {"p7": "b1/r4", "p0": "b1/r3", "p6": "b1/r4"}),
    Case("running pods keep r3's slots, so the gated ones go to r4",
         (rack("b1", "r3", 2), rack("b1", "r4", 2)),
         [pod("a").released_to("b1", "r3"), pod("b").released_to("b1", "r3"), pod("c"), pod("d")],
         {"c": "b1/r4", "d": "b1/r4"}),
    Case("pods beyond the assignment stay gated and are counted as held",
         (rack("b1", "r3", 2),), [pod("a").born(1), pod("b").born(2), pod("c").born(3)],
         {"a": "b1/r3", "b": "b1/r3"}, held=1),
    Case("a failed pod frees its slot for its replacement",
         (rack("b1", "r3", 2),),
         [pod("a").released_to("b1", "r3"), pod("b").released_to("b1", "r3").finished(), pod("b2")],
         {"b2": "b1/r3"}),
    Case("the replacement of index 1 returns to r3, where slot 1 is",
         (rack("b1", "r3", 2), rack("b1", "r4", 2)),
         [pod("p0").at(0).released_to("b1", "r3"), pod("p1").at(1).released_to("b1", "r3").finished(),
          pod("p2").at(2).released_to("b1", "r4"), pod("p3").at(3).released_to("b1", "r4"), pod("p1b").at(1)],
         {"p1b": "b1/r3"}),
    Case("an index whose slice is full (a pod was released there out of order) takes the next free slot",
         (rack("b1", "r3", 1), rack("b1", "r4", 1)),
         [pod("p1").at(1).released_to("b1", "r4"), pod("p0x").at(0).released_to("b1", "r3").finished(),
          pod("p0").at(0)],
         {"p0": "b1/r3"}),
    Case("a pod whose ungate patch is in flight keeps its slot while the cache still shows it gated",
         (rack("b1", "r3", 1), rack("b1", "r4", 1)), [pod("a").born(1), pod("b").born(2)],
         {"b": "b1/r4"}, in_flight={"uid-a": {BLOCK: "b1", RACK: "r3"}}),
    Case("without indexes, older pods are released first",
         (rack("b1", "r3", 1),), [pod("young").born(9), pod("old").born(1)], {"old": "b1/r3"}, held=1),
    Case("a duplicate index makes ranks unusable: creation order fills the slices instead",
         (rack("b1", "r3", 1), rack("b1", "r4", 1)),
         [pod("x").at(1).born(1), pod("y").at(1).born(2)], {"x": "b1/r3", "y": "b1/r4"}),
    Case("slots are numbered in the admission's slice order, even when label keys come back reordered",
         (DomainPods(node_labels={RACK: "r1", BLOCK: "b1"}, count=1), rack("b1", "r2", 1)),
         [pod("p1").at(1), pod("p0").at(0)], {"p0": "b1/r1", "p1": "b1/r2"}),
    Case("a released pod outside every slice takes no slot",
         (rack("b1", "r3", 1),), [pod("stray").released_to("b7", "r7"), pod("a")], {"a": "b1/r3"}),
    Case("a terminated gated pod is not released",
         (rack("b1", "r3", 2),), [pod("gone").finished(), pod("a")], {"a": "b1/r3"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_plan(case: Case) -> None:
    result = plan(case.slices, case.pods, case.in_flight)
    assert placed(result) == case.want
    assert result.held == case.held


def test_each_pod_set_uses_its_own_slices_and_a_pod_set_without_slices_stays_gated() -> None:
    result = plan((), [pod("w").of("workers"), pod("l").of("leader"), pod("x").of("unknown")],
                  by_pod_set={"workers": (rack("b1", "r1", 1),), "leader": (rack("b2", "r2", 1),)})
    assert placed(result) == {"w": "b1/r1", "l": "b2/r2"}
    assert result.held == 1


def test_ungate_carries_the_uid_and_exactly_the_slice_labels() -> None:
    result = plan((rack("b1", "r3", 1),), [pod("a")])
    (u,) = result.ungate
    assert (u.pod, u.uid, dict(u.node_selector)) == ("a", "uid-a", {BLOCK: "b1", RACK: "r3"})


def test_4096_pods_in_64_slices_are_planned_in_index_order() -> None:
    slices = [rack(f"b{i // 8}", f"r{i:02d}", 64) for i in range(64)]
    pods = [pod(f"p{i}").at(i) for i in range(4096)]
    random.Random(7).shuffle(pods)
    got = placed(plan(slices, pods))
    assert len(got) == 4096
    assert all(got[f"p{i}"] == f"b{(i // 64) // 8}/r{i // 64:02d}" for i in range(4096))


# ------------------------------------------------------------------------ properties vs an oracle

@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[DomainPods], list[PodBuilder]]:
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    slices = [rack("b1", f"r{i}", n) for i, n in enumerate(counts)]
    n_pods = draw(st.integers(0, sum(counts) + 3))
    indexed = draw(st.booleans())
    indexes = draw(st.permutations(range(n_pods))) if indexed else [None] * n_pods
    pods = []
    for i in range(n_pods):
        b = pod(f"p{i}").born(draw(st.integers(0, 59)))
        b.index = indexes[i]
        state = draw(st.sampled_from(["gated", "released", "finished"]))
        if state != "gated":
            b.released_to("b1", f"r{draw(st.integers(0, len(counts) - 1))}")
        if state == "finished" or draw(st.integers(0, 9)) == 0:
            b.terminated = True
        pods.append(b)
    return slices, pods


def oracle_free_slots(slices: Sequence[DomainPods], pods: Sequence[PodBuilder]) -> dict[str, int]:
    """Brute force: each slice's slots, one list entry per slot, minus one per live released pod there."""
    slots = [s.node_labels[RACK] for s in slices for _ in range(s.count)]
    for p in pods:
        if not p.terminated and not p.gated and p.assigned and p.assigned[RACK] in slots:
            slots.remove(p.assigned[RACK])
    return dict(Counter(slots))


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_slot_counts_are_never_exceeded_and_no_free_slot_is_wasted(scenario: tuple[list[DomainPods], list[PodBuilder]]) -> None:
    slices, pods = scenario
    result = plan(slices, pods)
    free = oracle_free_slots(slices, pods)
    new = Counter(u.node_selector[RACK] for u in result.ungate)
    assert all(new[r] <= free.get(r, 0) for r in new)
    waiting = sum(1 for p in pods if p.gated and not p.terminated)
    assert len(result.ungate) == min(waiting, sum(free.values()))
    assert result.held == waiting - len(result.ungate)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_running_and_terminated_pods_are_never_moved(scenario: tuple[list[DomainPods], list[PodBuilder]]) -> None:
    slices, pods = scenario
    names = {u.pod for u in plan(slices, pods).ungate}
    assert names <= {p.name for p in pods if p.gated and not p.terminated}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.data())
def test_fresh_indexed_pods_land_in_the_slice_of_their_slot(counts: list[int], data: st.DataObject) -> None:
    slices = [rack("b1", f"r{i}", n) for i, n in enumerate(counts)]
    total = sum(counts)
    present = data.draw(st.sets(st.integers(0, total - 1)))
    slot_owner = [s.node_labels[RACK] for s in slices for _ in range(s.count)]  # oracle: slot r -> slice
    got = placed(plan(slices, [pod(f"p{i}").at(i) for i in sorted(present)]))
    assert got == {f"p{i}": f"b1/{slot_owner[i]}" for i in present}


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.randoms())
def test_the_plan_does_not_depend_on_the_order_pods_are_listed(
        scenario: tuple[list[DomainPods], list[PodBuilder]], rnd: random.Random) -> None:
    slices, pods = scenario
    shuffled = list(pods)
    rnd.shuffle(shuffled)
    assert plan(slices, pods) == plan(slices, shuffled)


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.data())
def test_pods_in_flight_hold_their_slots_and_are_never_ungated_twice(
        scenario: tuple[list[DomainPods], list[PodBuilder]], data: st.DataObject) -> None:
    slices, pods = scenario
    waiting = [i for i, p in enumerate(pods) if p.gated and not p.terminated]
    chosen = data.draw(st.sets(st.sampled_from(waiting))) if waiting else set()
    racks = {i: data.draw(st.integers(0, len(slices) - 1)) for i in sorted(chosen)}
    in_flight = {pods[i].state().uid: {BLOCK: "b1", RACK: f"r{r}"} for i, r in racks.items()}
    result = plan(slices, pods, in_flight)
    # the oracle sees an in-flight pod as already released into the slice its patch names
    as_if_released = [replace(p).released_to("b1", f"r{racks[i]}") if i in racks else p for i, p in enumerate(pods)]
    free = oracle_free_slots(slices, as_if_released)
    new = Counter(u.node_selector[RACK] for u in result.ungate)
    assert all(new[r] <= free.get(r, 0) for r in new)
    assert not {u.uid for u in result.ungate} & set(in_flight)
    assert len(result.ungate) == min(len(waiting) - len(chosen), sum(free.values()))


# -- ranks of a JobSet's pods (pod_rank) ---------------------------------------------------------------

JOB_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION = "batch.kubernetes.io/job-completion-index"
JOBSET_REQUEST = PodSetTopologyRequest(required=RACK, pod_index_label=COMPLETION,
                                       sub_group_index_label=JOB_INDEX, sub_group_count=3)


@pytest.mark.parametrize(("labels", "request_", "count", "rank"), [
    ({COMPLETION: "2"}, None, 4, 2),  # a Job: its completion index
    ({COMPLETION: "1", JOB_INDEX: "2"}, JOBSET_REQUEST, 12, 9),  # the third Job of 4 pods, its second pod
    ({COMPLETION: "0", JOB_INDEX: "0"}, JOBSET_REQUEST, 12, 0),
    ({COMPLETION: "1"}, JOBSET_REQUEST, 12, None),  # no Job index: unranked, placed in order
    ({JOB_INDEX: "1"}, JOBSET_REQUEST, 12, None),
    ({COMPLETION: "x", JOB_INDEX: "1"}, JOBSET_REQUEST, 12, None),
], ids=["job_completion_index", "jobset_job_then_completion_index", "jobset_first_pod",
        "jobset_pod_without_job_index", "jobset_pod_without_completion_index", "not_a_number"])
def test_a_pods_rank_is_its_jobs_index_times_pods_per_job_plus_its_completion_index(
        labels: dict[str, str], request_: PodSetTopologyRequest | None, count: int, rank: int | None) -> None:
    assert pod_rank(labels, request_, count) == rank


@settings(max_examples=100, deadline=None)
@given(jobs=st.integers(1, 6), per_job=st.integers(1, 6), seed=st.integers(0, 10**6))
def test_jobset_ranks_number_every_pod_once_in_job_then_completion_order(jobs: int, per_job: int, seed: int) -> None:
    """Oracle: listing the pods Job by Job, each Job's pods by completion index, numbers them 0..n-1."""
    request = PodSetTopologyRequest(required=RACK, pod_index_label=COMPLETION, sub_group_index_label=JOB_INDEX,
                                    sub_group_count=jobs)
    pods = [{JOB_INDEX: str(j), COMPLETION: str(i)} for j in range(jobs) for i in range(per_job)]
    expected = {(p[JOB_INDEX], p[COMPLETION]): n for n, p in enumerate(pods)}
    random.Random(seed).shuffle(pods)
    assert {(p[JOB_INDEX], p[COMPLETION]): pod_rank(p, request, jobs * per_job) for p in pods} == expected
