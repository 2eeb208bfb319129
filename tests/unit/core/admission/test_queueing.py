"""ClusterQueue queues: order, BestEffortFIFO parking by shape, StrictFIFO blocking, requeue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


operations = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 9), st.integers(0, 3), st.integers(0, 2)),
    st.tuples(st.just("remove"), st.integers(0, 9)),
    st.tuples(st.just("park")),
    st.tuples(st.just("requeue")),
), max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops=operations, strict=st.booleans())
def test_head_matches_a_brute_force_scan(ops: list[tuple[Any, ...]], strict: bool) -> None:
    """The heaps with lazy deletion agree with scanning every member in order."""
    strategy = STRICT if strict else BEST
    queue = ClusterQueueQueue(strategy)
    members: dict[str, tuple[tuple[int, float, int, str], str]] = {}
    parked: set[str] = set()
    blocked: str | None = None
    for seq, op in enumerate(ops):
        if op[0] == "push":
            key = f"w{op[1]}"
            if key in members:
                continue
            order, shape = (-op[2], 0.0, seq, key), f"s{op[3]}"
            queue.push(key, order, shape)
            members[key] = (order, shape)
            if blocked is not None and order < members[blocked][0]:
                blocked = None
        elif op[0] == "remove":
            key = f"w{op[1]}"
            queue.remove(key)
            members.pop(key, None)
            blocked = None if blocked == key else blocked
        elif op[0] == "park":
            head = queue.head()
            if head is None:
                continue
            queue.park(head)
            if strict:
                blocked = head
            else:
                parked.add(members[head][1])
        else:
            queue.requeue()
            parked.clear()
            blocked = None
        eligible = sorted((o, k) for k, (o, s) in members.items() if s not in parked)
        want = None if blocked is not None or not eligible else eligible[0][1]
        assert queue.head() == want


def test_a_workload_pushed_again_takes_its_new_place() -> None:
    queue = ClusterQueueQueue(BEST)
    queue.push("w1", (-3, 0.0, 0, "w1"), "s")
    queue.remove("w1")
    queue.push("w1", (0, 0.0, 1, "w1"), "s")
    queue.push("w2", (-1, 0.0, 2, "w2"), "s")
    assert queue.head() == "w2"


class OracleQueue:
    """The brute-force model: every member scanned in order; BestEffortFIFO skips parked shapes,
    StrictFIFO offers nothing while blocked."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.members: dict[str, tuple[tuple[int, float, int, str], str]] = {}
        self.parked: set[str] = set()
        self.blocked: str | None = None

    def push(self, key: str, order: tuple[int, float, int, str], shape: str) -> None:
        self.members[key] = (order, shape)
        if self.blocked is not None and order < self.members[self.blocked][0]:
            self.blocked = None

    def remove(self, key: str) -> None:
        self.members.pop(key, None)
        self.blocked = None if self.blocked == key else self.blocked

    def head(self) -> str | None:
        eligible = sorted((order, key) for key, (order, shape) in self.members.items() if shape not in self.parked)
        return None if self.blocked is not None or not eligible else eligible[0][1]

    def park(self, key: str) -> None:
        if self.strict:
            self.blocked = key
        else:
            self.parked.add(self.members[key][1])

    def requeue(self) -> None:
        self.parked.clear()
        self.blocked = None


admission_operations = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 11), st.integers(0, 3), st.integers(0, 2)),
    st.tuples(st.just("pop")),
    st.tuples(st.just("remove"), st.integers(0, 11)),
    st.tuples(st.just("park")),
    st.tuples(st.just("requeue")),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops=admission_operations, strict=st.booleans())
def test_heads_are_handed_out_in_the_oracles_order(ops: list[tuple[Any, ...]], strict: bool) -> None:
    """Heads taken (admitted), parked, re-pushed with a new place, removed and requeued in any
    order: each head, and the order in which the rest drains, is the oracle's."""
    queue, oracle = ClusterQueueQueue(STRICT if strict else BEST), OracleQueue(strict)
    for seq, op in enumerate(ops):
        if op[0] == "push":  # a key pushed again (its spec changed) takes its new place
            key = f"w{op[1]}"
            order, shape = (-op[2], float(seq % 5), seq, key), f"s{op[3]}"
            queue.push(key, order, shape)
            oracle.push(key, order, shape)
        elif op[0] in ("pop", "park"):
            head = queue.head()
            assert head == oracle.head()
            if head is not None and op[0] == "pop":
                queue.remove(head)
                oracle.remove(head)
            elif head is not None:
                queue.park(head)
                oracle.park(head)
        elif op[0] == "remove":
            queue.remove(f"w{op[1]}")
            oracle.remove(f"w{op[1]}")
        else:
            queue.requeue()
            oracle.requeue()
        assert queue.head() == oracle.head()
    queue.requeue()
    oracle.requeue()
    want = [key for _, key in sorted((order, key) for key, (order, _) in oracle.members.items())]
    drained = []
    while (head := queue.head()) is not None:
        assert head == oracle.head()
        drained.append(head)
        queue.remove(head)
        oracle.remove(head)
    assert drained == want


def test_a_shape_keeps_one_live_entry_among_the_tops() -> None:
    """Admitting a backlog of one shape head by head leaves no pile of entries behind (the old
    queue kept one entry per push and moved every one of them on each admission)."""
    queue = ClusterQueueQueue(BEST)
    for i in range(1000):
        queue.push(f"w{i}", (0, float(i), i, f"w{i}"), "one shape")
    taken = []
    while (head := queue.head()) is not None:
        taken.append(head)
        queue.remove(head)
    assert taken == [f"w{i}" for i in range(1000)]
    assert queue.tops == [] and queue.listed == {}
