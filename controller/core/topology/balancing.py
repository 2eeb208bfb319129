"""Balanced placement (Kueue's TASBalancedPlacement gate) for a preferred pod set: when it fits in
one domain one level above its preferred level but needs several domains of the preferred level,
it is spread evenly over the fewest of them (25 pods over two racks of 15: 13 and 12) instead of
filling the first to the brim. Pure; called by `assigning` only when the gate is on.

Rule (tasq's reading of Kueue's algorithm, documented in docs/topology.md): for each domain one
level above (in label order; the whole topology when the preferred level is the widest) take its
children of the preferred level most free first until they hold the pod set's slices: `k` domains,
threshold `t = min(slices // k, slices of the k-th)`. The parent with the highest threshold wins
(then fewer domains, then label order); its `k` most free children each take `t` slices and the
rest goes one domain at a time, most free first. With `k` = 1 the caller keeps BestFit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from controller.core.topology.tree import FlavorTopology

Int64Array = npt.NDArray[np.int64]


def balanced_split(topology: FlavorTopology, units: list[Int64Array], pods: list[Int64Array], level: int,
                   slices: int, count: int) -> tuple[Int64Array, Int64Array] | None:
    """(domain ids at `level`, slices each takes), or None when balancing does not apply (no parent
    holds the pod set's slices and all its `count` pods, or one domain is enough). One pass over
    the level's domains, grouped by parent (no loop over parents)."""
    at, rank = units[level], topology.domains[level].rank()
    if level == 0:
        parent = np.zeros(at.shape[0], dtype=np.int64)
        parent_rank, held = np.zeros(1, dtype=np.int64), np.asarray([int(pods[0].sum())], dtype=np.int64)
    else:
        parent = topology.domains[level].parents()
        parent_rank, held = topology.domains[level - 1].rank(), pods[level - 1]
    ids = np.nonzero((at > 0) & (held[parent] >= count))[0]
    if ids.shape[0] == 0:
        return None
    ids = ids[np.lexsort((rank[ids], -at[ids], parent[ids]))]  # by parent, most free first
    group = parent[ids]
    starts = np.searchsorted(group, group)  # index of each id's group start
    cumulative = np.cumsum(at[ids])
    within = cumulative - np.where(starts > 0, cumulative[starts - 1], 0)
    reached = np.nonzero(within >= slices)[0]
    if reached.shape[0] == 0:
        return None
    groups, first = np.unique(group[reached], return_index=True)
    last = reached[first]  # per parent, the k-th domain in its order
    k = last - starts[last] + 1
    threshold = np.minimum(slices // k, at[ids[last]])
    best = int(np.lexsort((parent_rank[groups], k, -threshold))[0])
    if k[best] < 2 or threshold[best] <= 0:
        return None
    chosen = ids[starts[last[best]]: last[best] + 1]
    t = int(threshold[best])
    takes = np.full(chosen.shape[0], t, dtype=np.int64)
    extra = slices - t * chosen.shape[0]
    for i, d in enumerate(chosen.tolist()):
        more = min(int(at[d]) - t, extra)
        takes[i] += more
        extra -= more
    return chosen, takes
