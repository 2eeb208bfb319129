"""Job suspend/resume as tasq's Job integration drives it: a suspended Job creates no pods; while it
is suspended and has never started, its pod template's scheduling directives (nodeSelector,
tolerations, annotations, labels) may change; resuming creates the pods with them; once started the
template is immutable again; suspending a running Job deletes its active pods."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.conformance.conftest import eventually, status_body


def suspended_job(name: str, parallelism: int = 2) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"suspend": True, "parallelism": parallelism, "completions": parallelism,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}


def job_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    pods: list[client.V1Pod] = core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def test_suspended_job_takes_new_scheduling_directives_then_runs_with_them(
        core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(namespace, suspended_job("sus"))
    job = eventually(lambda: (j := batch.read_namespaced_job("sus", namespace)).status and j.status.conditions and j,
                     "the Job controller marks the Job Suspended")
    assert any(c.type == "Suspended" and c.status == "True" for c in job.status.conditions)
    assert job_pods(core, namespace, "sus") == []
    directives = {"metadata": {"annotations": {"kueue.x-k8s.io/topology-podset": "main"},
                               "labels": {"tasq.io/flavor": "h100"}},
                  "spec": {"nodeSelector": {"cloud.provider.com/topology-block": "b2"},
                           "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    batch.patch_namespaced_job("sus", namespace, {"spec": {"template": directives}})
    batch.patch_namespaced_job("sus", namespace, {"spec": {"suspend": False}})
    pods = eventually(lambda: len(p := job_pods(core, namespace, "sus")) == 2 and p, "2 pods are created")
    for pod in pods:
        assert pod.spec.node_selector == {"cloud.provider.com/topology-block": "b2"}
        assert pod.metadata.annotations["kueue.x-k8s.io/topology-podset"] == "main"
        assert pod.metadata.labels["tasq.io/flavor"] == "h100"
    eventually(lambda: batch.read_namespaced_job("sus", namespace).status.start_time, "the Job has started")
    with pytest.raises(ApiException) as e:
        batch.patch_namespaced_job("sus", namespace,
                                   {"spec": {"template": {"spec": {"nodeSelector": {"other": "x"}}}}})
    assert e.value.status == 422
    assert "spec.template: Invalid value" in status_body(e.value)["message"]


def test_suspending_a_running_job_deletes_its_active_pods(core: client.CoreV1Api, batch: client.BatchV1Api,
                                                          namespace: str) -> None:
    body = suspended_job("resume")
    body["spec"]["suspend"] = False
    batch.create_namespaced_job(namespace, body)
    eventually(lambda: len(job_pods(core, namespace, "resume")) == 2, "2 pods are created")
    batch.patch_namespaced_job("resume", namespace, {"spec": {"suspend": True}})
    eventually(lambda: job_pods(core, namespace, "resume") == [], "the active pods are deleted")
    job = eventually(lambda: (j := batch.read_namespaced_job("resume", namespace)).status.active in (None, 0) and j,
                     "no active pods are counted")
    assert any(c.type == "Suspended" and c.status == "True" for c in job.status.conditions or [])


@pytest.mark.parametrize("patch, field", [
    ({"spec": {"parallelism": -1}}, "spec.parallelism"),
    ({"spec": {"completions": 5}}, "spec.completions"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}}, "spec.template"),
], ids=["negative_parallelism", "completions_changed", "container_image_changed"])
def test_job_spec_rules_refuse_with_the_field(batch: client.BatchV1Api, namespace: str,
                                              patch: dict[str, Any], field: str) -> None:
    batch.create_namespaced_job(namespace, suspended_job("rules"))
    with pytest.raises(ApiException) as e:
        batch.patch_namespaced_job("rules", namespace, patch)
    assert e.value.status == 422
    assert f"invalid: {field}" in status_body(e.value)["message"]
