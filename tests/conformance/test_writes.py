"""Writes as clients and kopf rely on: status codes of create/update conflicts, optimistic concurrency
(409 on a stale resourceVersion), the resourceVersion rules of create and of a custom-resource PUT,
the status subresource (each half ignores the other's changes) and metadata.generation."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import status_body

GADGETS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.conformance.tasq.io"},
    "spec": {"group": "conformance.tasq.io", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                               "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]},
}
GROUP, VERSION, PLURAL = "conformance.tasq.io", "v1", "gadgets"


@pytest.fixture(scope="module")
def gadgets(extensions: client.ApiextensionsV1Api, custom: client.CustomObjectsApi) -> client.CustomObjectsApi:
    from tests.conformance.conftest import eventually

    extensions.create_custom_resource_definition(as_body(GADGETS_CRD))

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(GADGETS_CRD["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True" for c in present(crd.status).conditions or [])
    eventually(established, "the Gadget CRD is Established")
    eventually(lambda: _served(custom), "gadgets are served")
    return custom


def _served(custom: client.CustomObjectsApi) -> bool:
    try:
        custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    except ApiException:
        return False
    return True


def gadget(name: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": name},
            "spec": {"size": size}}


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def test_create_of_an_existing_name_is_409_already_exists(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, as_body(configmap("twice")))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, as_body(configmap("twice")))
    assert (e.value.status, status_body(e.value)["reason"]) == (409, "AlreadyExists")


def test_update_with_a_stale_resource_version_is_409_conflict(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_config_map(namespace, as_body(configmap("occ")))
    stale = present(created.metadata).resource_version
    fresh = core.patch_namespaced_config_map("occ", namespace, {"data": {"k": "w"}})
    assert present(fresh.metadata).resource_version != stale
    body = configmap("occ")
    body["metadata"]["resourceVersion"] = stale
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("occ", namespace, as_body(body))
    assert (e.value.status, status_body(e.value)["reason"]) == (409, "Conflict")
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map("occ", namespace, {"metadata": {"resourceVersion": stale},
                                                            "data": {"k": "x"}})
    assert e.value.status == 409


def test_create_with_a_resource_version_is_refused(core: client.CoreV1Api, namespace: str) -> None:
    body = configmap("with-rv")
    body["metadata"]["resourceVersion"] = "12345"
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, as_body(body))
    assert e.value.status == 500  # the storage layer refuses it, which kube-apiserver reports as InternalError
    assert "resourceVersion should not be set on objects to be created" in status_body(e.value)["message"]


def test_custom_resource_put_without_resource_version_is_422(gadgets: client.CustomObjectsApi,
                                                             namespace: str) -> None:
    gadgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, gadget("g1"))
    with pytest.raises(ApiException) as e:
        gadgets.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g1", gadget("g1", 2))
    body = status_body(e.value)
    assert (e.value.status, body["reason"]) == (422, "Invalid")
    assert "metadata.resourceVersion" in body["message"]


def test_status_subresource_and_main_resource_ignore_each_others_changes(gadgets: client.CustomObjectsApi,
                                                                         namespace: str) -> None:
    created = gadgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                      {**gadget("g2"), "status": {"phase": "Set-On-Create"}})
    assert isinstance(created, dict)
    assert "status" not in created  # status is dropped on create when the kind has a status subresource
    patched = gadgets.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "g2",
                                                            {"spec": {"size": 9}, "status": {"phase": "Running"}})
    assert isinstance(patched, dict)
    assert (patched["spec"]["size"], patched["status"]["phase"]) == (1, "Running")
    patched = gadgets.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g2",
                                                     {"spec": {"size": 3}, "status": {"phase": "Ignored"}})
    assert isinstance(patched, dict)
    assert (patched["spec"]["size"], patched["status"]["phase"]) == (3, "Running")


def test_generation_counts_spec_changes_only(gadgets: client.CustomObjectsApi, namespace: str) -> None:
    created = gadgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, gadget("g3"))
    assert isinstance(created, dict)
    assert created["metadata"]["generation"] == 1
    labelled = gadgets.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g3",
                                                      {"metadata": {"labels": {"a": "b"}}})
    assert isinstance(labelled, dict)
    status = gadgets.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "g3",
                                                           {"status": {"phase": "Done"}})
    assert isinstance(status, dict)
    assert (labelled["metadata"]["generation"], status["metadata"]["generation"]) == (1, 1)
    resized = gadgets.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g3", {"spec": {"size": 5}})
    assert isinstance(resized, dict)
    assert resized["metadata"]["generation"] == 2
    unchanged = gadgets.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "g3", {"spec": {"size": 5}})
    assert isinstance(unchanged, dict)
    assert unchanged["metadata"]["generation"] == 2
