"""Per pod shape counts kept current: how many pods of one shape (requests + candidacy signature)
each node and each domain of a flavor's tree hold, given a Usage. Pure; called by `assigning`.

Computed in full once per (tree epoch, usage lineage), then brought up to date by re-reading only
the nodes that changed since: slots the tree logged (node added, changed, moved or removed) and
rows the Usage logged (pods bound or gone, reservations made or released), on this Usage or a
relative it was cloned from or into. An assignment then reads per-domain sums instead of scanning
every node, and a node joining costs the next assignment one slot's update. Each count also
lists the slots whose fit changed (`ShapeCounts.changed`), which tells `assigning` whether a
placement it kept is still the one a search would find.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from controller.core.topology.candidacy import CandidateMask, Signature
from controller.core.topology.tree import MAX_MASKS, FlavorTopology
from controller.core.topology.usage import MILLI_CAP, ChangeLog, Usage

Int64Array = npt.NDArray[np.int64]

FIT_CAP = 1 << 20
"""Per-node pod counts are capped here so domain sums (float64 bincount) stay exact below 2^53."""
REFRESH_SHARE = 8
"""Past slots / REFRESH_SHARE changed nodes, a full recount is cheaper than patching them one by one."""
SMALL_PATCH = 8
"""Up to this many changed slots, their fits are computed one by one in Python ints (`_fit_now`)."""
MAX_CHANGED = 4096
"""Changed slots a ShapeCounts remembers for its kept choices before it starts over (a new generation)."""

ShapeKey = tuple[Signature, tuple[tuple[str, int], ...]]


def request_vector(requests: Mapping[str, int], resources: Sequence[str]) -> Int64Array:
    """Per-pod requests as int64. Amounts beyond MILLI_CAP (where allocatable is clamped) become
    MILLI_CAP + 1, which no node can hold: such a request never over-commits, it just never fits."""
    return np.asarray([min(max(requests.get(r, 0), 0), MILLI_CAP + 1) for r in resources], dtype=np.int64)


def fits_of(free: Int64Array, want: Int64Array, candidate: npt.NDArray[np.bool_]) -> Int64Array:
    """fit per row of `free`: min over requested resources of floor(free / request); 0 where not a
    candidate or overcommitted; at most FIT_CAP."""
    fit = np.full(free.shape[0], FIT_CAP, dtype=np.int64)
    for j, w in enumerate(want.tolist()):
        if w > 0:
            np.minimum(fit, free[:, j] // w, out=fit)
    np.maximum(fit, 0, out=fit)  # already at most FIT_CAP (its start); np.clip costs more on small arrays
    fit[~candidate] = 0
    return fit


@dataclass(slots=True)
class ShapeCounts:
    """`fit[slot]`: pods of the shape the node holds now; `counts[level][domain]`: their sums.
    `resources`/`want` the shape's requested resources and per-pod amounts; the rest says which
    state these numbers describe (tree epoch and log length, usage registry, log and position)."""

    resources: tuple[str, ...]
    want: Int64Array
    mask: CandidateMask
    fit: Int64Array
    counts: list[Int64Array]
    epoch: int
    tree_at: int
    registry: object
    log: ChangeLog
    log_at: int
    changed: list[int] = field(default_factory=list)
    """Slots whose fit changed since `generation` began, in order (a slot once per patch that
    changed it): `assigning` keeps choices valid while only their own slot changed."""
    generation: int = 0
    """Bumped when a slot moved between domains or `changed` restarted: every kept choice is void."""
    choices: dict[Hashable, object] = field(default_factory=dict)
    """Placements `assigning` keeps for this shape (opaque here), by its own key."""


def shape_counts(topology: FlavorTopology, usage: Usage, requests: Mapping[str, int],
                 signature: Signature) -> ShapeCounts:
    """The counts of this shape for `usage` now: kept per tree (at most MAX_MASKS shapes, least
    recently used out), patched when little changed, recounted otherwise. Callers must not mutate
    the arrays."""
    shape: ShapeKey = (signature, tuple(sorted((r, m) for r, m in requests.items() if m > 0)))
    mask = topology.candidates(signature)
    known = topology.shapes.pop(shape, None)
    entry = known if isinstance(known, ShapeCounts) else None
    if entry is None or not _patch(topology, usage, entry, mask):
        entry = _recount(topology, usage, shape, mask)
    if len(topology.shapes) >= MAX_MASKS:
        del topology.shapes[next(iter(topology.shapes))]
    topology.shapes[shape] = entry
    return entry


def _recount(topology: FlavorTopology, usage: Usage, shape: ShapeKey, mask: CandidateMask) -> ShapeCounts:
    """Every node's fit from allocatable minus used, then the domain sums bottom up."""
    resources = tuple(r for r, _ in shape[1])
    want = request_vector(dict(shape[1]), resources)
    rows = topology.rows_in(usage.registry)
    free = topology.allocatable(resources) - usage.used_matrix(rows, resources)
    fit = fits_of(free, want, mask.mask[: topology.slots])
    return ShapeCounts(resources, want, mask, fit, domain_sums(topology, fit), topology.epoch,
                       len(topology.log), usage.registry, usage.log, len(usage.log.rows))


def domain_sums(topology: FlavorTopology, fit: Int64Array) -> list[Int64Array]:
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


def _patch(topology: FlavorTopology, usage: Usage, entry: ShapeCounts, mask: CandidateMask) -> bool:
    """Bring `entry` up to date by re-reading the changed slots; False when a recount is needed
    (another epoch or registry, an unrelated usage, or too many changes)."""
    if entry.epoch != topology.epoch or entry.registry is not usage.registry or entry.mask is not mask:
        return False
    rows = usage.changed_since(entry.log, entry.log_at)
    if rows is None:
        return False
    before: dict[int, tuple[int, ...] | None] = {}
    for slot, domains in topology.log[entry.tree_at:]:
        before.setdefault(slot, domains)
    slot_of_row = topology.slot_of_row(usage.registry)
    for row in rows:
        found = slot_of_row.get(row)
        if found is not None:
            before.setdefault(found, None)
    if len(before) > max(topology.slots // REFRESH_SHARE, 64):
        return False
    if before:
        _apply(topology, usage, entry, before)
    entry.tree_at, entry.log, entry.log_at = len(topology.log), usage.log, len(usage.log.rows)
    return True


def _apply(topology: FlavorTopology, usage: Usage, entry: ShapeCounts,
           before: dict[int, tuple[int, ...] | None]) -> None:
    """Recompute the fit of `before`'s slots and move the difference through their domains: a slot
    whose domains changed is taken out of the old ones (as logged) and put into the new ones."""
    if entry.fit.shape[0] < topology.slots:
        entry.fit = np.concatenate([entry.fit, np.zeros(topology.slots - entry.fit.shape[0], dtype=np.int64)])
    for level, keys in enumerate(topology.domains):
        have = entry.counts[level].shape[0]
        if have < len(keys.keys):
            entry.counts[level] = np.concatenate([entry.counts[level],
                                                  np.zeros(len(keys.keys) - have, dtype=np.int64)])
    if len(before) > SMALL_PATCH:
        slots = np.fromiter(before, dtype=np.int64, count=len(before))
        olds: list[int] = entry.fit[slots].tolist()
        news = _fits_now(topology, usage, entry, slots)
        entry.fit[slots] = news
    else:
        olds = [int(entry.fit[slot]) for slot in before]
        news = [_fit_now(topology, usage, entry, slot) for slot in before]
        for slot, fit in zip(before, news, strict=True):
            entry.fit[slot] = fit
    counts = entry.counts
    changed = entry.changed
    if len(changed) + len(before) > MAX_CHANGED:
        changed.clear()
        entry.generation += 1
    for slot, old, fit in zip(before, olds, news, strict=True):
        now = topology.slot_domains(slot)
        logged = before[slot]
        was = logged if logged is not None else now
        if was == now:
            if fit != old:
                changed.append(slot)
                for level, d in enumerate(now):
                    if d >= 0:
                        counts[level][d] += fit - old
            continue
        entry.generation += 1
        for level, d in enumerate(was):
            if d >= 0:
                counts[level][d] -= old
        for level, d in enumerate(now):
            if d >= 0:
                counts[level][d] += fit


def _fits_now(topology: FlavorTopology, usage: Usage, entry: ShapeCounts, slots: Int64Array) -> list[int]:
    """The shape's fit on each of `slots` now (`fits_of` over their free capacity)."""
    rows = topology.rows_in(usage.registry)[slots]
    free = topology.allocatable_at(slots, entry.resources) - usage.used_matrix(rows, entry.resources)
    fits: list[int] = fits_of(free, entry.want, entry.mask.mask[slots]).tolist()
    return fits


def _fit_now(topology: FlavorTopology, usage: Usage, entry: ShapeCounts, slot: int) -> int:
    """One slot's fit now, as `fits_of` computes it, in Python ints: an admission changes a row or
    two, and for so few numpy's per-call cost is most of the work (the same floor divisions, cap,
    floor at 0 and candidacy)."""
    if not entry.mask.mask[slot]:
        return 0
    fit = FIT_CAP
    row = int(topology.rows_in(usage.registry)[slot])
    alloc = topology.allocatable_of(slot, entry.resources)
    for a, u, w in zip(alloc, usage.used_of(row, entry.resources), entry.want.tolist(), strict=True):
        if w > 0:
            fit = min(fit, (a - u) // w)
    return max(fit, 0)
