"""The JSONPath subset of printer columns, on a Workload-shaped object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from devcluster.front.jsonpath import JSONPathError, evaluate, parse

WORKLOAD: dict[str, Any] = {
    "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "x"}},
    "spec": {"podSets": [{"name": "main", "count": 8}, {"name": "aux", "count": 1}]},
    "status": {"admission": {"clusterQueue": "team-a"},
               "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "False"}]},
}


@dataclass(frozen=True)
class PathCase:
    name: str
    path: str
    want: list[Any]


CASES = [
    PathCase("dotted field", ".status.admission.clusterQueue", ["team-a"]),
    PathCase("missing field selects nothing", ".status.admission.missing", []),
    PathCase("filter on condition type", '.status.conditions[?(@.type=="Admitted")].status', ["False"]),
    PathCase("filter with single quotes", ".status.conditions[?(@.type=='QuotaReserved')].status", ["True"]),
    PathCase("not-equal filter", '.status.conditions[?(@.type!="Admitted")].type', ["QuotaReserved"]),
    PathCase("index", ".spec.podSets[1].name", ["aux"]),
    PathCase("negative index", ".spec.podSets[-1].count", [1]),
    PathCase("wildcard", ".spec.podSets[*].count", [8, 1]),
    PathCase("quoted key with dots and slashes", ".metadata.labels['app.kubernetes.io/name']", ["x"]),
    PathCase("braces are accepted", "{.metadata.name}", ["w"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_jsonpath(case: PathCase) -> None:
    assert evaluate(parse(case.path), WORKLOAD) == case.want


@pytest.mark.parametrize("path", ["..name", ".a[", ".a[?(@.x ~ 1)]", "name"])
def test_unsupported_paths_are_errors(path: str) -> None:
    with pytest.raises(JSONPathError):
        parse(path)
