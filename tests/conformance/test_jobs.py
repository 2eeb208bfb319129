"""Job suspend/resume as tasq's Job integration drives it: a suspended Job creates no pods; while it
is suspended and has never started, its pod template's scheduling directives (nodeSelector,
tolerations, annotations, labels) and its containers' resources may change; resuming creates the pods
with them; once started the template is immutable again, until the Job is suspended, marked Suspended
and has no active pods; suspending a running Job deletes its active pods."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.client_models import as_body, present
from tests.conformance.conftest import eventually, status_body


def suspended_job(name: str, parallelism: int = 2) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"suspend": True, "parallelism": parallelism, "completions": parallelism,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}


def job_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    pods: list[client.V1Pod] = core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items
    return [p for p in pods if present(p.metadata).deletion_timestamp is None]


def test_suspended_job_takes_new_scheduling_directives_then_runs_with_them(
        core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(namespace, as_body(suspended_job("sus")))
    job = eventually(lambda: (j := batch.read_namespaced_job("sus", namespace)).status and j.status.conditions and j,
                     "the Job controller marks the Job Suspended")
    assert isinstance(job, client.V1Job)
    assert any(c.type == "Suspended" and c.status == "True" for c in present(present(job.status).conditions))
    assert job_pods(core, namespace, "sus") == []
    directives = {"metadata": {"annotations": {"kueue.x-k8s.io/topology-podset": "main"},
                               "labels": {"tasq.io/flavor": "h100"}},
                  "spec": {"nodeSelector": {"cloud.provider.com/topology-block": "b2"},
                           "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
    batch.patch_namespaced_job("sus", namespace, {"spec": {"template": directives}})
    batch.patch_namespaced_job("sus", namespace, {"spec": {"suspend": False}})
    pods = eventually(lambda: len(p := job_pods(core, namespace, "sus")) == 2 and p, "2 pods are created")
    assert isinstance(pods, list)
    for pod in pods:
        assert pod.spec.node_selector == {"cloud.provider.com/topology-block": "b2"}
        assert pod.metadata.annotations["kueue.x-k8s.io/topology-podset"] == "main"
        assert pod.metadata.labels["tasq.io/flavor"] == "h100"
    eventually(lambda: present(batch.read_namespaced_job("sus", namespace).status).start_time, "the Job has started")
    with pytest.raises(ApiException) as e:
        batch.patch_namespaced_job("sus", namespace,
                                   {"spec": {"template": {"spec": {"nodeSelector": {"other": "x"}}}}})
    assert e.value.status == 422
    assert "spec.template: Invalid value" in status_body(e.value)["message"]


def test_suspending_a_running_job_deletes_its_active_pods(core: client.CoreV1Api, batch: client.BatchV1Api,
                                                          namespace: str) -> None:
    body = suspended_job("resume")
    body["spec"]["suspend"] = False
    batch.create_namespaced_job(namespace, as_body(body))
    eventually(lambda: len(job_pods(core, namespace, "resume")) == 2, "2 pods are created")
    batch.patch_namespaced_job("resume", namespace, {"spec": {"suspend": True}})
    eventually(lambda: job_pods(core, namespace, "resume") == [], "the active pods are deleted")
    job = eventually(lambda: present((j := batch.read_namespaced_job("resume", namespace)).status).active in (None, 0) and j,
                     "no active pods are counted")
    assert isinstance(job, client.V1Job)
    assert any(c.type == "Suspended" and c.status == "True" for c in present(job.status).conditions or [])


@pytest.mark.parametrize("patch, field", [
    ({"spec": {"parallelism": -1}}, "spec.parallelism"),
    ({"spec": {"completions": 5}}, "spec.completions"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}}, "spec.template"),
], ids=["negative_parallelism", "completions_changed", "container_image_changed"])
def test_job_spec_rules_refuse_with_the_field(batch: client.BatchV1Api, namespace: str,
                                              patch: dict[str, Any], field: str) -> None:
    batch.create_namespaced_job(namespace, as_body(suspended_job("rules")))
    with pytest.raises(ApiException) as e:
        batch.patch_namespaced_job("rules", namespace, patch)
    assert e.value.status == 422
    assert f"invalid: {field}" in status_body(e.value)["message"]


def refusal(call: Any) -> str | None:
    """The message of the 422 `call()` ends in, or None if it succeeds."""
    try:
        call()
    except ApiException as e:
        assert e.status == 422, e.body
        return str(status_body(e)["message"])
    return None


def test_a_suspended_job_that_never_started_takes_new_resources_but_not_a_new_image(
        batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(namespace, as_body(suspended_job("res")))
    resources = {"requests": {"cpu": "2", "nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}
    batch.patch_namespaced_job("res", namespace, {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "resources": resources}]}}}})
    stored = present(present(present(batch.read_namespaced_job("res", namespace).spec).template.spec).containers[0].resources)
    assert (stored.requests, stored.limits) == (resources["requests"], resources["limits"])
    message = refusal(lambda: batch.patch_namespaced_job("res", namespace, {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "other"}]}}}}))
    assert message is not None and "spec.template.spec: Invalid value" in message


def test_a_running_job_refuses_a_template_change_even_together_with_suspending_it(
        core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str) -> None:
    body = suspended_job("run", parallelism=1)
    body["spec"]["suspend"] = False
    batch.create_namespaced_job(namespace, as_body(body))
    eventually(lambda: len(job_pods(core, namespace, "run")) == 1, "the pod is created")
    message = refusal(lambda: batch.patch_namespaced_job("run", namespace, {"spec": {
        "suspend": True, "template": {"spec": {"nodeSelector": {"cloud.provider.com/topology-block": "b2"}}}}}))
    assert message is not None and "spec.template: Invalid value" in message
    assert present(batch.read_namespaced_job("run", namespace).spec).suspend is False


def test_a_suspended_job_takes_new_scheduling_directives_once_its_pods_are_gone(
        core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str) -> None:
    """A Job that ran and was suspended again: when the Job controller has marked it Suspended (which
    clears startTime) and counts no active pods, its template's scheduling directives may change."""
    body = suspended_job("again", parallelism=1)
    body["spec"]["suspend"] = False
    batch.create_namespaced_job(namespace, as_body(body))
    eventually(lambda: (batch.read_namespaced_job("again", namespace).status or client.V1JobStatus()).start_time,
               "the Job has started")
    batch.patch_namespaced_job("again", namespace, {"spec": {"suspend": True}})
    directives = {"spec": {"template": {"spec": {"nodeSelector": {"cloud.provider.com/topology-block": "b1"}}}}}
    eventually(lambda: refusal(lambda: batch.patch_namespaced_job("again", namespace, directives)) is None,
               "the suspended Job's nodeSelector may change")
    job = batch.read_namespaced_job("again", namespace)
    assert present(present(job.spec).template.spec).node_selector == {"cloud.provider.com/topology-block": "b1"}
    assert present(job.status).start_time is None
    assert present(job.status).active in (None, 0)
    assert any(c.type == "Suspended" and c.status == "True" for c in present(present(job.status).conditions))
    assert job_pods(core, namespace, "again") == []


def test_a_job_created_with_generate_name_labels_its_pods_with_the_generated_name(
        core: client.CoreV1Api, batch: client.BatchV1Api, namespace: str) -> None:
    body = suspended_job("unused", parallelism=1)
    body["metadata"] = {"generateName": "gen-"}
    body["spec"]["suspend"] = False
    job = batch.create_namespaced_job(namespace, as_body(body))
    name = str(present(job.metadata).name)
    assert name.startswith("gen-") and len(name) > len("gen-")
    labels = present(present(present(job.spec).template.metadata).labels)
    assert labels["batch.kubernetes.io/job-name"] == name and labels["job-name"] == name
    eventually(lambda: len(job_pods(core, namespace, name)) == 1, "the Job's pod, found by its job-name label")
