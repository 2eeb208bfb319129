"""The entry points: which rules apply to which apiVersion/kind, and field error rendering."""

from __future__ import annotations

import pytest

from tests.unit.webhooks.manifests import Case, cases, valid_flavor, valid_topology, valid_workload
from webhooks.validation import FieldError, validate, validate_update


@cases(
    Case("a Node is not tasq's to validate", {"apiVersion": "v1", "kind": "Node", "metadata": {}}),
    Case("a Pod is not tasq's to validate", {"apiVersion": "v1", "kind": "Pod"}),
    Case("an apps/v1 Deployment is ignored", {"apiVersion": "apps/v1", "kind": "Deployment"}),
    Case("an unknown kind in tasq's group", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck"},
         want_errors=("kind",)),
    Case("a Cohort is served as v1beta2 only", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort"},
         want_errors=("apiVersion",)),
    Case("a ResourceFlavor at v1alpha1", valid_flavor().set("apiVersion", "kueue.x-k8s.io/v1alpha1"),
         want_errors=("apiVersion",)),
    Case("a Topology at v1", valid_topology().set("apiVersion", "kueue.x-k8s.io/v1"), want_errors=("apiVersion",)),
    Case("a list is not an object", [1, 2], want_errors=("object",)),
)
def test_dispatch(case: Case) -> None:
    assert [e.path for e in validate(case.manifest())] == list(case.want_errors)


@pytest.mark.parametrize(("source", "priority", "want"), [
    pytest.param(None, None, ["spec.priority"], id="a name with no source or priority: conversion drops it, v1beta1 refuses"),
    pytest.param("kueue.x-k8s.io/workloadpriorityclass", None, ["spec.priority"], id="a name with a source, no priority"),
    pytest.param("kueue.x-k8s.io/workloadpriorityclass", 10, [], id="a name with a source and a priority"),
])
def test_a_v1beta1_priority_class_name_needs_a_priority(source: str | None, priority: int | None,
                                                        want: list[str]) -> None:
    workload = valid_workload().set("apiVersion", "kueue.x-k8s.io/v1beta1").build()
    workload["spec"]["priorityClassName"] = "high"
    for field, value in (("priorityClassSource", source), ("priority", priority)):
        if value is not None:
            workload["spec"][field] = value
    assert [e.path for e in validate(workload)] == want
    assert [e.path for e in validate_update(workload, workload)] == want


def test_update_of_a_kind_without_update_rules_applies_create_rules() -> None:
    old, new = valid_flavor().build(), valid_flavor().topology_name("gpu").build()
    assert [e.path for e in validate_update(old, new)] == ["spec.nodeLabels"]


@pytest.mark.parametrize(("error", "want"), [
    pytest.param(FieldError("spec.podSets[0].count", "must be greater than 0"),
                 "spec.podSets[0].count: must be greater than 0", id="path then message"),
])
def test_field_error_renders_like_the_api_server(error: FieldError, want: str) -> None:
    assert str(error) == want
