"""Queueing: the pending Workloads of every ClusterQueue, in admission order, and their heads.

Order is priority descending, then creation time (Kueue's); BestEffortFIFO parks a head that does
not fit together with its shape and lets the next shape through, StrictFIFO blocks behind it (see
`ClusterQueueQueue`). Called by the admission cycle; holds keys and order keys only.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field

from controller.api import constants as c

OrderKey = tuple[int, float, int, str]


@dataclass(slots=True)
class ClusterQueueQueue:
    """One ClusterQueue's pending workloads: one heap per shape plus a heap of the shapes' tops.

    Workloads of one shape (their pod sets' signature) fail alike while capacity only shrinks, so
    a head that does not fit parks its whole shape until `requeue` (something was released).

    A shape is known inside by a small integer (`_ids`, given at its first push): a signature is a
    tuple of dataclasses whose hash is computed anew on every lookup, and the queue looked shapes
    up several times per admission.

    Heaps use lazy deletion: a `shapes` entry is live only while `members` maps its key to the same
    (order, shape id). `tops` holds one live entry per unparked shape that has members: the one
    whose order `listed` records for that shape; any other entry of the shape is stale and dropped
    when it surfaces. A live entry whose shape's top moved on (its workload was admitted or removed)
    is moved to the new top when it surfaces, so each admission costs O(log n), not a pass over
    every entry pushed for the shape.
    """

    strategy: str = c.QUEUEING_BEST_EFFORT_FIFO
    members: dict[str, tuple[OrderKey, int]] = field(default_factory=dict)
    shapes: dict[int, list[tuple[OrderKey, str]]] = field(default_factory=dict)
    tops: list[tuple[OrderKey, int]] = field(default_factory=list)
    listed: dict[int, OrderKey] = field(default_factory=dict)
    """Shape id -> the order of its live entry in `tops` (absent: none, e.g. parked or empty)."""
    parked: set[int] = field(default_factory=set)
    blocked_by: str | None = None
    """StrictFIFO: the head that did not fit; it blocks the queue until capacity changes."""
    _ids: dict[Hashable, int] = field(default_factory=dict)
    """Shape -> its id (ids are never reused: a shape keeps its id while the queue lives)."""

    def push(self, key: str, order: OrderKey, shape: Hashable = None) -> None:
        sid = self._ids.get(shape)
        if sid is None:
            sid = self._ids[shape] = len(self._ids)
        self.members[key] = (order, sid)
        heap = self.shapes.get(sid)
        if heap is None:
            heap = self.shapes[sid] = []
        heapq.heappush(heap, (order, key))
        if sid not in self.parked:
            self._list(sid, order)
        if self.blocked_by is not None and order < self.members[self.blocked_by][0]:
            self.blocked_by = None  # a new, higher-priority workload goes before the blocked head

    def _list(self, sid: int, order: OrderKey) -> None:
        """Make `order` the shape's live entry in `tops` unless its live entry already comes first."""
        listed = self.listed.get(sid)
        if listed is None or order < listed:
            self.listed[sid] = order
            heapq.heappush(self.tops, (order, sid))

    def remove(self, key: str) -> None:
        self.members.pop(key, None)
        if self.blocked_by == key:
            self.blocked_by = None

    def _shape_top(self, sid: int) -> tuple[OrderKey, str] | None:
        heap = self.shapes.get(sid)
        if heap is None:
            return None
        members = self.members
        while heap:
            order, key = heap[0]
            entry = members.get(key)
            if entry is not None and entry[1] == sid and entry[0] == order:
                return order, key
            heapq.heappop(heap)
        return None

    def head(self) -> str | None:
        """The workload to try now, or None when the queue is empty, fully parked or blocked."""
        if self.blocked_by is not None:
            return None
        tops, listed = self.tops, self.listed
        while tops:
            order, sid = tops[0]
            if listed.get(sid) != order or sid in self.parked:
                heapq.heappop(tops)  # stale, or parked: `requeue` lists the shape again
                if listed.get(sid) == order:
                    del listed[sid]
                continue
            top = self._shape_top(sid)
            if top is None:
                heapq.heappop(tops)
                del listed[sid]
            elif top[0] != order:
                listed[sid] = top[0]
                heapq.heapreplace(tops, (top[0], sid))
            else:
                return top[1]
        return None

    def park(self, key: str) -> None:
        """The head did not fit: StrictFIFO blocks behind it, BestEffortFIFO parks its whole shape."""
        entry = self.members.get(key)
        if entry is None:
            return
        if self.strategy == c.QUEUEING_STRICT_FIFO:
            self.blocked_by = key
        else:
            self.parked.add(entry[1])

    def requeue(self) -> None:
        """Capacity changed: every parked shape is eligible again and the block is lifted."""
        self.blocked_by = None
        parked, self.parked = self.parked, set()
        for sid in parked:
            top = self._shape_top(sid)
            if top is not None:
                self._list(sid, top[0])

    def pending(self) -> list[str]:
        """Every pending key in queue order (for reports; not on the hot path)."""
        return [key for _, key in sorted((entry[0], key) for key, entry in self.members.items())]


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
