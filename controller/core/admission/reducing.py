"""Partial admission (Kueue's `PartialAdmission`): a Workload that does not fit whole gets the
largest count of its pod set with a `minCount` that does fit, quota and topology included.

Pure. Called by the admission cycle (controller.core.admission.cycle) once the full count, and in a
ClusterQueue that may preempt, preemption at the full count, found nothing; and by its `explain`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from controller.core.admission.flavoring import NoFit, WorkloadFit, assign_flavors
from controller.core.admission.snapshot import AdmissionSnapshot
from controller.core.admission.workloads import PodSetInfo, WorkloadInfo


@dataclass(frozen=True, slots=True)
class Reducible:
    """The pod set a partial admission may shrink and the counts it may get, ascending, all below
    its full count."""

    pod_set: PodSetInfo
    counts: tuple[int, ...]


def reducible(wl: WorkloadInfo) -> Reducible | None:
    """Phase 1: the first pod set with a minCount below its count (Kueue allows one) and its
    candidate counts: every count in [minCount, count) that keeps its slice rule, i.e. a multiple of
    its outermost slice size (inner layers divide it), so every slice stays whole. None when the
    Workload has no such pod set or no count qualifies."""
    for ps in wl.pod_sets:
        if ps.min_count is None or not 0 < ps.min_count < ps.count:
            continue
        size = ps.topology.slices[0].size if ps.topology is not None and ps.topology.slices else 1
        counts = tuple(k for k in range(ps.min_count, ps.count) if size <= 1 or k % size == 0)
        return Reducible(ps, counts) if counts else None
    return None


def with_count(wl: WorkloadInfo, pod_set: str, count: int) -> WorkloadInfo:
    """The Workload as admission sees it with one pod set's count replaced (same key, so the nodes
    a trial holds are held under the Workload's own key)."""
    return replace(wl, pod_sets=tuple(replace(ps, count=count) if ps.name == pod_set else ps
                                      for ps in wl.pod_sets))


def largest_passing(counts: Sequence[int], passes: Callable[[int], bool]) -> int | None:
    """Phase 2: the largest of ascending `counts` that passes, by binary search (Kueue's): valid
    because fitting is monotone in the count (fewer pods of one shape need a subset of the quota and
    of any placement that held more; slices stay whole as every candidate is a slice multiple)."""
    low, high, best = 0, len(counts) - 1, None
    while low <= high:
        mid = (low + high) // 2
        if passes(counts[mid]):
            best, low = counts[mid], mid + 1
        else:
            high = mid - 1
    return best


def reserve_largest_count(snap: AdmissionSnapshot, cq_name: str, wl: WorkloadInfo,
                          full: NoFit) -> WorkloadFit | NoFit:
    """Driver: the fit at the largest candidate count that fits, its nodes held in `snap.usage` under
    the Workload's key as `assign_flavors` holds them (the caller commits or releases them); else
    `full`'s reason with the partial search's outcome added to its message. Each trial's nodes are
    released before the next one."""
    found = reducible(wl)
    if found is None:
        return full
    name = found.pod_set.name

    def fits(count: int) -> bool:
        trial = assign_flavors(snap, cq_name, with_count(wl, name, count))
        if isinstance(trial, WorkloadFit):
            snap.usage.release(wl.key)
            return True
        return False

    best = largest_passing(found.counts, fits)
    if best is not None:
        fit = assign_flavors(snap, cq_name, with_count(wl, name, best))
        if isinstance(fit, WorkloadFit):
            return fit
    smallest = found.counts[0]
    return NoFit(full.reason, f"{full.message}; partial admission: not even {smallest} of the "
                 f"{found.pod_set.count} pod(s) of pod set \"{name}\" fit (minCount {found.pod_set.min_count})")
