"""Discovery documents built from the registry as CRDs come and go."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.front import discovery, openapi
from devcluster.server import crds
from devcluster.server.resources import ResourceRegistry


def crd(plural: str, kind: str, versions: list[str], status: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": f"{plural}.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io", "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   **({"subresources": {"status": {}}} if status else {})}
                                  for i, v in enumerate(versions)]}}


def test_a_group_prefers_its_most_stable_version() -> None:
    registry = ResourceRegistry.with_builtins()
    crds.register(registry, crd("topologies", "Topology", ["v1alpha1"]))
    crds.register(registry, crd("workloads", "Workload", ["v1beta1"], status=True))
    group = next(g for g in discovery.group_list(registry)["groups"] if g["name"] == "kueue.x-k8s.io")
    assert group["preferredVersion"]["version"] == "v1beta1"
    assert [v["version"] for v in group["versions"]] == ["v1beta1", "v1alpha1"]


def test_resource_list_names_subresources_and_disappears_with_the_crd() -> None:
    registry = ResourceRegistry.with_builtins()
    crds.register(registry, crd("workloads", "Workload", ["v1beta1"], status=True))
    listed = discovery.resource_list(registry, "kueue.x-k8s.io", "v1beta1")
    assert listed is not None
    assert [r["name"] for r in listed["resources"]] == ["workloads", "workloads/status"]
    registry.remove_group_resource("kueue.x-k8s.io", "workloads")
    assert discovery.resource_list(registry, "kueue.x-k8s.io", "v1beta1") is None
    assert "kueue.x-k8s.io" not in [g["name"] for g in discovery.group_list(registry)["groups"]]


def test_core_pods_list_binding_and_status_subresources() -> None:
    listed = discovery.resource_list(ResourceRegistry.with_builtins(), "", "v1")
    assert listed is not None
    names = [r["name"] for r in listed["resources"]]
    assert {"pods", "pods/status", "pods/binding", "nodes", "nodes/status", "events", "namespaces"} <= set(names)


def test_openapi_declares_field_validation_on_every_patch() -> None:
    """kubectl only validates server-side when each kind's PATCH declares the fieldValidation parameter."""
    registry = ResourceRegistry.with_builtins()
    root = openapi.root(registry)
    assert "apis/batch/v1" in root["paths"] and "api/v1" in root["paths"]
    doc = openapi.group_version(registry, "batch", "v1")
    patch = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


def test_openapi_carries_each_crd_schema_and_its_hash_follows_the_schema() -> None:
    registry = ResourceRegistry.with_builtins()
    body = crd("workloads", "Workload", ["v1beta1"])
    body["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {"queueName": {"type": "string"}}}}}}
    crds.register(registry, body)
    doc = openapi.group_version(registry, "kueue.x-k8s.io", "v1beta1")
    schema = doc["components"]["schemas"]["io.x-k8s.kueue.v1beta1.Workload"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "kueue.x-k8s.io", "version": "v1beta1", "kind": "Workload"}]
    assert sorted(schema["properties"]) == ["apiVersion", "kind", "metadata", "spec"]
    before = openapi.root(registry)["paths"]["apis/kueue.x-k8s.io/v1beta1"]["serverRelativeURL"]
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = {"type": "object"}
    crds.register(registry, body)
    after = openapi.root(registry)["paths"]["apis/kueue.x-k8s.io/v1beta1"]["serverRelativeURL"]
    assert before != after


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.mark.parametrize("group, version, kind, field, want_type", [
    ("", "v1", "Pod", "spec", "#/components/schemas/io.k8s.api.v1.PodSpec"),
    ("batch", "v1", "Job", "spec", "#/components/schemas/io.k8s.api.v1.JobSpec"),
    ("", "v1", "Event", "involvedObject", "#/components/schemas/io.k8s.api.v1.ObjectReference"),
])
def test_openapi_built_in_kinds_have_resolvable_schemas(group: str, version: str, kind: str, field: str,
                                                        want_type: str) -> None:
    doc = openapi.group_version(ResourceRegistry.with_builtins(), group, version)
    schemas = doc["components"]["schemas"]
    root = next(s for s in schemas.values()
                if {"group": group, "version": version, "kind": kind} in s.get("x-kubernetes-group-version-kind", []))
    assert root["properties"][field]["allOf"] == [{"$ref": want_type}]
    missing = {ref for ref in _refs(schemas) if ref.removeprefix("#/components/schemas/") not in schemas}
    assert missing == set()


def length_delimited_fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of one protobuf message (the only wire type the v2 document uses)."""
    fields: dict[int, bytes] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value
    while pos < len(data):
        key = varint()
        assert key & 7 == 2, f"wire type {key & 7}"
        size = varint()
        fields[key >> 3] = data[pos:pos + size]
        pos += size
    return fields


def test_the_openapi_v2_protobuf_is_the_json_document_without_definitions() -> None:
    document = openapi.v2_document()
    assert (document["paths"], document["definitions"]) == ({}, {})
    fields = length_delimited_fields(openapi.v2_protobuf())
    assert fields[1].decode() == document["swagger"] == "2.0"
    info = length_delimited_fields(fields[2])
    assert (info[1].decode(), info[2].decode()) == (document["info"]["title"], document["info"]["version"])
    assert sorted(fields) == [1, 2]
