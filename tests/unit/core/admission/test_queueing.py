"""ClusterQueue queues: order, BestEffortFIFO parking by shape, StrictFIFO blocking, requeue."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.core.admission.queueing import ClusterQueueQueue


@dataclass
class Entry:
    key: str
    priority: int = 0
    created: float = 0.0
    shape: str = "small"


@dataclass
class QueueCase:
    name: str
    strategy: str
    entries: list[Entry]
    park_heads: int
    """How many times the current head is parked (did not fit) before reading the head."""
    want_head: str | None


def fill(strategy: str, entries: list[Entry]) -> ClusterQueueQueue:
    queue = ClusterQueueQueue(strategy)
    for seq, e in enumerate(entries):
        queue.push(e.key, (-e.priority, e.created, seq, e.key), e.shape)
    return queue


BEST, STRICT = c.QUEUEING_BEST_EFFORT_FIFO, c.QUEUEING_STRICT_FIFO

CASES = [
    QueueCase("priority first", BEST, [Entry("low", 0), Entry("high", 5)], 0, "high"),
    QueueCase("then the older", BEST, [Entry("young", created=2), Entry("old", created=1)], 0, "old"),
    QueueCase("equal keys keep arrival order", BEST, [Entry("first"), Entry("second")], 0, "first"),
    QueueCase("BestEffortFIFO: a parked head lets the next shape through", BEST,
              [Entry("big", created=1, shape="big"), Entry("small", created=2)], 1, "small"),
    QueueCase("BestEffortFIFO: the whole shape of a parked head waits with it", BEST,
              [Entry("big1", created=1, shape="big"), Entry("big2", created=2, shape="big"),
               Entry("small", created=3)], 1, "small"),
    QueueCase("BestEffortFIFO: everything parked leaves no head", BEST,
              [Entry("big", shape="big"), Entry("small")], 2, None),
    QueueCase("StrictFIFO: a parked head blocks the queue", STRICT,
              [Entry("big", created=1, shape="big"), Entry("small", created=2)], 1, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_head(case: QueueCase) -> None:
    queue = fill(case.strategy, case.entries)
    for _ in range(case.park_heads):
        head = queue.head()
        assert head is not None
        queue.park(head)
    assert queue.head() == case.want_head


@pytest.mark.parametrize("strategy", [BEST, STRICT])
def test_requeue_makes_the_parked_head_first_again(strategy: str) -> None:
    queue = fill(strategy, [Entry("big", created=1, shape="big"), Entry("small", created=2)])
    queue.park("big")
    queue.requeue()
    assert queue.head() == "big"


def test_removed_workloads_never_come_back() -> None:
    queue = fill(BEST, [Entry("a", created=1), Entry("b", created=2)])
    queue.remove("a")
    queue.park("b")
    queue.requeue()
    assert queue.head() == "b"
    assert queue.pending() == ["b"]


def test_strict_fifo_a_new_higher_priority_workload_goes_before_the_blocked_head() -> None:
    queue = fill(STRICT, [Entry("blocked", created=1, shape="big")])
    queue.park("blocked")
    queue.push("urgent", (-10, 5.0, 9, "urgent"), "small")
    assert queue.head() == "urgent"
