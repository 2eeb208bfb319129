"""kube_schema: core objects against Kubernetes v1.37's schema, strictly as kubectl validates them."""

from __future__ import annotations

from typing import Any

import pytest

from controller.manifests.kube_schema import schema_errors
from tests.builders.cluster import make_node, make_pod

POD = "io.k8s.api.core.v1.Pod"
NODE = "io.k8s.api.core.v1.Node"


def pod(**spec: Any) -> dict[str, Any]:
    obj = make_pod("p").build()
    obj["spec"].update(spec)
    return obj


CASES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("a valid node: nothing", NODE, make_node("n1").allocatable(cpu="8").build(), []),
    ("a valid pod: nothing", POD, pod(), []),
    ("an unknown field, deep inside", POD, pod(tolerations=[{"key": "a", "operater": "Exists"}]),
     ['spec.tolerations[0].operater: unknown field "operater"']),
    ("a boolean where a string goes", NODE, make_node("n1").set("spec.podCIDR", True).build(),
     ["spec.podCIDR: Invalid value: true: must be a string"]),
    ("an integer that overflows int32", POD, pod(priority=2 ** 31),
     ["spec.priority: Invalid value: 2147483648: must be between -2147483648 and 2147483647"]),
    ("a string where an integer goes", POD, pod(priority="7"), ['spec.priority: Invalid value: "7": must be an integer']),
    ("a whole float is an integer, as JSON numbers are", POD, pod(priority=7.0), []),
    ("an apiVersion outside the definition's enum", POD, {**pod(), "apiVersion": "v2"},
     ['apiVersion: Unsupported value: "v2": supported values: "v1"']),
    ("a required field missing", POD, pod(containers=[{"image": "x"}]), ["spec.containers[0].name: Required value"]),
    ("a date that is not RFC 3339", NODE, make_node("n1").set("metadata.creationTimestamp", "yesterday").build(),
     ['metadata.creationTimestamp: Invalid value: "yesterday": must be an RFC 3339 date-time such as '
      '"2026-01-01T00:00:00Z"']),
    ("a map value of the wrong type", NODE, make_node("n1").set("metadata.labels", {"a": 1}).build(),
     ["metadata.labels[a]: Invalid value: 1: must be a string"]),
    ("null is an absent field", POD, pod(nodeName=None), []),
    ("a list where an object goes (the value is not echoed)", POD, pod(affinity=[1] * 1000),
     ['spec.affinity: Invalid value: "<list>": must be an object']),
]


@pytest.mark.parametrize(("definition", "obj", "errors"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_schema_errors(definition: str, obj: dict[str, Any], errors: list[str]) -> None:
    assert [str(e) for e in schema_errors(definition, obj)] == errors


NULL_ITEMS: list[tuple[str, str, dict[str, Any], str, Any]] = [
    ("a null selector term: an empty term", POD,
     pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [None]}}}),
     "affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}),
    ("a null gate: its required name empty", POD, pod(schedulingGates=[{"name": "a"}, None]),
     "schedulingGates", [{"name": "a"}, {"name": ""}]),
    ("a null match value: an empty string", POD,
     pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "a", "operator": "In", "values": [None]}]}]}}}),
     "affinity", {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "a", "operator": "In", "values": [""]}]}]}}}),
    ("a null request: quantity zero", POD, pod(containers=[{"name": "c", "resources": {"requests": {"cpu": None}}}]),
     "containers", [{"name": "c", "resources": {"requests": {"cpu": "0"}}}]),
    ("a null node selector value: an empty string", POD, pod(nodeSelector={"rack": None}), "nodeSelector",
     {"rack": ""}),
]


@pytest.mark.parametrize(("definition", "obj", "field", "decoded"), [c[1:] for c in NULL_ITEMS],
                         ids=[c[0] for c in NULL_ITEMS])
def test_a_null_item_or_map_value_is_decoded_into_its_zero_value_as_go_does(
        definition: str, obj: dict[str, Any], field: str, decoded: Any) -> None:
    assert schema_errors(definition, obj) == []
    assert obj["spec"][field] == decoded


def test_a_null_item_with_a_required_field_of_a_nested_type_gets_that_field_too() -> None:
    obj = pod(tolerations=[None], containers=[{"name": "c"}, None])
    assert schema_errors(POD, obj) == []
    assert obj["spec"]["tolerations"] == [{}]  # no required field
    assert obj["spec"]["containers"][1] == {"name": ""}
