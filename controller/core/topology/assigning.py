"""The assignment algorithm: place a workload's pod sets on a flavor's topology.

Called by the admission cycle once per (workload, topology flavor). Phases, per pod set in order:
slice plan -> node fits -> domain counts (in pods and in the plan's units) -> choose domains at the
start level (BestFit / balanced / spread / least-free) -> descend level by level -> spread over
nodes -> the remainder of an uneven slice split -> slices. Pod sets sharing a pod-set group are
placed together in one domain (`_place_group`). Each pod set sees what the earlier ones took; any
failure returns a value and nothing is kept (the Usage is never mutated). A pod set placed whole on
one node is kept with its shape's counts and placed there again without a search while nothing
but that node changed (`_recall`): a backlog of one shape is admitted node by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.api.quantity import Resources, format_milli
from controller.core.topology.balancing import balanced_split
from controller.core.topology.candidacy import (
    CandidateMask,
    Signature,
    reason_sort_key,
    resource_reason,
)
from controller.core.topology.counting import ShapeCounts, domain_sums, fits_of, request_vector, shape_counts
from controller.core.topology.outcome import (
    AssignmentFailure,
    AssignmentOutcome,
    AssignmentSuccess,
    Placement,
    Slice,
    TopologyAssignment,
)
from controller.core.topology.request import PodSetRequest
from controller.core.topology.slicing import SlicePlan, layer_fits, plan_of, unit_counts
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import Usage

Int64Array = npt.NDArray[np.int64]
MAX_KEPT = 16
"""Placements kept per shape's counts (`_keep`): one per pod count, mode and level in use."""


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


PerSlot = dict[int, int]
"""Pods per slot of one placed pod set (only the slots that got pods)."""
_Placed = tuple[PerSlot, TopologyAssignment]
"""One placed pod set: pods per slot and its TopologyAssignment."""


class _Workspace:
    """What one `assign` call sees: the Usage, plus what its earlier pod sets took (`taken[slot]`,
    milli per resource). Each pod set reads its shape's kept counts (`counting`), patched for the
    few slots earlier pod sets of the call took."""

    def __init__(self, topology: FlavorTopology, usage: Usage) -> None:
        self.topology, self.usage = topology, usage
        self.taken: dict[int, dict[str, int]] = {}

    def counts(self, ps: PodSetRequest) -> ShapeCounts:
        """The kept counts of the pod set's shape, brought up to date for the Usage."""
        return shape_counts(self.topology, self.usage, ps.requests,
                            Signature.of(ps.node_selector, ps.affinity_terms, ps.tolerations))

    def view(self, ps: PodSetRequest,
             entry: ShapeCounts | None = None) -> tuple[Int64Array, list[Int64Array], CandidateMask]:
        """(fit per slot, pods per domain per level, candidacy mask) for this pod set now (from
        `entry`, its kept counts, when the caller has them). The arrays are shared with the kept
        counts unless patched here: never mutate them."""
        if entry is None:
            entry = self.counts(ps)
        if not self.taken:
            return entry.fit, entry.counts, entry.mask
        slots = np.fromiter(self.taken, dtype=np.int64, count=len(self.taken))
        fit = entry.fit.copy()
        counts = [c.copy() for c in entry.counts]
        new = fits_of(self.free_at(slots, entry.resources), entry.want, entry.mask.mask[slots])
        delta = new - fit[slots]
        fit[slots] = new
        for level in range(len(self.topology.levels)):
            np.add.at(counts[level], self.topology.domain_of(level)[slots], delta)
        return fit, counts, entry.mask

    def free_at(self, slots: Int64Array, resources: Sequence[str]) -> Int64Array:
        """[len(slots) x len(resources)] free milli: allocatable - used - taken in this call."""
        rows = self.topology.rows_in(self.usage.registry)[slots]
        free = self.topology.allocatable_at(slots, resources) - self.usage.used_matrix(rows, resources)
        if self.taken:
            taken = np.fromiter(self.taken, dtype=np.int64, count=len(self.taken))
            for i in np.nonzero(np.isin(slots, taken))[0].tolist():
                took = self.taken[int(slots[i])]
                free[i] -= np.asarray([took.get(r, 0) for r in resources], dtype=np.int64)
        return free

    def take(self, ps: PodSetRequest, per_slot: PerSlot) -> None:
        for slot, n in per_slot.items():
            took = self.taken.setdefault(slot, {})
            for r, m in ps.requests.items():
                if m > 0:
                    took[r] = took.get(r, 0) + m * n


def assign(topology: FlavorTopology, usage: Usage, podsets: Sequence[PodSetRequest], *,
           balanced: bool = False) -> AssignmentOutcome:
    """Place every pod set (in order; a pod-set group where its first member is) or none; see the
    module docstring. `balanced`: Kueue's TASBalancedPlacement gate. Does not mutate `usage` (the
    per-shape counts kept in the tree are brought up to date, which changes no result)."""
    for ps in podsets:
        checked = plan_of(topology, ps)
        if isinstance(checked, AssignmentFailure):
            return checked
    ws = _Workspace(topology, usage)
    placed: dict[int, _Placed] = {}
    for i, ps in enumerate(podsets):
        if i in placed:
            continue
        group = ps.topology.group
        members = [j for j, other in enumerate(podsets) if group is not None and other.topology.group == group]
        if len(members) > 1:
            result = _place_group(ws, [podsets[j] for j in members])
        else:
            members = [i]
            one = _place_podset(ws, ps, balanced)
            result = one if isinstance(one, AssignmentFailure) else [one]
        if isinstance(result, AssignmentFailure):
            return result
        for j, (per_slot, assignment) in zip(members, result, strict=True):
            placed[j] = (per_slot, assignment)
            if len(placed) < len(podsets):  # later pod sets see what this one took
                ws.take(podsets[j], per_slot)
    pods: dict[str, dict[str, int]] = {}
    totals: dict[str, Resources] = {}
    for i, ps in enumerate(podsets):
        _record(topology, ps, placed[i][0], pods.setdefault(ps.name, {}), totals)
    return AssignmentSuccess(tuple(placed[i][1] for i in range(len(podsets))), Placement(pods, totals))


def _record(topology: FlavorTopology, ps: PodSetRequest, per_slot: PerSlot,
            on_nodes: dict[str, int], totals: dict[str, Resources]) -> None:
    """Add one placed pod set to the workload's Placement: pods per node and exact requests per
    node (in one pass when the nodes are new to both, as for a workload's first pod set: each
    node's requests copied from one vector per pod count)."""
    wanted = [(r, m) for r, m in ps.requests.items() if m > 0]
    slots = sorted(per_slot)
    counts = list(map(per_slot.__getitem__, slots))
    names = topology.names_of(slots)
    if not on_nodes and totals.keys().isdisjoint(names):
        on_nodes.update(zip(names, counts, strict=True))
        vectors = {n: {r: m * n for r, m in wanted} for n in set(counts)}
        totals.update(zip(names, map(dict.copy, map(vectors.__getitem__, counts)), strict=True))
        return
    for name, n in zip(names, counts, strict=True):
        on_nodes[name] = on_nodes.get(name, 0) + n
        vec = totals.setdefault(name, {})
        for r, m in wanted:
            vec[r] = vec.get(r, 0) + m * n


def _plain(topology: FlavorTopology, start: int) -> SlicePlan:
    """The plan of a pod set without slices: every pod its own slice at the lowest level."""
    return SlicePlan(start, len(topology.levels) - 1, 1, (1,) * len(topology.levels))


def _place_podset(ws: _Workspace, ps: PodSetRequest, balanced: bool) -> _Placed | AssignmentFailure:
    """One pod set: pods per slot and its TopologyAssignment, or why it does not fit. A pod set
    smaller than one slice is placed as plain pods (Kueue's validation refuses it on Jobs)."""
    topology = ws.topology
    if ps.count <= 0:
        return {}, TopologyAssignment(topology.levels, ())
    plan = plan_of(topology, ps)
    assert not isinstance(plan, AssignmentFailure)  # checked by `assign`
    if ps.count < plan.size:
        plan = _plain(topology, plan.start)
    entry = ws.counts(ps)
    key = _keepable(ws, ps, plan, balanced)
    if key is not None:
        recalled = _recall(entry, key, ps.count)
        if recalled is not None:
            return recalled
    fit, pods, mask = ws.view(ps, entry)
    units = unit_counts(topology, pods, plan)
    chosen = _choose_start(topology, pods, units, plan, ps, balanced)
    if isinstance(chosen, AssignmentFailure):
        return _with_exclusions(chosen, ws, ps, mask, fit)
    lowest = _descend(topology, units, plan, chosen)
    per_slot = _spread_over_nodes(topology, fit, lowest)
    remainder = ps.count - int(chosen.takes.sum())
    if remainder == 0:
        assignment = _slices(topology, lowest)
        if key is not None and len(per_slot) == 1:
            _keep(entry, key, per_slot, assignment)
        return per_slot, assignment
    left = fit.copy()
    for slot, n in per_slot.items():
        left[slot] -= n
    extra = _place_remainder(topology, left, chosen, remainder)
    assert extra is not None, "the start domains were chosen holding every pod"
    for slot, n in extra[0].items():
        per_slot[slot] = per_slot.get(slot, 0) + n
    return per_slot, _slices(topology, lowest, extra[1])


@dataclass(frozen=True, slots=True)
class _Kept:
    """A pod set placed whole on one node (`slot`, whose fit for the shape was `fit`), as the
    shape's counts stood when `changed` held `seen` slots in `generation`."""

    slot: int
    fit: int
    seen: int
    generation: int
    assignment: TopologyAssignment


_KeptKey = tuple[int, str, SlicePlan]
"""What a kept placement depends on besides the counts: pods, mode and the slice plan."""


def _keepable(ws: _Workspace, ps: PodSetRequest, plan: SlicePlan, balanced: bool) -> _KeptKey | None:
    """The key a placement of this pod set is kept under, or None when it is not kept: only a pod
    set placed on the kept counts themselves (the call's first), in plain pods (no slices), and not
    split by balanced placement. Its choice is then a chain of BestFit picks (the tightest domain
    holding every pod, at each level down to one node), which stays the same while nothing changes
    but that node's own fit, shrinking and still holding the pods (`_recall`)."""
    if ws.taken or plan.size != 1 or plan.layered or (balanced and ps.topology.mode == "preferred"):
        return None
    return ps.count, ps.topology.mode, plan


def _recall(entry: ShapeCounts, key: _KeptKey, count: int) -> _Placed | None:
    """The kept placement for `key` if it is still what a fresh one would be: no slot moved between
    domains and none changed but its node, whose fit has not grown and still holds `count` (every
    domain on its path then shrank by the same pods, and each stays the tightest holding them);
    the reference moves to now. None otherwise."""
    kept = entry.choices.get(key)
    if not isinstance(kept, _Kept) or kept.generation != entry.generation:
        return None
    changed = entry.changed
    for i in range(kept.seen, len(changed)):
        if changed[i] != kept.slot:
            return None
    fit = int(entry.fit[kept.slot])
    if not count <= fit <= kept.fit:
        return None
    entry.choices[key] = replace(kept, fit=fit, seen=len(changed))
    return {kept.slot: count}, kept.assignment


def _keep(entry: ShapeCounts, key: _KeptKey, per_slot: PerSlot, assignment: TopologyAssignment) -> None:
    """Keep a placement on one node for `_recall` (at most MAX_KEPT per shape, oldest out)."""
    (slot,) = per_slot
    entry.choices.pop(key, None)
    if len(entry.choices) >= MAX_KEPT:
        del entry.choices[next(iter(entry.choices))]
    entry.choices[key] = _Kept(slot, int(entry.fit[slot]), len(entry.changed), entry.generation, assignment)


def _place_remainder(topology: FlavorTopology, left: Int64Array, start: _Chosen,
                     n: int) -> tuple[PerSlot, _Chosen] | None:
    """The pods of an uneven slice split (count % slice size) as plain pods in what the slices left:
    inside the domains chosen for the slices (the pod set's domain), else anywhere in the topology
    (only a preferred or unconstrained pod set spread over several domains gets there)."""
    pods = domain_sums(topology, left)
    level = start.level
    picked = _fewest(start.ids, pods[level], topology.domains[level].rank(), n)
    if picked is None:
        level = 0
        picked = _fewest(_all(pods[0]), pods[0], topology.domains[0].rank(), n)
        if picked is None:
            return None
    lowest = _descend(topology, pods, _plain(topology, level), _Chosen(level, *picked))
    return _spread_over_nodes(topology, left, lowest), lowest


def _place_group(ws: _Workspace, members: Sequence[PodSetRequest]) -> list[_Placed] | AssignmentFailure:
    """A pod-set group: every member in one domain of the group's level (required; preferred also
    tries each wider level). Candidates are the domains where each member alone fits (read from the
    kept counts), tightest first (smallest summed pod counts, then label values); in each, the
    members are placed in order, each in what the earlier ones left, and the first domain taking
    them all wins."""
    topology, lead = ws.topology, members[0]
    lowest = len(topology.levels) - 1
    start = lowest if lead.topology.level is None else topology.levels.index(lead.topology.level)
    wider = range(start, -1, -1) if lead.topology.mode == "preferred" else range(start, start + 1)
    views = [ws.view(m) for m in members]
    counts = [pods for _, pods, _ in views]
    for level in wider:
        each = np.stack([c[level] for c in counts])
        need = np.asarray([m.count for m in members], dtype=np.int64)[:, None]
        candidates = np.nonzero((each >= need).all(axis=0))[0]
        tightness = each[:, candidates].sum(axis=0)
        for d in candidates[np.lexsort((topology.domains[level].rank()[candidates], tightness))].tolist():
            inside = _place_group_in(ws, members, level, d)
            if inside is not None:
                return inside
    return _group_unfit(ws, members, views, start)


def _slots_under(topology: FlavorTopology, level: int, domain: int) -> Int64Array:
    """Every slot inside one domain (its lowest descendants' slots)."""
    ids = [domain]
    for lv in range(level + 1, len(topology.levels)):
        ids = _children(topology, lv, ids).tolist()
    return np.asarray([slot for d in ids for slot in topology.slots_in(d)], dtype=np.int64)


def _place_group_in(ws: _Workspace, members: Sequence[PodSetRequest], level: int,
                    domain: int) -> list[_Placed] | None:
    """The members one after another inside `domain` of `level`, or None when one no longer fits.
    Only the domain's nodes are read: fits and sums are computed for them alone."""
    topology = ws.topology
    resources = sorted({r for m in members for r, v in m.requests.items() if v > 0})
    slots = _slots_under(topology, level, domain)
    left = ws.free_at(slots, resources)
    position = {slot: i for i, slot in enumerate(slots.tolist())}
    out: list[_Placed] = []
    for m in members:
        if m.count <= 0:
            out.append(({}, TopologyAssignment(topology.levels, ())))
            continue
        mask = topology.candidates(Signature.of(m.node_selector, m.affinity_terms, m.tolerations))
        want = request_vector(m.requests, resources)
        local = fits_of(left, want, mask.mask[slots])
        if int(local.sum()) < m.count:
            return None
        fit = np.zeros(topology.slots, dtype=np.int64)
        fit[slots] = local
        pods = [np.zeros(len(keys.keys), dtype=np.int64) for keys in topology.domains]
        for lv in range(len(topology.levels)):
            np.add.at(pods[lv], topology.domain_of(lv)[slots], local)
        lowest = _descend(topology, pods, _plain(topology, level), _Chosen.one(level, domain, m.count))
        per_slot = _spread_over_nodes(topology, fit, lowest)
        for slot, n in per_slot.items():
            left[position[slot]] -= n * want
        out.append((per_slot, _slices(topology, lowest)))
    return out


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
        one = _best_fit(np.flatnonzero(pods[start] >= n), units[start], rank, q)
        if one is not None:
            return _Chosen.one(start, one, q * size)
        picked = _least_free(units[start], rank, q)
        if picked is None or (size > 1 and int(pods[start].sum()) < n):  # size 1: picked holds n pods
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


def _children(topology: FlavorTopology, level: int, parents: Sequence[int]) -> Int64Array:
    """The domains of `level` under any of `parents` (domains of the level above)."""
    lists = topology.domains[level - 1].children
    return np.fromiter(chain.from_iterable(map(lists.__getitem__, parents)), dtype=np.int64)


def _descend(topology: FlavorTopology, units: list[Int64Array], plan: SlicePlan, chosen: _Chosen) -> _Chosen:
    """Level by level down to the lowest. Down to the slice level (unless `per_parent`): pool the
    children of the chosen domains and use the fewest of them (most free first, tightest for the
    last). Below it: each domain's pods go to the fewest of its own children, in the level's units.
    The children always hold what their parents took: the parents' counts are their sums."""
    for level in range(chosen.level + 1, len(topology.levels)):
        unit, rank = plan.unit(level), topology.domains[level].rank()
        if level <= plan.slice_level and not chosen.per_parent:
            children = _children(topology, level, chosen.ids.tolist())
            picked = _fewest(children, units[level], rank, int(chosen.takes.sum()) // unit)
            assert picked is not None, "children of chosen domains hold fewer slices than their parents"
            chosen = _Chosen(level, picked[0], picked[1] * unit)
            continue
        ids: list[Int64Array] = []
        takes: list[Int64Array] = []
        for d, p in zip(chosen.ids.tolist(), chosen.takes.tolist(), strict=True):
            if not p:
                continue
            picked = _fewest(_children(topology, level, (d,)), units[level], rank, p // unit)
            assert picked is not None, "a domain's children hold fewer units than the domain"
            ids.append(picked[0])
            takes.append(picked[1] * unit)
        chosen = _Chosen(level, np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, dtype=np.int64),
                         np.concatenate(takes).astype(np.int64) if takes else np.zeros(0, dtype=np.int64),
                         per_parent=True)
    return chosen


def _spread_over_nodes(topology: FlavorTopology, fit: Int64Array, chosen: _Chosen) -> PerSlot:
    """Pods per node. Each lowest domain's take goes to its fewest nodes (most free first, tightest
    for the last, ties by node name); a domain of one node (hostname as the lowest level) gives it
    all, read in bulk from the tree's lone slots."""
    taking = chosen.takes > 0
    ids, takes = chosen.ids[taking], chosen.takes[taking]
    lone = topology.lone_slots()[ids]
    alone = lone >= 0
    per_slot: PerSlot = dict(zip(lone[alone].tolist(), takes[alone].tolist(), strict=True))
    for d, take in zip(ids[~alone].tolist(), takes[~alone].tolist(), strict=True):
        slots = [slot for slot in topology.slots_in(d) if fit[slot] > 0]
        if len(slots) == 1:
            per_slot[slots[0]] = take
            continue
        named = np.asarray(sorted(slots, key=lambda slot: topology.view(slot).name), dtype=np.int64)  # type: ignore[union-attr]
        local = np.arange(named.shape[0], dtype=np.int64)
        picked = _fewest(local, fit[named], local, take)
        assert picked is not None, "a domain's nodes hold fewer pods than the domain"
        for i, n in zip(picked[0].tolist(), picked[1].tolist(), strict=True):
            per_slot[int(named[i])] = n
    return per_slot


def _slices(topology: FlavorTopology, *chosen: _Chosen) -> TopologyAssignment:
    """One slice per chosen lowest domain (takes of several choices added up), sorted by label
    values: ordered in bulk by the level's ranks; Python objects only for the slices themselves."""
    ids, takes = chosen[0].ids, chosen[0].takes
    if len(chosen) > 1:
        ids, where = np.unique(np.concatenate([one.ids for one in chosen]), return_inverse=True)
        takes = np.bincount(where.ravel(), weights=np.concatenate([one.takes for one in chosen]),
                            minlength=ids.shape[0]).astype(np.int64)
    taking = takes > 0
    ids, takes = ids[taking], takes[taking]
    order = np.argsort(topology.domains[-1].rank()[ids], kind="stable")
    return TopologyAssignment(topology.levels, tuple(map(
        Slice, topology.labels_of(ids[order].tolist()), takes[order].tolist())))


# -- orderings (as Kueue's) -----------------------------------------------------------------------

def _all(counts: Int64Array) -> Int64Array:
    return np.arange(counts.shape[0], dtype=np.int64)


def _best_fit(ids: Int64Array, counts: Int64Array, rank: Int64Array, n: int) -> int | None:
    """BestFit: the domain with the smallest count that still holds `n`, ties by label values
    (two linear passes, no sort: it runs over every host for an unconstrained pod set)."""
    fitting = ids[counts[ids] >= n]
    if fitting.shape[0] == 0:
        return None
    at = counts[fitting]
    tight = fitting[at == at.min()]
    return int(tight[np.argmin(rank[tight])])


def _first_in_order(ids: Int64Array, key: Int64Array, rank: Int64Array, k: int) -> Int64Array:
    """The first `k` of `ids` ordered by (key, rank), sorting only `k` of them. Keys are pod counts,
    usually small integers that tie a lot: a histogram finds the key of the k-th, every id below it
    is in, and the ties at it are cut by rank with a linear partition. Keys spread wider than the
    ids (a pod set requesting nothing fits FIT_CAP pods a node) are partitioned directly."""
    if k < ids.shape[0]:
        shifted = key - key.min()
        if int(shifted.max()) > 4 * ids.shape[0] + 1024:
            r = rank[ids]
            combined = shifted * (int(r.max()) + 1) + r
            part = np.argpartition(combined, k - 1)[:k]
            return ids[part][np.argsort(combined[part])]
        cumulative = np.cumsum(np.bincount(shifted))
        kth = int(np.searchsorted(cumulative, k))  # the key (shifted) of the k-th in order
        below = shifted < kth
        ties = ids[shifted == kth]
        need = k - int(below.sum())
        if need < ties.shape[0]:
            ties = ties[np.argpartition(rank[ties], need - 1)[:need]]
        keep = np.concatenate([ids[below], ties])
        key = np.concatenate([key[below], np.full(ties.shape[0], kth + key.min(), dtype=np.int64)])
        ids = keep
    return ids[np.lexsort((rank[ids], key))][:k]


def _fewest(ids: Int64Array, counts: Int64Array, rank: Int64Array,
            n: int) -> tuple[Int64Array, Int64Array] | None:
    """The fewest domains holding `n`: most free first (count desc, label values asc) while none
    holds what is left, then the tightest one that does. None when all of them hold fewer than `n`.
    Every domain with room holds at least one pod, so the prefix is among the first `n`."""
    at = counts[ids]
    ids = ids[at > 0]
    if ids.shape[0] == 0:
        return None
    at = counts[ids]
    if int(at.max()) >= n:
        # The most free domain holds `n` alone: the prefix is empty and the choice is the
        # tightest domain holding `n` (the same answer as below, without ordering anything).
        last = _best_fit(ids, counts, rank, n)
        assert last is not None
        return np.asarray([last], dtype=np.int64), np.asarray([n], dtype=np.int64)
    if int(at.sum()) < n:
        return None
    order = _first_in_order(ids, -counts[ids], rank, min(max(n, 1), ids.shape[0]))
    cumulative = np.cumsum(counts[order])
    k = int(np.searchsorted(cumulative, n))  # first prefix that holds n
    left = n - (int(cumulative[k - 1]) if k else 0)
    taken = np.zeros(counts.shape[0], dtype=np.bool_)
    taken[order[:k]] = True
    rest = ids[~taken[ids]]
    last = _best_fit(rest, counts, rank, left)
    assert last is not None  # order[k] itself holds `left`
    return (np.append(order[:k], last).astype(np.int64),
            np.append(counts[order[:k]], left).astype(np.int64))


def _least_free(counts: Int64Array, rank: Int64Array, n: int) -> tuple[Int64Array, Int64Array] | None:
    """Least free first over every domain of a level (count asc, label values asc, domains with
    room only); the last one takes only the remainder. None when all of them hold fewer than `n`.
    The histogram of the counts gives the count `v` at which the prefix ends and the pods held
    below it; then only the domains below `v` and the fewest-ranked of those at `v` are read (no
    sort of the level: an unconstrained pod set runs this over every host)."""
    top = int(counts.max()) if counts.shape[0] else 0
    if n <= 0 or top > 4 * counts.shape[0] + 1024:  # no pods wanted, or counts too wide to histogram
        return _least_free_sorted(_all(counts), counts, rank, n)
    if top == 0:
        return None
    upto = np.cumsum(np.bincount(counts)[1:] * np.arange(1, top + 1, dtype=np.int64))
    if int(upto[-1]) < n:
        return None
    v = int(np.searchsorted(upto, n)) + 1  # upto[v - 1]: pods in domains holding 1..v
    below = int(upto[v - 2]) if v > 1 else 0
    lower = np.flatnonzero((counts > 0) & (counts < v)) if below else np.zeros(0, dtype=np.int64)
    lower = lower[np.lexsort((rank[lower], counts[lower]))]
    need = -(-(n - below) // v)  # domains at v, the last taking what is left
    ties = _lowest_ranked(np.flatnonzero(counts == v), rank, need)
    ids = np.concatenate([lower, ties]).astype(np.int64)
    takes = counts[ids].copy()
    takes[-1] = n - below - (need - 1) * v
    return ids, takes


def _lowest_ranked(ids: Int64Array, rank: Int64Array, k: int) -> Int64Array:
    """The `k` of `ids` with the smallest ranks (a level's ranks: 0..domains-1, distinct), in rank
    order. Their ranks are marked in a bitmap and only its prefix holding `k` marks is scanned,
    its length guessed from the ids' density and doubled until enough (no sort, no partition)."""
    if k >= ids.shape[0]:
        return ids[np.argsort(rank[ids])]
    r = rank[ids]
    size = rank.shape[0]
    marked = np.zeros(size, dtype=np.bool_)
    marked[r] = True
    at = np.empty(size, dtype=np.int64)
    at[r] = ids
    end = min(size, 2 * k * size // ids.shape[0] + 64)
    while end < size and int(np.count_nonzero(marked[:end])) < k:
        end = min(size, 2 * end)
    return at[np.flatnonzero(marked[:end])[:k]]


def _least_free_sorted(ids: Int64Array, counts: Int64Array, rank: Int64Array,
                       n: int) -> tuple[Int64Array, Int64Array] | None:
    """`_least_free` by ordering the candidates (counts too wide for a histogram)."""
    ids = ids[counts[ids] > 0]
    if ids.shape[0] == 0 or int(counts[ids].sum()) < n:
        return None
    order = _first_in_order(ids, counts[ids], rank, min(max(n, 1), ids.shape[0]))
    cumulative = np.cumsum(counts[order])
    k = int(np.searchsorted(cumulative, n))
    takes = counts[order[: k + 1]].copy()
    takes[k] = n - (int(cumulative[k - 1]) if k else 0)
    return order[: k + 1].astype(np.int64), takes.astype(np.int64)


# -- failure ------------------------------------------------------------------------------------

def _path(topology: FlavorTopology, level: int, domain: int) -> str:
    return "/".join(topology.domains[level].keys[domain])


MAX_DOMAIN_FITS = 16
"""Domains listed in a failure's `domain_fits` (the best ones): formatting every domain of a
level would make the failure path scan-and-format the whole cluster."""


def _top_fits(topology: FlavorTopology, level: int, at: Int64Array) -> tuple[tuple[str, int], ...]:
    """The MAX_DOMAIN_FITS domains of `level` holding the most, most first (ties by label values)."""
    room = np.nonzero(at)[0]
    if room.shape[0] == 0:
        return ()
    order = _first_in_order(room, -at[room], topology.domains[level].rank(), min(MAX_DOMAIN_FITS, room.shape[0]))
    return tuple((_path(topology, level, int(d)), int(at[d])) for d in order)


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
    fits = _top_fits(topology, level, at)
    fit = int(at.sum()) if in_total else (fits[0][1] if fits else 0)
    where = "in total" if in_total else f'at level "{topology.levels[level]}"'
    best = f" (best: {fits[0][0]})" if fits and not in_total else ""
    head = (f'topology "{topology.name}" allows to fit only {fit} out of {need} {unit}(s) {where}{best}')
    if len(ps.topology.slices) > 1:
        rank = topology.domains[level].rank()
        best_units = units[level]
        top = int(np.lexsort((rank, -best_units))[0]) if best_units.shape[0] else 0
        layers = layer_fits(topology, pods, plan, ps, level, top) if best_units.shape[0] else []
        head = f'topology "{topology.name}" doesn\'t allow to fit' + "".join(
            f"; {fitting}/{needed} slice(s) fit on level {name}" for name, fitting, needed in layers)
    return AssignmentFailure(
        reason=c.REASON_POD_SET_TOPOLOGY_UNFIT, message=head, podset=ps.name, count=need, fit=fit,
        unit=unit, level=topology.levels[level], best=fits[0][0] if fits else None, domain_fits=fits,
        total_nodes=topology.node_count,
        never=never_fits(topology, ps, 0 if in_total else level, in_total) if len(ps.topology.slices) <= 1 else None)


def level_noun(level: str) -> str:
    """What a person calls a domain of a level: the label's name after its prefix, without a
    `topology-` lead (`cloud.provider.com/topology-rack` -> rack); the hostname level -> node."""
    if level == c.LABEL_HOSTNAME:
        return "node"
    name = level.rpartition("/")[2]
    return name.removeprefix("topology-") or level


def never_fits(topology: FlavorTopology, ps: PodSetRequest, level: int, in_total: bool) -> str | None:
    """Why the pod set could not fit even on empty nodes, or None when some domain could hold it.

    Reads only allocatable (the static tree): per domain of `level` (the whole topology when
    `in_total`), first each requested resource summed over the domain's nodes against the pod set's
    total, then the pods each node could hold empty (a pod's requests do not split across nodes).
    Every node placed in the tree counts, whatever the pod set's filters exclude: this is the fix
    "a larger domain or smaller pods", not "untaint a node"."""
    requested = sorted(r for r, m in ps.requests.items() if m > 0)
    placed = topology.domain_of(level) >= 0
    if not requested or ps.count <= 0:
        return None
    domains = topology.domain_of(level)[placed]
    alloc = topology.allocatable(requested)[placed]
    size = len(topology.domains[level].keys)
    where = "the flavor's nodes have" if in_total else f"the largest {level_noun(topology.levels[level])} has"
    for j, resource in enumerate(requested):
        column = alloc[:, j]
        if not in_total and size:
            # float sums find the largest domain; its exact sum is taken in Python ints (milli
            # amounts summed over thousands of nodes overflow int64).
            top = int(np.argmax(np.bincount(domains, weights=column, minlength=size)))
            column = column[domains == top]
        largest = sum(column.tolist())
        need = ps.requests[resource] * ps.count
        if largest < need:
            return (f"can never fit: {where} {format_milli(largest, resource)} {resource}"
                    f"{' in total' if in_total else ''}, pod set \"{ps.name}\" needs {format_milli(need, resource)}")
    empty = fits_of(alloc, request_vector(ps.requests, requested), np.ones(alloc.shape[0], dtype=np.bool_))
    held = np.bincount(domains, weights=empty, minlength=size).astype(np.int64) if size else np.zeros(1, np.int64)
    most = int(held.sum()) if in_total else int(held.max(initial=0))
    if most < ps.count:
        return (f"can never fit: {where.replace(' has', '').replace(' have', '')} hold{'' if in_total else 's'} "
                f"at most {most} such pod(s) even empty, pod set \"{ps.name}\" needs {ps.count}")
    return None


def _group_unfit(ws: _Workspace, members: Sequence[PodSetRequest],
                 views: Sequence[tuple[Int64Array, list[Int64Array], CandidateMask]], level: int) -> AssignmentFailure:
    """No domain takes the whole group: at its level, a domain's fit is the most pods of any one
    member's shape it holds (members share the capacity, so their fits do not add up), at most the
    group's count; the exclusion tally is the largest member's."""
    topology = ws.topology
    need = sum(m.count for m in members)
    at = np.minimum(np.stack([pods[level] for _, pods, _ in views]).max(axis=0), need)
    fits = _top_fits(topology, level, at)
    best = f" (best: {fits[0][0]})" if fits else ""
    group = members[0].topology.group
    head = (f'topology "{topology.name}" allows to fit only {fits[0][1] if fits else 0} out of {need} pod(s) '
            f'of pod-set group "{group}" at level "{topology.levels[level]}"{best}')
    largest = max(range(len(members)), key=lambda i: members[i].count)
    failure = AssignmentFailure(
        reason=c.REASON_POD_SET_TOPOLOGY_UNFIT, message=head, podset=members[largest].name, count=need,
        fit=fits[0][1] if fits else 0, level=topology.levels[level], best=fits[0][0] if fits else None,
        domain_fits=fits, total_nodes=topology.node_count)
    fit, _, mask = views[largest]
    return _with_exclusions(failure, ws, members[largest], mask, fit)


def _with_exclusions(failure: AssignmentFailure, ws: _Workspace, ps: PodSetRequest, mask: CandidateMask,
                     fit: Int64Array) -> AssignmentFailure:
    """Add the tally of excluded nodes (filters, then the first resource short on a candidate) to
    the failure and its message."""
    tally = mask.tally()
    requested = sorted(r for r, m in ps.requests.items() if m > 0)
    short_nodes = np.nonzero(mask.mask[: fit.shape[0]] & (fit == 0))[0].astype(np.int64)
    if requested and short_nodes.shape[0]:
        want = request_vector(ps.requests, requested)
        short = ws.free_at(short_nodes, requested) < want[None, :]
        first = np.argmax(short, axis=1)
        for j, n in enumerate(np.bincount(first, minlength=len(requested)).tolist()):
            if n:
                tally[resource_reason(requested[j])] += n
    excluded = tuple(sorted(tally.items(), key=lambda kv: reason_sort_key(kv[0])))
    listed = ", ".join(f"{reason}: {n}" for reason, n in excluded) or "none"
    message = f"{failure.message}. Total nodes: {failure.total_nodes}; excluded: {listed}"
    return replace(failure, message=message, excluded=excluded)
