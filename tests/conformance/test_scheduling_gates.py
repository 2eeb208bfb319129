"""Scheduling gates as tasq's TopologyUngater relies on them: a gated pod stays Pending with
PodScheduled=False/SchedulingGated; gates can be removed but not added after creation; while gated,
nodeSelector may gain keys but not change existing ones, and once scheduled it is frozen; an Indexed
Job whose pods carry a gate stays Pending until the gates are removed, then runs and completes."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import eventually, status_body

GATE = "kueue.x-k8s.io/topology"


def gated_pod(name: str, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations},
            "spec": {"schedulingGates": [{"name": GATE}], "restartPolicy": "Never",
                     "nodeSelector": {"cloud.provider.com/topology-block": "b1"},
                     "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}


def scheduled_condition(pod: client.V1Pod) -> tuple[str, str] | None:
    for cond in present(pod.status).conditions or []:
        if cond.type == "PodScheduled":
            return cond.status, cond.reason or ""
    return None


def test_a_gated_pod_waits_and_is_scheduled_once_its_gate_is_removed(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, as_body(gated_pod("gated")))
    eventually(lambda: scheduled_condition(core.read_namespaced_pod("gated", namespace)) == ("False", "SchedulingGated"),
               "PodScheduled=False with reason SchedulingGated")
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_pod("gated", namespace, {"spec": {"schedulingGates": [{"name": GATE}, {"name": "x.io/y"}]}})
    assert e.value.status == 422
    assert "only deletion is allowed, but found new scheduling gate 'x.io/y'" in status_body(e.value)["message"]
    core.patch_namespaced_pod("gated", namespace, {"spec": {"nodeSelector": {"cloud.provider.com/topology-rack": "b1-r2"}}})
    with pytest.raises(ApiException) as e:  # an existing key may not change, even while gated
        core.patch_namespaced_pod("gated", namespace, {"spec": {"nodeSelector": {"cloud.provider.com/topology-block": "b2"}}})
    assert e.value.status == 422
    core.patch_namespaced_pod("gated", namespace, {"spec": {"schedulingGates": None}})
    pod = eventually(lambda: present((p := core.read_namespaced_pod("gated", namespace)).spec).node_name and p,
                     "the ungated pod is bound")
    assert isinstance(pod, client.V1Pod)
    assert present(present(pod.spec).node_name).startswith("gpu-b1-r2-")
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_pod("gated", namespace, {"spec": {"nodeSelector": {"extra": "label"}}})
    assert e.value.status == 422


def test_an_indexed_job_with_gated_pods_runs_and_completes_only_after_ungating(
        core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str) -> None:
    pod = gated_pod("unused", **{"devcluster.tasq.io/run-seconds": "2"})
    template = {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": pod["spec"]}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "indexed"},
           "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "template": template}}
    batch.create_namespaced_job(namespace, as_body(job))

    def pods() -> list[client.V1Pod]:
        found: list[client.V1Pod] = core.list_namespaced_pod(namespace, label_selector="job-name=indexed").items
        return found
    eventually(lambda: len(pods()) == 3, "the Job controller creates 3 pods")
    import time
    time.sleep(3)  # long enough for an ungated pod to be bound, run and finish
    assert all(present(p.status).phase == "Pending" and not present(p.spec).node_name for p in pods())
    assert present(batch.read_namespaced_job("indexed", namespace).status).succeeded in (None, 0)
    for gated in pods():
        core.patch_namespaced_pod(present(present(gated.metadata).name), namespace, {"spec": {"schedulingGates": None}})
    done = eventually(lambda: present((j := batch.read_namespaced_job("indexed", namespace)).status).succeeded == 3 and j,
                      "the Job completes", timeout=90)
    assert isinstance(done, client.V1Job)
    assert any(c.type == "Complete" and c.status == "True" for c in present(done.status).conditions or [])
    indexes = sorted(present(present(p.metadata).annotations)["batch.kubernetes.io/job-completion-index"] for p in pods())
    assert indexes == ["0", "1", "2"]
