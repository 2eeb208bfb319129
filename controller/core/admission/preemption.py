"""Preemption is not implemented yet: what a ClusterQueue asks of it becomes a warning, not a pretence.

`preemption_warning(cq)` names the `spec.preemption` policies other than Never that tasq accepts
but does not act on (a Workload that would preempt waits instead). Pure; called by `tasq simulate`
for every ClusterQueue it reads, and meant for the ClusterQueue webhook's warnings.
"""

from __future__ import annotations

from typing import Final, get_args

from controller.api.queues import ClusterQueue, PreemptionPolicy

NEVER: Final = get_args(PreemptionPolicy)[0]
"""Kueue's default policy: no preemption (the first of the model's named values)."""


def preemption_warning(cq: ClusterQueue) -> str | None:
    """`ClusterQueue "x": spec.preemption (withinClusterQueue: LowerPriority) is accepted but tasq
    does not preempt yet; workloads that would preempt wait instead`, or None when nothing is asked."""
    preemption = cq.spec.preemption
    if preemption is None:
        return None
    asked = [(f"withinClusterQueue: {preemption.within_cluster_queue}", preemption.within_cluster_queue),
             (f"reclaimWithinCohort: {preemption.reclaim_within_cohort}", preemption.reclaim_within_cohort)]
    if preemption.borrow_within_cohort is not None:
        policy = preemption.borrow_within_cohort.policy
        asked.append((f"borrowWithinCohort.policy: {policy}", policy))
    policies = [text for text, value in asked if value not in (None, NEVER)]
    if not policies:
        return None
    return (f"ClusterQueue \"{cq.name}\": spec.preemption ({', '.join(policies)}) is accepted but tasq does "
            "not preempt yet; workloads that would preempt wait instead")
