"""Server-side apply as kubectl and tasq rely on: create by apply, field managers in managedFields
(Apply and Update entries, fieldsV1), 409 conflicts worded as kube-apiserver, `force`, removal of
fields a manager stops applying, keyed lists and sets merged as the schema says, the status
subresource, dry-run and the PatchOptions errors; `kubectl apply --server-side` end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.client_models import as_body, present
from tests.conformance.conftest import eventually
from tests.e2e.conftest import Kubectl

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
GROUP, VERSION, PLURAL = "conformance.tasq.io", "v1", "appliances"
APPLIANCES_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "appliance", "kind": "Appliance"},
             "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "size": {"type": "integer"},
                                   "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                             "x-kubernetes-list-map-keys": ["name", "proto"],
                                             "items": {"type": "object", "required": ["name", "proto"],
                                                       "properties": {"name": {"type": "string"},
                                                                      "proto": {"type": "string"},
                                                                      "port": {"type": "integer"}}}},
                                   "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                            "items": {"type": "string"}},
                                   "args": {"type": "array", "items": {"type": "string"}},
                                   "opts": {"type": "object", "additionalProperties": {"type": "string"}}}},
                               "status": {"type": "object", "properties": {"phase": {"type": "string"},
                                                                           "count": {"type": "integer"}}}}}}}]},
}


class Requests:
    """Raw PATCH/GET on one cluster (the generated clients cannot name every option)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             **query: str) -> tuple[int, dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        method, url, headers, data, post = self.api.param_serialize(
            method, path, query_params=list(query.items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"}, body=body,
            auth_settings=["BearerToken"])
        try:
            resp = self.api.call_api(method, url, headers, data, post)
            resp.read()  # type: ignore[no-untyped-call]  # the client's REST layer is unannotated
            return int(resp.status), json.loads(resp.data or b"{}")
        except ApiException as e:
            return int(e.status or 0), json.loads(e.body or "{}")

    def apply(self, path: str, body: dict[str, Any], manager: str, **query: str) -> tuple[int, dict[str, Any]]:
        return self.call("PATCH", path, body, APPLY, fieldManager=manager, **query)


def owners(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(manager, operation, subresource) -> fieldsV1, the part of managedFields both clusters agree on."""
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or []}


@pytest.fixture(scope="module")
def raw(api_client: client.ApiClient) -> Requests:
    return Requests(api_client)


@pytest.fixture(scope="module")
def appliances(extensions: client.ApiextensionsV1Api, raw: Requests) -> str:
    extensions.create_custom_resource_definition(as_body(APPLIANCES_CRD))

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(APPLIANCES_CRD["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True" for c in present(crd.status).conditions or [])
    eventually(established, "the Appliance CRD is Established")
    eventually(lambda: raw.call("GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}")[0] == 200, "appliances are served")
    return PLURAL


def configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def appliance(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Appliance", "metadata": {"name": name}, "spec": spec}


def test_apply_creates_and_a_second_manager_conflicts_only_where_it_would_change_a_value(
        raw: Requests, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/c"
    code, created = raw.apply(path, configmap("c", {"a": "1", "b": "2"}, {"x": "1"}), "alice")
    assert code == 201
    assert owners(created) == {("alice", "Apply", ""): {"f:data": {"f:a": {}, "f:b": {}},
                                                       "f:metadata": {"f:labels": {"f:x": {}}}}}
    code, refused = raw.apply(path, configmap("c", {"a": "9", "c": "3"}), "bob")
    assert code == 409 and refused["reason"] == "Conflict"
    assert refused["message"] == 'Apply failed with 1 conflict: conflict with "alice": .data.a'
    assert refused["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "alice"',
                                             "field": ".data.a"}]
    code, shared = raw.apply(path, configmap("c", {"a": "1", "c": "3"}), "bob")  # the same value: no conflict
    assert code == 200 and shared["data"] == {"a": "1", "b": "2", "c": "3"}
    assert owners(shared)[("bob", "Apply", "")] == {"f:data": {"f:a": {}, "f:c": {}}}


def test_an_update_takes_the_fields_it_changes_and_force_takes_them_back(raw: Requests, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/c"
    raw.apply(path, configmap("c", {"a": "1", "b": "2"}), "alice")
    code, updated = raw.call("PATCH", path, {"data": {"b": "7", "d": "4"}}, MERGE, fieldManager="carol")
    assert code == 200
    assert owners(updated) == {("alice", "Apply", ""): {"f:data": {"f:a": {}}},
                               ("carol", "Update", ""): {"f:data": {"f:b": {}, "f:d": {}}}}
    code, refused = raw.apply(path, configmap("c", {"a": "1", "b": "2"}), "alice")
    assert code == 409
    assert refused["message"] == 'Apply failed with 1 conflict: conflict with "carol" using v1: .data.b'
    code, forced = raw.apply(path, configmap("c", {"a": "1", "b": "2"}), "alice", force="true")
    assert code == 200 and forced["data"] == {"a": "1", "b": "2", "d": "4"}
    assert owners(forced) == {("alice", "Apply", ""): {"f:data": {"f:a": {}, "f:b": {}}},
                              ("carol", "Update", ""): {"f:data": {"f:d": {}}}}


def test_a_field_a_manager_stops_applying_is_removed_unless_another_manager_owns_it(
        raw: Requests, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/c"
    raw.apply(path, configmap("c", {"a": "1", "b": "2", "c": "3"}, {"x": "1"}), "alice")
    raw.apply(path, configmap("c", {"c": "3"}), "bob")
    code, after = raw.apply(path, configmap("c", {"a": "1"}), "alice")
    assert code == 200
    assert after["data"] == {"a": "1", "c": "3"}  # b was alice's alone; c is bob's too
    assert "labels" not in after["metadata"]  # the emptied labels map goes as well
    assert owners(after)[("alice", "Apply", "")] == {"f:data": {"f:a": {}}}


def test_create_by_post_records_an_update_manager_with_the_maps_it_created(raw: Requests, namespace: str) -> None:
    code, created = raw.call("POST", f"/api/v1/namespaces/{namespace}/configmaps", configmap("p", {"y": "5"}),
                             fieldManager="poster")
    assert code == 201
    assert owners(created) == {("poster", "Update", ""): {"f:data": {".": {}, "f:y": {}}}}


def test_keyed_lists_sets_and_atomic_lists_of_a_custom_resource_merge_as_its_schema_says(
        raw: Requests, namespace: str, appliances: str) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{appliances}/w"
    code, _ = raw.apply(path, appliance("w", {"size": 1, "args": ["1", "2"], "tags": ["x", "y"], "opts": {"o": "1"},
                                              "ports": [{"name": "a", "proto": "TCP", "port": 1},
                                                        {"name": "b", "proto": "UDP"}]}), "alice")
    assert code == 201
    code, merged = raw.apply(path, appliance("w", {"args": ["1", "2"], "tags": ["z"], "opts": {"p": "2"},
                                                   "ports": [{"name": "c", "proto": "TCP", "port": 3}]}), "bob")
    assert code == 200
    assert merged["spec"]["ports"] == [{"name": "a", "proto": "TCP", "port": 1}, {"name": "b", "proto": "UDP"},
                                       {"name": "c", "proto": "TCP", "port": 3}]
    assert merged["spec"]["tags"] == ["x", "y", "z"] and merged["spec"]["opts"] == {"o": "1", "p": "2"}
    assert owners(merged)[("bob", "Apply", "")] == {"f:spec": {
        "f:args": {}, "f:opts": {"f:p": {}}, "f:tags": {'v:"z"': {}},
        "f:ports": {'k:{"name":"c","proto":"TCP"}': {".": {}, "f:name": {}, "f:port": {}, "f:proto": {}}}}}
    code, refused = raw.apply(path, appliance("w", {"size": 2, "args": ["3"],
                                                    "ports": [{"name": "a", "proto": "TCP", "port": 9}]}), "bob")
    assert code == 409
    assert refused["message"] == ('Apply failed with 3 conflicts: conflicts with "alice":\n- .spec.args\n'
                                  '- .spec.size\n- .spec.ports[name="a",proto="TCP"].port')
    code, dropped = raw.apply(path, appliance("w", {"tags": ["y"], "ports": [{"name": "b", "proto": "UDP"}]}), "alice")
    assert code == 200
    assert dropped["spec"] == {"args": ["1", "2"], "tags": ["y", "z"], "opts": {"p": "2"},
                               "ports": [{"name": "b", "proto": "UDP"}, {"name": "c", "proto": "TCP", "port": 3}]}


def test_a_keyed_list_keeps_the_applied_order_with_live_only_items_after_their_predecessor(
        raw: Requests, namespace: str, appliances: str) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{appliances}/o"
    ports = [{"name": n, "proto": "TCP"} for n in ("a", "b", "c")]
    raw.apply(path, appliance("o", {"ports": ports}), "alice")
    code, merged = raw.apply(path, appliance("o", {"ports": [{"name": n, "proto": "TCP"} for n in "dba"]}), "bob")
    assert code == 200
    assert [p["name"] for p in merged["spec"]["ports"]] == ["d", "b", "c", "a"]


def test_status_apply_owns_only_status_and_its_conflicts_name_the_subresource(
        raw: Requests, namespace: str, appliances: str) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{appliances}/s"
    raw.apply(path, appliance("s", {"size": 1}), "alice")
    body = {**appliance("s", {"size": 100}), "status": {"phase": "Up"}}
    code, applied = raw.apply(path + "/status", body, "reporter")
    assert code == 200 and applied["spec"] == {"size": 1} and applied["status"] == {"phase": "Up"}
    assert owners(applied)[("reporter", "Apply", "status")] == {"f:status": {"f:phase": {}}}
    code, refused = raw.apply(path + "/status", {**appliance("s", {}), "status": {"phase": "Down"}}, "other")
    assert code == 409
    assert refused["message"] == ('Apply failed with 1 conflict: conflict with "reporter" with subresource '
                                  '"status": .status.phase')
    code, main = raw.apply(path, {**appliance("s", {"size": 1}), "status": {"phase": "Ignored"}}, "alice")
    assert code == 200 and main["status"] == {"phase": "Up"}


def test_patch_options_errors_dry_run_and_bad_bodies(raw: Requests, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/d"
    code, missing = raw.call("PATCH", path, configmap("d", {"a": "1"}), APPLY)
    assert code == 422 and missing["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required '
                                                  "value: is required for apply patch")
    code, dry = raw.apply(path, configmap("d", {"a": "1"}), "alice", dryRun="All")
    assert code == 201 and dry["data"] == {"a": "1"}
    assert raw.call("GET", path)[0] == 404
    raw.apply(path, configmap("d", {"a": "1"}), "alice")
    code, forced = raw.call("PATCH", path, {"data": {"q": "1"}}, MERGE, fieldManager="x", force="true")
    assert code == 422 and forced["message"] == ('PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not '
                                                 "be specified for non-apply patch")
    code, other_kind = raw.apply(path, {**configmap("d", {}), "kind": "Secret"}, "alice")
    assert code == 400 and other_kind["message"] == "invalid object type: /v1, Kind=Secret"
    code, renamed = raw.apply(path, configmap("e", {}), "alice")
    assert code == 400 and renamed["message"] == "the name of the object (e) does not match the name on the URL (d)"
    with_fields = configmap("d", {"a": "1"})
    with_fields["metadata"]["managedFields"] = [{"manager": "zz", "operation": "Apply"}]
    code, refused = raw.apply(path, with_fields, "alice")
    assert code == 400 and refused["message"] == "metadata.managedFields must be nil"


def test_a_deployment_template_merges_containers_by_name_and_ports_by_port_and_protocol(
        raw: Requests, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/j"

    def job(containers: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "j"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "j"}},
                         "template": {"metadata": {"labels": {"app": "j"}}, "spec": {"containers": containers}}}}
    code, _ = raw.apply(path, job([{"name": "main", "image": "busybox:1", "ports": [{"containerPort": 80}]}]), "alice")
    assert code == 201
    code, both = raw.apply(path, job([{"name": "side", "image": "busybox:1"}]), "bob")
    assert code == 200, both["message"]
    assert [c["name"] for c in both["spec"]["template"]["spec"]["containers"]] == ["main", "side"]
    alice = owners(both)[("alice", "Apply", "")]
    main = alice["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert main["f:ports"] == {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}
    code, refused = raw.apply(path, job([{"name": "main", "image": "busybox:2"}]), "bob")
    assert code == 409
    assert refused["message"] == ('Apply failed with 1 conflict: conflict with "alice": '
                                  '.spec.template.spec.containers[name="main"].image')


def test_kubectl_apply_server_side_conflicts_and_force_conflicts(kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(yaml.safe_dump({**configmap("k", {"a": "1"}), "metadata": {"name": "k",
                                                                                  "namespace": namespace}}))
    out = kubectl("apply", "--server-side", "-f", str(manifest))
    assert out.returncode == 0 and "configmap/k serverside-applied" in out.stdout
    changed = tmp_path / "changed.yaml"
    changed.write_text(manifest.read_text().replace("a: '1'", "a: '2'"))
    refused = kubectl("apply", "--server-side", "--field-manager=other", "-f", str(changed), check=False)
    assert refused.returncode != 0 and 'conflict with "kubectl"' in refused.stderr and ".data.a" in refused.stderr
    forced = kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", str(changed))
    assert forced.returncode == 0
    got = json.loads(kubectl("get", "configmap", "k", "-n", namespace, "-o", "json", "--show-managed-fields").stdout)
    assert got["data"] == {"a": "2"}
    assert set(owners(got)) == {("other", "Apply", "")}


def test_switching_from_client_side_to_server_side_apply_keeps_the_object(kubectl: Kubectl, namespace: str,
                                                                          tmp_path: Path) -> None:
    """kubectl moves the client-side apply manager's fields to its Apply manager (a JSON patch of
    managedFields) and applies again: nothing the manifest sets may disappear."""
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(yaml.safe_dump(configmap("u", {"x": "1"}, {"a": "b"}) | {
        "metadata": {"name": "u", "namespace": namespace, "labels": {"a": "b"}}}))
    kubectl("apply", "-f", str(manifest))
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    got = json.loads(kubectl("get", "configmap", "u", "-n", namespace, "-o", "json", "--show-managed-fields").stdout)
    assert got["data"] == {"x": "1"} and got["metadata"]["labels"] == {"a": "b"}
    assert owners(got)[("kubectl", "Apply", "")] == {"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}
    assert ("kubectl-client-side-apply", "Update", "") not in owners(got)
