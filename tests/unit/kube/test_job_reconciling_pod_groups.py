"""The generic job reconciler driving plain pod groups (a composable kind) against an in-memory API that keeps kube-apiserver's rule for gated pods
(scheduling gates may only be removed): a group waits until complete, a disagreeing group gets
Events and no Workload, an admission starts its pods, their end finishes the Workload, an eviction
deletes them and then releases the reservation."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.workload import Workload
from controller.cache.cluster import KIND_POD, ClusterCache
from controller.kube.api import PODS, WORKLOADS, ApiError, KubeApi
from controller.kube.events import EventRecorder
from controller.kube.job_reconciling import JobReconciler
from devcluster.server.patching import merge_patch as merge
from tests.builders.cluster import make_pod
from tests.builders.jobs import H100

COND = {"reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}


class PodRulesApi(KubeApi):
    """Pods and Workloads in memory; merge patches (status through its subresource); a pod patch
    adding a scheduling gate is refused (422) as kube-apiserver refuses it. `writes` logs (verb, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.rv = 100

    def put(self, resource: tuple[str, str], obj: Mapping[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(dict(obj))
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[(resource[1], stored["metadata"]["name"])] = stored
        return copy.deepcopy(stored)

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("create", obj["metadata"]["name"]))
        return self.put(resource, obj)

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        current = self.objects[(resource[1], name)]
        body = {k: v for k, v in patch.items() if k != "metadata" or subresource is None}
        part = {"status": body.get("status")} if subresource == "status" else {k: v for k, v in body.items() if k != "status"}
        new = merge(current, part)
        if resource == PODS:
            before = {g["name"] for g in current["spec"].get("schedulingGates") or []}
            after = {g["name"] for g in new["spec"].get("schedulingGates") or []}
            if after - before:
                raise ApiError(422, "spec.schedulingGates: Forbidden: only deletion is allowed")
        self.writes.append(("patch" + (f"/{subresource}" if subresource else ""), name))
        return self.put(resource, new)

    async def delete(self, resource: tuple[str, str], namespace: str | None, name: str,
                     resource_version: str | None = None, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> None:
        self.writes.append(("delete", name))
        del self.objects[(resource[1], name)]


class Events(EventRecorder):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = c.EVENT_TYPE_NORMAL) -> None:
        self.seen.append((obj["metadata"]["name"], reason, message))


def gated(name: str, total: str = "3", **annotations: str) -> dict[str, Any]:
    """A pod as the queued-pod webhook stores it: queue, group, total count, both gates."""
    pod = (make_pod(name).requests(cpu="1").label(c.LABEL_QUEUE_NAME, "lq").label(c.LABEL_POD_GROUP_NAME, "g")
           .label(c.LABEL_MANAGED, "true").annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, total)
           .gate(c.SCHEDULING_GATE_ADMISSION).gate().created(f"2026-01-01T00:00:0{name[-1]}Z"))
    for key, value in annotations.items():
        pod.annotate(key, value)
    return pod.build()


def setup(pods_ready: WaitForPodsReady | None = None) -> tuple[PodRulesApi, ClusterCache, Events, JobReconciler]:
    api, cache, events = PodRulesApi(), ClusterCache(), Events()
    return api, cache, events, JobReconciler(cache, api, events, pods_ready=pods_ready)


def add_pod(api: PodRulesApi, cache: ClusterCache, pod: dict[str, Any]) -> None:
    cache.upsert(KIND_POD, api.put(PODS, pod))


def step(reconciler: JobReconciler) -> None:
    asyncio.run(reconciler.reconcile("default/g", c.KIND_POD))


def admit(api: PodRulesApi, cache: ClusterCache, assignment: Mapping[str, Any]) -> None:
    wl = api.objects[("workloads", "g")]
    wl["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]},
                    "conditions": [{"type": t, "status": "True", **COND}
                                   for t in (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED)]}
    cache.upsert(c.KIND_WORKLOAD, api.put(WORKLOADS, wl))


def created_group(api: PodRulesApi, cache: ClusterCache, reconciler: JobReconciler,
                  pods: list[dict[str, Any]]) -> str:
    """Adds the group's gated `pods`, lets the reconciler create its Workload; the pod set's name."""
    for pod in pods:
        add_pod(api, cache, pod)
    step(reconciler)
    return cache.workloads["default/g"].obj.spec.pod_sets[0].name


def test_a_group_waits_for_its_last_pod_then_gets_one_workload() -> None:
    api, cache, events, reconciler = setup()
    for name in ("p0", "p1"):
        add_pod(api, cache, gated(name))
    step(reconciler)
    assert api.writes == []  # one pod missing: nothing yet
    add_pod(api, cache, gated("p2"))
    step(reconciler)
    assert api.writes == [("create", "g")]
    workload = cache.workloads["default/g"].obj
    assert [(ps.count, ps.min_count) for ps in workload.spec.pod_sets] == [(3, None)]
    assert {ref.name for ref in workload.metadata.owner_references} == {"p0", "p1", "p2"}
    assert events.seen[-1] == ("p0", c.EVENT_REASON_CREATED_WORKLOAD, "Created Workload: default/g")
    step(reconciler)
    assert api.writes == [("create", "g")]  # not twice


def test_a_disagreeing_group_gets_one_warning_per_conflict_and_no_workload() -> None:
    api, cache, events, reconciler = setup()
    for pod in (gated("p0"), gated("p1", total="4"), gated("p2")):
        add_pod(api, cache, pod)
    step(reconciler)
    step(reconciler)
    assert api.writes == []
    assert events.seen == [("p1", c.EVENT_REASON_ERR_WORKLOAD_COMPOSE,
                            f"pod p1: metadata.annotations[{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}]: 4 differs from 3 "
                            "of pod p0 in the same group: no Workload is created for group g")]


def test_an_admission_starts_every_pod_with_the_flavor_and_keeps_the_topology_gate_for_the_ungater() -> None:
    api, cache, _events, reconciler = setup()
    cache.upsert(c.KIND_RESOURCE_FLAVOR, {"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
                                          "metadata": {"name": "h100"}, "spec": H100})
    rack = {"kueue.x-k8s.io/podset-required-topology": "rack"}
    role = created_group(api, cache, reconciler, [gated(f"p{i}", **rack) for i in range(3)])
    admit(api, cache, {"name": role, "flavors": {"cpu": "h100"}, "resourceUsage": {"cpu": "3"},
                       "topologyAssignment": {"levels": ["rack"], "slices": [
                           {"domainCount": 1, "podCounts": {"universal": 3}, "valuesPerLevel": [{"universal": "r1"}]}]}})
    step(reconciler)
    for i in range(3):
        pod = api.objects[("pods", f"p{i}")]
        assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [c.SCHEDULING_GATE_TOPOLOGY]
        assert pod["spec"]["nodeSelector"] == {"gpu": "h100"}
        assert pod["metadata"]["annotations"][c.ANNOTATION_TOPOLOGY_WORKLOAD] == "g"
        assert pod["metadata"]["annotations"][c.ANNOTATION_TOPOLOGY_PODSET] == role
        assert cache.workload_of_pod(pod) == ("default", "g")  # the TopologyUngater finds them
    writes = len(api.writes)
    step(reconciler)
    assert len(api.writes) == writes  # started pods are not patched again


def test_a_partial_admission_starts_only_the_admitted_count_and_no_topology_gate_stays_without_topology() -> None:
    api, cache, _, reconciler = setup()
    role = created_group(api, cache, reconciler, [gated(f"p{i}") for i in range(3)])
    admit(api, cache, {"name": role, "count": 2, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}})
    step(reconciler)
    gates = {i: [g["name"] for g in api.objects[("pods", f"p{i}")]["spec"].get("schedulingGates") or []]
             for i in range(3)}
    assert gates == {0: [], 1: [], 2: [c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY]}


def test_the_workload_finishes_when_every_pod_succeeded() -> None:
    api, cache, _events, reconciler = setup()
    role = created_group(api, cache, reconciler, [gated(f"p{i}") for i in range(3)])
    admit(api, cache, {"name": role, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}})
    step(reconciler)
    for i in range(3):
        pod = api.objects[("pods", f"p{i}")]
        pod["status"]["phase"] = "Succeeded" if i < 2 else "Running"
        add_pod(api, cache, pod)
    step(reconciler)
    assert not cache.workloads["default/g"].finished
    pod = api.objects[("pods", "p2")]
    pod["status"]["phase"] = "Succeeded"
    add_pod(api, cache, pod)
    step(reconciler)
    finished = cache.workloads["default/g"].obj.condition(c.CONDITION_FINISHED)
    assert finished is not None and (finished.status, finished.reason, finished.message) == (
        "True", c.REASON_SUCCEEDED, "Pods succeeded: 3/3.")


def pods_deleted_then_released(api: PodRulesApi, cache: ClusterCache, reconciler: JobReconciler) -> Workload:
    """Asserts the group's three pods were deleted while its quota stays held, then lets their
    deletions arrive: the Workload, its reservation released."""
    assert sorted(w for w in api.writes if w[0] == "delete") == [("delete", "p0"), ("delete", "p1"), ("delete", "p2")]
    assert cache.workloads["default/g"].admission is not None  # its pods are still in the cache: quota held
    for i in range(3):
        cache.delete(KIND_POD, {"metadata": {"namespace": "default", "name": f"p{i}"}})
    step(reconciler)
    released = cache.workloads["default/g"].obj
    assert released.admission is None
    return released


def test_an_eviction_deletes_the_pods_then_releases_the_reservation_once_they_are_gone() -> None:
    api, cache, events, reconciler = setup()
    role = created_group(api, cache, reconciler, [gated(f"p{i}") for i in range(3)])
    admit(api, cache, {"name": role, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}})
    step(reconciler)
    wl = api.objects[("workloads", "g")]
    wl["status"]["conditions"].append({"type": c.CONDITION_EVICTED, "status": "True", **COND, "reason": "Preempted",
                                       "message": "Preempted to accommodate a workload"})
    cache.upsert(c.KIND_WORKLOAD, api.put(WORKLOADS, wl))
    step(reconciler)
    assert ("g", c.EVENT_REASON_STOPPED, "Preempted to accommodate a workload") in events.seen
    released = pods_deleted_then_released(api, cache, reconciler)
    quota = released.condition(c.CONDITION_QUOTA_RESERVED)
    assert quota is not None and quota.status == "False"


def admitted_group(pods_ready: WaitForPodsReady | None = None, total: str = "3",
                   ) -> tuple[PodRulesApi, ClusterCache, Events, JobReconciler]:
    """A group of `total` pods with Kueue's finalizer, its Workload admitted and its pods started."""
    api, cache, events, reconciler = setup(pods_ready)
    pods = [gated(f"p{i}", total=total) for i in range(int(total))]
    for pod in pods:
        pod["metadata"]["finalizers"] = [c.LABEL_MANAGED]
    role = created_group(api, cache, reconciler, pods)
    admit(api, cache, {"name": role, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": total}})
    step(reconciler)
    for i in range(int(total)):  # the watch brings the started pods back
        cache.upsert(KIND_POD, copy.deepcopy(api.objects[("pods", f"p{i}")]))
    return api, cache, events, reconciler


def set_phase(api: PodRulesApi, cache: ClusterCache, name: str, phase: str, ready: bool = False) -> None:
    pod = api.objects[("pods", name)]
    pod["status"]["phase"] = phase
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    add_pod(api, cache, pod)


def test_a_pod_beyond_the_group_s_count_is_deleted_with_a_warning_and_the_group_runs_on() -> None:
    api, cache, events, reconciler = admitted_group()
    add_pod(api, cache, gated("p7"))  # a fourth pod of a group of three, never to be admitted
    step(reconciler)
    assert ("delete", "p7") in api.writes
    assert ("p0", c.EVENT_REASON_EXCESS_PODS_DELETED, "Deleted 1 pods beyond the group's count: p7") in events.seen
    assert all(("delete", f"p{i}") not in api.writes for i in range(3))  # the started ones stay


def test_a_deactivated_group_has_its_pods_deleted_then_its_reservation_released() -> None:
    api, cache, events, reconciler = admitted_group()
    wl = api.objects[("workloads", "g")]
    wl["spec"]["active"] = False
    cache.upsert(c.KIND_WORKLOAD, api.put(WORKLOADS, wl))
    step(reconciler)
    assert any(e[:2] == ("g", c.EVENT_REASON_STOPPED) for e in events.seen)
    pods_deleted_then_released(api, cache, reconciler)
    assert ("g", c.EVENT_REASON_EVICTED_DEACTIVATED) in [e[:2] for e in events.seen]


def test_succeeded_pods_keep_their_finalizer_until_the_workload_records_the_group_s_end() -> None:
    api, cache, _events, reconciler = admitted_group()
    for i in range(2):
        set_phase(api, cache, f"p{i}", "Succeeded")
    step(reconciler)
    assert all(api.objects[("pods", f"p{i}")]["metadata"].get("finalizers") == [c.LABEL_MANAGED] for i in range(3))
    set_phase(api, cache, "p2", "Succeeded")
    step(reconciler)  # the Workload finishes
    assert cache.workloads["default/g"].finished
    step(reconciler)  # then every finalizer goes
    assert [api.objects[("pods", f"p{i}")]["metadata"].get("finalizers") for i in range(3)] == [None] * 3


def test_a_failed_pod_loses_its_finalizer_at_once_so_its_replacement_can_take_its_place() -> None:
    api, cache, _events, reconciler = admitted_group()
    set_phase(api, cache, "p1", "Failed")
    step(reconciler)
    assert api.objects[("pods", "p1")]["metadata"].get("finalizers") is None
    assert api.objects[("pods", "p0")]["metadata"].get("finalizers") == [c.LABEL_MANAGED]


def test_with_wait_for_pods_ready_the_group_s_readiness_becomes_its_workload_s_pods_ready() -> None:
    api, cache, _events, reconciler = admitted_group(WaitForPodsReady())
    for i in range(3):
        set_phase(api, cache, f"p{i}", "Running", ready=i < 2)
    step(reconciler)
    cond = cache.workloads["default/g"].obj.condition(c.CONDITION_PODS_READY)
    assert cond is not None and cond.status == "False"
    set_phase(api, cache, "p2", "Running", ready=True)
    step(reconciler)
    cond = cache.workloads["default/g"].obj.condition(c.CONDITION_PODS_READY)
    assert cond is not None and cond.status == "True"
