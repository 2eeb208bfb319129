"""Evicting a preempted Workload against an in-memory API that refuses what kube-apiserver refuses:
the decision written with the admission kept, its Job stopped, the reservation released only once
no pod of the Job is left; each step decided afresh from the API's objects (as after a restart)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from controller.api import constants as c
from controller.api.workload import Admission
from controller.cache.cluster import ClusterCache
from controller.core.admission.draining import Drain
from controller.kube.api import JOBS, WORKLOADS
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor, Preemption
from controller.kube.job_reconciling import JobReconciler
from controller.kube.metrics import Metrics
from tests.builders.jobs import authored
from tests.unit.kube.test_job_reconciling import JobRulesApi, admitted_workload, job_pod, running

PREEMPTOR = "ns/job-high-x"


class Recording(EventRecorder):
    """Events as (involved kind, name, reason, message), in the order they were emitted."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = c.EVENT_TYPE_NORMAL) -> None:
        self.events.append((str(obj.get("kind")), str(obj["metadata"]["name"]), reason, message))


def preemptor() -> dict[str, Any]:
    """The high-priority Workload, of Job ns/high, waiting in ClusterQueue cq."""
    job = authored("bare")
    job["metadata"].update(name="high", uid="u-high")
    wl = copy.deepcopy(admitted_workload(job))
    wl["metadata"].update(name="job-high-x", uid="w-high")
    wl["status"] = {}
    return wl


def cluster() -> tuple[JobRulesApi, dict[str, Any], dict[str, Any]]:
    """The victim ns/train (running, 2 pods) and its admitted Workload, and the preemptor."""
    job = authored("own selector and toleration")
    wl = admitted_workload(job)
    return JobRulesApi(running(job), wl, preemptor()), job, wl


def cache_of(api: JobRulesApi, *pods: dict[str, Any]) -> ClusterCache:
    """A cache filled from the API's objects (as after a restart), plus `pods`."""
    cache = ClusterCache()
    for obj in api.objects.values():
        cache.upsert(obj["kind"], obj)
    for pod in pods:
        cache.upsert("Pod", pod)
    return cache


def preempt(api: JobRulesApi, recorder: Recording, metrics: Metrics | None = None) -> bool:
    cache = cache_of(api)
    victim = next(key for key in cache.workloads if key != PREEMPTOR)
    evictor = Evictor(cache, api, recorder, metrics=metrics)
    return asyncio.run(evictor.preempt(Preemption(victim, PREEMPTOR, "cq", c.REASON_IN_CLUSTER_QUEUE)))


def reconcile(api: JobRulesApi, recorder: Recording, *pods: dict[str, Any]) -> ClusterCache:
    cache = cache_of(api, *pods)
    asyncio.run(JobReconciler(cache, api, recorder).reconcile("ns/train"))
    return cache


def conditions(obj: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    return {x["type"]: (x["status"], x["reason"]) for x in obj["status"]["conditions"]}


def test_a_preemption_is_written_with_kueues_conditions_events_and_metrics_and_keeps_the_admission() -> None:
    api, _, wl = cluster()
    recorder, metrics = Recording(), Metrics()
    assert preempt(api, recorder, metrics)
    written = api.objects[(WORKLOADS, wl["metadata"]["name"])]
    assert conditions(written) == {c.CONDITION_QUOTA_RESERVED: ("True", c.CONDITION_QUOTA_RESERVED),
                                   c.CONDITION_ADMITTED: ("True", c.CONDITION_ADMITTED),
                                   c.CONDITION_EVICTED: ("True", c.REASON_PREEMPTED),
                                   c.CONDITION_PREEMPTED: ("True", c.REASON_IN_CLUSTER_QUEUE)}
    kept = Admission.model_validate(written["status"]["admission"])
    assert kept == Admission.model_validate(wl["status"]["admission"])  # quota and nodes stay taken
    message = {x["type"]: x["message"] for x in written["status"]["conditions"]}[c.CONDITION_EVICTED]
    assert message == ("Preempted to accommodate a workload (UID: w-high, JobUID: u-high) due to prioritization in "
                       "the ClusterQueue; preemptor path: /cq; preemptee path: /cq; preemptor: workload "
                       "ns/job-high-x, job ns/high")
    assert [(kind, name, reason) for kind, name, reason, _ in recorder.events] == [
        (c.KIND_WORKLOAD, wl["metadata"]["name"], c.EVENT_REASON_PREEMPTED),
        (c.KIND_WORKLOAD, wl["metadata"]["name"], c.EVENT_REASON_EVICTED_PREEMPTED),
        (c.KIND_JOB, "train", c.EVENT_REASON_PREEMPTED),
        (c.KIND_WORKLOAD, "job-high-x", c.EVENT_REASON_PREEMPTED_WORKLOAD)]
    assert all(text == message for _, _, _, text in recorder.events[:3])
    exposition = metrics.exposition().decode()
    assert 'kueue_preempted_workloads_total{preempting_cluster_queue="cq",reason="InClusterQueue",replica_role="standalone"} 1.0' in exposition
    assert 'kueue_evicted_workloads_total{cluster_queue="cq",priority_class="",reason="Preempted",replica_role="standalone",underlying_cause=""} 1.0' in exposition


def test_a_workload_already_being_evicted_is_not_preempted_again() -> None:
    api, _, _ = cluster()
    recorder = Recording()
    assert preempt(api, recorder)
    writes, events = len(api.writes), len(recorder.events)
    assert not preempt(api, recorder)  # e.g. a new leader deciding the same preemption
    assert (len(api.writes), len(recorder.events)) == (writes, events)


def test_a_workload_that_lost_its_admission_or_finished_is_not_preempted() -> None:
    for change in ("lost", "finished"):
        api, _, wl = cluster()
        stored = api.objects[(WORKLOADS, wl["metadata"]["name"])]
        if change == "lost":
            stored["status"]["conditions"][0]["status"] = "False"
        else:
            stored["status"]["conditions"].append({"type": c.CONDITION_FINISHED, "status": "True", "reason": "Succeeded",
                                                   "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        assert not preempt(api, Recording())
        assert api.writes == []


def test_the_victims_reservation_is_released_only_once_its_job_is_stopped_and_its_pods_are_gone() -> None:
    api, job, wl = cluster()
    recorder = Recording()
    preempt(api, recorder)
    key = f"ns/{wl['metadata']['name']}"
    after_preempt = len(api.writes)
    cache = reconcile(api, recorder)
    assert api.writes[after_preempt:] == [("jobs", {"spec": {"suspend": True}})]
    stopped = recorder.events[-1]
    assert stopped[:3] == (c.KIND_JOB, "train", c.EVENT_REASON_STOPPED) and "Preempted to accommodate" in stopped[3]
    assert key in cache.admission_state().admitted  # 2 pods still active: the quota stays taken
    api.job_controller_suspends("train")
    terminating = job_pod("Running", deleting=True)  # in its grace period, still on its node
    cache = reconcile(api, recorder, terminating)
    assert [w for w, _ in api.writes[after_preempt + 1:]] == ["jobs"]  # the template restored, nothing released
    assert api.objects[(JOBS, "train")]["spec"]["template"] == job["spec"]["template"]
    assert key in cache.admission_state().admitted
    cache = reconcile(api, recorder)  # the pod is gone
    assert [w for w, _ in api.writes[after_preempt + 2:]] == ["workloads/status"]
    released = api.objects[(WORKLOADS, wl["metadata"]["name"])]
    assert "admission" not in released["status"]
    assert conditions(released) == {c.CONDITION_QUOTA_RESERVED: ("False", c.REASON_PENDING),
                                    c.CONDITION_ADMITTED: ("False", c.REASON_NO_RESERVATION),
                                    c.CONDITION_EVICTED: ("True", c.REASON_PREEMPTED),
                                    c.CONDITION_PREEMPTED: ("True", c.REASON_IN_CLUSTER_QUEUE),
                                    c.CONDITION_REQUEUED: ("True", c.REASON_PREEMPTED)}
    state = cache.admission_state()
    assert key not in state.admitted and key in state.waiting()  # quota and nodes given back; in its queue again
    writes = len(api.writes)
    reconcile(api, recorder)
    assert len(api.writes) == writes  # done: another pass writes nothing


def test_a_terminating_workload_is_marked_evicting_in_the_admission_state_after_a_restart() -> None:
    api, _, wl = cluster()
    preempt(api, Recording())
    cache = cache_of(api)  # a new leader: everything from the API objects
    state = cache.admission_state()
    key = f"ns/{wl['metadata']['name']}"
    assert key in state.admitted and state.evicting == {key: None}


def test_a_decided_eviction_claims_its_victim_before_its_write_lands_until_forgotten() -> None:
    api, _, wl = cluster()
    cache = cache_of(api)
    key = f"ns/{wl['metadata']['name']}"
    cache.admission_state()  # re-reserves the admission seen in the status
    cache.record_eviction(key, PREEMPTOR)
    assert cache.admission_state().evicting == {key: PREEMPTOR}
    cache.forget_eviction(key)
    assert cache.admission_state().evicting == {}


def test_a_drained_workload_is_stopped_like_a_victim_and_released_held_by_its_queue() -> None:
    # HoldAndDrain on its LocalQueue: the same three steps as a preemption, its own reason and Event,
    # and once released it is not requeued (Requeued=False LocalQueueStopped) until the queue runs again.
    api, _, wl = cluster()
    recorder, metrics = Recording(), Metrics()
    key = f"ns/{wl['metadata']['name']}"
    message = 'LocalQueue "lq" in namespace "ns" is stopped (stopPolicy HoldAndDrain): its admitted Workloads are evicted'
    drain = Drain(key, "cq", c.REASON_LOCAL_QUEUE_STOPPED, message)
    assert asyncio.run(Evictor(cache_of(api), api, recorder, metrics=metrics).drain(drain))
    assert not asyncio.run(Evictor(cache_of(api), api, recorder).drain(drain))  # once only, e.g. a new leader
    written = api.objects[(WORKLOADS, wl["metadata"]["name"])]
    assert conditions(written)[c.CONDITION_EVICTED] == ("True", c.REASON_LOCAL_QUEUE_STOPPED)
    held = Admission.model_validate(written["status"]["admission"])
    assert held == Admission.model_validate(wl["status"]["admission"])  # quota and nodes held meanwhile
    assert recorder.events == [(c.KIND_WORKLOAD, wl["metadata"]["name"], c.EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED,
                                message)]
    assert 'kueue_evicted_workloads_total{cluster_queue="cq",priority_class="",reason="LocalQueueStopped",' \
        in metrics.exposition().decode()
    reconcile(api, recorder)
    assert recorder.events[-1][:3] == (c.KIND_JOB, "train", c.EVENT_REASON_STOPPED) and recorder.events[-1][3] == message
    api.job_controller_suspends("train")
    reconcile(api, recorder)
    cache = reconcile(api, recorder)
    released = api.objects[(WORKLOADS, wl["metadata"]["name"])]
    assert "admission" not in released["status"]
    assert conditions(released)[c.CONDITION_REQUEUED] == ("False", c.REASON_LOCAL_QUEUE_STOPPED)
    assert key not in cache.admission_state().admitted


def test_a_workload_no_longer_admitted_is_not_drained() -> None:
    api, _, wl = cluster()
    api.objects[(WORKLOADS, wl["metadata"]["name"])]["status"]["conditions"][0]["status"] = "False"
    drain = Drain(f"ns/{wl['metadata']['name']}", "cq", c.REASON_CLUSTER_QUEUE_STOPPED, "stopped")
    assert not asyncio.run(Evictor(cache_of(api), api, Recording()).drain(drain))
    assert api.writes == []
