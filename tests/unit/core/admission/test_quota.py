"""Quota ledger: nominal quota, cohort borrowing up to borrowingLimit, lendingLimit, release."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.core.admission.quota import ClusterQueueQuota, QuotaLedger
from tests.builders.kueue import ClusterQueueBuilder, make_cluster_queue

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
