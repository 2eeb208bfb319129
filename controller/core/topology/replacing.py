"""Failed-node replacement: new hosts for the pods an admitted pod set had on failed nodes.

Kueue's TASFailedNodeReplacement, for several failed nodes of one pod set at once: each failed node's
pods go to the fewest candidate nodes of its own lowest domain above the hosts (its rack), widening
level by level up to the domain the pod set's required level (or deepest slice level) confines it to;
pods on healthy nodes keep their hosts. Reads the static tree and the current Usage (per-slot fits of
the pod shape, kept by `counting`), never mutates them. Called by the operator's node-failure
handling (controller.kube.node_failing) once per pod set with pods on a failed node.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.api.topology_assignment import AssignedDomain
from controller.core.topology.candidacy import Signature
from controller.core.topology.counting import shape_counts
from controller.core.topology.request import PodSetRequest
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import Usage

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class NodeReplacement:
    """The pods of `failed` go to `to` (node name, pods), fewest nodes first."""

    failed: str
    to: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ReplacementSuccess:
    """The pod set's new domains (the assignment's levels, ordered by label values; healthy hosts
    keep their counts) and which node replaced which."""

    domains: tuple[AssignedDomain, ...]
    replaced: tuple[NodeReplacement, ...]


@dataclass(frozen=True, slots=True)
class ReplacementFailure:
    """No replacement within the allowed domain: `reason` (PascalCase), a message naming the nodes."""

    reason: str
    message: str
    nodes: tuple[str, ...]


ReplacementOutcome = ReplacementSuccess | ReplacementFailure


def confining_level(topology: FlavorTopology, request: PodSetRequest) -> int:
    """The index of the level whose domain a replacement must stay in: the required level or the
    deepest slice level, whichever is deeper; -1 (anywhere in the flavor) when neither is set."""
    deepest = -1
    levels = topology.levels
    if request.topology.mode == "required":
        level = request.topology.level
        deepest = levels.index(level) if level in levels else len(levels) - 1
    for layer in request.topology.slices:
        if layer.level in levels:
            deepest = max(deepest, levels.index(layer.level))
    return deepest


def _stale(topology: FlavorTopology, levels: Sequence[str], assigned: Sequence[AssignedDomain]) -> str | None:
    """Phase 0: why the assignment cannot be repaired on this tree (levels changed, hosts not the
    lowest level), or None."""
    if tuple(levels) != topology.levels:
        return (f"the assignment's levels {list(levels)} are not the topology's {list(topology.levels)} "
                "any more")
    if not levels or levels[-1] != c.LABEL_HOSTNAME:
        return f"the assignment's lowest level is {levels[-1] if levels else 'none'}, not {c.LABEL_HOSTNAME}"
    if any(len(d.values) != len(levels) for d in assigned):
        return "a domain of the assignment does not name every level"
    return None


def _fits(topology: FlavorTopology, usage: Usage, request: PodSetRequest,
          unhealthy: Collection[str]) -> Int64Array:
    """Phase 1: pods of the shape each slot can take now (candidacy, allocatable minus used, the
    pod set's own reservation on healthy hosts included); 0 on every unhealthy node."""
    entry = shape_counts(topology, usage, request.requests,
                         Signature.of(request.node_selector, request.affinity_terms, request.tolerations))
    fit = entry.fit.copy()
    for name in unhealthy:
        slot = topology.slot_of(name)
        if slot is not None and slot < fit.shape[0]:
            fit[slot] = 0
    return fit


def _slots_under(topology: FlavorTopology, level: int, domain: int) -> Int64Array:
    """Every slot inside one domain of `level`."""
    ids = [domain]
    for lv in range(level + 1, len(topology.levels)):
        ids = [child for d in ids for child in topology.domains[lv - 1].children[d]]
    return np.asarray([slot for d in ids for slot in topology.slots_in(d)], dtype=np.int64)


def _scopes(topology: FlavorTopology, values: Sequence[str], confine: int, fit: Int64Array) -> Iterator[Int64Array]:
    """Phase 2: the failed host's enclosing domains, lowest (its rack) first, up to the confining
    level's domain, each as its slots; then, when nothing confines, every slot with room (read from
    `fit` in bulk). Lazy: a wider scope is listed only when the narrower one had no room. Nothing
    when the confining domain left the tree."""
    for level in range(len(topology.levels) - 2, max(confine, 0) - 1, -1):
        domain = topology.domains[level].id_of.get(tuple(values[: level + 1]))
        if domain is None:
            if level <= confine:
                return
            continue
        yield _slots_under(topology, level, domain)
    if confine < 0:
        yield np.nonzero(fit > 0)[0].astype(np.int64)


def _take_fewest(topology: FlavorTopology, fit: Int64Array, slots: Int64Array, need: int) -> dict[int, int] | None:
    """Phase 3: `need` pods onto the fewest of `slots` (most room first, then label order), taken from
    `fit`; None (and `fit` untouched) when they hold fewer. Sorted in bulk: no per-node Python."""
    if slots.shape[0] == 0:
        return None
    room = fit[slots]
    if int(room.sum()) < need:
        return None
    slots, room = slots[room > 0], room[room > 0]
    rank = topology.domains[-1].rank()[topology.domain_of(len(topology.levels) - 1)[slots]]
    order = np.lexsort((rank, -room))
    taken = np.minimum(room[order], np.maximum(need - (np.cumsum(room[order]) - room[order]), 0))
    picked = taken > 0
    took = dict(zip(slots[order][picked].tolist(), taken[picked].tolist(), strict=True))
    for slot, n in took.items():
        fit[slot] -= n
    return took


def find_replacement(topology: FlavorTopology, usage: Usage, request: PodSetRequest, levels: Sequence[str],
                     assigned: Sequence[AssignedDomain], failed: Collection[str]) -> ReplacementOutcome:
    """Driver: a new assignment for a pod set whose `assigned` hosts include `failed` ones (every
    failed host's pods placed, or a failure naming the hosts without one). `failed` may name hosts
    the assignment does not hold: they are only excluded as candidates."""
    stale = _stale(topology, levels, assigned)
    if stale is not None:
        return ReplacementFailure(c.REASON_NODE_FAILURES, f"Cannot replace the failed node(s) "
                                  f"{', '.join(sorted(failed))}: {stale}", tuple(sorted(failed)))
    fit = _fits(topology, usage, request, failed)
    confine = confining_level(topology, request)
    kept = {d.values[-1]: d for d in assigned if d.values[-1] not in failed}
    replaced: list[NodeReplacement] = []
    unplaced: list[str] = []
    for domain in assigned:
        host = domain.values[-1]
        if host not in failed:
            continue
        took = next((t for scope in _scopes(topology, domain.values, confine, fit)
                     if (t := _take_fewest(topology, fit, scope, domain.count)) is not None), None)
        if took is None:
            unplaced.append(host)
            continue
        to = []
        for slot, n in sorted(took.items(), key=lambda kv: (-kv[1], kv[0])):
            name = topology.names_of([slot])[0]
            values = topology.domains[-1].keys[topology.domain_of(len(topology.levels) - 1)[slot]]
            before = kept.get(name)
            kept[name] = AssignedDomain(values, n + (before.count if before is not None else 0))
            to.append((name, n))
        replaced.append(NodeReplacement(host, tuple(to)))
    if unplaced:
        return _no_room(topology, levels, assigned, unplaced, confine)
    ordered = tuple(sorted(kept.values(), key=lambda d: d.values))
    return ReplacementSuccess(ordered, tuple(replaced))


def _no_room(topology: FlavorTopology, levels: Sequence[str], assigned: Sequence[AssignedDomain],
             unplaced: Sequence[str], confine: int) -> ReplacementFailure:
    """The failure: which failed hosts found no room, with how many pods, inside which domain."""
    counts = {d.values[-1]: d.count for d in assigned}
    where = "in the flavor's topology"
    if confine >= 0:
        first = next(d for d in assigned if d.values[-1] == unplaced[0])
        where = f"in {levels[confine]}={first.values[confine]}"
    named = ", ".join(f"{host} ({counts[host]} pod{'' if counts[host] == 1 else 's'})" for host in sorted(unplaced))
    return ReplacementFailure(c.REASON_NODE_FAILURES,
                              f"Workload was evicted as there was no replacement for unhealthy node(s): "
                              f"{', '.join(sorted(unplaced))}; no healthy node {where} has room for the "
                              f"pods of {named}", tuple(sorted(unplaced)))
