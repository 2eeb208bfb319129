"""Node candidacy: which of a flavor's nodes (the tree holds only those carrying its nodeLabels, so
flavor labels are never a reason here) may host a given pod set, and why not. A node's static reason
(not ready, unschedulable, missing level label) is computed once when the tree learns the node; the
pod-set part (taints against pod + flavor tolerations, the pod's nodeSelector and required node
affinity) depends on the pod set's signature: `FlavorTopology` keeps one `CandidateMask` per
signature and patches it node by node as nodes change."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.api.selectors import NodeSelectorTerm, Toleration, node_matches_pod, untolerated_taint
from controller.api.views import NodeView

# Exclusion reasons, in the order they are checked and listed in messages.
NOT_READY = "not ready"
UNSCHEDULABLE = "unschedulable"
NODE_SELECTOR = "node selector"
NODE_AFFINITY = "node affinity"
_MISSING_LABEL = "missing label"
_TAINT = "taint"
_RESOURCE = "resource"
_KIND_ORDER = (NOT_READY, UNSCHEDULABLE, _MISSING_LABEL, _TAINT, NODE_SELECTOR, NODE_AFFINITY, _RESOURCE)


def missing_label(key: str) -> str:
    return f'{_MISSING_LABEL} "{key}"'


def taint_reason(taint: object) -> str:
    return f'{_TAINT} "{taint}"'


def resource_reason(resource: str) -> str:
    return f'{_RESOURCE} "{resource}"'


def reason_sort_key(reason: str) -> tuple[int, str]:
    """Message order: the order the checks run in, then the quoted name."""
    for i, kind in enumerate(_KIND_ORDER):
        if reason.startswith(kind):
            return i, reason
    return len(_KIND_ORDER), reason


def static_reason(view: NodeView, levels: Sequence[str]) -> str | None:
    """Why a node of the flavor can never host its pods (whatever the pod set), or None. A node
    lacking a level label is still the flavor's node: it counts in "Total nodes", excluded."""
    if not view.ready:
        return NOT_READY
    if view.unschedulable:
        return UNSCHEDULABLE
    for key in levels:
        if key not in view.labels:
            return missing_label(key)
    return None


@dataclass(frozen=True, slots=True)
class Signature:
    """What candidacy depends on in a pod set; equal signatures share one mask."""

    node_selector: tuple[tuple[str, str], ...]
    affinity_terms: tuple[NodeSelectorTerm, ...]
    tolerations: tuple[Toleration, ...]

    @classmethod
    def of(cls, node_selector: Mapping[str, str], affinity_terms: Sequence[NodeSelectorTerm],
           tolerations: Sequence[Toleration]) -> Signature:
        return cls(tuple(sorted(node_selector.items())), tuple(affinity_terms), tuple(tolerations))


def podset_reason(view: NodeView, signature: Signature, flavor_tolerations: Sequence[Toleration]) -> str | None:
    """Why a statically fine node cannot host pods of this signature, or None."""
    if view.taints:
        taint = untolerated_taint(view.taints, (*signature.tolerations, *flavor_tolerations))
        if taint is not None:
            return taint_reason(taint)
    if signature.node_selector and not node_matches_pod(view.name, view.labels, dict(signature.node_selector), ()):
        return NODE_SELECTOR
    if signature.affinity_terms and not node_matches_pod(view.name, view.labels, {}, signature.affinity_terms):
        return NODE_AFFINITY
    return None


class CandidateMask:
    """`mask[slot]` is True for candidate nodes; `reason_of[slot]` indexes `reasons` for the
    occupied slots that are not (-1 otherwise), so tallies are one bincount."""

    __slots__ = ("_reason_index", "mask", "reason_of", "reasons", "signature")

    def __init__(self, signature: Signature, size: int) -> None:
        self.signature = signature
        self.mask: npt.NDArray[np.bool_] = np.zeros(size, dtype=bool)
        self.reason_of: npt.NDArray[np.int32] = np.full(size, -1, dtype=np.int32)
        self.reasons: list[str] = []
        self._reason_index: dict[str, int] = {}

    def fill(self, views: Sequence[NodeView | None], statics: Sequence[str | None],
             flavor_tolerations: Sequence[Toleration]) -> None:
        """Evaluate every slot at once (first use of a signature)."""
        reason_of = [-1] * len(views)
        for slot, view in enumerate(views):
            if view is None:
                continue
            static = statics[slot]
            reason = static if static is not None else podset_reason(view, self.signature, flavor_tolerations)
            if reason is not None:
                reason_of[slot] = self._intern(reason)
        self.reason_of = np.asarray(reason_of, dtype=np.int32)
        occupied = np.asarray([v is not None for v in views], dtype=bool)
        self.mask = occupied & (self.reason_of < 0)

    def refresh(self, slot: int, view: NodeView | None, static: str | None,
                flavor_tolerations: Sequence[Toleration]) -> None:
        """Re-evaluate one slot after its node was added, changed or removed (view None)."""
        size = self.mask.shape[0]
        if slot >= size:
            grown = max(slot + 1, 2 * size)
            self.mask = np.concatenate([self.mask, np.zeros(grown - size, dtype=bool)])
            self.reason_of = np.concatenate([self.reason_of, np.full(grown - size, -1, dtype=np.int32)])
        reason = None
        if view is not None:
            reason = static if static is not None else podset_reason(view, self.signature, flavor_tolerations)
        self.mask[slot] = view is not None and reason is None
        self.reason_of[slot] = -1 if reason is None else self._intern(reason)

    def _intern(self, reason: str) -> int:
        index = self._reason_index.get(reason)
        if index is None:
            index = self._reason_index[reason] = len(self.reasons)
            self.reasons.append(reason)
        return index

    def tally(self) -> Counter[str]:
        """Excluded nodes per reason."""
        excluded = self.reason_of[self.reason_of >= 0]
        counts = np.bincount(excluded, minlength=len(self.reasons)).tolist()
        return Counter({self.reasons[i]: n for i, n in enumerate(counts) if n})
