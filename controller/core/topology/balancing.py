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
    holds the pod set's slices and all its `count` pods, or one domain is enough)."""
    at, rank = units[level], topology.domains[level].rank()
    if level == 0:
        groups = [(np.arange(at.shape[0], dtype=np.int64), int(pods[0].sum()))]
    else:
        above = topology.domains[level - 1]
        parents = np.argsort(above.rank(), kind="stable").tolist()
        groups = [(np.asarray(above.children[p], dtype=np.int64), int(pods[level - 1][p])) for p in parents]
    best: tuple[int, int] | None = None
    best_order: Int64Array | None = None
    for children, held in groups:
        if held < count:
            continue
        room = children[at[children] > 0]
        ranked = room[np.lexsort((rank[room], -at[room]))]
        cumulative = np.cumsum(at[ranked])
        if cumulative.shape[0] == 0 or int(cumulative[-1]) < slices:
            continue
        k = int(np.searchsorted(cumulative, slices)) + 1
        threshold = min(slices // k, int(at[ranked[k - 1]]))
        if best is None or (threshold, -k) > best:
            best, best_order = (threshold, -k), ranked[:k]
    if best is None or best_order is None or -best[1] < 2 or best[0] <= 0:
        return None
    threshold = best[0]
    takes = np.full(best_order.shape[0], threshold, dtype=np.int64)
    extra = slices - threshold * best_order.shape[0]
    for i, d in enumerate(best_order.tolist()):
        more = min(int(at[d]) - threshold, extra)
        takes[i] += more
        extra -= more
    return best_order, takes
