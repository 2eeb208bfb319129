"""Slice plans: the unit a pod set is counted in at each level of a flavor's topology (Kueue's
pod-set slices and multi-layer slices), and the per-domain counts in those units. Pure.

Without slices every pod is its own slice at the lowest level, so units are pods and the counts
are the plain per-domain pod counts. Used by `assigning` for every pod set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.api import constants as c
from controller.core.topology.outcome import AssignmentFailure
from controller.core.topology.request import PodSetRequest
from controller.core.topology.tree import FlavorTopology

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SlicePlan:
    """How one pod set is counted on one topology.

    `start`: the level the domain choice starts at. `slice_level`: the outer slice level (the
    lowest level without slices). `size`: pods per outer slice. `inner[l]`: the pod multiple a
    domain at level `l` below the slice level is filled in (an inner layer's size; 1 for pods).
    """

    start: int
    slice_level: int
    size: int
    inner: tuple[int, ...]

    def unit(self, level: int) -> int:
        """Pods per unit at `level`: outer slices down to the slice level, inner groups below."""
        return self.size if level <= self.slice_level else self.inner[level]

    @property
    def layered(self) -> bool:
        return any(m > 1 for m in self.inner)


def _level_missing(topology: FlavorTopology, ps: PodSetRequest, level: str, what: str) -> AssignmentFailure:
    have = ", ".join(f'"{lv}"' for lv in topology.levels)
    return AssignmentFailure(
        reason=c.REASON_TOPOLOGY_LEVEL_MISSING,
        message=f'topology "{topology.name}" has no {what}level "{level}"; its levels: {have}',
        podset=ps.name, count=ps.count, level=level, total_nodes=topology.node_count)


def _invalid(topology: FlavorTopology, ps: PodSetRequest, message: str) -> AssignmentFailure:
    return AssignmentFailure(reason=c.REASON_SLICE_TOPOLOGY_INVALID,
                             message=f'topology "{topology.name}": {message}', podset=ps.name,
                             count=ps.count, total_nodes=topology.node_count)


def plan_of(topology: FlavorTopology, ps: PodSetRequest) -> SlicePlan | AssignmentFailure:
    """The plan, or why the flavor cannot express the request (a missing level; Kueue's checks of a
    slice level above the pod set's level and of inner layers). A slice-only request (no required
    or preferred level) starts at the widest level, as Kueue's does."""
    request, levels = ps.topology, topology.levels
    lowest = len(levels) - 1
    level = request.level if request.mode != "unconstrained" else None
    if level is not None and level not in levels:
        return _level_missing(topology, ps, level, "")
    for layer in request.slices:
        if layer.level not in levels:
            return _level_missing(topology, ps, layer.level, "slice ")
    if level is not None:
        start = levels.index(level)
    else:
        start = 0 if request.mode == "unconstrained" and request.slices else lowest
    if not request.slices:
        return SlicePlan(start, lowest, 1, (1,) * len(levels))
    outer = request.slices[0]
    slice_level = levels.index(outer.level)
    if start > slice_level:
        return _invalid(topology, ps, f"podset slice topology {outer.level} is above the podset topology "
                                      f"{levels[start]}")
    inner = [1] * len(levels)
    prev_level, prev_size = slice_level, outer.size
    for layer in request.slices[1:]:
        index = levels.index(layer.level)
        if index <= prev_level:
            return _invalid(topology, ps, f"additional slice layer topology {layer.level} must be at a lower "
                                          f"level than {levels[prev_level]}")
        if layer.size < 1 or prev_size % layer.size:
            return _invalid(topology, ps, f"additional slice layer size {layer.size} must evenly divide parent "
                                          f"layer size {prev_size}")
        for lv in range(prev_level + 1, index + 1):
            inner[lv] = layer.size
        prev_level, prev_size = index, layer.size
    return SlicePlan(start, slice_level, max(outer.size, 1), tuple(inner))


def effective_pods(topology: FlavorTopology, pods: list[Int64Array], plan: SlicePlan) -> list[Int64Array]:
    """pods[level][domain] re-summed from the lowest level with each child rounded down to its
    level's inner size: a domain contributes to its parent only whole inner groups (Kueue's
    multi-layer rule). The plain counts when there are no inner layers."""
    if not plan.layered:
        return pods
    eff = list(pods)
    for level in range(len(topology.levels) - 2, -1, -1):
        m = plan.inner[level + 1]
        eff[level] = np.bincount(topology.domains[level + 1].parents(), weights=(eff[level + 1] // m) * m,
                                 minlength=len(topology.domains[level].keys)).astype(np.int64)
    return eff


def unit_counts(topology: FlavorTopology, pods: list[Int64Array], plan: SlicePlan) -> list[Int64Array]:
    """units[level][domain]: how many units of `plan.unit(level)` pods the domain holds.

    At the slice level a domain holds floor(pods / size) slices, above it the sum of its children's
    slices (a slice never straddles two domains of the slice level); below it, whole inner groups
    of its effective pods (`effective_pods`)."""
    if plan.size == 1 and not plan.layered:
        return pods
    levels = len(topology.levels)
    eff = effective_pods(topology, pods, plan)
    units: list[Int64Array] = [np.zeros(0, dtype=np.int64)] * levels
    for level in range(levels - 1, plan.slice_level, -1):
        units[level] = eff[level] // plan.inner[level]
    units[plan.slice_level] = eff[plan.slice_level] // plan.size
    for level in range(plan.slice_level - 1, -1, -1):
        units[level] = np.bincount(topology.domains[level + 1].parents(), weights=units[level + 1],
                                   minlength=len(topology.domains[level].keys)).astype(np.int64)
    return units


def layer_fits(topology: FlavorTopology, pods: list[Int64Array], plan: SlicePlan, ps: PodSetRequest,
               level: int, domain: int) -> list[tuple[str, int, int]]:
    """For Kueue's multi-layer failure message: per slice layer (level name, slices that fit inside
    `domain` of `level`, slices needed), from the effective pods of that layer's level."""
    eff = effective_pods(topology, pods, plan)
    out: list[tuple[str, int, int]] = []
    for layer in ps.topology.slices:
        target = topology.levels.index(layer.level)
        inside = np.asarray([domain], dtype=np.int64)
        for lv in range(level + 1, target + 1):
            inside = np.nonzero(np.isin(topology.domains[lv].parents(), inside))[0].astype(np.int64)
        out.append((layer.level, int((eff[target][inside] // layer.size).sum()), ps.count // layer.size))
    return out

