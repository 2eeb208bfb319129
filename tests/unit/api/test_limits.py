"""The CRD schemas and the validators agree on Kueue's size limits and enums, at and past each bound.

A limit lives in the model (and so the generated schema) and is read by the validators; a row
here fails when one of them drifts, e.g. a schema refusing what the validators accept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest

from controller.api import constants as c
from controller.api.crds import all_crds, crd_json_schema, kind_spec
from tests.unit.api import examples
from webhooks.validation import validate


@dataclass(frozen=True)
class LimitCase:
    name: str
    example: Callable[[], dict[str, Any]]
    change: Callable[[dict[str, Any]], None]
    want_valid: bool


def _spec(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["spec"].update(fields)


def _group(covered: int, flavors: int) -> dict[str, Any]:
    names = [f"example.com/r{i}" for i in range(covered)]
    return {"coveredResources": names, "flavors": [
        {"name": f"f{j}", "resources": [{"name": n, "nominalQuota": "1"} for n in names]} for j in range(flavors)]}


def _groups(count: int) -> list[dict[str, Any]]:
    return [{"coveredResources": [f"example.com/g{i}"], "flavors": [
        {"name": f"g{i}", "resources": [{"name": f"example.com/g{i}", "nominalQuota": "1"}]}]}
        for i in range(count)]


def _tolerations(n: int) -> list[dict[str, Any]]:
    return [{"key": f"k{i}", "operator": "Exists"} for i in range(n)]


CASES = [
    LimitCase("8 node labels on a flavor", examples.flavor_kueue_form,
              _spec(nodeLabels={f"l{i}": "x" for i in range(8)}), want_valid=True),
    LimitCase("9 node labels on a flavor", examples.flavor_kueue_form,
              _spec(nodeLabels={f"l{i}": "x" for i in range(9)}), want_valid=False),
    LimitCase("8 tolerations on a flavor", examples.flavor_kueue_form, _spec(tolerations=_tolerations(8)),
              want_valid=True),
    LimitCase("9 tolerations on a flavor", examples.flavor_kueue_form, _spec(tolerations=_tolerations(9)),
              want_valid=False),
    LimitCase("9 taints on a flavor", examples.flavor_kueue_form, _spec(nodeTaints=[
        {"key": f"k{i}", "effect": "NoSchedule"} for i in range(9)]), want_valid=False),
    LimitCase("64 resources in a group", examples.cluster_queue,
              _spec(resourceGroups=[_group(64, 1)]), want_valid=True),
    LimitCase("64 flavors in a group", examples.cluster_queue,
              _spec(resourceGroups=[_group(1, 64)]), want_valid=True),
    LimitCase("65 resources in a group", examples.cluster_queue,
              _spec(resourceGroups=[_group(65, 1)]), want_valid=False),
    LimitCase("65 flavors in a group", examples.cluster_queue,
              _spec(resourceGroups=[_group(1, 65)]), want_valid=False),
    LimitCase("16 resource groups", examples.cluster_queue, _spec(resourceGroups=_groups(16)), want_valid=True),
    LimitCase("17 resource groups", examples.cluster_queue, _spec(resourceGroups=_groups(17)), want_valid=False),
    LimitCase("flavorFungibility MayStopSearch (Kueue's current name)", examples.cluster_queue,
              _spec(flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}),
              want_valid=True),
    LimitCase("16 topology levels", examples.topology,
              _spec(levels=[{"nodeLabel": f"l{i}"} for i in range(16)]), want_valid=True),
    LimitCase("17 topology levels", examples.topology,
              _spec(levels=[{"nodeLabel": f"l{i}"} for i in range(17)]), want_valid=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_schema_and_validators_agree(case: LimitCase) -> None:
    obj = case.example()
    case.change(obj)
    group, _, version = obj["apiVersion"].rpartition("/")
    assert group == c.GROUP
    spec = kind_spec(obj["kind"])
    schema = crd_json_schema(all_crds()[spec.file_name], version)
    schema_valid = jsonschema.Draft202012Validator(schema).is_valid(obj)
    validator_errors = [str(e) for e in validate(obj)]
    assert (schema_valid, not validator_errors) == (case.want_valid, case.want_valid), validator_errors
