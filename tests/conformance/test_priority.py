"""Priority admission: a pod's spec.priority comes from its priorityClassName (or the global default
class), an unknown class is refused, and a pod may not set its own priority number."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import status_body


@pytest.fixture(scope="module")
def scheduling(api_client: client.ApiClient) -> Iterator[client.SchedulingV1Api]:
    api = client.SchedulingV1Api(api_client)
    api.create_priority_class(as_body({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": "conformance-high"}, "value": 1000}))
    yield api
    api.delete_priority_class("conformance-high")


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_priority_class_name_sets_the_pod_priority(scheduling: client.SchedulingV1Api, core: client.CoreV1Api,
                                                   namespace: str) -> None:
    created = core.create_namespaced_pod(namespace, as_body(pod("high", priorityClassName="conformance-high")))
    assert present(created.spec).priority == 1000
    plain = core.create_namespaced_pod(namespace, as_body(pod("plain")))
    assert present(plain.spec).priority == 0


def test_an_unknown_priority_class_is_refused(scheduling: client.SchedulingV1Api, core: client.CoreV1Api,
                                              namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, as_body(pod("unknown", priorityClassName="no-such-class")))
    assert e.value.status == 403
    assert "no PriorityClass with name no-such-class was found" in status_body(e.value)["message"]


def test_a_pod_may_not_set_its_own_priority(scheduling: client.SchedulingV1Api, core: client.CoreV1Api,
                                            namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, as_body(pod("self-set", priority=5)))
    assert e.value.status == 403
    assert "the integer value of priority (5) must not be provided in pod spec" in status_body(e.value)["message"]
