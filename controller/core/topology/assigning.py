"""The assignment algorithm (DESIGN.md §3): place a workload's pod sets on a flavor's topology.

Called by the admission cycle once per (workload, topology flavor). Phases, per pod set in order:
slice plan -> node fits -> domain counts (in pods and in the plan's units) -> choose domains at the
start level (BestFit / balanced / spread / least-free) -> descend level by level -> spread over
nodes -> the remainder of an uneven slice split -> slices. Pod sets sharing a pod-set group are
placed together in one domain (`_place_group`). Each pod set sees what the earlier ones took; any
failure returns a value and nothing is kept (the Usage is never mutated).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.api.quantity import Resources
from controller.core.topology.balancing import balanced_split
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
from controller.core.topology.slicing import SlicePlan, children_index, layer_fits, plan_of, unit_counts
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import MILLI_CAP, Usage

Int64Array = npt.NDArray[np.int64]

FIT_CAP = 1 << 20
"""Per-node pod counts are capped here so domain sums (float64 bincount) stay exact below 2^53."""


@dataclass(frozen=True, slots=True)
class _Chosen:
    """Domains picked at `level` (ids) and how many pods each takes; `per_parent`: lower levels
    split each domain's pods among its own children (slices below their level, balanced
    placement) instead of pooling the children of all of them."""

    level: int
    ids: Int64Array
    takes: Int64Array
    per_parent: bool = False

    @classmethod
    def one(cls, level: int, domain: int, n: int) -> _Chosen:
        """A single domain taking all `n` pods."""
        return cls(level, np.asarray([domain], dtype=np.int64), np.asarray([n], dtype=np.int64))


_Placed = tuple[Int64Array, TopologyAssignment]
"""One placed pod set: pods per slot and its TopologyAssignment."""


def assign(topology: FlavorTopology, usage: Usage, podsets: Sequence[PodSetRequest], *,
           balanced: bool = False) -> AssignmentOutcome:
    """Place every pod set (in order; a pod-set group where its first member is) or none; see the
    module docstring. `balanced`: Kueue's TASBalancedPlacement gate. Does not mutate `usage`."""
    for ps in podsets:
        checked = plan_of(topology, ps)
        if isinstance(checked, AssignmentFailure):
            return checked
    resources = sorted({r for ps in podsets for r, m in ps.requests.items() if m > 0})
    rows = topology.rows_in(usage.registry)
    # free[slot, j]: what is left of resources[j] on that node; shrinks as pod sets are placed.
    free = topology.allocatable(resources) - usage.used_matrix(rows, resources)
    placed: dict[int, _Placed] = {}
    for i, ps in enumerate(podsets):
        if i in placed:
            continue
        group = ps.topology.group
        members = [j for j, other in enumerate(podsets) if group is not None and other.topology.group == group]
        if len(members) > 1:
            result = _place_group(topology, free, resources, [podsets[j] for j in members])
        else:
            members = [i]
            one = _place_podset(topology, free, resources, ps, balanced)
            result = one if isinstance(one, AssignmentFailure) else [one]
        if isinstance(result, AssignmentFailure):
            return result
        for j, (per_slot, assignment) in zip(members, result, strict=True):
            placed[j] = (per_slot, assignment)
            free -= per_slot[:, None] * _request_vector(podsets[j].requests, resources)[None, :]
    pods: dict[str, dict[str, int]] = {}
    totals: dict[str, Resources] = {}
    for i, ps in enumerate(podsets):
        _record(topology, ps, placed[i][0], pods.setdefault(ps.name, {}), totals)
    return AssignmentSuccess(tuple(placed[i][1] for i in range(len(podsets))), Placement(pods, totals))


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


def _plain(topology: FlavorTopology, start: int) -> SlicePlan:
    """The plan of a pod set without slices: every pod its own slice at the lowest level."""
    return SlicePlan(start, len(topology.levels) - 1, 1, (1,) * len(topology.levels))


def _place_podset(topology: FlavorTopology, free: Int64Array, resources: Sequence[str],
                  ps: PodSetRequest, balanced: bool) -> _Placed | AssignmentFailure:
    """One pod set: per-slot pod counts and its TopologyAssignment, or why it does not fit. A pod
    set smaller than one slice is placed as plain pods (Kueue's validation refuses it on Jobs)."""
    if ps.count <= 0:
        return np.zeros(topology.slots, dtype=np.int64), TopologyAssignment(topology.levels, ())
    plan = plan_of(topology, ps)
    assert not isinstance(plan, AssignmentFailure)  # checked by `assign`
    if ps.count < plan.size:
        plan = _plain(topology, plan.start)
    mask = topology.candidates(Signature.of(ps.node_selector, ps.affinity_terms, ps.tolerations))
    fit = _node_fits(free, resources, ps.requests, mask)
    pods = _domain_counts(topology, fit)
    units = unit_counts(topology, pods, plan)
    chosen = _choose_start(topology, pods, units, plan, ps, balanced)
    if isinstance(chosen, AssignmentFailure):
        return _with_exclusions(chosen, topology, free, resources, ps, mask, fit)
    lowest = _descend(topology, units, plan, chosen)
    per_slot = _spread_over_nodes(topology, fit, lowest)
    remainder = ps.count - int(chosen.takes.sum())
    if remainder == 0:
        return per_slot, _slices(topology, lowest)
    extra = _place_remainder(topology, fit - per_slot, chosen, remainder)
    assert extra is not None, "the start domains were chosen holding every pod"
    return per_slot + extra[0], _slices(topology, lowest, extra[1])


def _place_remainder(topology: FlavorTopology, left: Int64Array, start: _Chosen,
                     n: int) -> tuple[Int64Array, _Chosen] | None:
    """The pods of an uneven slice split (count % slice size) as plain pods in what the slices left:
    inside the domains chosen for the slices (the pod set's domain), else anywhere in the topology
    (only a preferred or unconstrained pod set spread over several domains gets there)."""
    pods = _domain_counts(topology, left)
    level = start.level
    picked = _fewest(start.ids, pods[level], topology.domains[level].rank(), n)
    if picked is None:
        level = 0
        picked = _fewest(_all(pods[0]), pods[0], topology.domains[0].rank(), n)
        if picked is None:
            return None
    lowest = _descend(topology, pods, _plain(topology, level), _Chosen(level, *picked))
    return _spread_over_nodes(topology, left, lowest), lowest


def _place_group(topology: FlavorTopology, free: Int64Array, resources: Sequence[str],
                 members: Sequence[PodSetRequest]) -> list[_Placed] | AssignmentFailure:
    """A pod-set group: every member in one domain of the group's level (required; preferred also
    tries each wider level). Candidates are the domains where each member alone fits, tightest
    first (smallest summed pod counts, then label values); in each, the members are placed in
    order, each in what the earlier ones left, and the first domain taking them all wins."""
    lead = members[0]
    lowest = len(topology.levels) - 1
    start = lowest if lead.topology.level is None else topology.levels.index(lead.topology.level)
    wider = range(start, -1, -1) if lead.topology.mode == "preferred" else range(start, start + 1)
    masks = [topology.candidates(Signature.of(m.node_selector, m.affinity_terms, m.tolerations))
             for m in members]
    counts = [_domain_counts(topology, _node_fits(free, resources, m.requests, mask))
              for m, mask in zip(members, masks, strict=True)]
    for level in wider:
        each = np.stack([c[level] for c in counts])
        need = np.asarray([m.count for m in members], dtype=np.int64)[:, None]
        candidates = np.nonzero((each >= need).all(axis=0))[0]
        tightness = each[:, candidates].sum(axis=0)
        for d in candidates[np.lexsort((topology.domains[level].rank()[candidates], tightness))].tolist():
            inside = _place_group_in(topology, free, resources, members, level, d)
            if inside is not None:
                return inside
    return _group_unfit(topology, free, resources, members, masks, counts, start)


def _place_group_in(topology: FlavorTopology, free: Int64Array, resources: Sequence[str],
                    members: Sequence[PodSetRequest], level: int, domain: int) -> list[_Placed] | None:
    """The members one after another inside `domain` of `level`, or None when one no longer fits."""
    left = free.copy()
    out: list[_Placed] = []
    for m in members:
        if m.count <= 0:
            out.append((np.zeros(topology.slots, dtype=np.int64), TopologyAssignment(topology.levels, ())))
            continue
        mask = topology.candidates(Signature.of(m.node_selector, m.affinity_terms, m.tolerations))
        fit = _node_fits(left, resources, m.requests, mask)
        pods = _domain_counts(topology, fit)
        if pods[level][domain] < m.count:
            return None
        lowest = _descend(topology, pods, _plain(topology, level), _Chosen.one(level, domain, m.count))
        per_slot = _spread_over_nodes(topology, fit, lowest)
        left -= per_slot[:, None] * _request_vector(m.requests, resources)[None, :]
        out.append((per_slot, _slices(topology, lowest)))
    return out


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


def _choose_start(topology: FlavorTopology, pods: list[Int64Array], units: list[Int64Array],
                  plan: SlicePlan, ps: PodSetRequest, balanced: bool) -> _Chosen | AssignmentFailure:
    """The first choice, in slices of `plan.size` pods (a domain must also hold all the pods, for
    the remainder): required -> BestFit at its level; preferred -> balanced (gate on), else BestFit
    at its level, then each wider level, then the fewest top domains; unconstrained -> at its start
    level, the least free domain that holds every slice, else least-free first over several
    (Kueue's LeastFreeCapacity: a pod set that fits one host is not scattered)."""
    n, size = ps.count, plan.size
    q, start = n // size, plan.start
    if ps.topology.mode == "unconstrained":
        rank = topology.domains[start].rank()
        ids = _all(units[start])
        one = _best_fit(ids[pods[start] >= n], units[start], rank, q)
        if one is not None:
            return _Chosen.one(start, one, q * size)
        picked = _least_free(ids, units[start], rank, q)
        if picked is None or int(pods[start].sum()) < n:
            return _unfit(topology, pods, units, plan, ps, 0, in_total=True)
        return _Chosen(start, picked[0], picked[1] * size)
    if balanced and ps.topology.mode == "preferred" and start <= plan.slice_level:
        split = balanced_split(topology, units, pods, start, q, n)
        if split is not None:
            return _Chosen(start, split[0], split[1] * size, per_parent=True)
    wider = range(start, -1, -1) if ps.topology.mode == "preferred" else range(start, start + 1)
    for level in wider:
        ids = _all(units[level])
        best = _best_fit(ids[pods[level] >= n], units[level], topology.domains[level].rank(), q)
        if best is not None:
            return _Chosen.one(level, best, q * size)
    if ps.topology.mode == "required":
        return _unfit(topology, pods, units, plan, ps, start, in_total=False)
    spread = _fewest(_all(units[0]), units[0], topology.domains[0].rank(), q)
    if spread is None or int(pods[0].sum()) < n:
        return _unfit(topology, pods, units, plan, ps, 0, in_total=True)
    return _Chosen(0, spread[0], spread[1] * size)


def _descend(topology: FlavorTopology, units: list[Int64Array], plan: SlicePlan, chosen: _Chosen) -> _Chosen:
    """Level by level down to the lowest. Down to the slice level (unless `per_parent`): pool the
    children of the chosen domains and use the fewest of them (most free first, tightest for the
    last). Below it: each domain's pods go to the fewest of its own children, in the level's units.
    The children always hold what their parents took: the parents' counts are their sums."""
    for level in range(chosen.level + 1, len(topology.levels)):
        unit, rank = plan.unit(level), topology.domains[level].rank()
        if level <= plan.slice_level and not chosen.per_parent:
            children = np.nonzero(np.isin(topology.domains[level].parents(), chosen.ids))[0].astype(np.int64)
            picked = _fewest(children, units[level], rank, int(chosen.takes.sum()) // unit)
            assert picked is not None, "children of chosen domains hold fewer slices than their parents"
            chosen = _Chosen(level, picked[0], picked[1] * unit)
            continue
        order, starts = children_index(topology, level)
        ids: list[Int64Array] = []
        takes: list[Int64Array] = []
        for d, p in zip(chosen.ids.tolist(), chosen.takes.tolist(), strict=True):
            picked = _fewest(order[starts[d]:starts[d + 1]], units[level], rank, p // unit) if p else None
            assert picked is not None or not p, "a domain's children hold fewer units than the domain"
            if picked is not None:
                ids.append(picked[0])
                takes.append(picked[1] * unit)
        chosen = _Chosen(level, np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, dtype=np.int64),
                         np.concatenate(takes).astype(np.int64) if takes else np.zeros(0, dtype=np.int64),
                         per_parent=True)
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


def _slices(topology: FlavorTopology, *chosen: _Chosen) -> TopologyAssignment:
    """One slice per chosen lowest domain (takes of several choices added up), sorted by label values."""
    keys = topology.domains[-1].keys
    takes: dict[int, int] = {}
    for one in chosen:
        for d, t in zip(one.ids.tolist(), one.takes.tolist(), strict=True):
            takes[d] = takes.get(d, 0) + t
    pairs = sorted((keys[d], t) for d, t in takes.items() if t > 0)
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


def _unfit(topology: FlavorTopology, pods: list[Int64Array], units: list[Int64Array], plan: SlicePlan,
           ps: PodSetRequest, level: int, in_total: bool) -> AssignmentFailure:
    """The failure value, its message without the exclusion tally (added by `_with_exclusions`).
    Counted in slices while too few slices fit; otherwise in pods (the remainder of an uneven split
    was short), over the domains that hold the slices."""
    q = ps.count // plan.size
    enough = int(units[level].sum()) >= q if in_total else bool((units[level] >= q).any())
    if plan.size > 1 and not enough:
        at, unit, need = units[level], "slice", q
    elif plan.size > 1 and not in_total:
        at, unit, need = np.where(units[level] >= q, pods[level], 0), "pod", ps.count
    else:
        at, unit, need = pods[level], "pod", ps.count
    rank = topology.domains[level].rank()
    room = np.nonzero(at)[0]
    order = room[np.lexsort((rank[room], -at[room]))]
    fits = tuple((_path(topology, level, int(d)), int(at[d])) for d in order)
    fit = int(at.sum()) if in_total else (fits[0][1] if fits else 0)
    where = "in total" if in_total else f'at level "{topology.levels[level]}"'
    best = f" (best: {fits[0][0]})" if fits and not in_total else ""
    head = (f'topology "{topology.name}" allows to fit only {fit} out of {need} {unit}(s) {where}{best}')
    if len(ps.topology.slices) > 1:
        best_units = units[level]
        top = int(np.lexsort((rank, -best_units))[0]) if best_units.shape[0] else 0
        layers = layer_fits(topology, pods, plan, ps, level, top) if best_units.shape[0] else []
        head = f'topology "{topology.name}" doesn\'t allow to fit' + "".join(
            f"; {fitting}/{needed} slice(s) fit on level {name}" for name, fitting, needed in layers)
    return AssignmentFailure(
        reason=c.REASON_POD_SET_TOPOLOGY_UNFIT, message=head, podset=ps.name, count=need, fit=fit,
        unit=unit, level=topology.levels[level], best=fits[0][0] if fits else None, domain_fits=fits,
        total_nodes=topology.node_count)


def _group_unfit(topology: FlavorTopology, free: Int64Array, resources: Sequence[str],
                 members: Sequence[PodSetRequest], masks: Sequence[CandidateMask],
                 counts: Sequence[list[Int64Array]], level: int) -> AssignmentFailure:
    """No domain takes the whole group: at its level, a domain's fit is the most pods of any one
    member's shape it holds (members share the capacity, so their fits do not add up), at most the
    group's count; the exclusion tally is the largest member's."""
    need = sum(m.count for m in members)
    at = np.minimum(np.stack([c[level] for c in counts]).max(axis=0), need)
    rank = topology.domains[level].rank()
    room = np.nonzero(at)[0]
    order = room[np.lexsort((rank[room], -at[room]))]
    fits = tuple((_path(topology, level, int(d)), int(at[d])) for d in order)
    best = f" (best: {fits[0][0]})" if fits else ""
    group = members[0].topology.group
    head = (f'topology "{topology.name}" allows to fit only {fits[0][1] if fits else 0} out of {need} pod(s) '
            f'of pod-set group "{group}" at level "{topology.levels[level]}"{best}')
    largest = max(range(len(members)), key=lambda i: members[i].count)
    failure = AssignmentFailure(
        reason=c.REASON_POD_SET_TOPOLOGY_UNFIT, message=head, podset=members[largest].name, count=need,
        fit=fits[0][1] if fits else 0, level=topology.levels[level], best=fits[0][0] if fits else None,
        domain_fits=fits, total_nodes=topology.node_count)
    fit = _node_fits(free, resources, members[largest].requests, masks[largest])
    return _with_exclusions(failure, topology, free, resources, members[largest], masks[largest], fit)


def _with_exclusions(failure: AssignmentFailure, topology: FlavorTopology, free: Int64Array,
                     resources: Sequence[str], ps: PodSetRequest, mask: CandidateMask,
                     fit: Int64Array) -> AssignmentFailure:
    """Add the tally of excluded nodes (filters, then the first resource short on a candidate) to
    the failure and its message."""
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
    listed = ", ".join(f"{reason}: {n}" for reason, n in excluded) or "none"
    message = f"{failure.message}. Total nodes: {failure.total_nodes}; excluded: {listed}"
    return replace(failure, message=message, excluded=excluded)
