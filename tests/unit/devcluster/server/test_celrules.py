"""CRD validation rules (CEL) as kube-apiserver applies them: messages, messageExpression, fieldPath,
reasons, transition rules with oldSelf, list correlation, compile errors refusing the CRD, and tasq's
own CRDs' Kueue rules evaluated on the devcluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.server.celrules import compile_causes, rule_causes
from devcluster.server.errors import ApiError
from devcluster.simulated.seeding import apply_crds

CRDS = Path(__file__).parents[4] / "crds"

GADGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "!has(self.spec.retired) || !self.spec.retired || self.spec.size == 0",
         "message": "a retired gadget has size 0", "fieldPath": ".spec.size", "reason": "FieldValueForbidden"}],
    "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self <= 10", "messageExpression": "'size ' + string(self) + ' is over 10'"},
            {"rule": "self >= oldSelf", "message": "size may only grow"}]},
        "retired": {"type": "boolean"},
        "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "x-kubernetes-validations": [{"rule": "size(self) <= 2", "message": "at most two parts"}],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "kind": {
                      "type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf",
                                                                      "message": "kind is immutable"}]}}}},
        "labels": {"type": "object", "additionalProperties": {
            "type": "string", "x-kubernetes-validations": [{"rule": "size(self) <= 3"}]}}}}},
}


def gadget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec}


def messages(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    return [str(c) for c in rule_causes(obj, old, GADGET_SCHEMA)]


@pytest.mark.parametrize(("_name", "obj", "old", "want"), [
    ("a valid create", gadget(size=3, parts=[{"name": "a", "kind": "x"}]), None, []),
    ("a rule on a structured value shows no value", gadget(parts=[{"name": "a"}] * 3), None,
     ["spec.parts: Invalid value: at most two parts"]),
    ("messageExpression builds the message, which shows no value", gadget(size=11), None,
     ["spec.size: Invalid value: size 11 is over 10"]),
    ("a root rule with fieldPath and reason Forbidden", gadget(size=1, retired=True), None,
     ["spec.size: Forbidden: a retired gadget has size 0"]),
    ("transition rules are skipped on create", gadget(size=1), None, []),
    ("a transition rule on update shows the scalar value", gadget(size=1), gadget(size=2),
     ["spec.size: Invalid value: 1: size may only grow"]),
    ("map-list items are correlated by key, wherever they moved",
     gadget(parts=[{"name": "b", "kind": "y"}, {"name": "a", "kind": "z"}]),
     gadget(parts=[{"name": "a", "kind": "x"}, {"name": "b", "kind": "y"}]),
     ['spec.parts[1].kind: Invalid value: "z": kind is immutable']),
    ("a new map-list item has no old self", gadget(parts=[{"name": "c", "kind": "q"}]), gadget(parts=[]), []),
    ("ratcheting: an unchanged value that breaks a rule passes", gadget(size=12, retired=False),
     gadget(size=12), []),
    ("ratcheting stops once the value changes", gadget(size=13), gadget(size=12),
     ["spec.size: Invalid value: size 13 is over 10"]),
    ("additionalProperties values, no message: the rule is quoted", gadget(labels={"team": "abcd"}), None,
     ['spec.labels[team]: Invalid value: "abcd": failed rule: size(self) <= 3']),
])
def test_rules(_name: str, obj: dict[str, Any], old: dict[str, Any] | None, want: list[str]) -> None:
    assert messages(obj, old) == want


def test_an_evaluation_error_is_a_field_error_not_a_crash() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.missing == 1", "message": "m"}]}}}
    (cause,) = rule_causes({"spec": {}}, None, schema)
    assert cause.field == "spec" and "evaluating rule: self.missing == 1" in cause.message


def test_rules_that_do_not_compile_are_named_with_their_crd_path() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.a ==="}, {"rule": "true", "messageExpression": "'x' +"}]}}}
    causes = compile_causes(schema, "spec.versions[0].schema.openAPIV3Schema")
    assert [c.field for c in causes] == [
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule",
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].messageExpression"]
    assert all("compilation failed" in c.message for c in causes)


# ---------------------------------------------------------------- through the request pipeline

GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": GADGET_SCHEMA}}]},
}


async def test_a_denial_is_422_invalid_with_every_cause_and_nothing_is_stored() -> None:
    api = ApiServer()
    await api.create(api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions"), "", GADGET_CRD)
    gadgets = api.resource("example.com/v1", "gadgets")
    with pytest.raises(ApiError) as refused:
        await api.create(gadgets, "default", gadget(size=11, retired=True))
    error = refused.value
    assert error.code == 422 and error.reason == "Invalid"
    assert [(c.field, c.reason) for c in error.causes] == [("spec.size", "FieldValueForbidden"),
                                                           ("spec.size", "FieldValueInvalid")]
    assert 'Gadget.example.com "g" is invalid' in error.message
    await api.create(gadgets, "default", gadget(size=5))
    with pytest.raises(ApiError, match="size may only grow"):
        await api.patch(gadgets, "default", "g", PATCH_MERGE, {"spec": {"size": 4}})
    assert (await api.get(gadgets, "default", "g"))["spec"]["size"] == 5


async def test_a_crd_with_a_rule_that_does_not_compile_is_refused() -> None:
    api = ApiServer()
    bad = {**GADGET_CRD, "spec": {**GADGET_CRD["spec"], "versions": [{
        "name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-validations": [{"rule": "self.spec.size >"}]}}}]}}
    with pytest.raises(ApiError) as refused:
        await api.create(api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions"), "", bad)
    assert refused.value.code == 422
    assert refused.value.causes[0].field.endswith("x-kubernetes-validations[0].rule")


def topology(*labels: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


@pytest.mark.parametrize(("_name", "labels", "message"), [
    ("duplicate levels", ("cloud.com/block", "cloud.com/block"), "must be unique"),
    ("hostname above the lowest level", ("kubernetes.io/hostname", "cloud.com/rack"),
     "the kubernetes.io/hostname label can only be used at the lowest level of topology"),
])
async def test_tasqs_topology_crd_rules_refuse_a_bad_topology(_name: str, labels: tuple[str, ...],
                                                              message: str) -> None:
    api = ApiServer()
    await apply_crds(api, CRDS)
    topologies = api.registry.storage_resource("kueue.x-k8s.io", "topologies")
    assert topologies is not None
    with pytest.raises(ApiError) as refused:
        await api.create(topologies, "", {**topology(*labels), "apiVersion": topologies.group_version})
    assert refused.value.code == 422
    assert any(c.field == "spec.levels" and message in c.message for c in refused.value.causes)
    good = await api.create(topologies, "", {**topology("cloud.com/block", "kubernetes.io/hostname"),
                                             "apiVersion": topologies.group_version})
    assert [lv["nodeLabel"] for lv in good["spec"]["levels"]] == ["cloud.com/block", "kubernetes.io/hostname"]
