"""The request pipeline without HTTP: metadata, generation, status isolation, finalizers, garbage
collection, namespaces, CRDs, scheduling gates, Job immutability, watches and the hook points."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from devcluster.server.apiserver import (
    PATCH_MERGE,
    PATCH_STRATEGIC,
    AdmissionRequest,
    ApiServer,
    ListOptions,
    RequestInfo,
)
from devcluster.server.errors import ApiError
from devcluster.server.resources import ResourceType
from tests.builders.cluster import make_pod

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MERGE = PATCH_MERGE


class ObjectBuilder:
    """A generic object dict: `make_object("v1", "ConfigMap", "c").owned_by(parent).finalizer("x").build()`."""

    def __init__(self, api_version: str, kind: str, name: str) -> None:
        self._obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}

    def label(self, key: str, value: str) -> ObjectBuilder:
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def finalizer(self, name: str) -> ObjectBuilder:
        self._obj["metadata"].setdefault("finalizers", []).append(name)
        return self

    def owned_by(self, owner: dict[str, Any]) -> ObjectBuilder:
        self._obj["metadata"].setdefault("ownerReferences", []).append(
            {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"]})
        return self

    def field(self, key: str, value: Any) -> ObjectBuilder:
        self._obj[key] = value
        return self

    def build(self) -> dict[str, Any]:
        return self._obj


def make_object(api_version: str, kind: str, name: str) -> ObjectBuilder:
    return ObjectBuilder(api_version, kind, name)


def make_configmap(name: str) -> ObjectBuilder:
    return make_object("v1", "ConfigMap", name).field("data", {"k": "v"})


def make_job(name: str, suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"suspend": suspend, "parallelism": 2, "completions": 2,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "img"}]}}}}


@pytest.fixture
def api() -> ApiServer:
    return ApiServer(now=lambda: NOW)


def res(api: ApiServer, api_version: str, plural: str) -> ResourceType:
    return api.resource(api_version, plural)


async def test_create_sets_server_metadata_from_the_injected_clock(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    before = api.store.revision
    made = await api.create(cms, "default", make_configmap("c").build())
    meta = made["metadata"]
    assert meta["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert meta["generation"] == 1 and meta["uid"] and meta["namespace"] == "default"
    assert int(meta["resourceVersion"]) == before + 1


async def test_generate_name_appends_five_characters(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    body = make_object("v1", "ConfigMap", "").build()
    body["metadata"] = {"generateName": "job-"}
    made = await api.create(cms, "default", body)
    assert made["metadata"]["name"].startswith("job-") and len(made["metadata"]["name"]) == 9


@dataclass(frozen=True)
class GenerationCase:
    name: str
    patch: dict[str, Any]
    subresource: str
    want_generation: int


GENERATION_CASES = [
    GenerationCase("spec change bumps generation", {"spec": {"parallelism": 1}}, "", 2),
    GenerationCase("label change does not", {"metadata": {"labels": {"a": "b"}}}, "", 1),
    GenerationCase("status change does not", {"status": {"active": 1}}, "status", 1),
]


@pytest.mark.parametrize("case", GENERATION_CASES, ids=lambda c: c.name)
async def test_generation_counts_spec_changes_only(api: ApiServer, case: GenerationCase) -> None:
    jobs = res(api, "batch/v1", "jobs")
    await api.create(jobs, "default", make_job("j", suspend=True))
    got = await api.patch(jobs, "default", "j", MERGE, case.patch, subresource=case.subresource)
    assert got["metadata"]["generation"] == case.want_generation


async def test_status_subresource_is_isolated_from_the_main_resource(api: ApiServer) -> None:
    pods = res(api, "v1", "pods")
    await api.create(pods, "default", make_pod("p").build())
    main = await api.patch(pods, "default", "p", MERGE, {"status": {"phase": "Running"},
                                                         "metadata": {"labels": {"x": "1"}}})
    assert main["status"]["phase"] == "Pending" and main["metadata"]["labels"] == {"x": "1"}
    status = await api.patch(pods, "default", "p", MERGE, {"status": {"phase": "Running"},
                                                           "metadata": {"labels": {"x": "2"}}},
                             subresource="status")
    assert status["status"]["phase"] == "Running" and status["metadata"]["labels"] == {"x": "1"}


async def test_a_no_op_update_keeps_the_resource_version(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    made = await api.create(cms, "default", make_configmap("c").build())
    same = await api.update(cms, "default", "c", made)
    assert same["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


async def test_stale_resource_version_conflicts(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    made = await api.create(cms, "default", make_configmap("c").build())
    await api.patch(cms, "default", "c", MERGE, {"data": {"k": "2"}})
    with pytest.raises(ApiError) as error:
        await api.update(cms, "default", "c", {**made, "data": {"k": "3"}})
    assert (error.value.code, error.value.reason) == (409, "Conflict")


async def test_finalizers_hold_deletion_until_the_last_one_is_removed(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    await api.create(cms, "default", make_configmap("c").finalizer("a/x").finalizer("a/y").build())
    marked = await api.delete(cms, "default", "c")
    assert marked["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:05Z"
    with pytest.raises(ApiError) as added:
        await api.patch(cms, "default", "c", MERGE, {"metadata": {"finalizers": ["a/x", "a/y", "a/z"]}})
    assert added.value.code == 422 and "no new finalizers can be added" in added.value.message
    await api.patch(cms, "default", "c", MERGE, {"metadata": {"finalizers": ["a/y"]}})
    assert (await api.get(cms, "default", "c"))["metadata"]["finalizers"] == ["a/y"]
    await api.patch(cms, "default", "c", MERGE, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiError) as gone:
        await api.get(cms, "default", "c")
    assert gone.value.code == 404


async def owner_with_pods(api: ApiServer, *pod_finalizers: str) -> dict[str, Any]:
    """A ConfigMap owning pods p0 and p1 (p0 carrying `pod_finalizers`)."""
    owner = await api.create(res(api, "v1", "configmaps"), "default", make_configmap("owner").build())
    for i in range(2):
        pod = make_pod(f"p{i}").build()
        pod["metadata"].pop("uid")
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                               "uid": owner["metadata"]["uid"]}]
        if i == 0 and pod_finalizers:
            pod["metadata"]["finalizers"] = list(pod_finalizers)
        await api.create(res(api, "v1", "pods"), "default", pod)
    return owner


async def pod_names(api: ApiServer) -> list[str]:
    listed = await api.list_objects(res(api, "v1", "pods"), "default")
    return [p["metadata"]["name"] for p in listed["items"]]


async def test_background_deletion_collects_dependents(api: ApiServer) -> None:
    await owner_with_pods(api)
    await api.delete(res(api, "v1", "configmaps"), "default", "owner", propagation="Background")
    assert await pod_names(api) == []


async def test_a_dependent_with_another_live_owner_survives_without_the_dead_reference(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    await owner_with_pods(api)
    other = await api.create(cms, "default", make_configmap("other").build())
    p1 = await api.get(res(api, "v1", "pods"), "default", "p1")
    refs = p1["metadata"]["ownerReferences"] + [{"apiVersion": "v1", "kind": "ConfigMap", "name": "other",
                                                  "uid": other["metadata"]["uid"]}]
    await api.patch(res(api, "v1", "pods"), "default", "p1", MERGE, {"metadata": {"ownerReferences": refs}})
    await api.delete(cms, "default", "owner")
    assert await pod_names(api) == ["p1"]
    p1 = await api.get(res(api, "v1", "pods"), "default", "p1")
    assert [r["name"] for r in p1["metadata"]["ownerReferences"]] == ["other"]


async def test_foreground_deletion_waits_for_dependents(api: ApiServer) -> None:
    cms, pods = res(api, "v1", "configmaps"), res(api, "v1", "pods")
    await owner_with_pods(api, "test/hold")
    pending = await api.delete(cms, "default", "owner", propagation="Foreground")
    assert pending["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert await pod_names(api) == ["p0"]  # p1 deleted, p0 held by its finalizer
    await api.patch(pods, "default", "p0", MERGE, {"metadata": {"finalizers": None}})
    assert await pod_names(api) == []
    with pytest.raises(ApiError):
        await api.get(cms, "default", "owner")


async def test_orphan_deletion_keeps_dependents_without_the_reference(api: ApiServer) -> None:
    await owner_with_pods(api)
    await api.delete(res(api, "v1", "configmaps"), "default", "owner", propagation="Orphan")
    assert await pod_names(api) == ["p0", "p1"]
    p0 = await api.get(res(api, "v1", "pods"), "default", "p0")
    assert "ownerReferences" not in p0["metadata"]


async def test_jobs_orphan_their_pods_by_default_as_batch_v1_does(api: ApiServer) -> None:
    job = await api.create(res(api, "batch/v1", "jobs"), "default", make_job("j", suspend=False))
    pod = make_pod("j-0").build()
    pod["metadata"].pop("uid")
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                           "uid": job["metadata"]["uid"]}]
    await api.create(res(api, "v1", "pods"), "default", pod)
    await api.delete(res(api, "batch/v1", "jobs"), "default", "j")
    assert await pod_names(api) == ["j-0"]


async def test_a_pod_created_for_a_job_deleted_meanwhile_is_collected_as_the_real_gc_does(api: ApiServer) -> None:
    # a Job controller acting on its view from before the deletion creates one more pod: the create
    # succeeds, then the pod is collected (its only owner is gone); a pod whose owner lives stays
    jobs, pods = res(api, "batch/v1", "jobs"), res(api, "v1", "pods")
    job = await api.create(jobs, "default", make_job("gone", suspend=False))
    kept = await api.create(jobs, "default", make_job("kept", suspend=False))
    await api.delete(jobs, "default", "gone", propagation="Foreground")
    for name, owner in (("gone-0", job), ("kept-0", kept)):
        pod = make_pod(name).build()
        pod["metadata"].pop("uid")
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                               "uid": owner["metadata"]["uid"]}]
        created = await api.create(pods, "default", pod)
        assert created["metadata"]["name"] == name
    assert await pod_names(api) == ["kept-0"]


async def test_namespace_deletion_removes_its_content_then_itself(api: ApiServer) -> None:
    nss, cms = res(api, "v1", "namespaces"), res(api, "v1", "configmaps")
    await api.create(nss, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await api.create(cms, "team", make_configmap("c").build())
    await api.delete(nss, "", "team")
    assert (await api.list_objects(cms, "team"))["items"] == []
    with pytest.raises(ApiError):
        await api.get(nss, "", "team")


@pytest.mark.parametrize("name, want_code", [("default", 403), ("kube-system", 403), ("kube-public", 403),
                                              ("kube-node-lease", 200)])
async def test_only_the_immortal_system_namespaces_refuse_deletion(api: ApiServer, name: str,
                                                                    want_code: int) -> None:
    nss, cms = res(api, "v1", "namespaces"), res(api, "v1", "configmaps")
    await api.create(cms, name, make_configmap("kept").build())
    try:
        await api.delete(nss, "", name)
        code = 200
    except ApiError as e:
        code = e.code
        assert e.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
        assert e.reason == "Forbidden"
    assert code == want_code
    left = (await api.list_objects(cms, name))["items"]
    assert [c["metadata"]["name"] for c in left] == (["kept"] if want_code == 403 else [])


async def test_creating_in_a_terminating_namespace_is_forbidden(api: ApiServer) -> None:
    nss, cms = res(api, "v1", "namespaces"), res(api, "v1", "configmaps")
    await api.create(nss, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await api.create(cms, "team", make_configmap("held").finalizer("x/y").build())
    await api.delete(nss, "", "team")
    assert (await api.get(nss, "", "team"))["status"]["phase"] == "Terminating"
    with pytest.raises(ApiError) as error:
        await api.create(cms, "team", make_configmap("new").build())
    assert error.value.code == 403


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


async def test_custom_resources_without_status_subresource_count_status_in_generation(api: ApiServer) -> None:
    await api.create(res(api, "apiextensions.k8s.io/v1", "customresourcedefinitions"), "", WIDGET_CRD)
    widgets = res(api, "example.com/v1", "widgets")
    await api.create(widgets, "default", {"apiVersion": "example.com/v1", "kind": "Widget",
                                          "metadata": {"name": "w"}, "spec": {}})
    got = await api.patch(widgets, "default", "w", MERGE, {"status": {"phase": "Ready"}})
    assert got["status"] == {"phase": "Ready"} and got["metadata"]["generation"] == 2


async def test_crd_lifecycle_registers_and_removes_the_resource_and_its_objects(api: ApiServer) -> None:
    crds = res(api, "apiextensions.k8s.io/v1", "customresourcedefinitions")
    made = await api.create(crds, "", WIDGET_CRD)
    assert [c["type"] for c in made["status"]["conditions"]] == ["NamesAccepted", "Established"]
    widgets = res(api, "example.com/v1", "widgets")
    await api.create(widgets, "default", {"apiVersion": "example.com/v1", "kind": "Widget",
                                          "metadata": {"name": "w"}})
    watch = api.watch(widgets, "default", resource_version=made["metadata"]["resourceVersion"])
    await api.delete(crds, "", "widgets.example.com")
    assert [(await watch.next(0.1) or {}).get("type") for _ in range(2)] == ["ADDED", "DELETED"]
    with pytest.raises(ApiError) as missing:
        api.resource("example.com/v1", "widgets")
    assert missing.value.code == 404


@pytest.mark.parametrize("body, want_field", [
    ({**WIDGET_CRD, "metadata": {"name": "wrong.example.com"}}, "metadata.name"),
    ({**WIDGET_CRD, "spec": {**WIDGET_CRD["spec"], "scope": "Global"}}, "spec.scope"),
    ({**WIDGET_CRD, "spec": {**WIDGET_CRD["spec"], "versions": []}}, "spec.versions"),
], ids=["name must be plural.group", "scope", "versions"])
async def test_invalid_crds_are_refused(api: ApiServer, body: dict[str, Any], want_field: str) -> None:
    with pytest.raises(ApiError) as error:
        await api.create(res(api, "apiextensions.k8s.io/v1", "customresourcedefinitions"), "", body)
    assert error.value.code == 422 and [c.field for c in error.value.causes] == [want_field]


@dataclass(frozen=True)
class GateCase:
    name: str
    patch: dict[str, Any]
    want_error: str  # "" = accepted


GATE_CASES = [
    GateCase("removing a gate is allowed", {"spec": {"schedulingGates": [{"name": "b"}]}}, ""),
    GateCase("adding a gate is forbidden", {"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}},
             "spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"),
    GateCase("adding nodeSelector terms while gated is allowed", {"spec": {"nodeSelector": {"rack": "r1"}}}, ""),
    GateCase("other spec fields stay immutable", {"spec": {"restartPolicy": "Never"}},
             "spec: Forbidden: pod updates may not change fields other than"),
    GateCase("images may change", {"spec": {"containers": [{"name": "main", "image": "v2"}]}}, ""),
    GateCase("tolerations may be added", {"spec": {"tolerations": [
        {"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "new", "operator": "Exists"}]}}, ""),
    GateCase("a toleration's seconds may change", {"spec": {"tolerations": [
        {"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]}}, ""),
    GateCase("a toleration may not be removed", {"spec": {"tolerations": [{"key": "new", "operator": "Exists"}]}},
             "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"),
]


@pytest.mark.parametrize("case", GATE_CASES, ids=lambda c: c.name)
async def test_pod_updates_and_scheduling_gates(api: ApiServer, case: GateCase) -> None:
    pods = res(api, "v1", "pods")
    pod = make_pod("p").gate("a").gate("b").build()
    pod["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
    await api.create(pods, "default", pod)
    if not case.want_error:
        await api.patch(pods, "default", "p", PATCH_STRATEGIC, case.patch)
        return
    with pytest.raises(ApiError) as error:
        await api.patch(pods, "default", "p", PATCH_STRATEGIC, case.patch)
    assert error.value.code == 422 and case.want_error in error.value.message


async def test_a_gated_pod_cannot_be_created_bound_nor_bound_later(api: ApiServer) -> None:
    pods = res(api, "v1", "pods")
    with pytest.raises(ApiError) as bound:
        await api.create(pods, "default", make_pod("p").gate().on("n1").build())
    assert "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared" in bound.value.message
    await api.create(pods, "default", make_pod("q").gate().build())
    with pytest.raises(ApiError) as gated:
        await api.bind("default", "q", {"target": {"name": "n1"}})
    assert gated.value.code == 409
    await api.patch(pods, "default", "q", MERGE, {"spec": {"schedulingGates": None}})
    await api.bind("default", "q", {"target": {"name": "n1"}})
    assert (await api.get(pods, "default", "q"))["spec"]["nodeName"] == "n1"
    with pytest.raises(ApiError) as twice:
        await api.bind("default", "q", {"target": {"name": "n2"}})
    assert twice.value.code == 409 and 'already assigned to node "n1"' in twice.value.message


@dataclass(frozen=True)
class TemplateCase:
    """A patch of the pod template of a Job in state (suspend, status); want: the refused field or None."""

    name: str
    suspend: bool
    status: dict[str, Any]
    patch: dict[str, Any]
    want: str | None


_SUSPENDED_MARK = {"conditions": [{"type": "Suspended", "status": "True"}]}
_STARTED = {"startTime": "2026-01-01T00:00:00Z"}
_NODE_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}}}
_POD_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "rack"}]}}
_GPUS = {"containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "2"},
                                                       "limits": {"nvidia.com/gpu": "2"}}}]}


@pytest.mark.parametrize("case", [
    TemplateCase("never started: scheduling directives change", True, {},
                 {"spec": {"nodeSelector": {"rack": "r1"}, "tolerations": [{"key": "gpu", "operator": "Exists"}],
                           "schedulingGates": [{"name": "g"}], "affinity": _NODE_AFFINITY},
                  "metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}}}, None),
    TemplateCase("never started: container resources change", True, {}, {"spec": _GPUS}, None),
    TemplateCase("never started: an image is refused under spec", True, {},
                 {"spec": {"containers": [{"name": "main", "image": "other"}]}}, "spec.template.spec"),
    TemplateCase("never started: pod affinity is not a scheduling directive", True, {},
                 {"spec": {"affinity": _POD_AFFINITY}}, "spec.template.spec"),
    TemplateCase("started, marked Suspended: directives change", True, {**_STARTED, **_SUSPENDED_MARK},
                 {"spec": {"nodeSelector": {"rack": "r1"}}}, None),
    TemplateCase("started, not yet marked Suspended: immutable", True, _STARTED,
                 {"spec": {"nodeSelector": {"rack": "r1"}}}, "spec.template"),
    TemplateCase("suspended with an active pod: immutable", True, {"active": 1},
                 {"spec": {"nodeSelector": {"rack": "r1"}}}, "spec.template"),
    TemplateCase("running: immutable", False, {}, {"spec": {"nodeSelector": {"rack": "r1"}}}, "spec.template"),
    TemplateCase("running: an empty nodeSelector is no change", False, {}, {"spec": {"nodeSelector": {}}}, None),
], ids=lambda case: case.name)
async def test_job_template_mutability(api: ApiServer, case: TemplateCase) -> None:
    jobs = res(api, "batch/v1", "jobs")
    await api.create(jobs, "default", make_job("j", case.suspend))
    if case.status:
        await api.patch(jobs, "default", "j", MERGE, {"status": case.status}, subresource="status")
    body = {"spec": {"template": case.patch}}
    if case.want is None:
        changed = await api.patch(jobs, "default", "j", PATCH_STRATEGIC, body)
        assert changed["spec"]["template"]["spec"].get("nodeSelector") == case.patch["spec"].get("nodeSelector")
        return
    with pytest.raises(ApiError) as error:
        await api.patch(jobs, "default", "j", PATCH_STRATEGIC, body)
    assert [(c.field, c.message) for c in error.value.causes] == [(case.want, "Invalid value: field is immutable")]


async def test_job_defaults_generate_selector_and_template_labels(api: ApiServer) -> None:
    job = await api.create(res(api, "batch/v1", "jobs"), "default", make_job("j", False))
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"


async def test_watch_turns_selector_transitions_into_added_and_deleted(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    watch = api.watch(cms, "default", label_selector="app=x")
    await api.create(cms, "default", make_configmap("c").label("app", "x").build())
    await api.patch(cms, "default", "c", MERGE, {"metadata": {"labels": {"app": "y"}}})
    await api.patch(cms, "default", "c", MERGE, {"data": {"k": "ignored"}})
    await api.patch(cms, "default", "c", MERGE, {"metadata": {"labels": {"app": "x"}}})
    events = [await watch.next(0.1) for _ in range(4)]
    assert [e["type"] if e else None for e in events] == ["ADDED", "DELETED", "ADDED", None]
    watch.close()


async def test_hooks_run_fault_then_mutate_then_validate(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    calls: list[str] = []

    async def fault(info: RequestInfo) -> ApiError | None:
        calls.append(f"fault:{info.verb}")
        return ApiError(503, "ServiceUnavailable", "injected") if info.name == "broken" else None

    async def mutate(request: AdmissionRequest) -> dict[str, Any] | ApiError:
        calls.append(f"mutate:{request.operation}")
        assert request.object is not None
        return {**request.object, "data": {"mutated": "yes"}}

    async def validate(request: AdmissionRequest) -> ApiError | None:
        calls.append(f"validate:{request.operation}")
        assert request.object is not None
        return ApiError(400, "BadRequest", "denied") if request.object["metadata"]["name"] == "denied" else None

    api.fault_hooks.append(fault)
    api.mutating_hooks.append(mutate)
    api.validating_hooks.append(validate)
    made = await api.create(cms, "default", make_configmap("ok").build())
    assert made["data"] == {"mutated": "yes"}
    assert calls == ["fault:create", "mutate:CREATE", "validate:CREATE"]
    revision = api.store.revision
    for name, code in (("broken", 503), ("denied", 400)):
        with pytest.raises(ApiError) as error:
            await api.create(cms, "default", make_configmap(name).build())
        assert error.value.code == code
    assert api.store.revision == revision


async def test_dry_run_changes_nothing(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    await api.create(cms, "default", make_configmap("c").build())
    revision = api.store.revision
    await api.create(cms, "default", make_configmap("d").build(), dry_run=True)
    await api.patch(cms, "default", "c", MERGE, {"data": {"k": "2"}}, dry_run=True)
    await api.delete(cms, "default", "c", dry_run=True)
    assert api.store.revision == revision
    assert (await api.get(cms, "default", "c"))["data"] == {"k": "v"}


@pytest.mark.parametrize("patch_type, patch", [
    (PATCH_STRATEGIC, {"spec": {"schedulingGates": None}}),
    (MERGE, {"spec": {"schedulingGates": None}}),
    (MERGE, {"metadata": {"labels": {"a": "2"}}}),
    ("application/json-patch+json", [{"op": "remove", "path": "/spec/schedulingGates"}]),
], ids=["strategic spec", "merge spec", "merge labels", "json"])
async def test_writes_never_mutate_the_stored_previous_object(api: ApiServer, patch_type: str, patch: Any) -> None:
    """Watch events and in-process readers share stored objects, so an update must build a new one."""
    pods = res(api, "v1", "pods")
    await api.create(pods, "default", make_pod("p").label("a", "1").gate().build())
    before = await api.get(pods, "default", "p", copy=False)
    snapshot = repr(before)
    await api.patch(pods, "default", "p", patch_type, patch)
    await api.patch(pods, "default", "p", MERGE, {"status": {"phase": "Running"}}, subresource="status")
    assert repr(before) == snapshot


async def test_a_write_landing_while_hooks_await_is_not_lost(api: ApiServer) -> None:
    """A status write that lands while a main-resource patch awaits its webhooks survives: the patch
    is re-applied to the newer object (kube-apiserver's GuaranteedUpdate)."""
    pods = res(api, "v1", "pods")
    await api.create(pods, "default", make_pod("p").build())
    interleaved = False

    async def slow_webhook(request: AdmissionRequest) -> ApiError | None:
        nonlocal interleaved
        if request.subresource == "" and not interleaved:
            interleaved = True
            await api.patch(pods, "default", "p", MERGE, {"status": {"phase": "Running"}}, subresource="status")
        return None

    api.validating_hooks.append(slow_webhook)
    await api.patch(pods, "default", "p", MERGE, {"metadata": {"labels": {"seen": "yes"}}})
    got = await api.get(pods, "default", "p")
    assert got["status"]["phase"] == "Running" and got["metadata"]["labels"] == {"seen": "yes"}


async def test_deleting_a_namespace_with_many_objects_removes_them_all(api: ApiServer) -> None:
    nss, cms = res(api, "v1", "namespaces"), res(api, "v1", "configmaps")
    await api.create(nss, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "big"}})
    for i in range(2000):
        await api.create(cms, "big", make_configmap(f"c{i}").build(), copy=False)
    await api.delete(nss, "", "big")
    assert api.store.count(cms.storage_key, "big") == 0
    with pytest.raises(ApiError):
        await api.get(nss, "", "big")


async def test_both_event_apis_serve_one_storage(api: ApiServer) -> None:
    """An Event written through events.k8s.io/v1 is what `kubectl describe` reads through core/v1."""
    core, new_api = res(api, "v1", "events"), res(api, "events.k8s.io/v1", "events")
    watch = api.watch(new_api, "default")
    await api.create(new_api, "default", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}, "note": "gated", "reason": "Gated",
        "type": "Normal", "reportingController": "tasq", "reportingInstance": "tasq-0",
        "eventTime": "2026-01-02T03:04:05.000000Z", "action": "Gate"})
    as_core = await api.list_objects(core, "default", ListOptions(field_selector="involvedObject.name=p"))
    assert [(e["message"], e["reportingComponent"], e["involvedObject"]["kind"]) for e in as_core["items"]] == [
        ("gated", "tasq", "Pod")]
    await api.create(core, "default", {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e2"},
                                       "involvedObject": {"kind": "Pod", "name": "q"}, "message": "old style",
                                       "count": 3})
    as_new = await api.list_objects(new_api, "default", ListOptions(field_selector="regarding.name=q"))
    assert [(e["apiVersion"], e["note"], e["deprecatedCount"]) for e in as_new["items"]] == [
        ("events.k8s.io/v1", "old style", 3)]
    events = [await watch.next(0.1) for _ in range(2)]
    assert [(e or {}).get("object", {}).get("regarding", {}).get("name") for e in events] == ["p", "q"]


async def test_streaming_list_sends_current_objects_then_the_initial_events_end_bookmark(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    await api.create(cms, "default", make_configmap("b").build())
    await api.create(cms, "default", make_configmap("a").build())
    watch = api.watch(cms, "default", resource_version="1", send_initial_events=True)
    await api.create(cms, "default", make_configmap("c").build())
    events = [await watch.next(0.1) or {} for _ in range(4)]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None), ("ADDED", "c")]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


@dataclass
class UnknownFieldCase:
    name: str
    api_version: str
    plural: str
    body: dict[str, Any]
    want_dropped: list[str]


UNKNOWN_FIELD_CASES = [
    UnknownFieldCase("pod_spec_and_container_typos", "v1", "pods",
                     make_pod("p").build() | {"spec": {"nodeSelecter": {"a": "b"}, "containers": [
                         {"name": "c", "image": "i", "imagee": "j", "resources": {"requests": {"cpu": "1"}}}]}},
                     ["spec.nodeSelecter", "spec.containers[0].imagee"]),
    UnknownFieldCase("job_template_typo_and_metadata_typo", "batch/v1", "jobs",
                     make_job("j", True) | {"metadata": {"name": "j", "lables": {"a": "b"}}, "spec": {
                         "suspend": True, "template": {"spec": {"restartPolicy": "Never", "tolerationz": [],
                                                                "containers": [{"name": "c", "image": "i"}]}}}},
                     ["metadata.lables", "spec.template.spec.tolerationz"]),
    UnknownFieldCase("secret_data_keys_are_free_form", "v1", "secrets",
                     make_object("v1", "Secret", "s").field("stringData", {"any-key": "v"}).build(), []),
    UnknownFieldCase("crd_schema_keywords_are_all_known", "apiextensions.k8s.io/v1", "customresourcedefinitions",
                     {**WIDGET_CRD, "spec": {**WIDGET_CRD["spec"], "versions": [{
                         "name": "v1", "served": True, "storage": True,
                         "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                             "type": "object", "x-kubernetes-preserve-unknown-fields": True,
                             "properties": {"n": {"x-kubernetes-int-or-string": True, "default": 1}}}}}}}]}},
                     []),
]


@pytest.mark.parametrize("case", UNKNOWN_FIELD_CASES, ids=lambda c: c.name)
async def test_built_in_kinds_drop_unknown_fields_or_refuse_them_when_strict(api: ApiServer,
                                                                             case: UnknownFieldCase) -> None:
    r = res(api, case.api_version, case.plural)
    if case.want_dropped:
        with pytest.raises(ApiError) as strict:
            await api.create(r, "default", case.body, strict=True)
        assert strict.value.code == 400
        assert strict.value.message.endswith("strict decoding error: " + ", ".join(
            f'unknown field "{path}"' for path in case.want_dropped))
    made = await api.create(r, "default", case.body)
    for path in case.want_dropped:
        parent: Any = made
        *steps, last = path.replace("[0]", ".0").split(".")
        for step in steps:
            parent = parent[int(step)] if step.isdigit() else parent[step]
        assert last not in parent, path
    if case.plural == "customresourcedefinitions":
        props = made["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert props["properties"]["n"] == {"x-kubernetes-int-or-string": True, "default": 1}
    updated = await api.patch(r, "default", made["metadata"]["name"], MERGE, {"metadata": {"labelz": {"x": "y"}}})
    assert "labelz" not in updated["metadata"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def test_secret_string_data_is_written_into_data_and_never_stored(api: ApiServer) -> None:
    secrets = res(api, "v1", "secrets")
    made = await api.create(secrets, "default", make_object("v1", "Secret", "s")
                            .field("data", {"a": b64("1"), "keep": b64("k")})
                            .field("stringData", {"a": "2", "b": "x"}).build())
    assert made["data"] == {"a": b64("2"), "keep": b64("k"), "b": b64("x")} and "stringData" not in made
    patched = await api.patch(secrets, "default", "s", MERGE, {"stringData": {"c": "y"}})
    assert patched["data"] == {"a": b64("2"), "keep": b64("k"), "b": b64("x"), "c": b64("y")}
    assert "stringData" not in await api.get(secrets, "default", "s")


@pytest.mark.parametrize("gated, want_conditions", [
    (True, [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
             "message": "Scheduling is blocked due to non-empty scheduling gates"}]),
    (False, None),
], ids=["gated_pod_gets_the_condition_at_create", "ungated_pod_gets_none"])
async def test_pod_create_records_scheduling_gates_as_a_condition(api: ApiServer, gated: bool,
                                                                  want_conditions: list[dict[str, str]] | None) -> None:
    pod = make_pod("p").gate() if gated else make_pod("p")
    body = pod.build()
    del body["metadata"]["uid"]
    made = await api.create(res(api, "v1", "pods"), "default", body)
    assert made["status"].get("conditions") == want_conditions


async def test_a_list_from_a_future_resource_version_waits_for_it_then_is_504(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    await api.create(cms, "default", make_configmap("a").build())
    now = api.store.revision
    api.fresh_wait = 0.05

    served = await api.list_objects(cms, "default", ListOptions(resource_version=str(now)))
    assert served["metadata"]["resourceVersion"] == str(now)  # the current revision is not "too new"
    with pytest.raises(ApiError) as error:
        await api.list_objects(cms, "default", ListOptions(resource_version=str(now + 2)))
    assert error.value.status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 504, "reason": "Timeout",
        "message": f"Timeout: Too large resource version: {now + 2}, current: {now}",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version",
                                "field": ""}], "retryAfterSeconds": 1}}
    with pytest.raises(ApiError) as error:
        await api.list_objects(cms, "default", ListOptions(resource_version="abc"))
    assert error.value.code == 400


async def test_a_list_from_a_future_resource_version_is_served_once_writes_reach_it(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    wanted = api.store.revision + 2
    api.fresh_wait = 5.0

    async def two_writes() -> None:
        for name in ("a", "b"):
            await asyncio.sleep(0.02)
            await api.create(cms, "default", make_configmap(name).build())

    writer = asyncio.create_task(two_writes())
    listed = await api.list_objects(cms, "default", ListOptions(resource_version=str(wanted)))
    await writer
    assert ([i["metadata"]["name"] for i in listed["items"]], listed["metadata"]["resourceVersion"]) == (
        ["a", "b"], str(wanted))


async def test_create_with_a_resource_version_is_refused_and_nothing_is_stored(api: ApiServer) -> None:
    cms = res(api, "v1", "configmaps")
    with pytest.raises(ApiError) as refused:
        await api.create(cms, "default", {"metadata": {"name": "c", "resourceVersion": "12"}})
    assert refused.value.code == 500
    assert refused.value.message.endswith("resourceVersion should not be set on objects to be created")
    assert (await api.list_objects(cms, "default"))["items"] == []


async def test_a_custom_resource_put_needs_a_resource_version_a_configmap_put_does_not(api: ApiServer) -> None:
    await api.create(res(api, "apiextensions.k8s.io/v1", "customresourcedefinitions"), "", WIDGET_CRD)
    widgets = res(api, "example.com/v1", "widgets")
    await api.create(widgets, "default", {"metadata": {"name": "w"}, "spec": {"size": 1}})
    with pytest.raises(ApiError) as refused:
        await api.update(widgets, "default", "w", {"metadata": {"name": "w"}, "spec": {"size": 2}})
    assert (refused.value.code, refused.value.causes[0].field) == (422, "metadata.resourceVersion")
    assert "must be specified for an update" in refused.value.message
    cms = res(api, "v1", "configmaps")
    await api.create(cms, "default", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    updated = await api.update(cms, "default", "c", {"metadata": {"name": "c"}, "data": {"a": "2"}})
    assert updated["data"] == {"a": "2"}


async def test_mutating_hooks_run_before_the_server_fills_metadata_and_resets_status(api: ApiServer) -> None:
    seen: list[dict[str, Any]] = []

    async def mutate(request: AdmissionRequest) -> dict[str, Any] | ApiError:
        assert request.object is not None
        seen.append(request.object)
        return {**request.object, "status": {"phase": "Running"},
                "metadata": {**request.object["metadata"], "labels": {"mutated": "yes"}}}

    api.mutating_hooks.append(mutate)
    made = await api.create(res(api, "v1", "pods"), "default",
                            {"metadata": {"generateName": "w-"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    meta = seen[0]["metadata"]
    assert "uid" not in meta and "creationTimestamp" not in meta and "name" not in meta
    assert seen[0]["spec"]["restartPolicy"] == "Always"  # defaulted at decoding, before the hooks
    assert made["metadata"]["labels"] == {"mutated": "yes"} and made["metadata"]["name"].startswith("w-")
    assert made["status"]["phase"] == "Pending"  # the hook's status is dropped by the create strategy
