"""Built-in validation of the fields tasq reads and writes: quantities (extended resources such as
`nvidia.com/gpu` cannot be overcommitted: their request needs an equal limit), label keys and values,
annotations' size, node selectors, tolerations, Job and Lease fields, and Job status writes. Each bad
value is refused with the field path, so nothing malformed reaches tasq's cache. Where `tasq simulate`
must agree (Job templates, scheduling gates, null list items), its boundary is checked on the same body."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.manifests.kube_objects import check_object
from tests.client_models import as_body, present
from tests.conformance.conftest import status_body
from tests.e2e.conftest import Kubectl


def pod(**spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {})
    container = {"name": "c", "image": "busybox", **spec.pop("container", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", **meta},
            "spec": {"containers": [container], **spec}}


@pytest.mark.parametrize("body, code, want", [
    (pod(metadata={"labels": {"bad key!": "v"}}), 422, "metadata.labels: Invalid value: \"bad key!\""),
    (pod(metadata={"labels": {"k": "-starts-with-dash"}}), 422, "metadata.labels: Invalid value: \"-starts-with-dash\""),
    (pod(metadata={"annotations": {"a/b/c": "v"}}), 422, "metadata.annotations: Invalid value: \"a/b/c\""),
    (pod(container={"resources": {"requests": {"cpu": "-1"}}}), 422,
     "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"),
    (pod(container={"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}), 422,
     "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit"),
    (pod(nodeSelector={"bad key!": "v"}), 422, "spec.nodeSelector: Invalid value: \"bad key!\""),
    (pod(tolerations=[{"key": "gpu", "operator": "Exists", "value": "x"}]), 422, "spec.tolerations[0].operator"),
    (pod(tolerations=[{"key": "gpu", "effect": "Sometimes"}]), 422, "spec.tolerations[0].effect: Unsupported value"),
    (pod(container={"resources": {"requests": {"nvidia.com/gpu": "1"}}}), 422,
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    (pod(container={"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}}), 422,
     "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2"),
    (pod(container={"resources": {"requests": {"nvidia.com/gpu": "500m"}, "limits": {"nvidia.com/gpu": "500m"}}}), 422,
     "spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"500m\": must be an integer"),
    (pod(initContainers=[{"name": "i", "image": "busybox", "resources": {"requests": {"hugepages-2Mi": "2Mi"}}}]),
     422, "spec.initContainers[0].resources.limits: Required value: Limit must be set for non overcommitable"),
], ids=["label_key", "label_value", "annotation_key", "negative_request", "request_above_limit",
        "node_selector_key", "exists_toleration_with_value", "toleration_effect", "gpu_request_without_limit",
        "gpu_request_below_limit", "fractional_gpu", "hugepages_without_limit"])
def test_bad_pod_fields_are_refused_with_their_path(core: client.CoreV1Api, namespace: str,
                                                    body: dict[str, Any], code: int, want: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, as_body(body))
    assert e.value.status == code
    assert want in status_body(e.value)["message"]


def test_an_unparseable_quantity_is_refused_before_anything_is_stored(core: client.CoreV1Api,
                                                                       namespace: str) -> None:
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, as_body(pod(container={"resources": {"requests": {"cpu": "abc"}}})))
    assert e.value.status == 400
    assert "quantities must match the regular expression" in status_body(e.value)["message"]
    assert [present(p.metadata).name for p in core.list_namespaced_pod(namespace).items] == []


@pytest.mark.parametrize("spec, want", [
    ({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
    ({"leaseTransitions": -1}, "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"),
], ids=["zero_duration", "negative_transitions"])
def test_bad_lease_fields_are_refused(api_client: client.ApiClient, namespace: str, spec: dict[str, Any],
                                      want: str) -> None:
    leases = client.CoordinationV1Api(api_client)
    with pytest.raises(ApiException) as e:
        leases.create_namespaced_lease(namespace, as_body({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                   "metadata": {"name": "bad"}, "spec": spec}))
    assert e.value.status == 422
    assert want in status_body(e.value)["message"]


def test_a_webhook_configuration_with_a_plain_http_url_is_refused(api_client: client.ApiClient) -> None:
    admission = client.AdmissionregistrationV1Api(api_client)
    with pytest.raises(ApiException) as e:
        admission.create_validating_webhook_configuration(as_body({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "plain-http"},
            "webhooks": [{"name": "plain.conformance.tasq.io", "clientConfig": {"url": "http://127.0.0.1:9443/"},
                          "sideEffects": "None", "admissionReviewVersions": ["v1"]}]}))
    assert e.value.status == 422
    assert ("webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; "
            "desired format: https://host[/path]") in status_body(e.value)["message"]


def test_a_job_status_write_is_validated(batch: client.BatchV1Api, namespace: str) -> None:
    batch.create_namespaced_job(namespace, as_body({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "status"},
        "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                        "containers": [{"name": "c", "image": "busybox"}]}}}}))
    with pytest.raises(ApiException) as e:
        batch.patch_namespaced_job_status("status", namespace, {"status": {"succeeded": -1}})
    assert e.value.status == 422
    assert "status.succeeded: Invalid value: -1" in status_body(e.value)["message"]


@pytest.mark.parametrize("resources", [
    {"requests": {"nvidia.com/gpu": "2", "cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
    {"requests": {"kubernetes.io/widget": "1", "cpu": "500m"}, "limits": {"cpu": "1"}},
], ids=["gpu_request_equal_to_limit", "native_domain_resource_overcommitted"])
def test_requests_the_rules_allow_are_stored(core: client.CoreV1Api, namespace: str,
                                          resources: dict[str, Any]) -> None:
    """Extended resources request exactly their limit; cpu and kubernetes.io/ names may request less."""
    created = core.create_namespaced_pod(namespace, as_body(pod(container={"resources": resources})), dry_run="All")
    assert present(present(created.spec).containers[0].resources).requests == resources["requests"]


def test_a_job_template_requesting_a_gpu_without_limit_is_refused(batch: client.BatchV1Api,
                                                                   namespace: str) -> None:
    template = pod(container={"resources": {"requests": {"nvidia.com/gpu": "8"}}})
    template["spec"]["restartPolicy"] = "Never"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gpu"},
           "spec": {"suspend": True, "template": {"spec": template["spec"]}}}
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_job(namespace, as_body(job))
    assert e.value.status == 422
    assert ("spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for non "
            "overcommitable resources") in status_body(e.value)["message"]


def job(template_spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
            "spec": {"suspend": True, "template": {"spec": template_spec}}}


@pytest.mark.parametrize("body, want", [
    (job({"containers": [{"name": "c", "image": "busybox"}]}),
     'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    (job({"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                    "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}),
     "spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable "
     "resources"),
    (pod(nodeName="gpu-b1-r1-n1", schedulingGates=[{"name": "example.com/wait"}]),
     "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"),
    (pod(schedulingGates=[None]), 'spec.schedulingGates[0]: Invalid value: "": name part must be non-empty'),
], ids=["job_without_restart_policy", "job_gpu_request_without_limit", "pod_node_name_with_gates",
        "pod_null_scheduling_gate"])
def test_the_cluster_and_tasqs_validators_refuse_the_same_job_and_pod_at_the_same_field(
        kubectl: Kubectl, namespace: str, body: dict[str, Any], want: str) -> None:
    """What `tasq simulate` (and the Job webhook) refuse is what the API server refuses: same field
    path, same message (tasq's checks get the manifest as written, before any defaulting). kubectl
    sends the body as written (the typed client refuses a null list item before sending it)."""
    assert want in [str(e) for e in check_object(copy.deepcopy(body)).errors]
    created = kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(body), check=False)
    assert created.returncode != 0
    assert want in created.stderr


def test_a_null_node_selector_term_is_stored_as_an_empty_term_as_tasq_reads_it(kubectl: Kubectl,
                                                                                namespace: str) -> None:
    """An empty term matches no node; tasq's boundary keeps it (not a crash, not an error)."""
    body = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [None]}}})
    kept = check_object(copy.deepcopy(body)).obj
    assert kept is not None
    stored = json.loads(kubectl("create", "-n", namespace, "-f", "-", "-o", "json", stdin=json.dumps(body)).stdout)
    assert stored["spec"]["affinity"] == kept["spec"]["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}


def test_a_null_job_condition_is_stored_as_an_empty_one(kubectl: Kubectl, namespace: str) -> None:
    """A status write with a null condition is accepted (an empty type and status), as tasq's boundary
    reads a Job dump with one: a condition of no type, so the Job is not finished."""
    body = job({"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]})
    kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(body))
    kubectl("patch", "-n", namespace, "job", "bad", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"conditions": [None]}}))
    stored = json.loads(kubectl("get", "-n", namespace, "job", "bad", "-o", "json").stdout)
    # The Job controller may add its Suspended condition meanwhile; the written one is the untyped one.
    untyped = [(cd["type"], cd["status"]) for cd in stored["status"]["conditions"] if cd["type"] != "Suspended"]
    assert untyped == [("", "")], stored["status"]
    kept = check_object({**body, "status": {"conditions": [None]}}).obj
    assert kept is not None and kept["status"]["conditions"] == [{"type": "", "status": ""}]
