"""preemption_warning: which ClusterQueue preemption settings tasq warns it does not act on."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.admission.preemption import preemption_warning
from tests.builders.kueue import make_cluster_queue

CASES: list[tuple[str, Any, str | None]] = [
    ("no preemption field: nothing to warn about", None, None),
    ("every policy Never (Kueue's default): nothing asked", {"withinClusterQueue": "Never",
                                                             "reclaimWithinCohort": "Never"}, None),
    ("within the queue by priority", {"withinClusterQueue": "LowerPriority"}, "withinClusterQueue: LowerPriority"),
    ("reclaim and borrow within the cohort", {"reclaimWithinCohort": "Any", "borrowWithinCohort": {
        "policy": "LowerPriority"}}, "reclaimWithinCohort: Any, borrowWithinCohort.policy: LowerPriority"),
]


@pytest.mark.parametrize(("preemption", "named"), [(p, n) for _, p, n in CASES], ids=[c[0] for c in CASES])
def test_preemption_warning_names_each_policy_that_is_not_never(preemption: Any, named: str | None) -> None:
    cq = make_cluster_queue("cq").flavor("f", {"cpu": 1})
    if preemption is not None:
        cq.set("spec.preemption", preemption)
    warning = preemption_warning(cq.model())
    if named is None:
        assert warning is None
    else:
        assert warning == (f'ClusterQueue "cq": spec.preemption ({named}) is accepted but tasq does not '
                           "preempt yet; workloads that would preempt wait instead")
