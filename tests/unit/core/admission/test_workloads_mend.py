"""workload_info reads a Workload's priority with the same rule as a Job's pod spec (priority_of)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from controller.core.admission.workloads import workload_info

CLASSES = {"high": 1000, "low": -5}


@dataclass(frozen=True)
class PriorityCase:
    name: str
    spec: dict[str, Any]
    want_priority: int


CASES = [
    PriorityCase("an explicit priority wins over its class", {"priority": 7, "priorityClassName": "high"}, 7),
    PriorityCase("a zero priority is explicit too", {"priority": 0, "priorityClassName": "high"}, 0),
    PriorityCase("a known class gives its value", {"priorityClassName": "low"}, -5),
    PriorityCase("an unknown class falls back to 0", {"priorityClassName": "missing"}, 0),
    PriorityCase("neither field gives 0", {}, 0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_workload_priority(case: PriorityCase) -> None:
    wl = workload_info({"metadata": {"name": "w", "namespace": "ns"}, "spec": {"queueName": "q", **case.spec}},
                       priority_classes=CLASSES)
    assert wl.priority == case.want_priority
