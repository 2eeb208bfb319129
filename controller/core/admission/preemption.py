"""A ClusterQueue's preemption settings as admission reads them.

`PreemptionPolicy.from_model(cq)` reads `spec.preemption` and `spec.flavorFungibility.whenCanPreempt`
with Kueue's defaults (every policy Never, whenCanPreempt TryNextFlavor); `ClusterQueueQuota` carries
it for the victim search (controller.core.admission.preempting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.api import constants as c
from controller.api.queues import ClusterQueue

STOP_AT_PREEMPTION: Final = "MayStopSearch"
"""The whenCanPreempt value that takes the first flavor where preemption makes room (v1beta1's
deprecated `Preempt` arrives converted to it)."""


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    """`within_cluster_queue`: Never / LowerPriority / LowerOrNewerEqualPriority; `reclaim_within_cohort`:
    Never / LowerPriority / Any; `borrow_within_cohort`: Never / LowerPriority with its optional
    `max_priority_threshold` (victims above it are reclaimed only when the preemptor then does not
    borrow); `stop_at_preemption`: whenCanPreempt MayStopSearch (preempt in an earlier flavor rather
    than take a later one that fits)."""

    within_cluster_queue: str = c.PREEMPTION_NEVER
    reclaim_within_cohort: str = c.PREEMPTION_NEVER
    borrow_within_cohort: str = c.PREEMPTION_NEVER
    max_priority_threshold: int | None = None
    stop_at_preemption: bool = False

    @property
    def enabled(self) -> bool:
        return (self.within_cluster_queue, self.reclaim_within_cohort) != (c.PREEMPTION_NEVER, c.PREEMPTION_NEVER)

    @classmethod
    def from_model(cls, cq: ClusterQueue) -> PreemptionPolicy:
        spec = cq.spec
        fungibility = spec.flavor_fungibility
        stop = fungibility is not None and fungibility.when_can_preempt == STOP_AT_PREEMPTION
        preemption = spec.preemption
        if preemption is None:
            return cls(stop_at_preemption=stop)
        borrow = preemption.borrow_within_cohort
        return cls(
            within_cluster_queue=preemption.within_cluster_queue or c.PREEMPTION_NEVER,
            reclaim_within_cohort=preemption.reclaim_within_cohort or c.PREEMPTION_NEVER,
            borrow_within_cohort=(borrow.policy if borrow is not None and borrow.policy else c.PREEMPTION_NEVER),
            max_priority_threshold=borrow.max_priority_threshold if borrow is not None else None,
            stop_at_preemption=stop,
        )
