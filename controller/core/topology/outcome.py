"""Results of the topology engine: a TopologyAssignment per pod set (its slices name domains through
shared read-only DomainLabels) and its per-node Placement on success, or a failure value carrying a
PascalCase reason, a deterministic message and the data behind it (per-domain fit counts, exclusion
tally). Produced by `assigning.assign`; read by admission, which writes `TopologyAssignment.to_dict()`
(Kueue's compact v1beta2 form, `controller.api.topology_assignment`) into the Workload status and
passes `placement` to `Usage.reserve`.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from controller.api.quantity import Resources
from controller.api.topology_assignment import AssignedDomain, encode


class DomainLabels(Mapping[str, str]):
    """The labels of one domain, level -> value, read-only, over the tree's own tuples (levels, and
    the domain's key). Made once per domain and shared by every result naming it: a large result
    names hundreds of domains, and a dict for each was most of its cost."""

    __slots__ = ("_levels", "_values")

    def __init__(self, levels: tuple[str, ...], values: tuple[str, ...]) -> None:
        self._levels, self._values = levels, values

    def __getitem__(self, key: str) -> str:
        for level, value in zip(self._levels, self._values, strict=True):
            if level == key:
                return value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._levels)

    def __len__(self) -> int:
        return len(self._levels)

    def __repr__(self) -> str:
        return repr(dict(self))

    @property
    def level_values(self) -> tuple[str, ...]:
        """The domain's value at each level, widest first."""
        return self._values


@dataclass(frozen=True, slots=True)
class Slice:
    """`count` pods go to the domain whose labels are `node_labels` (a value for every level)."""

    node_labels: Mapping[str, str]
    count: int



@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """One slice per chosen domain, sorted by their label values (level order): the order slots are
    numbered in, which the compact encoding keeps."""

    levels: tuple[str, ...]
    slices: tuple[Slice, ...]

    @property
    def count(self) -> int:
        return sum(s.count for s in self.slices)

    def to_dict(self) -> dict[str, Any]:
        """Kueue's compact v1beta2 TopologyAssignment of these slices (O(slices x levels)): a fresh
        copy of the encoding kept for the same levels and slices (`_encoded`) when they are few."""
        key = tuple((_values_of(self.levels, s.node_labels), s.count) for s in self.slices)
        if len(key) > SLICES_KEPT:
            return encode(self.levels, [AssignedDomain(values, count) for values, count in key]).to_dict()
        fresh: dict[str, Any] = marshal.loads(_encoded(self.levels, key))
        return fresh


def _values_of(levels: tuple[str, ...], labels: Mapping[str, str]) -> tuple[str, ...]:
    return labels.level_values if isinstance(labels, DomainLabels) else tuple(labels[level] for level in levels)


ENCODINGS_KEPT = 4096
"""Distinct assignments whose encoding is kept (least recently used out)."""
SLICES_KEPT = 64
"""Only assignments of at most this many slices are kept: a large one is rarely made twice, and
4,096 of them could hold hundreds of megabytes."""


@lru_cache(maxsize=ENCODINGS_KEPT)
def _encoded(levels: tuple[str, ...], slices: tuple[tuple[tuple[str, ...], int], ...]) -> bytes:
    """The wire form of slices (values per level, pods), kept serialised: a cycle admitting a
    backlog of one shape places many Workloads on the same few nodes, i.e. encodes the same
    assignment again and again, and building the compact form (models, prefixes) was a fifth of
    each admission's cost. `marshal` (dicts, lists, strings and ints only) gives each caller its own
    copy several times faster than walking the value in Python."""
    return marshal.dumps(encode(levels, [AssignedDomain(values, count) for values, count in slices]).to_dict())


@dataclass(frozen=True, slots=True)
class Placement:
    """Where every pod of a workload's pod sets went, node by node, for `Usage.reserve`.

    `pods[podset][node]` is a pod count; `resources[node]` the summed requests (milli) on that node.
    """

    pods: Mapping[str, Mapping[str, int]]
    resources: Mapping[str, Resources]


@dataclass(frozen=True, slots=True)
class AssignmentSuccess:
    """Every pod set fits: one TopologyAssignment per pod set, in the order they were given."""

    assignments: tuple[TopologyAssignment, ...]
    placement: Placement
    ok: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class AssignmentFailure:
    """No placement for pod set `podset` (earlier pod sets may have fitted; nothing is kept).

    `level` is the level the fit counts refer to (the requested one, or the widest when spreading);
    `unit` what `fit` counts: "pod", or "slice" for a pod set in slices of more than one pod;
    `fit` the most units any acceptable placement could hold; `best` the best domain's path at
    `level` (None when nothing fits at all); `domain_fits` the (at most 16) domains at `level` holding
    the most, most first (path, count); `excluded` the tally of nodes excluded by reason, in message order.
    """

    reason: str
    message: str
    podset: str
    count: int = 0
    fit: int = 0
    unit: str = "pod"
    level: str | None = None
    best: str | None = None
    domain_fits: tuple[tuple[str, int], ...] = ()
    total_nodes: int = 0
    excluded: tuple[tuple[str, int], ...] = ()
    never: str | None = None
    """`can never fit: ...` when no domain of `level` could hold the pod set even with every node
    empty (allocatable alone): the fix is a larger domain or a smaller pod set, not waiting."""
    ok: bool = field(default=False, init=False)


AssignmentOutcome = AssignmentSuccess | AssignmentFailure
