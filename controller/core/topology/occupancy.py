"""Occupancy of a flavor's topology: capacity, use and Workloads per domain and per node.

Built from the static tree (`tree.FlavorTopology`) and one `Usage` (bound pods plus reservations),
for one headline resource (GPUs when the nodes have them). Pure and read-only: `tasq top` (controller
/commands/top.py) builds it from a live cluster's objects or a simulate input and draws it. Domain
sums are numpy passes over the slots; Python objects are made per domain and per node only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import Usage

Int64Array = npt.NDArray[np.int64]

STANDARD_RESOURCES = (c.RESOURCE_PODS, "cpu", "memory", "ephemeral-storage")
"""Resources every node has: a headline resource is another one when the nodes have one."""


@dataclass(frozen=True, slots=True)
class NodeOccupancy:
    """One node: its allocatable and used amount of the headline resource (milli) and the keys
    (`namespace/name`) of the Workloads holding any resource there, sorted."""

    name: str
    capacity: int
    used: int
    workloads: tuple[str, ...]

    @property
    def free(self) -> int:
        return max(self.capacity - self.used, 0)


@dataclass(frozen=True, slots=True)
class DomainOccupancy:
    """One domain of `level` (its label values widest first in `path`): the sums of its nodes, the
    Workloads on any of them, its child domains (label order) or, at the deepest level drawn, its
    nodes (name order)."""

    level: str
    path: tuple[str, ...]
    capacity: int
    used: int
    node_count: int
    workloads: tuple[str, ...]
    children: tuple[DomainOccupancy, ...] = ()
    nodes: tuple[NodeOccupancy, ...] = ()

    @property
    def name(self) -> str:
        return self.path[-1]


@dataclass(frozen=True, slots=True)
class FlavorOccupancy:
    """A flavor's whole tree for `resource`: its top-level domains; `levels` are those drawn as
    domains (a lowest hostname level is drawn as the nodes themselves); `unplaced` counts the
    flavor's nodes lacking a level label (in no domain)."""

    flavor: str
    topology: str
    levels: tuple[str, ...]
    resource: str
    capacity: int
    used: int
    node_count: int
    unplaced: int
    domains: tuple[DomainOccupancy, ...]


def headline_resource(topology: FlavorTopology) -> str:
    """The resource the view is drawn in: a GPU resource if any node has one, else the first other
    extended resource, else cpu."""
    extended = sorted(r for r in topology.resources if r not in STANDARD_RESOURCES)
    gpus = [r for r in extended if "gpu" in r.lower()]
    return (gpus or extended or ["cpu"])[0]


def occupancy_of(flavor: str, topology: FlavorTopology, usage: Usage, workload_keys: Iterable[str],
                 resource: str | None = None) -> FlavorOccupancy:
    """Phases: per-slot amounts -> Workloads per slot -> domains level by level (see the classes)."""
    resource = resource or headline_resource(topology)
    capacity, used = _slot_amounts(topology, usage, resource)
    on_slot = _workloads_by_slot(topology, usage, workload_keys)
    drawn = len(topology.levels) - (1 if topology.levels and topology.levels[-1] == c.LABEL_HOSTNAME else 0)
    placed = topology.domain_of(0) >= 0 if topology.levels else np.zeros(topology.slots, dtype=np.bool_)
    live = [topology.view(slot) is not None for slot in range(topology.slots)]
    domains = _domains(topology, capacity, used, on_slot, drawn) if drawn else ()
    return FlavorOccupancy(
        flavor=flavor, topology=topology.name, levels=topology.levels[:drawn], resource=resource,
        capacity=int(capacity[placed].sum()), used=int(used[placed].sum()), node_count=topology.node_count,
        unplaced=sum(1 for slot, alive in enumerate(live) if alive and not placed[slot]), domains=domains)


def _slot_amounts(topology: FlavorTopology, usage: Usage, resource: str) -> tuple[Int64Array, Int64Array]:
    """(allocatable, used) of `resource` per slot, milli; used is clipped to allocatable (a node
    over-committed by pods that predate a shrink shows full, not beyond)."""
    capacity = topology.allocatable([resource])[:, 0]
    used = usage.used_matrix(topology.rows_in(usage.registry), [resource])[:, 0]
    empty = np.asarray([topology.view(slot) is None for slot in range(topology.slots)], dtype=np.bool_)
    capacity[empty] = 0
    used = np.minimum(np.where(empty, 0, used), capacity)
    return capacity, used


def _workloads_by_slot(topology: FlavorTopology, usage: Usage, workload_keys: Iterable[str]) -> dict[int, list[str]]:
    """Slot -> keys of the Workloads whose footprint (reservation and bound pods) touches it; each
    workload read once, so the cost is the size of the placements, not nodes x workloads."""
    slot_of_row = topology.slot_of_row(usage.registry)
    out: dict[int, list[str]] = {}
    for key in sorted(set(workload_keys)):
        for row, amounts in usage.footprint(key).items():
            slot = slot_of_row.get(row)
            if slot is not None and any(amounts.values()):
                out.setdefault(slot, []).append(key)
    return out


def _sums(ids: Int64Array, values: Int64Array, size: int) -> list[int]:
    """Per-domain sums of per-slot values (Python ints; slots outside the tree have id -1)."""
    inside = ids >= 0
    return [int(v) for v in np.bincount(ids[inside], weights=values[inside], minlength=size)] if size else []


def _domains(topology: FlavorTopology, capacity: Int64Array, used: Int64Array,
             on_slot: dict[int, list[str]], drawn: int) -> tuple[DomainOccupancy, ...]:
    """The domains of the `drawn` widest levels, built deepest first so each parent takes its
    children's tuples; the deepest drawn level holds its nodes. Empty domains are left out."""
    below: list[DomainOccupancy | None] = []
    for level in range(drawn - 1, -1, -1):
        table = topology.domains[level]
        size = len(table.keys)
        ids = topology.domain_of(level)
        caps, uses = _sums(ids, capacity, size), _sums(ids, used, size)
        counts = _sums(ids, np.ones(ids.shape[0], dtype=np.int64), size)
        order = np.argsort(table.rank(), kind="stable").tolist()
        nodes_of = _nodes_by_domain(topology, capacity, used, on_slot, ids) if level == drawn - 1 else {}
        current: list[DomainOccupancy | None] = [None] * size
        for d in order:
            if not counts[d]:
                continue
            if level == drawn - 1:
                children: tuple[DomainOccupancy, ...] = ()
                nodes = tuple(nodes_of.get(d, ()))
                names: Iterable[str] = (k for n in nodes for k in n.workloads)
            else:
                kids = sorted(table.children[d], key=topology.domains[level + 1].rank().__getitem__)
                children = tuple(k for k in (below[i] for i in kids) if k is not None)
                nodes = ()
                names = (k for child in children for k in child.workloads)
            current[d] = DomainOccupancy(topology.levels[level], table.keys[d], caps[d], uses[d], counts[d],
                                         tuple(sorted(set(names))), children, nodes)
        below = current
    return tuple(d for d in (below[i] for i in np.argsort(topology.domains[0].rank(), kind="stable").tolist())
                 if d is not None)


def _nodes_by_domain(topology: FlavorTopology, capacity: Int64Array, used: Int64Array,
                     on_slot: dict[int, list[str]], ids: Int64Array) -> dict[int, Sequence[NodeOccupancy]]:
    """The nodes of each domain of the deepest drawn level, by name."""
    out: dict[int, list[NodeOccupancy]] = {}
    for slot in np.flatnonzero(ids >= 0).tolist():
        view = topology.view(slot)
        if view is None:
            continue
        out.setdefault(int(ids[slot]), []).append(NodeOccupancy(
            view.name, int(capacity[slot]), int(used[slot]), tuple(on_slot.get(slot, ()))))
    for nodes in out.values():
        nodes.sort(key=lambda n: n.name)
    return dict(out)
