"""Queueing: the pending Workloads of every ClusterQueue, in admission order, and their heads.

Order is priority descending, then creation time ascending (Kueue's). A workload that did not fit
is parked as inadmissible: under BestEffortFIFO the next one becomes the head, under StrictFIFO
the parked head blocks its queue. Parked workloads return when capacity is released
(`requeue_all`). Called by the admission cycle; holds keys and order keys only.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from controller.api import constants as c

OrderKey = tuple[int, float, int, str]


@dataclass(slots=True)
class ClusterQueueQueue:
    """One ClusterQueue's pending workloads: an active heap plus the parked (inadmissible) ones."""

    strategy: str = c.QUEUEING_BEST_EFFORT_FIFO
    active: list[tuple[OrderKey, str]] = field(default_factory=list)
    parked: dict[str, OrderKey] = field(default_factory=dict)
    members: dict[str, OrderKey] = field(default_factory=dict)
    """Every pending key with its order key; heap entries not in here are stale (lazy deletion)."""
    blocked_by: str | None = None
    """StrictFIFO: the parked head that blocks the queue until capacity changes."""

    def push(self, key: str, order: OrderKey) -> None:
        self.members[key] = order
        self.parked.pop(key, None)
        heapq.heappush(self.active, (order, key))
        if self.blocked_by is not None and order < self.members.get(self.blocked_by, order):
            # A new, higher-priority workload goes before the blocked head and gets its chance.
            self.blocked_by = None

    def remove(self, key: str) -> None:
        self.members.pop(key, None)
        self.parked.pop(key, None)
        if self.blocked_by == key:
            self.blocked_by = None

    def head(self) -> str | None:
        """The workload to try now, or None when the queue is empty, fully parked or blocked."""
        if self.blocked_by is not None:
            return None
        while self.active:
            order, key = self.active[0]
            if self.members.get(key) == order and key not in self.parked:
                return key
            heapq.heappop(self.active)
        return None

    def park(self, key: str) -> None:
        """The head did not fit: StrictFIFO blocks behind it, BestEffortFIFO moves on."""
        order = self.members.get(key)
        if order is None:
            return
        if self.strategy == c.QUEUEING_STRICT_FIFO:
            self.blocked_by = key
            return
        self.parked[key] = order

    def requeue(self) -> None:
        """Capacity changed: every parked workload is eligible again, the block is lifted."""
        self.blocked_by = None
        for key, order in self.parked.items():
            heapq.heappush(self.active, (order, key))
        self.parked.clear()

    def pending(self) -> list[str]:
        """Every pending key in queue order (for reports; not on the hot path)."""
        return [key for order, key in sorted((o, k) for k, o in self.members.items())]


@dataclass(slots=True)
class QueueSet:
    """The queues of every ClusterQueue, by name."""

    queues: dict[str, ClusterQueueQueue] = field(default_factory=dict)

    def ensure(self, name: str, strategy: str) -> ClusterQueueQueue:
        queue = self.queues.get(name)
        if queue is None:
            queue = self.queues[name] = ClusterQueueQueue(strategy)
        return queue

    def heads(self) -> list[tuple[str, str]]:
        """(ClusterQueue, workload key) for every queue with a head, by ClusterQueue name."""
        out = []
        for name in sorted(self.queues):
            head = self.queues[name].head()
            if head is not None:
                out.append((name, head))
        return out

    def requeue_all(self) -> None:
        for queue in self.queues.values():
            queue.requeue()
