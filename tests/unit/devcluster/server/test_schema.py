"""CRD structural schemas: pruning, defaulting and validation messages with field paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster.server.schema import prune_and_default, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {
            "type": "object", "required": ["queueName", "podSets"],
            "properties": {
                "queueName": {"type": "string", "minLength": 1, "maxLength": 63},
                "priority": {"type": "integer", "default": 0},
                "mode": {"type": "string", "enum": ["Strict", "BestEffort"]},
                "podSets": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
                    "type": "object", "required": ["name", "count"],
                    "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"},
                                   "count": {"type": "integer", "minimum": 1},
                                   "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}},
                "quota": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "note": {"type": "string", "nullable": True},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def workload(**spec: Any) -> dict[str, Any]:
    base = {"queueName": "q", "podSets": [{"name": "main", "count": 1}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w", "uid": "1"},
            "spec": {**base, **spec}}


@dataclass(frozen=True)
class InvalidCase:
    name: str
    spec: dict[str, Any]
    want: list[tuple[str, str, str]]  # field, reason, message


INVALID_CASES = [
    InvalidCase("count below minimum", {"podSets": [{"name": "main", "count": 0}]},
                [("spec.podSets[0].count", "FieldValueInvalid",
                  "Invalid value: 0: spec.podSets[0].count in body should be greater than or equal to 1")]),
    InvalidCase("wrong type", {"podSets": [{"name": "main", "count": "eight"}]},
                [("spec.podSets[0].count", "FieldValueTypeInvalid",
                  'Invalid value: "string": spec.podSets[0].count in body must be of type integer: "eight"')]),
    InvalidCase("missing required field", {"podSets": [{"name": "main"}]},
                [("spec.podSets[0].count", "FieldValueRequired", "Required value")]),
    InvalidCase("enum", {"mode": "Lax"},
                [("spec.mode", "FieldValueNotSupported",
                  'Unsupported value: "Lax": supported values: "Strict", "BestEffort"')]),
    InvalidCase("pattern", {"podSets": [{"name": "Main", "count": 1}]},
                [("spec.podSets[0].name", "FieldValueInvalid",
                  "Invalid value: \"Main\": spec.podSets[0].name in body should match '^[a-z]+$'")]),
    InvalidCase("too many items", {"podSets": [{"name": "a", "count": 1}] * 3},
                [("spec.podSets", "FieldValueTooMany", "Too many: 3: must have at most 2 items")]),
    InvalidCase("too few items", {"podSets": []},
                [("spec.podSets", "FieldValueInvalid", "Invalid value: 0: spec.podSets in body should have at "
                                                       "least 1 items")]),
    InvalidCase("string too short", {"queueName": ""},
                [("spec.queueName", "FieldValueInvalid",
                  'Invalid value: "": spec.queueName in body should be at least 1 chars long')]),
    InvalidCase("int-or-string refuses a bool", {"quota": True},
                [("spec.quota", "FieldValueTypeInvalid",
                  "Invalid value: \"boolean\": spec.quota in body must be of type integer,string: true")]),
    InvalidCase("additionalProperties schema applies to every value", {"labels": {"a": 1}},
                [("spec.labels.a", "FieldValueTypeInvalid",
                  "Invalid value: \"integer\": spec.labels.a in body must be of type string: 1")]),
    InvalidCase("every error is reported", {"queueName": "", "podSets": [{"name": "main", "count": 0}]},
                [("spec.queueName", "FieldValueInvalid",
                  'Invalid value: "": spec.queueName in body should be at least 1 chars long'),
                 ("spec.podSets[0].count", "FieldValueInvalid",
                  "Invalid value: 0: spec.podSets[0].count in body should be greater than or equal to 1")]),
]


@pytest.mark.parametrize("case", INVALID_CASES, ids=lambda c: c.name)
def test_validation_reports_field_paths(case: InvalidCase) -> None:
    causes = validate(workload(**case.spec), SCHEMA)
    assert [(c.field, c.reason, c.message) for c in causes] == case.want


@pytest.mark.parametrize("spec", [{"quota": "10Gi"}, {"quota": 3}, {"note": None}, {"labels": {"a": "b"}}],
                         ids=["int-or-string string", "int-or-string int", "nullable", "map of strings"])
def test_valid_values_pass(spec: dict[str, Any]) -> None:
    assert validate(workload(**spec), SCHEMA) == []


def test_pruning_drops_undeclared_fields_and_keeps_preserved_ones() -> None:
    obj = workload(unknown=1, podSets=[{"name": "a", "count": 1, "extra": True, "template": {"any": {"x": 1}}}])
    obj["metadata"]["labels"] = {"kept": "yes"}
    obj["rogue"] = {"top": 1}
    pruned = prune_and_default(obj, SCHEMA)
    assert "rogue" not in pruned and "unknown" not in pruned["spec"]
    assert pruned["spec"]["podSets"] == [{"name": "a", "count": 1, "template": {"any": {"x": 1}}}]
    assert pruned["metadata"] == {"name": "w", "uid": "1", "labels": {"kept": "yes"}}


def test_defaults_fill_missing_fields_only() -> None:
    assert prune_and_default(workload(), SCHEMA)["spec"]["priority"] == 0
    assert prune_and_default(workload(priority=7), SCHEMA)["spec"]["priority"] == 7


@given(st.dictionaries(st.sampled_from(["queueName", "priority", "junk", "more"]),
                       st.one_of(st.integers(), st.text(max_size=3)), max_size=4))
def test_pruning_keeps_exactly_the_declared_keys(spec: dict[str, Any]) -> None:
    declared = set(SCHEMA["properties"]["spec"]["properties"])
    pruned = prune_and_default({"metadata": {}, "spec": spec}, SCHEMA)["spec"]
    assert set(pruned) == ({k for k in spec if k in declared} | {"priority"})


def test_pruning_reports_the_paths_it_dropped() -> None:
    dropped: list[str] = []
    prune_and_default(workload(queueNam="typo", podSets=[{"name": "a", "count": 1, "cnt": 2}]), SCHEMA, dropped)
    assert dropped == ["spec.podSets[0].cnt", "spec.queueNam"]  # document order
