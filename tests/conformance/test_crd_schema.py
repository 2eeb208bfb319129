"""Structural CRD schemas as the apiserver applies them to custom objects: a value against the schema
is 422 naming the field path, unknown fields are pruned (or refused with fieldValidation=Strict),
defaults are filled in on create, and x-kubernetes-validations (CEL) rules refuse with their message."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body
from tests.conformance.conftest import eventually, status_body

GROUP, VERSION, PLURAL = "conformance.tasq.io", "v1", "racks"
RACKS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "rack", "kind": "Rack"},
             "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {
                     "type": "object", "required": ["slots"],
                     "x-kubernetes-validations": [{"rule": "self.used <= self.slots",
                                                   "message": "used must not exceed slots"}],
                     "properties": {
                         "slots": {"type": "integer", "minimum": 1, "maximum": 64},
                         "used": {"type": "integer", "default": 0},
                         "kind": {"type": "string", "enum": ["gpu", "cpu"], "default": "gpu"},
                         "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}]},
}


@pytest.fixture(scope="module")
def racks(extensions: client.ApiextensionsV1Api, custom: client.CustomObjectsApi) -> Iterator[client.CustomObjectsApi]:
    extensions.create_custom_resource_definition(as_body(RACKS_CRD))

    def served() -> bool:
        try:
            custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        except ApiException:
            return False
        return True
    eventually(served, "racks are served")
    yield custom
    extensions.delete_custom_resource_definition(RACKS_CRD["metadata"]["name"])


def rack(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Rack", "metadata": {"name": name}, "spec": spec}


def test_defaults_are_applied_and_unknown_fields_pruned(racks: client.CustomObjectsApi, namespace: str) -> None:
    created = racks.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                    rack("r1", slots=8, colour="red"))
    assert isinstance(created, dict)
    assert created["spec"] == {"slots": 8, "used": 0, "kind": "gpu"}


def test_strict_field_validation_refuses_unknown_fields(racks: client.CustomObjectsApi, namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        racks.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, rack("r2", slots=8, colour="red"),
                                              field_validation="Strict")
    assert e.value.status == 400
    assert 'unknown field "spec.colour"' in status_body(e.value)["message"]


@pytest.mark.parametrize("spec, want", [
    ({}, "spec.slots: Required value"),
    ({"slots": 0}, "spec.slots: Invalid value: 0: spec.slots in body should be greater than or equal to 1"),
    ({"slots": 8, "kind": "tpu"}, 'spec.kind: Unsupported value: "tpu": supported values: "gpu", "cpu"'),
    ({"slots": "eight"}, 'spec.slots: Invalid value: "string": spec.slots in body must be of type integer'),
    ({"slots": 2, "used": 3}, "spec: Invalid value: used must not exceed slots"),
], ids=["required_field_missing", "below_minimum", "not_in_enum", "wrong_type", "cel_rule_broken"])
def test_schema_violations_are_422_with_the_field_path(racks: client.CustomObjectsApi, namespace: str,
                                                       spec: dict[str, Any], want: str) -> None:
    with pytest.raises(ApiException) as e:
        racks.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, rack("bad", **spec))
    body = status_body(e.value)
    assert (e.value.status, body["reason"]) == (422, "Invalid")
    assert want in body["message"]
