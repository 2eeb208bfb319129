"""Built-in validation through the request pipeline: every bad field is a 422 cause with its path and
the apiserver's wording (extended resources and hugepages cannot be overcommitted: a request needs an
equal limit); an unparseable quantity is a 400 before anything is stored."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.server.errors import ApiError
from devcluster.server.validation import overcommit_allowed, qualified_name_problems


def pod(**spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {})
    container = {"name": "c", "image": "busybox", **spec.pop("container", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta},
            "spec": {"containers": [container], **spec}}


@pytest.mark.parametrize(("_name", "body", "want"), [
    ("a label key with a space", pod(metadata={"labels": {"bad key": "v"}}),
     'metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric characters'),
    ("a label value starting with a dash", pod(metadata={"labels": {"k": "-v"}}),
     'metadata.labels: Invalid value: "-v": a valid label must be an empty string'),
    ("an annotation key with two slashes", pod(metadata={"annotations": {"a/b/c": "v"}}),
     'metadata.annotations: Invalid value: "a/b/c": a qualified name must consist of'),
    ("a finalizer neither standard nor qualified", pod(metadata={"finalizers": ["cleanup"]}),
     'metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it '
     "fully qualified"),
    ("a negative request", pod(container={"resources": {"requests": {"cpu": "-1"}}}),
     'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ("a request above its limit", pod(container={"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
     'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ("a GPU request without a limit", pod(container={"resources": {"requests": {"nvidia.com/gpu": "1"}}}),
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ("a GPU request below its limit",
     pod(container={"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}}),
     'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
    ("half a GPU", pod(container={"resources": {"limits": {"nvidia.com/gpu": "500m"}}}),
     'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer'),
    ("hugepages without a limit", pod(initContainers=[{"name": "i", "image": "busybox",
                                                       "resources": {"requests": {"hugepages-2Mi": "2Mi"}}}]),
     "spec.initContainers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ("a nodeSelector key", pod(nodeSelector={"bad key": "v"}), 'spec.nodeSelector: Invalid value: "bad key"'),
    ("Exists with a value", pod(tolerations=[{"key": "gpu", "operator": "Exists", "value": "x"}]),
     "spec.tolerations[0].operator: Invalid value: \"x\": value must be empty when `operator` is 'Exists'"),
    ("an unknown effect", pod(tolerations=[{"key": "gpu", "effect": "Sometimes"}]),
     'spec.tolerations[0].effect: Unsupported value: "Sometimes"'),
    ("seconds without NoExecute", pod(tolerations=[{"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
     "`tolerationSeconds` is set"),
    ("an empty key needs Exists", pod(tolerations=[{"value": "x"}]),
     "spec.tolerations[0].operator: Invalid value: \"\": operator must be Exists when `key` is empty"),
])
async def test_a_bad_pod_field_is_refused_with_its_path(_name: str, body: dict[str, Any], want: str) -> None:
    api = ApiServer()
    with pytest.raises(ApiError) as refused:
        await api.create(api.resource("v1", "pods"), "default", body)
    assert refused.value.code == 422
    assert want in refused.value.message


async def test_an_unparseable_quantity_is_a_400_and_nothing_is_stored() -> None:
    api = ApiServer()
    pods = api.resource("v1", "pods")
    with pytest.raises(ApiError) as refused:
        await api.create(pods, "default", pod(container={"resources": {"requests": {"cpu": "abc"}}}))
    assert refused.value.code == 400
    assert refused.value.message.startswith('Pod in version "v1" cannot be handled as a Pod: quantities must match')
    assert (await api.list_objects(pods, "default"))["items"] == []


async def test_a_custom_resource_finalizer_needs_only_a_qualified_name() -> None:
    api = ApiServer()
    cms = api.resource("v1", "configmaps")
    with pytest.raises(ApiError, match="name part must consist"):
        await api.create(cms, "default", {"metadata": {"name": "c", "finalizers": ["example.com/bad name"]}})
    made = await api.create(cms, "default", {"metadata": {"name": "c", "finalizers": ["example.com/cleanup"]}})
    assert made["metadata"]["finalizers"] == ["example.com/cleanup"]


@pytest.mark.parametrize(("_name", "spec", "want"), [
    ("a zero duration", {"leaseDurationSeconds": 0},
     "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
    ("negative transitions", {"leaseTransitions": -1},
     "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"),
])
async def test_bad_lease_fields(_name: str, spec: dict[str, Any], want: str) -> None:
    api = ApiServer()
    with pytest.raises(ApiError) as refused:
        await api.create(api.resource("coordination.k8s.io/v1", "leases"), "default",
                         {"metadata": {"name": "l"}, "spec": spec})
    assert refused.value.code == 422 and want in refused.value.message


JOB: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
       "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                       "containers": [{"name": "c", "image": "busybox"}]}}}}


@pytest.mark.parametrize(("_name", "status", "want"), [
    ("a negative count", {"succeeded": -1}, "status.succeeded: Invalid value: -1: must be greater than or equal to 0"),
    ("complete and failed at once", {"conditions": [{"type": "Complete", "status": "True"},
                                                    {"type": "Failed", "status": "True"}]},
     "cannot set Complete=True and Failed=true conditions"),
])
async def test_a_bad_job_status_write_is_refused(_name: str, status: dict[str, Any], want: str) -> None:
    api = ApiServer()
    jobs = api.resource("batch/v1", "jobs")
    await api.create(jobs, "default", JOB)
    with pytest.raises(ApiError) as refused:
        await api.patch(jobs, "default", "j", PATCH_MERGE, {"status": status}, subresource="status")
    assert refused.value.code == 422 and want in refused.value.message


@pytest.mark.parametrize(("name", "problems"), [
    ("example.com/my-name", 0), ("MyName", 0), ("a/b/c", 1), ("/x", 1), ("Example.com/x", 1), ("x" * 64, 1),
    ("example.com/", 1),
])
def test_qualified_names(name: str, problems: int) -> None:
    assert len(qualified_name_problems(name)) == problems


@pytest.mark.parametrize(("_name", "mode", "patch", "want"), [
    ("a NonIndexed Job's completions are immutable", "NonIndexed", {"completions": 5},
     "spec.completions: Invalid value: 5: field is immutable"),
    ("an Indexed Job scales completions with parallelism", "Indexed", {"completions": 4, "parallelism": 4}, None),
    ("an Indexed Job's completions alone cannot change", "Indexed", {"completions": 4},
     "spec.completions: Invalid value: 4: can only be modified in tandem with spec.parallelism"),
])
async def test_job_completions_updates(_name: str, mode: str, patch: dict[str, Any], want: str | None) -> None:
    api = ApiServer()
    jobs = api.resource("batch/v1", "jobs")
    spec = {**JOB["spec"], "completionMode": mode, "completions": 2, "parallelism": 2}
    await api.create(jobs, "default", {**JOB, "spec": spec})
    if want is None:
        assert (await api.patch(jobs, "default", "j", PATCH_MERGE, {"spec": patch}))["spec"]["completions"] == 4
        return
    with pytest.raises(ApiError) as refused:
        await api.patch(jobs, "default", "j", PATCH_MERGE, {"spec": patch})
    assert want in refused.value.message


@pytest.mark.parametrize(("name", "allowed"), [
    ("cpu", True), ("memory", True), ("ephemeral-storage", True), ("kubernetes.io/widget", True),
    ("example.kubernetes.io/widget", True), ("nvidia.com/gpu", False), ("hugepages-2Mi", False),
    ("example.com/foo", False),
])
def test_only_native_resources_but_hugepages_may_be_overcommitted(name: str, allowed: bool) -> None:
    assert overcommit_allowed(name) is allowed


async def test_a_job_template_needs_gpu_limits_and_native_requests_may_stay_below_limits() -> None:
    api = ApiServer()
    jobs = api.resource("batch/v1", "jobs")
    bad = {**JOB, "spec": {**JOB["spec"], "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
            "requests": {"nvidia.com/gpu": "8", "cpu": "1"}, "limits": {"cpu": "2"}}}]}}}}
    with pytest.raises(ApiError) as refused:
        await api.create(jobs, "default", bad)
    assert [(c.field, c.message) for c in refused.value.causes] == [
        ("spec.template.spec.containers[0].resources.limits",
         "Required value: Limit must be set for non overcommitable resources")]
    good = clone_with_gpu_limit(bad)
    made = await api.create(jobs, "default", good)
    assert made["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"


def clone_with_gpu_limit(job: dict[str, Any]) -> dict[str, Any]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    resources = {**container["resources"], "limits": {**container["resources"]["limits"], "nvidia.com/gpu": "8"}}
    spec = {**job["spec"]["template"]["spec"], "containers": [{**container, "resources": resources}]}
    return {**job, "spec": {**job["spec"], "template": {"spec": spec}}}


async def test_a_pods_limits_stand_in_for_its_missing_requests_but_not_a_templates() -> None:
    api = ApiServer()
    made = await api.create(api.resource("v1", "pods"), "default", pod(container={"resources": {
        "requests": {"cpu": "500m"}, "limits": {"cpu": "1", "nvidia.com/gpu": "2"}}}))
    assert made["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "nvidia.com/gpu": "2"}
    job = await api.create(api.resource("batch/v1", "jobs"), "default", {**JOB, "spec": {**JOB["spec"], "template": {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                           "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}})
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
