"""Lists and watches as informers use them: a watch from a list's resourceVersion sees every later
change once and in order; a watch from a resourceVersion older than the server keeps answers 410 Gone
(an ERROR event with a Status, or the 410 response); label and field selectors filter lists and watches."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import eventually


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


def test_watch_from_a_list_sees_every_later_change_once_in_order(core: client.CoreV1Api, namespace: str) -> None:
    start = present(core.list_namespaced_config_map(namespace).metadata).resource_version
    core.create_namespaced_config_map(namespace, as_body(configmap("w1")))
    core.patch_namespaced_config_map("w1", namespace, {"data": {"a": "1"}})
    core.delete_namespaced_config_map("w1", namespace)
    seen = []
    for event in watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=start,  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
                                      timeout_seconds=5):
        if event["object"].metadata.name == "w1":
            seen.append(event["type"])
        if len(seen) == 3:
            break
    assert seen == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_from_a_compacted_resource_version_is_410_gone(core: client.CoreV1Api, namespace: str) -> None:
    """Once the history a watch would start from is gone (kube-apiserver's watch cache, when full, drops
    events older than 75 s; devcluster compacts), the watch ends at once with an ERROR event of 410 Expired."""
    old = present(core.create_namespaced_config_map(namespace, as_body(configmap("old"))).metadata).resource_version
    core.patch_namespaced_config_map("old", namespace, {"data": {"k": "2"}})

    def first_event() -> dict[str, Any] | None:
        for _ in range(10):  # the watch cache drops its oldest events only once it is full
            core.patch_namespaced_config_map("old", namespace, {"data": {"k": str(time.monotonic())}})
        resp: object = core.list_namespaced_config_map(namespace, watch=True, resource_version=old, timeout_seconds=1,
                                                       _preload_content=False, field_selector="metadata.name=old")
        assert isinstance(resp, urllib3.BaseHTTPResponse)  # what _preload_content=False returns
        events = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
        return events[0] if events and events[0]["type"] == "ERROR" else None
    event = eventually(first_event, "a watch from a compacted resourceVersion is refused", timeout=150, interval=1)
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")


@pytest.mark.parametrize("selector, want", [
    ("tier=gpu", ["a", "b"]),
    ("tier!=gpu", ["c", "d"]),
    ("tier in (cpu, gpu),zone", ["a", "c"]),
    ("tier notin (gpu)", ["c", "d"]),
    ("!zone", ["b", "d"]),
], ids=["equals", "not_equals_includes_unlabelled", "set_and_exists", "notin_includes_unlabelled", "does_not_exist"])
def test_label_selectors_filter_lists(core: client.CoreV1Api, namespace: str, selector: str, want: list[str]) -> None:
    core.create_namespaced_config_map(namespace, as_body(configmap("a", tier="gpu", zone="z1")))
    core.create_namespaced_config_map(namespace, as_body(configmap("b", tier="gpu")))
    core.create_namespaced_config_map(namespace, as_body(configmap("c", tier="cpu", zone="z2")))
    core.create_namespaced_config_map(namespace, as_body(configmap("d")))
    names = [present(present(cm.metadata).name) for cm in core.list_namespaced_config_map(namespace, label_selector=selector).items
             if present(present(cm.metadata).name) in "abcd"]
    assert sorted(names) == want


def test_field_selectors_on_pods_by_name_phase_and_node(core: client.CoreV1Api, namespace: str) -> None:
    for name, node in (("on-n1", "gpu-b1-r1-n1"), ("on-n2", "gpu-b1-r1-n2"), ("unbound", None)):
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                               "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                        "schedulingGates": [{"name": "conformance.tasq.io/hold"}]}}
        if node:
            del pod["spec"]["schedulingGates"]
            pod["spec"]["nodeName"] = node
        core.create_namespaced_pod(namespace, as_body(pod))

    def names(selector: str) -> list[str]:
        return sorted(present(present(p.metadata).name) for p in core.list_namespaced_pod(namespace, field_selector=selector).items)
    assert names("metadata.name=on-n1") == ["on-n1"]
    assert names("spec.nodeName=gpu-b1-r1-n2") == ["on-n2"]
    assert names("spec.nodeName=") == ["unbound"]
    assert names("spec.nodeName!=,metadata.name!=on-n1") == ["on-n2"]
    with pytest.raises(ApiException) as e:
        core.list_namespaced_pod(namespace, field_selector="spec.unknownField=x")
    assert e.value.status == 400
    assert json.loads(present(e.value.body))["message"] == 'field label not supported: spec.unknownField'


def test_a_config_map_field_selector_names_the_supported_fields(core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(namespace, field_selector="data.k=v")
    assert e.value.status == 400
    assert json.loads(present(e.value.body))["message"] == (
        '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"')
