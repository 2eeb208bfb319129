"""Request size limits, as a Workload status over thousands of hosts meets them: kube-apiserver refuses a
body over 3 MiB with 413 before decoding it; a write over etcd's 1.5 MiB `--max-request-bytes` is
refused by etcd (500 "etcdserver: request is too large"), one over 2 MiB already by kube-apiserver's
etcd client (500 ResourceExhausted); nothing is stored either way, creates and status patches alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import eventually, status_body

GROUP, VERSION, PLURAL = "conformance.tasq.io", "v1", "blobs"
_STRINGS = {"type": "array", "items": {"type": "string"}}
BLOBS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "blob", "kind": "Blob"},
             "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"data": _STRINGS}},
                               "status": {"type": "object", "properties": {"data": _STRINGS}}}}}}]},
}
MIB = 1024 * 1024
ITEM = 1000  # bytes of one string item on the wire, quotes and comma included


def data(mib: float) -> list[str]:
    """About `mib` MiB of JSON strings."""
    return ["x" * (ITEM - 3)] * int(mib * MIB / ITEM)


def blob(name: str, mib: float) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Blob", "metadata": {"name": name}, "spec": {"data": data(mib)}}


@pytest.fixture(scope="module")
def blobs(extensions: client.ApiextensionsV1Api, custom: client.CustomObjectsApi) -> Iterator[client.CustomObjectsApi]:
    extensions.create_custom_resource_definition(as_body(BLOBS_CRD))

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(BLOBS_CRD["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True" for c in present(crd.status).conditions or [])

    def served() -> bool:
        try:
            custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        except ApiException:
            return False
        return True
    eventually(established, "the Blob CRD is Established")
    eventually(served, "blobs are served")
    yield custom
    extensions.delete_custom_resource_definition(BLOBS_CRD["metadata"]["name"])


def refusal(blobs: client.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as e:
        blobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    return e.value.status, status_body(e.value)


def absent(blobs: client.CustomObjectsApi, namespace: str, name: str) -> bool:
    with pytest.raises(ApiException) as e:
        blobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return bool(e.value.status == 404)


def get(blobs: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    got = blobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    assert isinstance(got, dict)
    return got


def test_an_object_under_etcds_limit_is_stored(blobs: client.CustomObjectsApi, namespace: str) -> None:
    blobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, blob("under", 1.45))
    assert len(get(blobs, namespace, "under")["spec"]["data"]) == len(data(1.45))


def test_an_object_over_etcds_limit_is_refused_by_etcd(blobs: client.CustomObjectsApi, namespace: str) -> None:
    code, status = refusal(blobs, namespace, blob("over-etcd", 1.6))
    assert (code, status["message"], "reason" in status) == (500, "etcdserver: request is too large", False)
    assert absent(blobs, namespace, "over-etcd")


def test_an_object_over_two_mib_is_refused_by_the_etcd_client(blobs: client.CustomObjectsApi, namespace: str) -> None:
    code, status = refusal(blobs, namespace, blob("over-grpc", 2.5))
    assert code == 500 and "reason" not in status
    assert status["message"].startswith(
        "rpc error: code = ResourceExhausted desc = trying to send message larger than max (")
    assert status["message"].endswith(" vs. 2097152)")
    assert absent(blobs, namespace, "over-grpc")


def test_a_body_over_three_mib_is_refused_before_it_is_read(blobs: client.CustomObjectsApi, namespace: str) -> None:
    code, status = refusal(blobs, namespace, blob("over-body", 3.2))
    assert (code, status["reason"], status["message"]) == (
        413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
    assert absent(blobs, namespace, "over-body")


def test_a_status_patch_that_grows_an_object_past_the_limit_changes_nothing(blobs: client.CustomObjectsApi,
                                                                             namespace: str) -> None:
    blobs.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, blob("growing", 0.001))
    before = get(blobs, namespace, "growing")
    with pytest.raises(ApiException) as e:
        blobs.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, "growing",
                                                    {"status": {"data": data(1.6)}})
    assert (e.value.status, status_body(e.value)["message"]) == (500, "etcdserver: request is too large")
    after = get(blobs, namespace, "growing")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "status" not in after
