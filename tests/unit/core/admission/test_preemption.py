"""PreemptionPolicy.from_model: a ClusterQueue's spec.preemption and whenCanPreempt as admission reads
them, with Kueue's defaults."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from controller.core.admission.preemption import PreemptionPolicy
from tests.builders.kueue import make_cluster_queue

CASES: list[tuple[str, Any, Any, PreemptionPolicy]] = [
    ("no preemption field: Kueue's defaults, nothing preempts", None, None, PreemptionPolicy()),
    ("within the queue by priority", {"withinClusterQueue": "LowerPriority"}, None,
     PreemptionPolicy(within_cluster_queue=c.PREEMPTION_LOWER_PRIORITY)),
    ("reclaim and borrow within the cohort, with a threshold",
     {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 7}},
     None, PreemptionPolicy(reclaim_within_cohort=c.PREEMPTION_ANY, borrow_within_cohort=c.PREEMPTION_LOWER_PRIORITY,
                            max_priority_threshold=7)),
    ("whenCanPreempt MayStopSearch stops at the first flavor where preemption helps", None,
     {"whenCanPreempt": "MayStopSearch"}, PreemptionPolicy(stop_at_preemption=True)),
    ("whenCanPreempt TryNextFlavor (the default) moves on", None, {"whenCanPreempt": "TryNextFlavor"},
     PreemptionPolicy()),
]


@pytest.mark.parametrize(("preemption", "fungibility", "want"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_policy_from_model(preemption: Any, fungibility: Any, want: PreemptionPolicy) -> None:
    cq = make_cluster_queue("cq").flavor("f", {"cpu": 1})
    if preemption is not None:
        cq.set("spec.preemption", preemption)
    if fungibility is not None:
        cq.set("spec.flavorFungibility", fungibility)
    got = PreemptionPolicy.from_model(cq.model())
    assert got == want
    assert got.enabled == ((want.within_cluster_queue, want.reclaim_within_cohort) != ("Never", "Never"))
