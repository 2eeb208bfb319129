"""Quota ledger: nominal quota, cohort borrowing up to borrowingLimit, lendingLimit, release; trees of\ncohorts (table cases drawn as trees, and a property test against a from-scratch oracle)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.admission.quota import (
    ClusterQueueQuota,
    CohortQuota,
    FlavorQuotas,
    QuotaLedger,
    ResourceGroup,
    ResourceQuota,
)
from tests.builders.kueue import ClusterQueueBuilder, CohortBuilder, make_cluster_queue, make_cohort

GPU = "nvidia.com/gpu"


def ledger_of(*builders: ClusterQueueBuilder) -> QuotaLedger:
    queues = {b.model().name: ClusterQueueQuota.from_model(b.model()) for b in builders}
    return QuotaLedger.build(queues)


@dataclass
class QuotaCase:
    name: str
    queues: list[ClusterQueueBuilder]
    used: list[tuple[str, int]] = field(default_factory=list)
    """(queue, GPUs in flavor h100) reserved before asking."""
    ask: str = "a"
    want_available: int = 0


def gpu_queue(name: str, nominal: int, cohort: str | None = None) -> ClusterQueueBuilder:
    builder = make_cluster_queue(name).flavor("h100", {GPU: nominal})
    return builder.cohort(cohort) if cohort else builder


QUOTA_CASES = [
    QuotaCase("alone: nominal minus used", [gpu_queue("a", 150)], used=[("a", 100)], want_available=50),
    QuotaCase("alone: never negative", [gpu_queue("a", 10)], used=[("a", 10)], want_available=0),
    QuotaCase("cohort: an idle neighbour's quota can be borrowed",
              [gpu_queue("a", 10, "c"), gpu_queue("b", 20, "c")], want_available=30),
    QuotaCase("cohort: the neighbour's own use shrinks what can be borrowed",
              [gpu_queue("a", 10, "c"), gpu_queue("b", 20, "c")], used=[("b", 15)], want_available=15),
    QuotaCase("cohort: borrowingLimit caps nominal + borrowed",
              [gpu_queue("a", 10, "c").limits("h100", GPU, borrowing=5), gpu_queue("b", 20, "c")],
              want_available=15),
    QuotaCase("cohort: borrowingLimit counts what is already used",
              [gpu_queue("a", 10, "c").limits("h100", GPU, borrowing=5), gpu_queue("b", 20, "c")],
              used=[("a", 12)], want_available=3),
    QuotaCase("cohort: lendingLimit keeps the rest of the lender's quota for itself",
              [gpu_queue("a", 10, "c"), gpu_queue("b", 20, "c").limits("h100", GPU, lending=4)],
              want_available=14),
    QuotaCase("cohort: the lender keeps its guaranteed part even when the pool is drained",
              [gpu_queue("a", 10, "c"), gpu_queue("b", 20, "c").limits("h100", GPU, lending=4)],
              used=[("a", 14)], ask="b", want_available=16),
    QuotaCase("different cohorts do not share",
              [gpu_queue("a", 10, "c1"), gpu_queue("b", 20, "c2")], want_available=10),
]


@pytest.mark.parametrize("case", QUOTA_CASES, ids=lambda case: case.name)
def test_availability(case: QuotaCase) -> None:
    ledger = ledger_of(*case.queues)
    for i, (queue, gpus) in enumerate(case.used):
        ledger.reserve(f"ns/w{i}", queue, {("h100", GPU): gpus * 1000})
    assert ledger.availability(case.ask, "h100", GPU).available == case.want_available * 1000


def test_release_gives_back_exactly_what_was_reserved() -> None:
    ledger = ledger_of(gpu_queue("a", 10, "c"), gpu_queue("b", 20, "c"))
    ledger.reserve("ns/big", "a", {("h100", GPU): 25_000})
    assert ledger.availability("b", "h100", GPU).available == 5_000
    assert ledger.release("ns/big")
    assert not ledger.release("ns/big")
    assert ledger.availability("b", "h100", GPU).available == 30_000


def test_clone_is_independent() -> None:
    ledger = ledger_of(gpu_queue("a", 10))
    twin = ledger.clone()
    twin.reserve("ns/w", "a", {("h100", GPU): 4_000})
    assert ledger.availability("a", "h100", GPU).available == 10_000
    assert twin.availability("a", "h100", GPU).available == 6_000


def test_describe_names_the_numbers_behind_the_availability() -> None:
    ledger = ledger_of(gpu_queue("a", 10, "c").limits("h100", GPU, borrowing=5), gpu_queue("b", 20, "c"))
    ledger.reserve("ns/w", "a", {("h100", GPU): 12_000})
    text = ledger.availability("a", "h100", GPU).describe(GPU)
    assert text == 'nominal 10, used 12, unused in cohort "c" 18, borrowingLimit 5'


# -- trees of cohorts (v1beta2 Cohort objects) -----------------------------------------------------


def tree_ledger(queues: list[ClusterQueueBuilder], cohorts: list[CohortBuilder]) -> QuotaLedger:
    qs = {b.model().name: ClusterQueueQuota.from_model(b.model()) for b in queues}
    return QuotaLedger.build(qs, {b.model().name: CohortQuota.from_model(b.model()) for b in cohorts})


def gpu_cohort(name: str, parent: str | None = None, nominal: int = 0, borrowing: int | None = None,
               lending: int | None = None) -> CohortBuilder:
    builder = make_cohort(name).flavor("h100", {GPU: nominal})
    if parent is not None:
        builder.parent(parent)
    return builder.limits("h100", GPU, borrowing=borrowing, lending=lending)


@dataclass
class TreeCase:
    name: str
    queues: list[ClusterQueueBuilder]
    cohorts: list[CohortBuilder]
    ask: str
    want_available: int
    used: list[tuple[str, int]] = field(default_factory=list)


def two_level(left: CohortBuilder | None = None, right: CohortBuilder | None = None) -> list[CohortBuilder]:
    """
                 root
               /      \\
            left      right
            /  \\        |
        a(10)  b(10)   c(20)        (GPUs of flavor h100)
    """
    return [gpu_cohort("root"), left or gpu_cohort("left", "root"), right or gpu_cohort("right", "root")]


TWO_LEVEL_QUEUES = [gpu_queue("a", 10, "left"), gpu_queue("b", 10, "left"), gpu_queue("c", 20, "right")]

TREE_CASES = [
    TreeCase("a cohort's own quota is shared by the queues under it",
             # pool(8) -- a(2)
             [gpu_queue("a", 2, "pool")], [gpu_cohort("pool", nominal=8)], ask="a", want_available=10),
    TreeCase("two levels: a cousin's idle quota flows up to the root and down again",
             TWO_LEVEL_QUEUES, two_level(), ask="a", want_available=40),
    TreeCase("two levels: a cousin's use is not available",
             TWO_LEVEL_QUEUES, two_level(), used=[("c", 15)], ask="a", want_available=25),
    TreeCase("a middle cohort's lendingLimit caps what its subtree lends up",
             TWO_LEVEL_QUEUES, two_level(right=gpu_cohort("right", "root", lending=5)), ask="a", want_available=25),
    TreeCase("what a middle cohort does not lend stays available to its own subtree",
             TWO_LEVEL_QUEUES, two_level(right=gpu_cohort("right", "root", lending=5)), ask="c", want_available=40),
    TreeCase("use inside what a cohort keeps does not reach its parent",
             TWO_LEVEL_QUEUES, two_level(right=gpu_cohort("right", "root", lending=5)),
             used=[("c", 10)], ask="a", want_available=25),
    TreeCase("use beyond what a cohort keeps is taken from its parent",
             TWO_LEVEL_QUEUES, two_level(right=gpu_cohort("right", "root", lending=5)),
             used=[("c", 18)], ask="a", want_available=22),
    TreeCase("a middle cohort's borrowingLimit caps what its subtree takes from above",
             TWO_LEVEL_QUEUES, two_level(left=gpu_cohort("left", "root", borrowing=3)), ask="a", want_available=23),
    TreeCase("a middle cohort's borrowingLimit counts what its subtree already took",
             TWO_LEVEL_QUEUES, two_level(left=gpu_cohort("left", "root", borrowing=3)),
             used=[("b", 22)], ask="a", want_available=1),
    TreeCase("a queue's own borrowingLimit still applies inside a tree",
             [gpu_queue("a", 10, "left").limits("h100", GPU, borrowing=4), *TWO_LEVEL_QUEUES[1:]],
             two_level(), ask="a", want_available=14),
    TreeCase("a parent no Cohort object defines is an empty root the subtrees share",
             # (ghost) -- left -- a(10), b(10);  (ghost) -- right -- c(20)
             TWO_LEVEL_QUEUES, [gpu_cohort("left", "ghost"), gpu_cohort("right", "ghost")], ask="a",
             want_available=40),
    TreeCase("a ClusterQueue naming a cohort no Cohort object defines shares with its siblings only",
             [gpu_queue("a", 10, "solo"), gpu_queue("b", 5, "solo"), gpu_queue("c", 20, "right")],
             [gpu_cohort("right")], ask="a", want_available=15),
    TreeCase("a cycle disables the queues in it",
             # x -> y -> x;  a(10) in x
             [gpu_queue("a", 10, "x")], [gpu_cohort("x", "y"), gpu_cohort("y", "x")], ask="a", want_available=0),
    TreeCase("a cycle above disables the queues of the cohorts under it",
             # z -> x -> y -> x;  a(10) in z
             [gpu_queue("a", 10, "z")], [gpu_cohort("z", "x"), gpu_cohort("x", "y"), gpu_cohort("y", "x")],
             ask="a", want_available=0),
]


@pytest.mark.parametrize("case", TREE_CASES, ids=lambda case: case.name)
def test_tree_availability(case: TreeCase) -> None:
    ledger = tree_ledger(case.queues, case.cohorts)
    for i, (queue, gpus) in enumerate(case.used):
        ledger.reserve(f"ns/w{i}", queue, {("h100", GPU): gpus * 1000})
    assert ledger.availability(case.ask, "h100", GPU).available == case.want_available * 1000


def test_a_cycle_is_named_for_every_queue_it_disables() -> None:
    ledger = tree_ledger([gpu_queue("a", 1, "z"), gpu_queue("b", 1, "other")],
                         [gpu_cohort("z", "y"), gpu_cohort("y", "x"), gpu_cohort("x", "y"), gpu_cohort("other")])
    assert ledger.cohort_cycle("a") == ("x", "y")
    assert ledger.cohort_cycle("b") is None


def test_releasing_everything_leaves_no_usage_anywhere_in_the_tree() -> None:
    ledger = tree_ledger(TWO_LEVEL_QUEUES, two_level(right=gpu_cohort("right", "root", lending=5)))
    for i, (queue, gpus) in enumerate([("c", 18), ("a", 12), ("b", 7)]):
        ledger.reserve(f"ns/w{i}", queue, {("h100", GPU): gpus * 1000})
    assert ledger.cohort_used["root"][("h100", GPU)] > 0
    for i in range(3):
        assert ledger.release(f"ns/w{i}")
    assert all(v == 0 for usage in (*ledger.used.values(), *ledger.cohort_used.values()) for v in usage.values())


# -- property: the ledger against a from-scratch oracle on random trees -----------------------------


@dataclass(frozen=True)
class NodeSpec:
    nominal: int
    borrowing: int | None
    lending: int | None
    parent: str | None


def _oracle_fits(cohorts: dict[str, NodeSpec], queues: dict[str, NodeSpec], usage: dict[str, int]) -> bool:
    """Every constraint of Kueue's model checked from scratch: a root's usage within its subtree
    quota, a node with a borrowingLimit within subtree + borrowingLimit, where a cohort's usage
    is what its children use beyond what they keep (subtree - lendingLimit)."""
    def children(name: str) -> list[tuple[bool, str]]:
        return [(True, n) for n, s in cohorts.items() if s.parent == name] + \
               [(False, n) for n, s in queues.items() if s.parent == name]

    def spec(node: tuple[bool, str]) -> NodeSpec:
        return cohorts[node[1]] if node[0] else queues[node[1]]

    def subtree(node: tuple[bool, str]) -> int:
        if not node[0]:
            return spec(node).nominal
        return spec(node).nominal + sum(subtree(ch) - keeps(ch) for ch in children(node[1]))

    def keeps(node: tuple[bool, str]) -> int:
        lending = spec(node).lending
        return 0 if lending is None else max(0, subtree(node) - lending)

    def used(node: tuple[bool, str]) -> int:
        if not node[0]:
            return usage.get(node[1], 0)
        return sum(max(0, used(ch) - keeps(ch)) for ch in children(node[1]))

    nodes = [(True, n) for n in cohorts] + [(False, n) for n in queues]
    for node in nodes:
        s = spec(node)
        if s.parent is None and used(node) > subtree(node):
            return False
        if s.parent is not None and s.borrowing is not None and used(node) > subtree(node) + s.borrowing:
            return False
    return True


def _oracle_available(cohorts: dict[str, NodeSpec], queues: dict[str, NodeSpec], usage: dict[str, int],
                      queue: str) -> int:
    """The most the queue can add with every constraint still holding (tried one by one)."""
    ceiling = sum(s.nominal for s in (*cohorts.values(), *queues.values())) + 1
    best = 0
    for extra in range(1, ceiling + 1):
        if not _oracle_fits(cohorts, queues, {**usage, queue: usage.get(queue, 0) + extra}):
            break
        best = extra
    return best


limit = st.none() | st.integers(0, 6)


@st.composite
def random_tree(draw: st.DrawFn) -> tuple[dict[str, NodeSpec], dict[str, NodeSpec]]:
    """Up to 5 cohorts, each parented by an earlier one or none (so no cycle), and up to 5 queues,
    each in a cohort or alone; limits only where there is a parent (Kueue's webhook rule)."""
    cohorts: dict[str, NodeSpec] = {}
    for i in range(draw(st.integers(1, 5))):
        parent = draw(st.none() | st.sampled_from(sorted(cohorts))) if cohorts else None
        has_parent = parent is not None
        cohorts[f"co{i}"] = NodeSpec(draw(st.integers(0, 6)), draw(limit) if has_parent else None,
                                     draw(limit) if has_parent else None, parent)
    queues: dict[str, NodeSpec] = {}
    for i in range(draw(st.integers(1, 5))):
        parent = draw(st.none() | st.sampled_from(sorted(cohorts)))
        has_parent = parent is not None
        queues[f"q{i}"] = NodeSpec(draw(st.integers(0, 6)), draw(limit) if has_parent else None,
                                   draw(limit) if has_parent else None, parent)
    return cohorts, queues


def _ledger_of(cohorts: dict[str, NodeSpec], queues: dict[str, NodeSpec]) -> QuotaLedger:
    def quota(s: NodeSpec) -> dict[str, ResourceQuota]:
        return {GPU: ResourceQuota(s.nominal, s.borrowing, s.lending)}
    return QuotaLedger.build(
        {n: ClusterQueueQuota(n, s.parent, (ResourceGroup((GPU,), (FlavorQuotas("h100", quota(s)),)),))
         for n, s in queues.items()},
        {n: CohortQuota(n, s.parent, (ResourceGroup((GPU,), (FlavorQuotas("h100", quota(s)),)),))
         for n, s in cohorts.items()})


@settings(max_examples=150, deadline=None)
@given(tree=random_tree(), steps=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 8), st.booleans()),
                                          max_size=12))
def test_availability_matches_the_oracle_through_reserves_and_releases(
        tree: tuple[dict[str, NodeSpec], dict[str, NodeSpec]], steps: list[tuple[int, int, bool]]) -> None:
    cohorts, queues = tree
    ledger = _ledger_of(cohorts, queues)
    names = sorted(queues)
    usage: dict[str, int] = {}
    held: list[tuple[str, str, int]] = []
    for i, (pick, amount, release) in enumerate(steps):
        if release and held:
            key, queue, gpus = held.pop(pick % len(held))
            assert ledger.release(key)
            usage[queue] -= gpus
        else:
            queue = names[pick % len(names)]
            if ledger.availability(queue, "h100", GPU).available >= amount:  # admitted only when it fits
                ledger.reserve(f"ns/w{i}", queue, {("h100", GPU): amount})
                held.append((f"ns/w{i}", queue, amount))
                usage[queue] = usage.get(queue, 0) + amount
        for name in names:
            assert ledger.availability(name, "h100", GPU).available == \
                _oracle_available(cohorts, queues, usage, name), name
