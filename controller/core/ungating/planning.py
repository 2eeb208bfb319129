"""Plans which gated pods of one admitted Workload to release, and into which topology slice.

Pure: the TopologyUngater (controller/kube/ungating.py) builds an `UngatingInput` from its cache and
patches one pod per `Ungate`. Pods already released keep their slot; terminated pods free theirs;
with ranks, pod of rank i goes to the slice holding slot i (slices in the admission's order, which
sorts them). `pod_rank` reads a pod's rank as Kueue does: its index label (a Job's completion index),
offset by its sub-group's index (a JobSet's Job index) times the pods per sub-group.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from controller.api import constants as c
from controller.api.topology_assignment import DomainPods
from controller.api.workload import PodSetTopologyRequest

_NO_INDEX = 1 << 62  # sorts pods without a completion index after every indexed pod
_EMPTY: Mapping[str, Mapping[str, str]] = MappingProxyType({})


def _label_int(labels: Mapping[str, str], key: str) -> int | None:
    raw = labels.get(key, "")
    return int(raw) if raw.isdigit() else None


def pod_rank(labels: Mapping[str, str], request: PodSetTopologyRequest | None, count: int) -> int | None:
    """The pod's rank within its pod set of `count` pods: the value of the request's podIndexLabel
    (the completion index when it names none); with subGroupIndexLabel and subGroupCount, plus the
    sub-group's index x count / subGroupCount. None when a label is absent or not a number."""
    index = _label_int(labels, (request.pod_index_label if request is not None else None)
                       or c.LABEL_JOB_COMPLETION_INDEX)
    if index is None or request is None or not request.sub_group_index_label or not request.sub_group_count:
        return index
    sub_group = _label_int(labels, request.sub_group_index_label)
    if sub_group is None:
        return None
    return sub_group * (count // request.sub_group_count) + index


@dataclass(frozen=True)
class PodState:
    """What the planner needs of one pod of the Workload.

    `completion_index` is the pod's rank (`pod_rank`: for a Job its completion index; None: a label
    absent or not a number); `gated` means the pod still carries the `kueue.x-k8s.io/topology` gate; `assigned` is, for
    an ungated pod, its nodeSelector (the slice labels it was released into); `terminated` means
    Succeeded, Failed or being deleted; `created` is the RFC 3339 creationTimestamp (a tie-break).
    """

    name: str
    uid: str
    pod_set: str
    completion_index: int | None
    gated: bool
    assigned: Mapping[str, str] | None
    terminated: bool
    created: str


@dataclass(frozen=True)
class UngatingInput:
    """One admitted Workload: its slices per pod set (from `status.admission`) and its pods."""

    namespace: str
    workload: str
    slices: Mapping[str, Sequence[DomainPods]]
    pods: Sequence[PodState]


@dataclass(frozen=True)
class Ungate:
    """Remove the topology gate from `pod` and add `node_selector` (the slice's labels) in one patch."""

    pod: str
    uid: str
    node_selector: Mapping[str, str]


@dataclass(frozen=True)
class UngatingPlan:
    """The pods to release now; `held` counts gated pods left gated because no slot is free for them."""

    ungate: tuple[Ungate, ...]
    held: int


def plan_ungating(inp: UngatingInput, in_flight: Mapping[str, Mapping[str, str]] = _EMPTY) -> UngatingPlan:
    """Assign gated pods to free slice slots, pod set by pod set (sorted by name): deterministic.

    `in_flight` maps the uid of a pod whose ungate patch was sent but not yet seen in the cache to the
    node selector it was given: such a pod occupies its slot as if the cache already showed it released.
    """
    by_pod_set: dict[str, list[PodState]] = {}
    for pod in inp.pods:
        by_pod_set.setdefault(pod.pod_set, []).append(pod)
    ungate: list[Ungate] = []
    held = 0
    for pod_set in sorted(by_pod_set):
        pods = by_pod_set[pod_set]
        slices = inp.slices.get(pod_set) or ()
        board = _SlotBoard.of(slices)
        waiting = _occupy_kept_slots(board, pods, in_flight)
        placed, rest = _place_by_rank(board, waiting, _ranks_usable(pods, board.total))
        filled, left = _fill_in_order(board, rest)
        ungate.extend(sorted(placed + filled, key=lambda u: u.pod))
        held += len(left)
    return UngatingPlan(tuple(ungate), held)


@dataclass
class _SlotBoard:
    """The slices of one pod set in the admission's order and how many slots of each are still free.

    `starts[i]` is the first slot (rank) of slice i, so slot r belongs to slice
    `bisect_right(starts, r) - 1`; `by_labels` finds a slice from a released pod's node selector.
    """

    labels: list[dict[str, str]]
    free: list[int]
    starts: list[int]
    total: int
    key_sets: list[tuple[str, ...]] = field(default_factory=list)
    by_labels: dict[tuple[tuple[str, str], ...], int] = field(default_factory=dict)

    @classmethod
    def of(cls, slices: Sequence[DomainPods]) -> _SlotBoard:
        # The admission's order, as Kueue numbers slots: the admission sorts slices by their values
        # level by level, which the planner cannot redo (an API round trip may reorder label keys).
        ordered = list(slices)
        starts: list[int] = []
        total = 0
        for s in ordered:
            starts.append(total)
            total += s.count
        board = cls([dict(s.node_labels) for s in ordered], [s.count for s in ordered], starts, total)
        for i, s in enumerate(ordered):
            keys = tuple(sorted(s.node_labels))
            if keys not in board.key_sets:
                board.key_sets.append(keys)
            board.by_labels.setdefault(tuple(sorted(s.node_labels.items())), i)
        return board

    def slice_of(self, selector: Mapping[str, str]) -> int | None:
        """The slice whose labels all appear in `selector` with the same values (None: no such slice)."""
        for keys in self.key_sets:
            if all(k in selector for k in keys):
                found = self.by_labels.get(tuple((k, selector[k]) for k in keys))
                if found is not None:
                    return found
        return None

    def slice_of_rank(self, rank: int) -> int:
        return bisect.bisect_right(self.starts, rank) - 1


def _occupy_kept_slots(board: _SlotBoard, pods: Sequence[PodState],
                       in_flight: Mapping[str, Mapping[str, str]]) -> list[PodState]:
    """Phase 1: released pods (and in-flight ones) that are not terminated take their slice's slots.

    Returns the gated, non-terminated pods that still wait, ordered by completion index, then creation
    time, then name. A released pod outside every slice takes no slot (it is not ours to count).
    """
    waiting: list[PodState] = []
    for pod in pods:
        if pod.terminated:
            continue
        selector = in_flight.get(pod.uid)
        if selector is None and not pod.gated:
            selector = pod.assigned or {}
        if selector is None:
            waiting.append(pod)
            continue
        i = board.slice_of(selector)
        if i is not None:
            board.free[i] -= 1
    waiting.sort(key=lambda p: (_NO_INDEX if p.completion_index is None else p.completion_index,
                                p.created, p.name))
    return waiting


def _ranks_usable(pods: Sequence[PodState], total: int) -> bool:
    """Ranks (completion indexes) decide slots only when every live pod has a distinct one below `total`."""
    seen: set[int] = set()
    for pod in pods:
        if pod.terminated:
            continue
        index = pod.completion_index
        if index is None or not 0 <= index < total or index in seen:
            return False
        seen.add(index)
    return bool(seen)


def _place_by_rank(board: _SlotBoard, waiting: list[PodState], usable: bool) -> tuple[list[Ungate], list[PodState]]:
    """Phase 2: a pod with completion index r goes to the slice holding slot r if that slice has room.

    Returns the pods placed and, in the same order as given, those whose slice was full (or all of
    them when ranks are not usable).
    """
    if not usable:
        return [], waiting
    placed: list[Ungate] = []
    rest: list[PodState] = []
    for pod in waiting:
        i = board.slice_of_rank(pod.completion_index or 0)
        if board.free[i] > 0:
            board.free[i] -= 1
            placed.append(Ungate(pod.name, pod.uid, board.labels[i]))
        else:
            rest.append(pod)
    return placed, rest


def _fill_in_order(board: _SlotBoard, waiting: list[PodState]) -> tuple[list[Ungate], list[PodState]]:
    """Phase 3: the remaining pods, in order, fill the free slots slice by slice in the admission's order.

    One pass over pods and slices together; returns the pods placed and those left without a slot.
    """
    placed: list[Ungate] = []
    i = 0
    for n, pod in enumerate(waiting):
        while i < len(board.free) and board.free[i] <= 0:
            i += 1
        if i == len(board.free):
            return placed, waiting[n:]
        board.free[i] -= 1
        placed.append(Ungate(pod.name, pod.uid, board.labels[i]))
    return placed, []
