"""The assignment algorithm (DESIGN.md §3): place a workload's pod sets on a flavor's topology.

Called by the admission cycle once per (workload, topology flavor). Phases, per pod set in order:
node fits -> domain counts -> choose domains at the start level (BestFit / spread / least-free) ->
descend level by level -> spread over nodes -> slices. Each pod set sees what the earlier ones took;
any failure returns a value and nothing is kept (the Usage is never mutated).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.api.quantity import Resources
from controller.core.topology.candidacy import (
    CandidateMask,
    Signature,
    reason_sort_key,
    resource_reason,
)
from controller.core.topology.outcome import (
    AssignmentFailure,
    AssignmentOutcome,
    AssignmentSuccess,
    Placement,
    Slice,
    TopologyAssignment,
)
from controller.core.topology.request import PodSetRequest
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import MILLI_CAP, Usage

Int64Array = npt.NDArray[np.int64]

FIT_CAP = 1 << 20
"""Per-node pod counts are capped here so domain sums (float64 bincount) stay exact below 2^53."""


@dataclass(frozen=True, slots=True)
class _Chosen:
    """Domains picked at `level` (ids) and how many pods each takes."""

    level: int
    ids: Int64Array
    takes: Int64Array

    @classmethod
    def one(cls, level: int, domain: int, n: int) -> _Chosen:
        """A single domain taking all `n` pods."""
        return cls(level, np.asarray([domain], dtype=np.int64), np.asarray([n], dtype=np.int64))


def assign(topology: FlavorTopology, usage: Usage, podsets: Sequence[PodSetRequest]) -> AssignmentOutcome:
    """Place every pod set (in order) or none; see the module docstring. Does not mutate `usage`."""
    for ps in podsets:
        missing = _missing_level(topology, ps)
        if missing is not None:
            return missing
    resources = sorted({r for ps in podsets for r, m in ps.requests.items() if m > 0})
    rows = topology.rows_in(usage.registry)
    # free[slot, j]: what is left of resources[j] on that node; shrinks as pod sets are placed.
    free = topology.allocatable(resources) - usage.used_matrix(rows, resources)
    assignments: list[TopologyAssignment] = []
    pods: dict[str, dict[str, int]] = {}
    totals: dict[str, Resources] = {}
    for ps in podsets:
        placed = _place_podset(topology, free, resources, ps)
        if isinstance(placed, AssignmentFailure):
            return placed
        per_slot, assignment = placed
        assignments.append(assignment)
        free -= per_slot[:, None] * _request_vector(ps.requests, resources)[None, :]
        _record(topology, ps, per_slot, pods.setdefault(ps.name, {}), totals)
    return AssignmentSuccess(tuple(assignments), Placement(pods, totals))


def _record(topology: FlavorTopology, ps: PodSetRequest, per_slot: Int64Array,
            on_nodes: dict[str, int], totals: dict[str, Resources]) -> None:
    """Add one placed pod set to the workload's Placement: pods per node and exact requests per node."""
    for slot in np.nonzero(per_slot)[0].tolist():
        view = topology.view(slot)
        assert view is not None  # only candidate (occupied) slots get pods
        n = int(per_slot[slot])
        on_nodes[view.name] = on_nodes.get(view.name, 0) + n
        vec = totals.setdefault(view.name, {})
        for r, m in ps.requests.items():
            if m > 0:
                vec[r] = vec.get(r, 0) + m * n


def _missing_level(topology: FlavorTopology, ps: PodSetRequest) -> AssignmentFailure | None:
    """A requested level the flavor's topology lacks rejects the flavor (the next one may fit)."""
    level = ps.topology.level
    if ps.topology.mode == "unconstrained" or level is None or level in topology.levels:
        return None
    have = ", ".join(f'"{lv}"' for lv in topology.levels)
    return AssignmentFailure(
        reason=c.REASON_TOPOLOGY_LEVEL_MISSING,
        message=f'topology "{topology.name}" has no level "{level}"; its levels: {have}',
        podset=ps.name, count=ps.count, level=level, total_nodes=topology.node_count)


def _place_podset(topology: FlavorTopology, free: Int64Array, resources: Sequence[str],
                  ps: PodSetRequest) -> tuple[Int64Array, TopologyAssignment] | AssignmentFailure:
    """One pod set: per-slot pod counts and its TopologyAssignment, or why it does not fit."""
    lowest = len(topology.levels) - 1
    if ps.count <= 0:
        return np.zeros(topology.slots, dtype=np.int64), TopologyAssignment(topology.levels, ())
    mask = topology.candidates(Signature.of(ps.node_selector, ps.affinity_terms, ps.tolerations))
    fit = _node_fits(free, resources, ps.requests, mask)
    counts = _domain_counts(topology, fit)
    chosen = _choose_start(topology, counts, ps)
    if isinstance(chosen, AssignmentFailure):
        return _with_exclusions(chosen, topology, free, resources, ps, mask, fit)
    lowest_chosen = _descend(topology, counts, chosen, ps.count) if chosen.level < lowest else chosen
    per_slot = _spread_over_nodes(topology, fit, lowest_chosen)
    return per_slot, _slices(topology, lowest_chosen)


def _request_vector(requests: Mapping[str, int], resources: Sequence[str]) -> Int64Array:
    """Per-pod requests as int64. Amounts beyond MILLI_CAP (where allocatable is clamped) become
    MILLI_CAP + 1, which no node can hold: such a request never over-commits, it just never fits."""
    return np.asarray([min(max(requests.get(r, 0), 0), MILLI_CAP + 1) for r in resources], dtype=np.int64)


def _node_fits(free: Int64Array, resources: Sequence[str], requests: Mapping[str, int],
               mask: CandidateMask) -> Int64Array:
    """fit[slot]: pods of this shape the node holds = min over requested resources of
    floor(free / request); 0 for non-candidates and overcommitted nodes; at most FIT_CAP."""
    fit = np.full(free.shape[0], FIT_CAP, dtype=np.int64)
    for j, want in enumerate(_request_vector(requests, resources).tolist()):
        if want > 0:
            np.minimum(fit, free[:, j] // want, out=fit)
    np.clip(fit, 0, FIT_CAP, out=fit)
    fit[~mask.mask[: free.shape[0]]] = 0
    return fit


def _domain_counts(topology: FlavorTopology, fit: Int64Array) -> list[Int64Array]:
    """counts[level][domain]: pods the domain holds, summed from its nodes' fits (never divided)."""
    lowest = len(topology.levels) - 1
    counts: list[Int64Array] = [np.zeros(0, dtype=np.int64)] * len(topology.levels)
    slots = np.nonzero(fit)[0]
    domain = topology.domain_of(lowest)[slots]
    counts[lowest] = np.bincount(domain, weights=fit[slots],
                                 minlength=len(topology.domains[lowest].keys)).astype(np.int64)
    for level in range(lowest - 1, -1, -1):
        counts[level] = np.bincount(topology.domains[level + 1].parents(), weights=counts[level + 1],
                                    minlength=len(topology.domains[level].keys)).astype(np.int64)
    return counts


def _choose_start(topology: FlavorTopology, counts: list[Int64Array],
                  ps: PodSetRequest) -> _Chosen | AssignmentFailure:
    """The first choice: required -> BestFit at its level; preferred -> BestFit at its level, then
    each wider level, then the fewest top domains; unconstrained -> at the lowest level, the least
    free domain that holds every pod, else least-free first over several (Kueue's LeastFreeCapacity:
    a pod set that fits one host is not scattered over the emptiest corners of the cluster)."""
    n, lowest = ps.count, len(topology.levels) - 1
    start = lowest if ps.topology.level is None else topology.levels.index(ps.topology.level)
    if ps.topology.mode == "unconstrained":
        rank = topology.domains[lowest].rank()
        one = _best_fit(_all(counts[lowest]), counts[lowest], rank, n)
        if one is not None:
            return _Chosen.one(lowest, one, n)
        picked = _least_free(_all(counts[lowest]), counts[lowest], rank, n)
        if picked is None:
            return _unfit(topology, counts, ps, 0, in_total=True)
        return _Chosen(lowest, *picked)
    wider = range(start, -1, -1) if ps.topology.mode == "preferred" else range(start, start + 1)
    for level in wider:
        best = _best_fit(_all(counts[level]), counts[level], topology.domains[level].rank(), n)
        if best is not None:
            return _Chosen.one(level, best, n)
    if ps.topology.mode == "required":
        return _unfit(topology, counts, ps, start, in_total=False)
    spread = _fewest(_all(counts[0]), counts[0], topology.domains[0].rank(), n)
    if spread is None:
        return _unfit(topology, counts, ps, 0, in_total=True)
    return _Chosen(0, *spread)


def _descend(topology: FlavorTopology, counts: list[Int64Array], chosen: _Chosen, n: int) -> _Chosen:
    """Level by level down to the lowest: pool the children of the chosen domains and use the fewest
    of them (most free first, tightest for the last). The pool always holds `n`: its parents did."""
    for level in range(chosen.level + 1, len(topology.levels)):
        children = np.nonzero(np.isin(topology.domains[level].parents(), chosen.ids))[0].astype(np.int64)
        picked = _fewest(children, counts[level], topology.domains[level].rank(), n)
        assert picked is not None, "children of chosen domains hold fewer pods than their parents"
        chosen = _Chosen(level, *picked)
    return chosen


def _spread_over_nodes(topology: FlavorTopology, fit: Int64Array, chosen: _Chosen) -> Int64Array:
    """per_slot[slot]: pods per node. Each lowest domain's take goes to its fewest nodes (most free
    first, tightest for the last); with hostname as the lowest level that is the one node."""
    per_slot = np.zeros(fit.shape[0], dtype=np.int64)
    domain = topology.domain_of(len(topology.levels) - 1)
    slots = np.nonzero(fit)[0]
    slots = slots[np.isin(domain[slots], chosen.ids)]
    nodes_in = np.bincount(domain[slots], minlength=len(topology.domains[-1].keys))
    take_of = dict(zip(chosen.ids.tolist(), chosen.takes.tolist(), strict=True))
    single = slots[nodes_in[domain[slots]] == 1]
    per_slot[single] = [take_of[d] for d in domain[single].tolist()]
    names = topology.name_rank()
    for d in chosen.ids[nodes_in[chosen.ids] > 1].tolist():
        picked = _fewest(slots[domain[slots] == d], fit, names, take_of[d])
        assert picked is not None, "a domain's nodes hold fewer pods than the domain"
        per_slot[picked[0]] = picked[1]
    return per_slot


def _slices(topology: FlavorTopology, chosen: _Chosen) -> TopologyAssignment:
    """One slice per chosen lowest domain, sorted by label values."""
    keys = topology.domains[-1].keys
    pairs = sorted((keys[d], t) for d, t in zip(chosen.ids.tolist(), chosen.takes.tolist(), strict=True)
                   if t > 0)
    return TopologyAssignment(topology.levels, tuple(
        Slice(dict(zip(topology.levels, key, strict=True)), count) for key, count in pairs))


# -- orderings (DESIGN.md §3) -------------------------------------------------------------------

def _all(counts: Int64Array) -> Int64Array:
    return np.arange(counts.shape[0], dtype=np.int64)


def _best_fit(ids: Int64Array, counts: Int64Array, rank: Int64Array, n: int) -> int | None:
    """BestFit: the domain with the smallest count that still holds `n`, ties by label values."""
    fitting = ids[counts[ids] >= n]
    if fitting.shape[0] == 0:
        return None
    return int(fitting[np.lexsort((rank[fitting], counts[fitting]))[0]])


def _fewest(ids: Int64Array, counts: Int64Array, rank: Int64Array,
            n: int) -> tuple[Int64Array, Int64Array] | None:
    """The fewest domains holding `n`: most free first (count desc, label values asc) while none
    holds what is left, then the tightest one that does. None when all of them hold fewer than `n`."""
    ids = ids[counts[ids] > 0]
    order = ids[np.lexsort((rank[ids], -counts[ids]))]
    cumulative = np.cumsum(counts[order])
    if cumulative.shape[0] == 0 or int(cumulative[-1]) < n:
        return None
    k = int(np.searchsorted(cumulative, n))  # first prefix that holds n
    left = n - (int(cumulative[k - 1]) if k else 0)
    last = _best_fit(order[k:], counts, rank, left)
    assert last is not None  # order[k] itself holds `left`
    return (np.append(order[:k], last).astype(np.int64),
            np.append(counts[order[:k]], left).astype(np.int64))


def _least_free(ids: Int64Array, counts: Int64Array, rank: Int64Array,
                n: int) -> tuple[Int64Array, Int64Array] | None:
    """Least free first (count asc, label values asc, domains with room only); the last one takes
    only the remainder. None when all of them hold fewer than `n`."""
    ids = ids[counts[ids] > 0]
    order = ids[np.lexsort((rank[ids], counts[ids]))]
    cumulative = np.cumsum(counts[order])
    if cumulative.shape[0] == 0 or int(cumulative[-1]) < n:
        return None
    k = int(np.searchsorted(cumulative, n))
    takes = counts[order[: k + 1]].copy()
    takes[k] = n - (int(cumulative[k - 1]) if k else 0)
    return order[: k + 1].astype(np.int64), takes.astype(np.int64)


# -- failure ------------------------------------------------------------------------------------

def _path(topology: FlavorTopology, level: int, domain: int) -> str:
    return "/".join(topology.domains[level].keys[domain])


def _unfit(topology: FlavorTopology, counts: list[Int64Array], ps: PodSetRequest, level: int,
           in_total: bool) -> AssignmentFailure:
    """The failure value without the exclusion tally (added by `_with_exclusions`)."""
    at = counts[level]
    rank = topology.domains[level].rank()
    room = np.nonzero(at)[0]
    order = room[np.lexsort((rank[room], -at[room]))]
    fits = tuple((_path(topology, level, int(d)), int(at[d])) for d in order)
    fit = int(at.sum()) if in_total else (fits[0][1] if fits else 0)
    return AssignmentFailure(
        reason=c.REASON_POD_SET_TOPOLOGY_UNFIT, message="", podset=ps.name, count=ps.count, fit=fit,
        level=topology.levels[level], best=fits[0][0] if fits else None, domain_fits=fits,
        total_nodes=topology.node_count)


def _with_exclusions(failure: AssignmentFailure, topology: FlavorTopology, free: Int64Array,
                     resources: Sequence[str], ps: PodSetRequest, mask: CandidateMask,
                     fit: Int64Array) -> AssignmentFailure:
    """Add the tally of excluded nodes (filters, then the first resource short on a candidate) and
    write the message."""
    tally = mask.tally()
    requested = [j for j, r in enumerate(resources) if ps.requests.get(r, 0) > 0]
    short_nodes = np.nonzero(mask.mask[: free.shape[0]] & (fit == 0))[0]
    if requested and short_nodes.shape[0]:
        want = _request_vector(ps.requests, resources)[requested]
        short = free[short_nodes][:, np.asarray(requested, dtype=np.int64)] < want[None, :]
        first = np.argmax(short, axis=1)
        for j, n in enumerate(np.bincount(first, minlength=len(requested)).tolist()):
            if n:
                tally[resource_reason(resources[requested[j]])] += n
    excluded = tuple(sorted(tally.items(), key=lambda kv: reason_sort_key(kv[0])))
    # Spreading (preferred, unconstrained) failed on the total; required names its best domain.
    spread = ps.topology.mode != "required"
    where = "in total" if spread else f'at level "{failure.level}"'
    best = f" (best: {failure.best})" if failure.best is not None and not spread else ""
    listed = ", ".join(f"{reason}: {n}" for reason, n in excluded) or "none"
    message = (f'topology "{topology.name}" allows to fit only {failure.fit} out of {ps.count} pod(s) '
               f"{where}{best}. Total nodes: {failure.total_nodes}; excluded: {listed}")
    return replace(failure, message=message, excluded=excluded)

