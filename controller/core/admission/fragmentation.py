"""Topology fragmentation: free capacity stranded in domains too small for the largest waiting gang.

`largest_gang` is what the biggest waiting Workload asks of one resource (every pod of every pod
set); `fragmented_free` sums, per level of a flavor's topology, the free amount of that resource in
the domains whose free amount is above zero but below the gang. The admission loop reports both as
metrics (tasq_largest_pending_gang_gpus, tasq_topology_fragmented_free_gpus). Pure: one numpy pass
over the flavor's nodes per call, nothing per pod.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from controller.core.admission.workloads import WorkloadInfo
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import Usage


def gang_request(info: WorkloadInfo, resource: str) -> int:
    """Milli of `resource` the whole Workload needs: every pod of every pod set."""
    return sum(ps.count * ps.requests.get(resource, 0) for ps in info.pod_sets)


def largest_gang(waiting: Iterable[WorkloadInfo], resource: str) -> int:
    """Milli of `resource` the largest waiting Workload needs (0 when none waits or none asks)."""
    return max((gang_request(info, resource) for info in waiting), default=0)


def fragmented_free(topology: FlavorTopology, usage: Usage, resource: str, need: int) -> dict[str, int]:
    """Level label -> milli of `resource` free in that level's domains holding some but less than
    `need` (no domain counts when `need` is 0). Free is allocatable minus used, never below zero,
    over the nodes that carry the level's label."""
    out: dict[str, int] = {}
    if topology.slots == 0:
        return {level: 0 for level in topology.levels}
    rows = topology.rows_in(usage.registry)
    free = (topology.allocatable([resource]) - usage.used_matrix(rows, [resource]))[:, 0]
    free = np.maximum(free, 0)
    for level, label in enumerate(topology.levels):
        domain = topology.domain_of(level)
        placed = domain >= 0
        sums = np.bincount(domain[placed], weights=free[placed],
                           minlength=len(topology.domains[level].keys)).astype(np.int64)
        small = (sums > 0) & (sums < need)
        out[label] = int(sums[small].sum())
    return out
