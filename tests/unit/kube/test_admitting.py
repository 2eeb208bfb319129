"""The admission loop against a recording fake API: admissions written as status patches, the
queue statuses (counted from the cache) written at once after a cycle, then coalesced while cycles
keep coming; a deleted ClusterQueue's status and metric series forgotten; an admission whose write
dropped given back, or kept when it was applied with its answer lost; a Cohort's Active condition
written when it changes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controller.api import constants as c
from controller.api.configuration import RequeuingStrategy, WaitForPodsReady
from controller.api.meta import format_time
from controller.api.workload import RequeueState, Workload, admission_of
from controller.cache.cluster import KIND_NODE, ClusterCache
from controller.core.admission.conditions import mark_admitted, mark_eviction_done
from controller.core.admission.cycle import run_until_quiet
from controller.core.admission.pods_ready import (
    mark_pods_ready,
    mark_pods_ready_timeout,
    readiness_deadline,
    requeue_at,
)
from controller.core.admission.queue_status import queue_statuses
from controller.kube.admitting import AdmissionLoop, queue_inputs
from controller.kube.api import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES, WORKLOADS, ApiError
from controller.kube.arrivals import Arrivals
from controller.kube.events import EventRecorder
from controller.kube.metrics import Metrics
from controller.kube.routing import Applied
from tests.builders.cluster import make_node
from tests.builders.kueue import make_cluster_queue, make_cohort, make_flavor, make_local_queue, make_workload

GPU = "nvidia.com/gpu"


class RecordingApi:
    """Answers merge patches as the API would (the object patched, a new resourceVersion); creates
    (Events) succeed. `patches` lists (resource, name) of every status patch."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.patches: list[tuple[tuple[str, str], str]] = []
        self.version = 100

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        self.version += 1
        if subresource is None and resource != WORKLOADS:  # a resource-in-use finalizer (controller.kube.finalizing)
            held = self.cache.cluster_queues.get(name) if resource == CLUSTER_QUEUES else self.cache.flavors.get(name)
            assert held is not None
            obj = held.to_dict()
            return {**obj, "metadata": {**obj["metadata"], **patch["metadata"], "resourceVersion": str(self.version)}}
        self.patches.append((resource, name))
        current: dict[str, Any] = {"metadata": {"name": name}}
        if resource == WORKLOADS:
            current = self.cache.workloads[f"{namespace}/{name}"].obj.to_dict()
        meta = {**current.get("metadata", {}), "resourceVersion": str(self.version)}
        return {**current, "metadata": meta, "status": patch["status"]}

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        return dict(obj)


def cluster(workloads: int) -> ClusterCache:
    """One 8-GPU node; ClusterQueue cq (64 GPUs) and LocalQueue lq; `workloads` 1-GPU Workloads."""
    cache = ClusterCache()
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 64}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
    cache.upsert(KIND_NODE, make_node("h1").labels({"gpu": "yes"}).allocatable({GPU: 8}).obj())
    for i in range(workloads):
        cache.upsert(c.KIND_WORKLOAD, make_workload(f"w{i}").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    return cache


def queue_writes(api: RecordingApi) -> list[str]:
    return [name for resource, name in api.patches if resource in (CLUSTER_QUEUES, LOCAL_QUEUES)]


async def settle(loop: AdmissionLoop) -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_queue_statuses_are_written_after_the_first_cycle_then_once_per_interval() -> None:
    cache = cluster(workloads=3)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api), queue_status_interval_s=0.3)  # type: ignore[arg-type]
    await loop.cycle()
    await settle(loop)
    assert sorted(queue_writes(api)) == ["cq", "lq"]  # at once after the first cycle
    assert sum(resource == WORKLOADS for resource, _ in api.patches) == 3  # every admission written
    for i in range(3, 6):  # three more cycles within the interval, each with a new admission
        cache.upsert(c.KIND_WORKLOAD, make_workload(f"w{i}").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
        await loop.cycle()
        await settle(loop)
    assert len(queue_writes(api)) == 2  # nothing more before the interval is over
    await asyncio.sleep(0.5)
    assert sorted(queue_writes(api)) == ["cq", "cq", "lq", "lq"]  # one coalesced write per queue
    assert loop.admitted_at.keys() == {f"default/w{i}" for i in range(6)}


def test_queue_inputs_count_what_a_cycle_over_the_cache_admitted_and_left_waiting() -> None:
    # cq's quota is 64 GPUs (a plain flavor: quota alone decides): four 16-GPU Workloads fit, one waits.
    cache = cluster(workloads=0)
    for i in range(5):
        cache.upsert(c.KIND_WORKLOAD, make_workload(f"w{i}").queue("lq").pod_set("main", 1, {GPU: 16}).obj())
    state = cache.admission_state()
    run_until_quiet(state)
    for key, fit in state.admitted.items():
        cache.record_admission(key, fit)
    waiting = {key: state.queue_of[key] for key in state.waiting()}
    cqs, lqs = queue_statuses(queue_inputs(cache), waiting)
    assert (cqs["cq"]["pendingWorkloads"], cqs["cq"]["admittedWorkloads"]) == (1, 4)
    assert (lqs["default/lq"]["pendingWorkloads"], lqs["default/lq"]["admittedWorkloads"]) == (1, 4)
    assert cqs["cq"]["flavorsUsage"] == [{"name": "gpu", "resources": [{"name": GPU, "total": "64", "borrowed": "0"}]}]


def test_a_queue_turns_active_once_its_flavor_appears_in_the_cache() -> None:
    cache = ClusterCache()
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
    assert queue_statuses(queue_inputs(cache), {})[0]["cq"]["conditions"][0]["status"] == "False"
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").obj())
    cqs, lqs = queue_statuses(queue_inputs(cache), {})
    assert (cqs["cq"]["conditions"][0]["status"], lqs["default/lq"]["conditions"][0]["status"]) == ("True", "True")


def scraped(metrics: Metrics) -> set[str]:
    """The ClusterQueues named by any series in a scrape."""
    return {s.labels["cluster_queue"] for family in text_string_to_metric_families(metrics.exposition().decode())
            for s in family.samples if "cluster_queue" in s.labels}


async def test_a_deleted_cluster_queue_loses_its_series_and_one_made_again_is_written_afresh() -> None:
    cache = cluster(workloads=1)
    api = RecordingApi(cache)
    metrics = Metrics()
    loop = AdmissionLoop(cache, api, EventRecorder(api), metrics=metrics,  # type: ignore[arg-type]
                         queue_status_interval_s=0)
    await loop.cycle()
    await settle(loop)
    assert scraped(metrics) == {"cq"}
    assert sorted(queue_writes(api)) == ["cq", "lq"]
    cq = make_cluster_queue("cq").flavor("gpu", {GPU: 64}).obj()
    cache.delete(c.KIND_CLUSTER_QUEUE, cq)
    await loop.cycle()
    await settle(loop)
    assert scraped(metrics) == set()
    cache.upsert(c.KIND_CLUSTER_QUEUE, cq)  # the same name again: its status is written, not remembered
    await loop.cycle()
    await settle(loop)
    assert scraped(metrics) == {"cq"}
    assert queue_writes(api).count("cq") == 2


def scrape_values(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "replica_role"))): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


async def test_a_cycle_reports_kueues_series_for_admissions_waiting_and_quota() -> None:
    # cq's quota is 64 GPUs on one 8-GPU node (a plain flavor: quota alone decides): 64 one-GPU
    # Workloads fit the quota, the 65th waits; its QuotaReserved=False reason is written (the router
    # puts the answer into the cache), so it counts as inadmissible, not active.
    cache = cluster(workloads=65)
    api = RecordingApi(cache)
    metrics = Metrics()

    def applied(kind: str, obj: Mapping[str, Any]) -> None:
        cache.upsert(kind, dict(obj))
    loop = AdmissionLoop(cache, api, EventRecorder(api), metrics=metrics, applied=applied,  # type: ignore[arg-type]
                         queue_status_interval_s=0)
    await loop.cycle()
    await settle(loop)
    await loop.cycle()  # the queue figures of the cache with every write applied
    await settle(loop)
    got = scrape_values(metrics)
    queue = ("cluster_queue", "cq")
    assert got[("kueue_admitted_workloads_total", (queue, ("priority_class", "")))] == 64
    assert got[("kueue_quota_reserved_workloads_total", (queue, ("priority_class", "")))] == 64
    assert got[("kueue_admission_wait_time_seconds_count", (queue, ("priority_class", "")))] == 64
    assert got[("kueue_pending_workloads", (queue, ("status", "inadmissible")))] == 1
    assert got[("kueue_pending_workloads", (queue, ("status", "active")))] == 0
    assert got[("kueue_admitted_active_workloads", (queue,))] == 64
    gpus = (queue, ("cohort", ""), ("flavor", "gpu"), ("resource", GPU))
    assert got[("kueue_cluster_queue_nominal_quota", gpus)] == 64
    assert got[("kueue_cluster_queue_resource_usage", gpus)] == 64
    assert got[("kueue_cluster_queue_status", (queue, ("status", "active")))] == 1
    assert got[("kueue_admission_attempts_total", (("result", "success"),))] == 64


class DroppingApi(RecordingApi):
    """RecordingApi whose first `drops` Workload status patches lose their connection, as a restarting
    kube-apiserver drops it: before the patch is applied, or (`applied`) after, the answer lost.
    `get` answers what the server holds."""

    def __init__(self, cache: ClusterCache, drops: int, applied: bool,
                 error: Exception | None = None) -> None:
        super().__init__(cache)
        self.drops, self.applied = drops, applied
        self.error = error if error is not None else aiohttp.ServerDisconnectedError()
        self.server: dict[str, dict[str, Any]] = {}

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        if resource != WORKLOADS:
            return await super().merge_patch(resource, namespace, name, patch, subresource)
        held = self.server.get(name)
        if held is not None and patch["metadata"]["resourceVersion"] != held["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")  # the retry of a write that was applied
        if self.drops > 0:
            self.drops -= 1
            if self.applied:
                self.server[name] = await super().merge_patch(resource, namespace, name, patch, subresource)
            raise self.error
        self.server[name] = await super().merge_patch(resource, namespace, name, patch, subresource)
        return self.server[name]

    async def get(self, resource: tuple[str, str], namespace: str | None, name: str) -> dict[str, Any]:
        return self.server.get(name) or self.cache.workloads[f"{namespace}/{name}"].obj.to_dict()


def handing_on(cache: ClusterCache, admitted: list[str]) -> Applied:
    """The loop's `applied` as the operator's router does it (into the cache), recording the name of
    each Workload handed on with an admission."""
    def applied(kind: str, obj: Mapping[str, Any]) -> bool:
        if kind == c.KIND_WORKLOAD and admission_of(obj) is not None:
            admitted.append(obj["metadata"]["name"])
        return cache.upsert(kind, obj)
    return applied


def admitted_on_server(api: DroppingApi) -> list[str]:
    return sorted(name for name, wl in api.server.items() if wl["status"].get("admission"))


async def test_an_admission_whose_write_dropped_unapplied_is_given_back_then_written_by_a_later_cycle() -> None:
    cache = cluster(workloads=1)
    api = DroppingApi(cache, drops=1, applied=False)
    loop = AdmissionLoop(cache, api, EventRecorder(api))  # type: ignore[arg-type]

    await loop.cycle()
    await settle(loop)

    assert cache.workloads["default/w0"].fit is None  # rolled back before the next cycle
    assert admitted_on_server(api) == []
    await loop.cycle()
    await settle(loop)
    assert admitted_on_server(api) == ["w0"]
    assert cache.workloads["default/w0"].fit is not None


async def test_an_admission_applied_with_its_answer_lost_keeps_its_reservation_and_is_not_written_twice() -> None:
    cache = cluster(workloads=1)
    api = DroppingApi(cache, drops=1, applied=True)
    admitted: list[str] = []
    loop = AdmissionLoop(cache, api, EventRecorder(api),  # type: ignore[arg-type]
                         applied=handing_on(cache, admitted))

    await loop.cycle()
    await settle(loop)
    await loop.cycle()
    await settle(loop)

    assert cache.workloads["default/w0"].fit is not None  # read back: the server holds the admission
    assert admitted == ["w0"]
    assert sum(resource == WORKLOADS for resource, _ in api.patches) == 1


async def test_an_admission_applied_with_its_answer_lost_then_retried_into_a_conflict_is_known_as_ours() -> None:
    # The door retries a write that got no answer (status 0); the retry carries the old
    # resourceVersion, so it conflicts, and the fresh read shows this very admission.
    cache = cluster(workloads=1)
    api = DroppingApi(cache, drops=1, applied=True, error=ApiError(0, "PATCH ...: ServerDisconnectedError"))
    admitted: list[str] = []
    loop = AdmissionLoop(cache, api, EventRecorder(api),  # type: ignore[arg-type]
                         applied=handing_on(cache, admitted))

    await loop.cycle()
    for _ in range(50):  # the door's backoff before its retry
        await asyncio.sleep(0.01)
    await loop.cycle()
    await settle(loop)

    assert cache.workloads["default/w0"].fit is not None  # kept: the server holds it
    assert admitted == ["w0"]
    assert sum(resource == WORKLOADS for resource, _ in api.patches) == 1


async def test_a_long_cycle_lets_the_loop_run_and_gives_back_what_it_admits_for_a_deleted_workload(
        monkeypatch: Any) -> None:
    """With no time budget the cycle yields after every round (one head each here): a Workload
    deleted meanwhile, and decided in a later round, is not recorded or written; its nodes and
    quota are free again. The others are admitted as before."""
    monkeypatch.setattr("controller.kube.admitting.STEP_BUDGET_S", 0.0)
    cache = cluster(workloads=5)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api))  # type: ignore[arg-type]
    doomed = cache.workloads["default/w3"].obj.to_dict()
    deleted_during_cycle: list[bool] = []

    async def delete_w3() -> None:
        await asyncio.sleep(0)
        cache.delete(c.KIND_WORKLOAD, doomed)
        deleted_during_cycle.append(not cycle.done())

    cycle = asyncio.ensure_future(loop.cycle())
    deleter = asyncio.ensure_future(delete_w3())
    await asyncio.gather(cycle, deleter)
    await settle(loop)
    assert deleted_during_cycle == [True]
    written = sorted(name for resource, name in api.patches if resource == WORKLOADS)
    assert written == ["w0", "w1", "w2", "w4"]
    assert cache.usage.reserved("default/w3") == {}
    assert "default/w3" not in cache.snapshot().quota.by_workload
    assert cache.snapshot().quota.used["cq"] == {("gpu", GPU): 4000}
    assert [key for key, entry in cache.workloads.items() if entry.fit is not None] == [
        "default/w0", "default/w1", "default/w2", "default/w4"]


async def test_a_cycle_stops_where_a_queue_change_rebuilt_the_ledger(monkeypatch: Any) -> None:
    """A ClusterQueue's spec changes while a long cycle lets the loop run: the cycle stops at its
    next pause (reserving in the replaced ledger would be lost), and the next cycle admits the rest
    on the new one; the ledger then holds exactly what the Workloads hold."""
    monkeypatch.setattr("controller.kube.admitting.STEP_BUDGET_S", 0.0)
    cache = cluster(workloads=5)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api))  # type: ignore[arg-type]

    async def raise_the_quota() -> None:
        await asyncio.sleep(0)
        cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 65}).obj())

    await asyncio.gather(loop.cycle(), raise_the_quota())
    first = sum(entry.fit is not None for entry in cache.workloads.values())
    assert 0 < first < 5
    await loop.cycle()
    await settle(loop)
    assert sum(entry.fit is not None for entry in cache.workloads.values()) == 5
    assert cache.snapshot().quota.used["cq"] == {("gpu", GPU): 5000}
    assert sorted(name for resource, name in api.patches if resource == WORKLOADS) == [f"w{i}" for i in range(5)]


async def test_a_workload_parked_behind_a_same_shape_head_gets_the_fresh_reason_not_the_old_one() -> None:
    # A quota of 8 GPUs, then 10; three 6-GPU Workloads of one shape: w0 is admitted, w1 (the head)
    # and w2 (parked behind it) wait. Once the quota grows, both still wait, with the new free count.
    cache = ClusterCache()
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
    cache.upsert(KIND_NODE, make_node("h1").labels({"gpu": "yes"}).allocatable({GPU: 8}).obj())
    for i in range(3):
        cache.upsert(c.KIND_WORKLOAD, make_workload(f"w{i}").queue("lq").pod_set("main", 1, {GPU: 6}).obj())
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api))  # type: ignore[arg-type]

    def reasons() -> dict[str, str]:
        out = {}
        for name in ("w1", "w2"):
            cond = cache.workloads[f"default/{name}"].obj.condition(c.CONDITION_QUOTA_RESERVED)
            assert cond is not None and cond.status == "False"
            out[name] = cond.message
        return out

    await loop.cycle()
    await settle(loop)
    before = reasons()
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 10}).obj())
    await loop.cycle()
    await settle(loop)
    after = reasons()
    assert after["w1"] != before["w1"]  # the head's reason counts the grown quota
    assert after["w2"] == after["w1"]  # and so does the parked one's: not the stale count


def preempting_cluster() -> ClusterCache:
    """One 8-GPU node; ClusterQueue cq (8 GPUs, withinClusterQueue LowerPriority); "low" (priority 0,
    8 GPUs), admitted by a first cycle."""
    cache = ClusterCache()
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 8})
                 .preemption(within=c.PREEMPTION_LOWER_PRIORITY).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
    cache.upsert(KIND_NODE, make_node("h1").labels({"gpu": "yes"}).allocatable({GPU: 8}).obj())
    cache.upsert(c.KIND_WORKLOAD, make_workload("low").queue("lq").pod_set("main", 1, {GPU: 8}).obj())
    return cache


async def test_a_preempt_decision_writes_the_victims_eviction_once_and_the_preemptor_waits() -> None:
    cache = preempting_cluster()
    api = RecordingApi(cache)
    metrics = Metrics()
    loop = AdmissionLoop(cache, api, EventRecorder(api), applied=cache.upsert, metrics=metrics)  # type: ignore[arg-type]
    await loop.cycle()
    await settle(loop)
    assert admission_of(cache.workloads["default/low"].obj.to_dict()) is not None
    cache.upsert(c.KIND_WORKLOAD, make_workload("high").queue("lq").priority(100).pod_set("main", 1, {GPU: 8}).obj())
    await loop.cycle()
    await settle(loop)
    low, high = cache.workloads["default/low"].obj, cache.workloads["default/high"].obj
    evicted, preempted = low.condition(c.CONDITION_EVICTED), low.condition(c.CONDITION_PREEMPTED)
    assert evicted is not None and (evicted.status, evicted.reason) == ("True", c.REASON_PREEMPTED)
    assert preempted is not None and preempted.reason == c.REASON_IN_CLUSTER_QUEUE
    assert low.reserved_admission is not None  # kept until the Job reconciler releases it
    waiting = high.condition(c.CONDITION_QUOTA_RESERVED)
    assert waiting is not None and waiting.status == "False" and "preempting 1 workload(s)" in waiting.message
    writes = [name for resource, name in api.patches if resource == WORKLOADS]
    await loop.cycle()  # the victim terminates: no second eviction, the preemptor still waits
    await settle(loop)
    assert [name for resource, name in api.patches if resource == WORKLOADS].count("low") == writes.count("low") == 2
    assert high.reserved_admission is None
    assert scraped_value(metrics, "kueue_preempted_workloads_total", {"preempting_cluster_queue": "cq"}) == 1.0


def scraped_value(metrics: Metrics, name: str, labels: dict[str, str]) -> float:
    """The sample of `name` (a counter's `_total`) whose labels include `labels`."""
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    raise AssertionError(f"no sample {name}{labels}")


async def test_a_cohorts_active_condition_is_written_when_it_changes_and_only_then() -> None:
    cache = cluster(workloads=0)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api), queue_status_interval_s=0)  # type: ignore[arg-type]
    cache.upsert(c.KIND_COHORT, make_cohort("a").parent("b").obj())

    def cohort_writes() -> list[str]:
        return [name for resource, name in api.patches if resource == COHORTS]
    await loop.cycle()
    await settle(loop)
    assert cohort_writes() == ["a"]  # Active, ParentNotFound: b has no Cohort object
    await loop.cycle()
    await settle(loop)
    assert cohort_writes() == ["a"]  # unchanged: not written again
    cache.upsert(c.KIND_COHORT, make_cohort("b").parent("a").obj())  # a -> b -> a
    await loop.cycle()
    await settle(loop)
    assert sorted(cohort_writes()) == ["a", "a", "b"]


# ---------------------------------------------------------------- waitForPodsReady

class SpecPatchingApi(RecordingApi):
    """RecordingApi that also applies merge patches of a Workload's spec (`spec.active`)."""

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        if subresource is None and resource == WORKLOADS:
            self.patches.append((resource, name))
            self.version += 1
            current = self.cache.workloads[f"{namespace}/{name}"].obj.to_dict()
            return {**current, "metadata": {**current["metadata"], "resourceVersion": str(self.version)},
                    "spec": {**current["spec"], **patch["spec"]}}
        return await super().merge_patch(resource, namespace, name, patch, subresource)


PODS_READY = WaitForPodsReady(timeout_s=10, block_admission=True, requeuing_strategy=RequeuingStrategy(
    backoff_limit_count=1, backoff_base_seconds=30, backoff_max_seconds=60))


def pods_ready_loop(cache: ClusterCache, api: RecordingApi, settings: WaitForPodsReady = PODS_READY,
                    metrics: Metrics | None = None) -> AdmissionLoop:
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    return AdmissionLoop(cache, api, recorder, applied=cache.upsert, pods_ready=settings,  # type: ignore[arg-type]
                         metrics=metrics)


def workload_model(cache: ClusterCache, key: str) -> Workload:
    return cache.workloads[key].obj.model_copy(deep=True)


def admitted_keys(cache: ClusterCache) -> list[str]:
    return sorted(k for k, e in cache.workloads.items() if e.obj.is_admitted)


async def test_block_admission_admits_one_workload_and_the_next_only_once_it_is_ready() -> None:
    cache = cluster(workloads=3)
    api = RecordingApi(cache)
    loop = pods_ready_loop(cache, api)
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0"]  # room for all three, but one at a time
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0"]  # w0's pods are not ready yet
    ready = workload_model(cache, "default/w0")
    mark_pods_ready(ready, True, datetime.now(UTC))
    newer = str(int(ready.metadata.resource_version or "0") + 1)  # the watch bringing the Job reconciler's write
    cache.upsert(c.KIND_WORKLOAD, {**ready.to_dict(), "metadata": {**ready.to_dict()["metadata"],
                                                                  "resourceVersion": newer}})
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0", "default/w1"]


def admitted_long_ago(cache: ClusterCache, key: str, seconds: float, count: int = 0) -> None:
    """The cached Workload `key` as admitted `seconds` ago (pods not ready), requeued `count` times."""
    model = workload_model(cache, key)
    since = datetime.now(UTC) - timedelta(seconds=seconds)
    mark_admitted(model, {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": {GPU: "gpu"}, "resourceUsage": {GPU: "1"}}]}, since)
    mark_pods_ready(model, False, since)
    if count:
        assert model.status is not None
        model.status.requeue_state = RequeueState(count=count)
    obj = model.to_dict()
    obj["metadata"]["resourceVersion"] = "1"
    cache.upsert(c.KIND_WORKLOAD, obj)


async def test_a_workload_past_its_timeout_is_evicted_with_a_requeue_state_and_counted() -> None:
    cache = cluster(workloads=1)
    admitted_long_ago(cache, "default/w0", seconds=11)
    api = RecordingApi(cache)
    metrics = Metrics()
    loop = pods_ready_loop(cache, api, metrics=metrics)
    await loop.cycle()
    await settle(loop)
    wl = cache.workloads["default/w0"].obj
    evicted = wl.condition(c.CONDITION_EVICTED)
    assert evicted is not None and (evicted.reason, evicted.message) == (
        "PodsReadyTimeout", "Exceeded the PodsReady timeout default/w0")
    assert wl.status is not None and wl.status.requeue_state is not None and wl.status.requeue_state.count == 1
    assert scraped_value(metrics, "kueue_evicted_workloads_total",
                         {"cluster_queue": "cq", "reason": "PodsReadyTimeout"}) == 1
    assert loop._timer is None  # nothing ahead: its Job reconciler carries the eviction on


async def test_a_workload_within_its_timeout_gets_one_timer_for_its_deadline() -> None:
    cache = cluster(workloads=1)
    admitted_long_ago(cache, "default/w0", seconds=4)
    loop = pods_ready_loop(cache, RecordingApi(cache))
    await loop.cycle()
    await settle(loop)
    assert cache.workloads["default/w0"].obj.condition(c.CONDITION_EVICTED) is None
    deadline = readiness_deadline(cache.workloads["default/w0"].obj, PODS_READY)
    assert deadline is not None and loop._timer is not None and loop._timer_at == deadline.at
    loop._timer.cancel()


async def test_past_the_requeue_limit_the_timeout_deactivates_instead() -> None:
    cache = cluster(workloads=1)
    admitted_long_ago(cache, "default/w0", seconds=11, count=1)
    api = SpecPatchingApi(cache)
    loop = pods_ready_loop(cache, api)
    await loop.cycle()
    await settle(loop)
    wl = cache.workloads["default/w0"].obj
    assert wl.spec.active is False and wl.condition(c.CONDITION_EVICTED) is None  # the Job reconciler evicts it
    target = wl.condition(c.CONDITION_DEACTIVATION_TARGET)
    assert target is not None and target.reason == "RequeuingLimitExceeded"


def released_in_backoff(cache: ClusterCache, key: str, requeue_in: float) -> None:
    """The cached Workload `key` evicted by a PodsReady timeout and released, its requeueAt
    `requeue_in` seconds from now."""
    model = workload_model(cache, key)
    now = datetime.now(UTC)
    mark_admitted(model, {"clusterQueue": "cq", "podSetAssignments": []}, now - timedelta(seconds=60))
    mark_pods_ready_timeout(model, key, PODS_READY, now - timedelta(seconds=30))
    mark_eviction_done(model, now - timedelta(seconds=29))
    assert model.status is not None and model.status.requeue_state is not None
    model.status.requeue_state.requeue_at = format_time(now + timedelta(seconds=requeue_in))
    obj = model.to_dict()
    obj["metadata"]["resourceVersion"] = "1"
    cache.upsert(c.KIND_WORKLOAD, obj)


async def test_a_workload_in_its_backoff_is_not_admitted_and_wakes_the_loop_when_it_ends() -> None:
    cache = cluster(workloads=1)
    released_in_backoff(cache, "default/w0", requeue_in=30)
    loop = pods_ready_loop(cache, RecordingApi(cache))
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == []
    assert loop._timer is not None and loop._timer_at == requeue_at(cache.workloads["default/w0"].obj)
    loop._timer.cancel()


async def test_once_its_backoff_ended_it_is_requeued_and_admitted() -> None:
    cache = cluster(workloads=1)
    released_in_backoff(cache, "default/w0", requeue_in=-1)
    loop = pods_ready_loop(cache, RecordingApi(cache))
    await loop.cycle()
    await settle(loop)
    await loop.cycle()
    await settle(loop)
    wl = cache.workloads["default/w0"].obj
    requeued = wl.condition(c.CONDITION_REQUEUED)
    assert requeued is not None and (requeued.status, requeued.reason) == ("True", "BackoffFinished")
    assert wl.is_admitted and wl.status is not None and wl.status.requeue_state is not None
    assert (wl.status.requeue_state.count, wl.status.requeue_state.requeue_at) == (1, None)


class RecordedEvents(EventRecorder):
    """Events as (Workload name, reason), in the order they were emitted."""

    def __init__(self, api: RecordingApi) -> None:
        super().__init__(api)  # type: ignore[arg-type]
        self.seen: list[tuple[str, str]] = []

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = c.EVENT_TYPE_NORMAL) -> None:
        self.seen.append((str(obj["metadata"]["name"]), reason))


def stop(cache: ClusterCache, api: RecordingApi, kind: str, policy: str) -> None:
    """Set the stopPolicy of LocalQueue default/lq (kind LocalQueue) or ClusterQueue cq, as a watch event would."""
    obj = (cache.local_queues["default/lq"] if kind == c.KIND_LOCAL_QUEUE else cache.cluster_queues["cq"]).to_dict()
    obj["spec"]["stopPolicy"] = policy
    api.version += 1
    obj["metadata"]["resourceVersion"] = str(api.version)
    assert cache.upsert(kind, obj)


def released(cache: ClusterCache, api: RecordingApi, key: str) -> None:
    """What the Job reconciler writes once the evicted Workload's pods are gone (`Evictor.release`)."""
    model = workload_model(cache, key)
    assert mark_eviction_done(model, datetime.now(UTC))
    obj = model.to_dict()
    api.version += 1
    obj["metadata"]["resourceVersion"] = str(api.version)
    cache.upsert(c.KIND_WORKLOAD, obj)


def condition_of(cache: ClusterCache, key: str, type_: str) -> tuple[str, str] | None:
    cond = cache.workloads[key].obj.condition(type_)
    return (cond.status, cond.reason) if cond is not None else None


async def test_hold_on_a_local_queue_admits_nothing_more_and_leaves_what_runs_running() -> None:
    cache = cluster(workloads=1)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, RecordedEvents(api), applied=cache.upsert,  # type: ignore[arg-type]
                         queue_status_interval_s=0.0)
    await loop.cycle()
    await settle(loop)
    stop(cache, api, c.KIND_LOCAL_QUEUE, "Hold")
    cache.upsert(c.KIND_WORKLOAD, make_workload("late").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0"] and condition_of(cache, "default/w0", c.CONDITION_EVICTED) is None
    waiting = cache.workloads["default/late"].obj.condition(c.CONDITION_QUOTA_RESERVED)
    assert waiting is not None and (waiting.status, waiting.reason, waiting.message) == (
        "False", c.REASON_INADMISSIBLE, 'LocalQueue "lq" in namespace "default" is stopped (stopPolicy Hold)')
    written = loop._queue_status[(True, "default/lq")]  # as the cycle's queue status write counted it
    assert (written["pendingWorkloads"], written["admittedWorkloads"]) == (0, 1)  # held: in no queue, as Kueue's
    assert written["conditions"][0]["reason"] == c.REASON_STOPPED


async def test_a_held_backlog_is_written_once_per_workload_with_no_event_and_later_cycles_write_only_arrivals() -> None:
    # Kueue's Workload controller writes QuotaReserved=False Inadmissible for a stopped queue and
    # posts no Event; its scheduler's Pending Event is for a Workload it tried.
    cache = cluster(workloads=0)
    api = RecordingApi(cache)
    recorder = RecordedEvents(api)
    loop = AdmissionLoop(cache, api, recorder, applied=cache.upsert)  # type: ignore[arg-type]
    stop(cache, api, c.KIND_LOCAL_QUEUE, "Hold")
    for i in range(3):
        cache.upsert(c.KIND_WORKLOAD, make_workload(f"w{i}").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    await loop.cycle()
    await settle(loop)
    assert sorted(name for resource, name in api.patches if resource == WORKLOADS) == ["w0", "w1", "w2"]
    cache.upsert(c.KIND_WORKLOAD, make_workload("late").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    writes = len(api.patches)
    await loop.cycle()
    await settle(loop)
    assert [name for resource, name in api.patches[writes:] if resource == WORKLOADS] == ["late"]
    assert recorder.seen == []
    assert condition_of(cache, "default/late", c.CONDITION_QUOTA_RESERVED) == ("False", c.REASON_INADMISSIBLE)


async def test_a_workload_that_does_not_fit_gets_one_pending_event_and_its_unchanged_reason_is_not_written_again() -> None:
    cache = cluster(workloads=0)  # cq: 64 GPUs of quota
    api = RecordingApi(cache)
    recorder = RecordedEvents(api)
    loop = AdmissionLoop(cache, api, recorder, applied=cache.upsert)  # type: ignore[arg-type]
    cache.upsert(c.KIND_WORKLOAD, make_workload("big").queue("lq").pod_set("main", 1, {GPU: 100}).obj())
    await loop.cycle()
    await settle(loop)
    assert condition_of(cache, "default/big", c.CONDITION_QUOTA_RESERVED) == ("False", c.REASON_PENDING)
    assert recorder.seen == [("big", c.REASON_PENDING)]
    writes = len(api.patches)
    await loop.cycle()
    await settle(loop)
    assert [name for resource, name in api.patches[writes:] if resource == WORKLOADS] == []
    assert recorder.seen == [("big", c.REASON_PENDING)]


async def test_hold_and_drain_on_a_local_queue_evicts_its_admitted_workloads_once_then_requeues_them_on_restart() -> None:
    cache = cluster(workloads=2)
    api = RecordingApi(cache)
    recorder, metrics = RecordedEvents(api), Metrics()
    loop = AdmissionLoop(cache, api, recorder, applied=cache.upsert, metrics=metrics)  # type: ignore[arg-type]
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0", "default/w1"]
    stop(cache, api, c.KIND_LOCAL_QUEUE, "HoldAndDrain")
    await loop.cycle()
    await settle(loop)
    for key in ("default/w0", "default/w1"):
        assert condition_of(cache, key, c.CONDITION_EVICTED) == ("True", c.REASON_LOCAL_QUEUE_STOPPED)
        assert cache.workloads[key].admission is not None  # held until its Job is stopped and its pods gone
    assert [e for e in recorder.seen if e[1] == c.EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED] == [
        ("w0", c.EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED), ("w1", c.EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED)]
    assert scraped_value(metrics, "kueue_evicted_workloads_total", {"reason": c.REASON_LOCAL_QUEUE_STOPPED}) == 2
    writes = len(api.patches)
    await loop.cycle()  # being evicted: nothing is written again
    await settle(loop)
    assert [name for resource, name in api.patches[writes:] if resource == WORKLOADS] == []
    for key in ("default/w0", "default/w1"):
        released(cache, api, key)
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == []  # released, and held by the stopped queue
    assert condition_of(cache, "default/w0", c.CONDITION_REQUEUED) == ("False", c.REASON_LOCAL_QUEUE_STOPPED)
    assert condition_of(cache, "default/w0", c.CONDITION_QUOTA_RESERVED) == ("False", c.REASON_INADMISSIBLE)
    stop(cache, api, c.KIND_LOCAL_QUEUE, "None")
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0", "default/w1"]
    for key in ("default/w0", "default/w1"):
        assert condition_of(cache, key, c.CONDITION_REQUEUED) == ("True", c.REASON_LOCAL_QUEUE_RESTARTED)
        assert condition_of(cache, key, c.CONDITION_EVICTED) == ("False", c.REASON_QUOTA_RESERVED)


async def test_hold_and_drain_on_a_cluster_queue_evicts_what_it_admitted_and_its_restart_requeues_it() -> None:
    cache = cluster(workloads=1)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, RecordedEvents(api), applied=cache.upsert)  # type: ignore[arg-type]
    await loop.cycle()
    await settle(loop)
    stop(cache, api, c.KIND_CLUSTER_QUEUE, "HoldAndDrain")
    await loop.cycle()
    await settle(loop)
    assert condition_of(cache, "default/w0", c.CONDITION_EVICTED) == ("True", c.REASON_CLUSTER_QUEUE_STOPPED)
    stop(cache, api, c.KIND_CLUSTER_QUEUE, "None")  # running again before the eviction was over
    await loop.cycle()
    await settle(loop)
    assert condition_of(cache, "default/w0", c.CONDITION_REQUEUED) is None  # its release is yet to come
    released(cache, api, "default/w0")
    await loop.cycle()  # no queue changed since: the Workload is known as drained
    await settle(loop)
    assert condition_of(cache, "default/w0", c.CONDITION_REQUEUED) == ("True", c.REASON_CLUSTER_QUEUE_RESTARTED)
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/w0"]


async def test_a_change_after_a_quiet_spell_is_decided_at_once_and_changes_that_keep_coming_are_batched() -> None:
    cache = cluster(workloads=1)
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api), debounce_s=3600)  # type: ignore[arg-type]
    running = asyncio.create_task(loop.run())
    try:
        await settle(loop)
        assert loop.cycles == 1 and admitted_keys(cache) == ["default/w0"]  # no debounce before the first
        cache.upsert(c.KIND_WORKLOAD, make_workload("w1").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
        loop.notify()
        await settle(loop)
        assert loop.cycles == 1  # right after a cycle: waits for the window to gather the burst
    finally:
        running.cancel()


async def test_what_the_loop_remembers_per_workload_does_not_grow_with_workloads_gone(monkeypatch: Any) -> None:
    # Admission times are kept for the latest few only; the last pending cause of a Workload deleted
    # while it waited is dropped once such causes outnumber the Workloads (a long-running operator
    # sees millions come and go). A quota of 3 GPUs: three 1-GPU Workloads are admitted, others wait.
    monkeypatch.setattr("controller.kube.admitting.ADMITTED_AT_KEPT", 2)
    cache = cluster(workloads=0)
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 3}).obj())
    api = RecordingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api))  # type: ignore[arg-type]

    async def arrive(*names: str) -> None:
        for name in names:
            cache.upsert(c.KIND_WORKLOAD, make_workload(name).queue("lq").pod_set("main", 1, {GPU: 1}).obj())
        await loop.cycle()
        await settle(loop)

    await arrive("a0", "a1", "a2")
    assert list(loop.admitted_at) == ["default/a1", "default/a2"]  # a0, the oldest, forgotten
    await arrive(*(f"w{i}" for i in range(10)))
    assert set(loop._last_cause) == {f"default/w{i}" for i in range(10)}
    for i in range(10):
        cache.delete(c.KIND_WORKLOAD, cache.workloads[f"default/w{i}"].obj.to_dict())
    await arrive("w10")  # ten causes for three Workloads held: those of the deleted ones go
    assert set(loop._last_cause) == {"default/w10"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_while_workloads_keep_arriving_a_pending_status_waits_for_the_lull_and_an_admission_does_not() -> None:
    # The API server's cores go to the creates and the admissions during a burst; "why it waits"
    # (status and Event) follows in the lull, with the reason of the latest cycle.
    cache = cluster(workloads=0)  # cq: 64 GPUs of quota, one 8-GPU node
    api = RecordingApi(cache)
    recorder = RecordedEvents(api)
    clock = Clock()
    arrivals = Arrivals(clock, window_s=0.25, burst_arrivals=1, defer_max_s=5.0)
    loop = AdmissionLoop(cache, api, recorder, applied=cache.upsert, arrivals=arrivals)  # type: ignore[arg-type]
    arrivals.arrived()
    cache.upsert(c.KIND_WORKLOAD, make_workload("small").queue("lq").pod_set("main", 1, {GPU: 1}).obj())
    cache.upsert(c.KIND_WORKLOAD, make_workload("big").queue("lq").pod_set("main", 1, {GPU: 100}).obj())
    await loop.cycle()
    await settle(loop)
    assert admitted_keys(cache) == ["default/small"]
    assert condition_of(cache, "default/big", c.CONDITION_QUOTA_RESERVED) is None
    assert ("big", c.REASON_PENDING) not in recorder.seen
    clock.now += 0.1
    arrivals.arrived()
    await loop.cycle()  # the same reason again, kept once
    await settle(loop)
    assert condition_of(cache, "default/big", c.CONDITION_QUOTA_RESERVED) is None
    clock.now += 0.3
    arrivals.check()
    await settle(loop)
    assert condition_of(cache, "default/big", c.CONDITION_QUOTA_RESERVED) == ("False", c.REASON_PENDING)
    assert recorder.seen.count(("big", c.REASON_PENDING)) == 1
    assert [name for resource, name in api.patches if resource == WORKLOADS].count("big") == 1


async def test_a_workload_admitted_before_the_lull_gets_no_pending_status_written_after_it() -> None:
    cache = cluster(workloads=0)
    api = RecordingApi(cache)
    clock = Clock()
    arrivals = Arrivals(clock, window_s=0.25, burst_arrivals=1, defer_max_s=5.0)
    loop = AdmissionLoop(cache, api, RecordedEvents(api), applied=cache.upsert, arrivals=arrivals)  # type: ignore[arg-type]
    arrivals.arrived()
    for i in range(9):  # 8 fit the quota of 64 GPUs; the ninth waits for room
        cache.upsert(c.KIND_WORKLOAD, make_workload(f"w{i}").queue("lq").pod_set("main", 1, {GPU: 8}).obj())
    await loop.cycle()
    await settle(loop)
    (waiting,) = [k for k in cache.workloads if k not in admitted_keys(cache)]
    freed = next(iter(admitted_keys(cache)))
    cache.delete(c.KIND_WORKLOAD, cache.workloads[freed].obj.to_dict())
    await loop.cycle()  # room again: admitted, and the reason kept for it dropped
    await settle(loop)
    assert waiting in admitted_keys(cache)
    clock.now += 0.3
    arrivals.check()
    await settle(loop)
    assert condition_of(cache, waiting, c.CONDITION_QUOTA_RESERVED) == ("True", c.REASON_QUOTA_RESERVED)
    assert [name for resource, name in api.patches if resource == WORKLOADS].count(waiting.split("/")[1]) == 1
