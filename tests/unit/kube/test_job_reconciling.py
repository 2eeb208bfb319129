"""The Job integration: the patch that starts an admitted Job, the missing-PriorityClass check, and
stopping a Job whose Workload lost its admission (suspend, clear startTime, restore the template the
Workload recorded), driven against an in-memory API that refuses what kube-apiserver refuses."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.workload import Admission, Workload
from controller.cache.cluster import KIND_POD, ClusterCache
from controller.core.jobs.batch_job import BATCH_JOB, workload_from_job
from controller.kube.api import JOBS, WORKLOADS, ApiError, KubeApi
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor
from controller.kube.job_reconciling import JobReconciler, was_admitted
from controller.kube.metrics import Metrics
from devcluster.server.patching import merge_patch as merge  # RFC 7386, as the API server applies it
from tests.builders.cluster import make_pod
from tests.builders.jobs import H100, TRAINER, TRAINER_GVK, admission, authored, pod_template_patch, trainer

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_workload_never_admitted_has_no_admitted_condition_one_evicted_keeps_it() -> None:
    workload = workload_from_job(authored("bare"))
    assert not was_admitted(Workload.from_dict(workload))
    condition = {"reason": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    workload["status"] = {"conditions": [{"type": c.CONDITION_QUOTA_RESERVED, "status": "False", **condition}]}
    assert not was_admitted(Workload.from_dict(workload))
    workload["status"]["conditions"].append({"type": c.CONDITION_ADMITTED, "status": "False", **condition})
    assert was_admitted(Workload.from_dict(workload))


# -- the reconciler against an API that enforces kube-apiserver's Job rules ------------------------

class JobRulesApi(KubeApi):
    """Jobs and Workloads in memory, merge patches with resourceVersion checks, and kube-apiserver's
    rule for a Job's pod template: `rule="1.37"` (MutableSchedulingDirectivesForSuspendedJobs, on
    by default since 1.36) lets it change only while the stored Job is suspended, has no active pod
    and either no `status.startTime` or the Suspended condition; `rule="1.34"` only while suspended
    without `status.startTime`. Suspend and template in one request are refused by both. `writes`
    logs each patch."""

    def __init__(self, *objects: dict[str, Any], rule: str = "1.37") -> None:
        self.objects = {(self._resource(o), o["metadata"]["name"]): copy.deepcopy(o) for o in objects}
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.rule = rule
        self.rv = 100

    @staticmethod
    def _resource(obj: Mapping[str, Any]) -> tuple[str, str]:
        return JOBS if obj["kind"] == c.KIND_JOB else WORKLOADS

    def _template_mutable(self, job: Mapping[str, Any]) -> bool:
        status = job.get("status") or {}
        suspended, not_started = bool(job["spec"].get("suspend")), not status.get("startTime")
        if self.rule == "1.34":
            return suspended and not_started
        condition = any(x["type"] == c.CONDITION_JOB_SUSPENDED and x["status"] == "True"
                        for x in status.get("conditions") or [])
        return suspended and (not_started or condition) and not status.get("active")

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        old = self.objects[(resource, name)]
        if patch.get("metadata", {}).get("resourceVersion") not in (None, old["metadata"]["resourceVersion"]):
            raise ApiError(409, "the object has been modified")
        body = {k: v for k, v in patch.items() if k != "metadata"}
        new = merge(old, {"status": body.get("status")} if subresource == "status" else
                    {k: v for k, v in body.items() if k != "status"})
        template_changed = resource == JOBS and new["spec"]["template"] != old["spec"]["template"]
        if template_changed and not self._template_mutable(old):
            raise ApiError(422, "spec.template: Invalid value: field is immutable")
        self.store(new)
        self.writes.append((f"{resource[1]}{'/' + subresource if subresource else ''}", dict(body)))
        return copy.deepcopy(new)

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        created = copy.deepcopy(dict(obj))
        created.setdefault("kind", c.KIND_WORKLOAD if resource == WORKLOADS else c.KIND_JOB)
        if (resource, created["metadata"]["name"]) in self.objects:
            raise ApiError(409, "already exists")
        self.store(created)
        self.writes.append((f"create {resource[1]}", created))
        return copy.deepcopy(created)

    async def delete(self, resource: tuple[str, str], namespace: str | None, name: str,
                     resource_version: str | None = None, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> None:
        old = self.objects.get((resource, name))
        if old is None:
            raise ApiError(404, "not found")
        if resource_version not in (None, old["metadata"]["resourceVersion"]):
            raise ApiError(409, "Precondition failed: UID in precondition")
        del self.objects[(resource, name)]
        self.writes.append((f"delete {resource[1]}", {"resourceVersion": resource_version}))

    def store(self, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[(self._resource(obj), obj["metadata"]["name"])] = obj

    def job_controller_suspends(self, name: str) -> None:
        """What the Job controller does with a suspended Job: its pods deleted, the Suspended
        condition set, and (from 1.35) startTime cleared with it."""
        job = copy.deepcopy(self.objects[(JOBS, name)])
        status = job.setdefault("status", {})
        status["active"] = 0
        status["conditions"] = [{"type": c.CONDITION_JOB_SUSPENDED, "status": "True"}]
        if self.rule != "1.34":
            status.pop("startTime", None)
        self.store(job)


class Quiet(EventRecorder):
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = c.EVENT_TYPE_NORMAL) -> None:
        self.reasons.append(reason)


def admitted_workload(job: dict[str, Any]) -> dict[str, Any]:
    wl = workload_from_job(job)
    wl["metadata"]["resourceVersion"] = "20"
    wl["status"] = {"admission": admission(topology=True), "conditions": [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t in (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED)]}
    return wl


def running(job: dict[str, Any]) -> dict[str, Any]:
    """The Job after tasq started it and the Job controller stamped its startTime."""
    started = merge(job, pod_template_patch(job, "job-train-x", Admission.model_validate(admission(topology=True)), {"h100": H100}))
    started["metadata"]["resourceVersion"] = "30"
    started["status"] = {"startTime": "2026-01-01T00:00:05Z", "active": 2}
    return dict(started)


def reconcile(api: JobRulesApi, recorder: Quiet | None = None, metrics: Metrics | None = None) -> ClusterCache:
    """One reconcile of Job ns/train from a cache filled with the API's objects (as after a restart)."""
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    recorder = recorder or Quiet()
    reconciler = JobReconciler(cache, api, recorder, evictor=Evictor(cache, api, recorder, metrics=metrics))
    asyncio.run(reconciler.reconcile("ns/train"))
    return cache


def lost_admission(wl: dict[str, Any]) -> dict[str, Any]:
    """The Workload after its reservation went (Kueue's UnsetQuotaReservation)."""
    wl = copy.deepcopy(wl)
    wl["status"].pop("admission")
    for cond in wl["status"]["conditions"]:
        cond["status"] = "False"
    return wl


@pytest.mark.parametrize(("rule", "writes_after_pods_gone"), [
    ("1.37", ["jobs"]),  # the Job controller cleared startTime with the Suspended condition
    ("1.34", ["jobs/status", "jobs"]),  # it left startTime: tasq clears it, then restores
])
def test_a_job_whose_workload_lost_its_admission_is_suspended_then_restored_once_its_pods_are_gone(
        rule: str, writes_after_pods_gone: list[str]) -> None:
    job = authored("own selector and toleration")
    api = JobRulesApi(running(job), lost_admission(admitted_workload(job)), rule=rule)
    recorder = Quiet()
    reconcile(api, recorder)
    assert api.writes == [("jobs", {"spec": {"suspend": True}})]  # then waits: 2 pods still active
    reconcile(api)
    assert len(api.writes) == 1  # still waiting, nothing refused
    api.job_controller_suspends("train")
    cache = reconcile(api, recorder)  # as after a restart too: everything from the API
    assert [w for w, _ in api.writes[1:]] == writes_after_pods_gone
    stored = api.objects[(JOBS, "train")]
    assert stored["spec"]["suspend"] is True
    assert stored["spec"]["template"] == job["spec"]["template"]
    assert cache.jobs["ns/train"]["spec"]["template"] == job["spec"]["template"]  # applied at once
    assert recorder.reasons == [c.EVENT_REASON_STOPPED]
    reconcile(api)
    assert len(api.writes) == 1 + len(writes_after_pods_gone)  # done: another pass writes nothing


def test_a_suspended_job_never_admitted_keeps_a_template_its_author_changed() -> None:
    job = authored("bare")
    job["spec"]["suspend"] = True
    edited = copy.deepcopy(job)
    edited["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "b"}
    pending = workload_from_job(job)
    pending["metadata"]["resourceVersion"] = "20"
    api = JobRulesApi(edited, pending)
    reconcile(api)
    assert api.writes == []


def test_a_deactivated_workload_keeps_its_quota_until_its_job_is_stopped_and_restored() -> None:
    job = authored("own selector and toleration")
    wl = admitted_workload(job)
    wl["spec"]["active"] = False
    api = JobRulesApi(running(job), wl)
    recorder, metrics = Quiet(), Metrics()
    reconcile(api, recorder)
    assert [w for w, _ in api.writes] == ["jobs"]  # suspended; its pods still run
    assert "admission" in api.objects[(WORKLOADS, wl["metadata"]["name"])]["status"]
    api.job_controller_suspends("train")
    cache = reconcile(api, recorder, metrics)
    assert [w for w, _ in api.writes] == ["jobs", "jobs", "workloads/status"]
    assert api.objects[(JOBS, "train")]["spec"]["template"] == job["spec"]["template"]
    written = api.objects[(WORKLOADS, wl["metadata"]["name"])]
    assert "admission" not in written["status"]
    evicted = {x["type"]: x for x in written["status"]["conditions"]}[c.CONDITION_EVICTED]
    assert (evicted["status"], evicted["reason"]) == ("True", c.REASON_DEACTIVATED)
    entry = cache.workloads[f"ns/{wl['metadata']['name']}"]
    assert entry.fit is None and entry.restoring is None  # the cache released the reservation
    assert recorder.reasons == [c.EVENT_REASON_STOPPED, c.EVENT_REASON_EVICTED_DEACTIVATED]
    assert b'kueue_evicted_workloads_total{cluster_queue="cq",priority_class="",reason="Deactivated",replica_role="standalone",underlying_cause=""} 1.0' in metrics.exposition()


def test_a_deactivated_workload_keeps_its_quota_while_a_pod_of_its_job_is_still_terminating() -> None:
    job = authored("own selector and toleration")
    wl = admitted_workload(job)
    wl["spec"]["active"] = False
    api = JobRulesApi(running(job), wl)
    reconcile(api)
    api.job_controller_suspends("train")
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    cache.upsert("Pod", job_pod("Running", deleting=True))  # in its grace period, on its node
    asyncio.run(JobReconciler(cache, api, Quiet()).reconcile("ns/train"))
    assert [w for w, _ in api.writes] == ["jobs", "jobs"]  # suspended, restored; nothing released
    assert "admission" in api.objects[(WORKLOADS, wl["metadata"]["name"])]["status"]
    reconcile(api)  # the pod is gone
    assert [w for w, _ in api.writes] == ["jobs", "jobs", "workloads/status"]


# -- a Job found running without an admission ----------------------------------------------------

def found_running(job: dict[str, Any]) -> dict[str, Any]:
    """The Job as the Job controller runs it when no webhook suspended it at creation: never
    started by tasq, its author's template, two pods active."""
    unsuspended = copy.deepcopy(job)
    unsuspended["spec"]["suspend"] = False
    unsuspended["status"] = {"startTime": "2026-01-01T00:00:05Z", "active": 2}
    return unsuspended


@pytest.mark.parametrize("rule", ["1.37", "1.34"])
def test_a_job_found_running_with_no_workload_gets_one_only_once_it_is_stopped(rule: str) -> None:
    job = authored("own selector and toleration")
    api = JobRulesApi(found_running(job), rule=rule)
    recorder = Quiet()
    reconcile(api, recorder)
    assert api.writes == [("jobs", {"spec": {"suspend": True}})]  # no Workload yet: nothing to admit
    assert recorder.reasons == [c.EVENT_REASON_STOPPED]
    reconcile(api)
    assert len(api.writes) == 1  # suspended, 2 pods still active: waits, still no Workload
    api.job_controller_suspends("train")
    reconcile(api)  # 1.34 left startTime: cleared first (as Kueue clears it)
    if rule == "1.34":
        assert api.writes[1] == ("jobs/status", {"status": {"startTime": None}})
        reconcile(api)
    assert [w for w, _ in api.writes[-1:]] == ["create workloads"]
    assert (WORKLOADS, "train") not in api.objects  # Kueue's name, not the Job's
    created = next(o for (r, _), o in api.objects.items() if r == WORKLOADS)
    assert created["spec"]["podSets"][0]["template"] == job["spec"]["template"]  # the author's template
    assert api.objects[(JOBS, "train")]["spec"]["template"] == job["spec"]["template"]


def test_a_job_found_running_then_deleted_before_its_suspension_was_acknowledged_is_forgotten() -> None:
    # A namespace going away deletes an admitted Job's Workload before the Job: the Job is found
    # running without one and suspended; then it goes too, and nothing of it may stay behind.
    api = JobRulesApi(found_running(authored("bare")))
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    reconciler = JobReconciler(cache, api, Quiet())
    asyncio.run(reconciler.reconcile("ns/train"))
    assert api.writes == [("jobs", {"spec": {"suspend": True}})] and reconciler._found_running
    cache.delete(c.KIND_JOB, api.objects[(JOBS, "train")])
    asyncio.run(reconciler.reconcile("ns/train"))
    assert not reconciler._found_running


@pytest.mark.parametrize(("status", "stopped"), [
    ({}, True),                                           # created suspended by the webhook
    ({"active": 1}, False),                               # the Job controller has not deleted it yet
    ({"terminating": 1}, False),                          # deleted, may still run on its node
    ({"startTime": "2026-01-01T00:00:05Z"}, False),       # ran: its clock must be reset first
])
def test_a_suspended_job_counts_as_stopped_only_with_no_pod_left_and_no_start_time(
        status: dict[str, Any], stopped: bool) -> None:
    job = authored("bare")
    job["spec"]["suspend"] = True
    job["status"] = status
    api = JobRulesApi(job)
    reconcile(api)
    assert any(w == "create workloads" for w, _ in api.writes) is stopped


def test_a_job_caught_before_the_job_controller_counted_its_pods_waits_for_it_to_acknowledge_the_suspension() -> None:
    # Caught at once: no startTime, no counters yet, yet the Job controller may have created pods.
    job = authored("bare")
    job["spec"]["suspend"] = False
    api = JobRulesApi(job)
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    reconciler = JobReconciler(cache, api, Quiet())

    def once() -> None:
        cache.upsert(c.KIND_JOB, api.objects[(JOBS, "train")])
        asyncio.run(reconciler.reconcile("ns/train"))

    once()
    assert api.writes == [("jobs", {"spec": {"suspend": True}})]
    once()  # suspended, counters 0, no startTime: still no Workload until the Job controller acts
    assert len(api.writes) == 1
    api.job_controller_suspends("train")
    once()
    assert [w for w, _ in api.writes[1:]] == ["create workloads"]


def job_pod(phase: str, deleting: bool = False) -> dict[str, Any]:
    """A pod the Job controller made for ns/train (its controller owner), in `phase`."""
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "train-0", "namespace": "ns", "resourceVersion": "40", "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u", "controller": True}]},
        "spec": {"nodeName": "h1", "containers": [{"name": "c"}]}, "status": {"phase": phase}}
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:09Z"
    return pod


@pytest.mark.parametrize(("pod", "stopped"), [
    (job_pod("Running"), False),                # the Job's counters already say 0: its pod still runs
    (job_pod("Running", deleting=True), False),  # deleted, still on its node until it is gone
    (job_pod("Succeeded"), True),                # finished before the Job was suspended: runs nowhere
    (None, True),                                # gone
], ids=["running", "deleting", "succeeded", "gone"])
def test_a_job_counts_as_stopped_only_once_the_cache_holds_no_live_pod_of_it(
        pod: dict[str, Any] | None, stopped: bool) -> None:
    job = authored("bare")
    job["spec"]["suspend"] = True
    job["status"] = {}
    api = JobRulesApi(job)
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    if pod is not None:
        cache.upsert("Pod", pod)
    asyncio.run(JobReconciler(cache, api, Quiet()).reconcile("ns/train"))
    assert any(w == "create workloads" for w, _ in api.writes) is stopped


def pending_workload(job: dict[str, Any]) -> dict[str, Any]:
    wl = workload_from_job(job)
    wl["metadata"]["resourceVersion"] = "20"
    return wl


def test_a_pending_workload_whose_job_runs_anyway_is_deleted_at_its_version_and_the_job_stopped() -> None:
    job = authored("own selector and toleration")
    api = JobRulesApi(found_running(job), pending_workload(job))
    reconcile(api)
    assert api.writes == [("delete workloads", {"resourceVersion": "20"})]  # the admission gate goes first
    reconcile(api)
    assert api.writes[1:] == [("jobs", {"spec": {"suspend": True}})]  # then the Job is stopped as any


def test_a_workload_admitted_meanwhile_is_not_deleted() -> None:
    job = authored("own selector and toleration")
    api = JobRulesApi(found_running(job), pending_workload(job))
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    api.store(admitted_workload(job) | {"metadata": {**pending_workload(job)["metadata"]}})  # a newer version
    asyncio.run(JobReconciler(cache, api, Quiet()).reconcile("ns/train"))
    assert api.writes == []  # the precondition failed (409): kept, retried from the newer version
    assert any(r == WORKLOADS for r, _ in api.objects)


def test_an_admitted_job_still_counting_pods_is_started_only_once_they_are_gone() -> None:
    job = authored("own selector and toleration")
    job["spec"]["suspend"] = True
    job["status"] = {"terminating": 2}
    api = JobRulesApi(job, admitted_workload(job))
    reconcile(api)
    assert api.writes == []
    api.objects[(JOBS, "train")]["status"] = {}
    reconcile(api)
    assert [w for w, _ in api.writes] == ["jobs"]
    assert api.objects[(JOBS, "train")]["spec"]["suspend"] is False
    assert api.objects[(JOBS, "train")]["spec"]["template"]["spec"]["schedulingGates"] == [
        {"name": c.SCHEDULING_GATE_TOPOLOGY}]


class RecordingReconciler(JobReconciler):
    """Records the order Jobs are reconciled in; `b` is changed again while it is being reconciled."""

    def __init__(self) -> None:
        super().__init__(ClusterCache(), KubeApi.__new__(KubeApi), Quiet())
        self.order: list[str] = []

    async def reconcile(self, key: str, kind: str = c.KIND_JOB) -> None:
        self.order.append(key)
        if key == "ns/b" and self.order.count(key) == 1:
            self.notify("ns/b")
        await asyncio.sleep(0)


def test_changed_jobs_are_taken_in_the_order_they_changed_and_a_change_during_a_reconcile_runs_again() -> None:
    async def scenario() -> list[str]:
        reconciler = RecordingReconciler()
        for name in ("c", "a", "b", "a", "d"):  # `a` changing twice before it is taken runs once
            reconciler.notify(f"ns/{name}")
        workers = asyncio.create_task(reconciler.run())

        async def five_reconciles() -> None:
            while len(reconciler.order) < 5:
                await asyncio.sleep(0)
        try:
            await asyncio.wait_for(five_reconciles(), 10)
        finally:
            workers.cancel()
        return reconciler.order

    order = asyncio.run(scenario())
    assert order[:4] == ["ns/c", "ns/a", "ns/b", "ns/d"]
    assert order[4:] == ["ns/b"]


class FailingReconciler(JobReconciler):
    """Each Job's reconcile raises `failures[key]` times (a dropped connection, a refusal, a bug), then succeeds."""

    def __init__(self, failures: dict[str, list[Exception]]) -> None:
        super().__init__(ClusterCache(), KubeApi.__new__(KubeApi), Quiet())
        self.failures = failures
        self.tries: list[tuple[str, float]] = []
        self.done: set[str] = set()

    async def reconcile(self, key: str, kind: str = c.KIND_JOB) -> None:
        self.tries.append((key, asyncio.get_running_loop().time()))
        if self.failures[key]:
            raise self.failures[key].pop(0)
        self.done.add(key)


def test_a_failed_reconcile_of_any_kind_is_requeued_with_growing_backoff_until_it_succeeds() -> None:
    async def scenario() -> FailingReconciler:
        reconciler = FailingReconciler({
            "ns/dropped": [aiohttp.ServerDisconnectedError(), aiohttp.ServerDisconnectedError()],
            "ns/refused": [ApiError(503, "etcd leader changed")],
            "ns/bug": [KeyError("metadata")],
            "ns/fine": []})
        for key in reconciler.failures:
            reconciler.notify(key)
        workers = asyncio.create_task(reconciler.run())
        try:
            async def all_done() -> None:
                while len(reconciler.done) < 4:
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(all_done(), 10)
        finally:
            workers.cancel()
        return reconciler

    reconciler = asyncio.run(scenario())
    assert reconciler.done == {"ns/dropped", "ns/refused", "ns/bug", "ns/fine"}  # none dropped
    dropped = [t for key, t in reconciler.tries if key == "ns/dropped"]
    assert len(dropped) == 3
    first_wait, second_wait = dropped[1] - dropped[0], dropped[2] - dropped[1]
    assert first_wait >= 0.19 and second_wait >= 0.39  # BASE_S, then doubled


# -- a second kind: the reconciler drives any adapter --------------------------------------------

TRAINERS = (TRAINER_GVK.api_version, TRAINER_GVK.plural)


class MemoryApi(KubeApi):
    """Any kind in memory: merge patches (status only through the subresource), creates, deletes;
    `writes` logs (verb, plural) in order."""

    def __init__(self) -> None:
        self.objects: dict[tuple[tuple[str, str], str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.rv = 100

    def put(self, resource: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[(resource, obj["metadata"]["name"])] = obj
        return copy.deepcopy(obj)

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        body = {k: v for k, v in patch.items() if k != "metadata"}
        part = {"status": body.get("status")} if subresource == "status" else {k: v for k, v in body.items() if k != "status"}
        self.writes.append(("patch" + ("/status" if subresource else ""), resource[1]))
        return self.put(resource, merge(self.objects[(resource, name)], part))

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("create", resource[1]))
        return self.put(resource, dict(obj))

    async def delete(self, resource: tuple[str, str], namespace: str | None, name: str,
                     resource_version: str | None = None, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> None:
        self.writes.append(("delete", resource[1]))
        del self.objects[(resource, name)]


def test_the_reconciler_drives_a_second_kind_through_its_adapter_alone() -> None:
    """A Trainer found running is paused and gets its Workload once its labelled pod is gone; on
    admission it is unpaused with the flavor's nodeSelector; losing the admission pauses it and
    restores its template; its outcome finishes the Workload; its deletion deletes the Workload."""
    api, adapter = MemoryApi(), TRAINER
    cache = ClusterCache(integrations=(BATCH_JOB, adapter))
    reconciler = JobReconciler(cache, api, Quiet())
    cache.upsert(TRAINER_GVK.kind, api.put(TRAINERS, trainer(paused=False)))
    pod = make_pod("bert-0", namespace="ns").label("trainer", "bert").obj()
    cache.upsert(KIND_POD, pod)

    def step() -> dict[str, Any] | None:
        asyncio.run(reconciler.reconcile("ns/bert", TRAINER_GVK.kind))
        wl_key = cache.workload_of.get((TRAINER_GVK.kind, "ns/bert"))
        return cache.workloads[wl_key].obj.to_dict() if wl_key in cache.workloads else None

    assert step() is None and api.objects[(TRAINERS, "bert")]["spec"]["paused"] is True
    assert step() is None  # its pod still runs
    cache.delete(KIND_POD, pod)
    workload = step()
    assert workload is not None and workload["metadata"]["name"].startswith("trainer-bert-")
    assert workload["metadata"]["ownerReferences"][0]["kind"] == "Trainer"
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("workers", 3)]

    name = workload["metadata"]["name"]
    cache.upsert(c.KIND_RESOURCE_FLAVOR, {"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
                                          "metadata": {"name": "h100"}, "spec": H100})
    admitted = {**workload, "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "workers", "count": 3, "flavors": {"cpu": "h100"}, "resourceUsage": {"cpu": "3"}}]},
        "conditions": [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                       for t in (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED)]}}
    cache.upsert(c.KIND_WORKLOAD, api.put(WORKLOADS, admitted))
    step()
    started = cache.owners["Trainer"]["ns/bert"]
    assert started["spec"]["paused"] is False
    assert started["spec"]["podTemplate"]["spec"]["nodeSelector"] == {"gpu": "h100"}

    lost = lost_admission(api.objects[(WORKLOADS, name)])
    cache.upsert(c.KIND_WORKLOAD, api.put(WORKLOADS, lost))
    step()
    assert cache.owners["Trainer"]["ns/bert"]["spec"]["paused"] is True
    step()
    assert "nodeSelector" not in cache.owners["Trainer"]["ns/bert"]["spec"]["podTemplate"]["spec"]

    cache.upsert(TRAINER_GVK.kind, api.put(TRAINERS, merge(api.objects[(TRAINERS, "bert")],
                                                           {"status": {"outcome": "done"}})))
    finished = step()
    assert finished is not None and any(
        cond["type"] == c.CONDITION_FINISHED and cond["message"] == "Trainer done" for cond in finished["status"]["conditions"])

    cache.delete(TRAINER_GVK.kind, api.objects.pop((TRAINERS, "bert")))
    step()
    assert (WORKLOADS, name) not in api.objects
    assert {plural for _, plural in api.writes} == {"trainers", "workloads"}  # never a Job


@pytest.mark.parametrize(("counters", "want"), [
    pytest.param({"active": 2, "ready": 1}, ("False", "WaitForStart"), id="one of two pods ready: waits for start"),
    pytest.param({"active": 2, "ready": 2}, ("True", "Started"), id="both ready: started"),
    pytest.param({"active": 1, "ready": 1, "succeeded": 1}, ("True", "Started"), id="a succeeded pod counts as ready"),
])
def test_with_wait_for_pods_ready_a_running_jobs_readiness_becomes_its_workloads_pods_ready(
        counters: dict[str, int], want: tuple[str, str]) -> None:
    job = authored("own selector and toleration")
    started = running(job)
    started["spec"].update(parallelism=2, completions=2)  # as admitted: 2 pods
    started["status"].update(counters)
    api = JobRulesApi(started, admitted_workload(job))
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    recorder = Quiet()
    asyncio.run(JobReconciler(cache, api, recorder, evictor=Evictor(cache, api, recorder),
                              pods_ready=WaitForPodsReady()).reconcile("ns/train"))
    (wl,) = [o for o in api.objects.values() if o["kind"] == c.KIND_WORKLOAD]
    pods_ready = next(cd for cd in wl["status"]["conditions"] if cd["type"] == c.CONDITION_PODS_READY)
    assert (pods_ready["status"], pods_ready["reason"]) == want


def test_without_wait_for_pods_ready_no_pods_ready_condition_is_written() -> None:
    job = authored("own selector and toleration")
    started = running(job)
    started["status"].update(ready=2)
    api = JobRulesApi(started, admitted_workload(job))
    reconcile(api)
    assert api.writes == []


@pytest.mark.parametrize(("controller", "gets_a_workload"), [
    pytest.param(None, True, id="a Job of its own"),
    pytest.param({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}, False,
                 id="a JobSet's child Job: its JobSet's Workload covers it"),
    pytest.param({"apiVersion": "example.com/v1", "kind": "Pipeline"}, True,
                 id="a Job of a controller tasq does not integrate"),
])
def test_a_queued_job_an_integrated_kind_controls_gets_no_workload_of_its_own(
        controller: dict[str, str] | None, gets_a_workload: bool) -> None:
    job = authored("bare")  # the queue label copied from a replicatedJob's template
    job["spec"]["suspend"] = True
    if controller is not None:
        job["metadata"]["ownerReferences"] = [{**controller, "name": "js", "uid": "u-js", "controller": True}]
    api = JobRulesApi(job)
    reconcile(api)
    assert [w for w, _ in api.writes] == (["create workloads"] if gets_a_workload else [])
