"""Finalizers and garbage collection: a DELETE of a finalizer-held object answers 200 with the object
(deletionTimestamp set) and it stays until the last finalizer goes; finalizer names are validated;
dependents go with their owner (background), and foreground deletion holds the owner until they do."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import eventually, status_body

FINALIZER = "conformance.tasq.io/hold"


def configmap(name: str, finalizers: list[str] | None = None, owner: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
                                    "uid": owner.metadata.uid}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def gone(core: client.CoreV1Api, name: str, namespace: str) -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except ApiException as e:
        return bool(e.status == 404)
    return False


def test_delete_of_a_finalizer_held_object_marks_it_and_waits_for_the_finalizer(
        core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, as_body(configmap("held", [FINALIZER])))
    answer = core.delete_namespaced_config_map("held", namespace, _preload_content=False)
    assert isinstance(answer, urllib3.BaseHTTPResponse)  # what _preload_content=False returns
    body = json.loads(answer.data)
    assert (answer.status, body["kind"]) == (200, "ConfigMap")  # the object itself, not a Status
    assert body["metadata"]["deletionTimestamp"] and body["metadata"]["finalizers"] == [FINALIZER]
    still = core.read_namespaced_config_map("held", namespace)
    assert present(still.metadata).deletion_timestamp is not None
    with pytest.raises(ApiException) as e:  # no new finalizer on an object being deleted
        core.patch_namespaced_config_map("held", namespace,
                                         {"metadata": {"finalizers": [FINALIZER, "conformance.tasq.io/more"]}})
    assert e.value.status == 422
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    eventually(lambda: gone(core, "held", namespace), "the configmap is gone once its finalizer is removed")


def test_an_invalid_finalizer_name_is_422(core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(namespace, as_body(configmap("bad-finalizer", ["no slash here"])))
    body = status_body(e.value)
    assert (e.value.status, body["reason"]) == (422, "Invalid")
    assert "metadata.finalizers[0]" in body["message"]


def test_dependents_are_collected_after_their_owner(core: client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, as_body(configmap("owner")))
    core.create_namespaced_config_map(namespace, as_body(configmap("dependent", owner=owner)))
    core.delete_namespaced_config_map("owner", namespace)
    eventually(lambda: gone(core, "dependent", namespace), "the garbage collector deletes the dependent")


def test_foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone(
        core: client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, as_body(configmap("fg-owner")))
    dependent = configmap("fg-dependent", [FINALIZER], owner=owner)
    dependent["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    core.create_namespaced_config_map(namespace, as_body(dependent))
    core.delete_namespaced_config_map("fg-owner", namespace, propagation_policy="Foreground")
    held = core.read_namespaced_config_map("fg-owner", namespace)
    assert "foregroundDeletion" in (present(held.metadata).finalizers or [])
    eventually(lambda: present(core.read_namespaced_config_map("fg-dependent", namespace).metadata).deletion_timestamp,
               "the dependent is being deleted")
    assert not gone(core, "fg-owner", namespace)
    core.patch_namespaced_config_map("fg-dependent", namespace, {"metadata": {"finalizers": None}})
    eventually(lambda: gone(core, "fg-owner", namespace), "the owner goes after its dependent")
