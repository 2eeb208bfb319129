"""The batch/v1 Job integration: a queue-labelled Job's Workload, and the Job following it.

For each changed Job (or its Workload): a Job found running without an admission (created while the
webhook configurations were absent, or unsuspended by someone else) is stopped first (suspended,
its pods gone, startTime cleared) and only then gets its Workload (Kueue's name and owner reference),
so the admission loop never sees a Workload whose Job runs pods tasq did not place; refuse one whose
PriorityClass, or the WorkloadPriorityClass its label names, is missing (an Event, the Job stays suspended); on admission write the flavors'
nodeSelector/tolerations, the topology-workload/-podset annotations, tasq's label and the topology
scheduling gate into the pod template and unsuspend; suspend a Job whose Workload lost its admission
and put back the pod template the Workload recorded at creation; stop the Job of an evicted Workload
(Evicted=True, admission still held: a preemption victim) the same way and, once its pods are gone,
release its reservation (controller.kube.evicting); evict a deactivated Workload (`spec.active:
false`) the same way, then release its reservation; mark the Workload Finished when the Job
completes or fails; delete it when the Job is gone. Leader only. A reconcile that fails in any way
(refused, a dropped connection, a bug) is re-queued with backoff (controller.kube.requeuing).
Started by controller.kube.operating, whose EventRouter wakes it and takes every Job and Workload it
writes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.views import JobView
from controller.api.workload import Admission, Workload
from controller.cache.cluster import ClusterCache, WorkloadEntry
from controller.core.admission.conditions import (
    deactivation_message,
    is_terminating,
    mark_deactivated,
    mark_finished,
)
from controller.core.admission.pods_ready import admitted_counts, all_pods_ready, mark_pods_ready
from controller.core.admission.workloads import workload_from_job, workload_priority_class_of
from controller.kube.api import JOBS, WORKLOADS, ApiError, KubeApi, retrying
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor
from controller.kube.requeuing import Backoff, log_failure
from controller.kube.routing import Applied
from controller.kube.statuses import write_workload_status

log = logging.getLogger(__name__)

PARALLEL_RECONCILES = 16


def pod_template_patch(job: Mapping[str, Any], workload_name: str, admission: Admission,
                       flavors: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The Job merge patch that starts an admitted Job: its pod template gets every assigned
    flavor's nodeLabels (as nodeSelector) and tolerations, and, for a pod set with a topology
    assignment, the topology-workload/-podset annotations, tasq's label and the
    `kueue.x-k8s.io/topology` scheduling gate; `suspend` becomes false. The gate in the template
    (as Kueue writes it into its pod-set info) makes every pod start gated even when no Pod webhook
    answers; the Pod webhook, selected by the label, stays a second line and never adds it twice.
    `flavors`: flavor name -> its spec."""
    template = (job.get("spec") or {}).get("template") or {}
    pod_spec = template.get("spec") or {}
    selector = dict(pod_spec.get("nodeSelector") or {})
    tolerations = list(pod_spec.get("tolerations") or [])
    template_meta: dict[str, Any] = {}
    for psa in admission.pod_set_assignments:
        for flavor in sorted(set(psa.flavors.values())):
            spec = flavors.get(flavor) or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations.extend(t for t in spec.get("tolerations") or [] if t not in tolerations)
        if psa.topology_assignment is not None:
            template_meta = {
                "annotations": {c.ANNOTATION_TOPOLOGY_WORKLOAD: workload_name,
                                c.ANNOTATION_TOPOLOGY_PODSET: psa.name},
                "labels": {c.LABEL_TAS: c.LABEL_TAS_VALUE}}
    pod_patch: dict[str, Any] = {"nodeSelector": selector or None}
    if tolerations:
        pod_patch["tolerations"] = tolerations
    gates = list(pod_spec.get("schedulingGates") or [])
    if template_meta and not any(g.get("name") == c.SCHEDULING_GATE_TOPOLOGY for g in gates):
        pod_patch["schedulingGates"] = [*gates, {"name": c.SCHEDULING_GATE_TOPOLOGY}]  # replaced whole
    patched_template: dict[str, Any] = {"spec": pod_patch}
    if template_meta:
        patched_template["metadata"] = template_meta
    return {"metadata": {"resourceVersion": (job.get("metadata") or {}).get("resourceVersion")},
            "spec": {"suspend": False, "template": patched_template}}


def recorded_template(workload: Workload) -> Mapping[str, Any]:
    """The pod template the Workload copied from its Job at creation (its single pod set's): the
    Job's template as its author wrote it, before any admission changed it."""
    return workload.spec.pod_sets[0].template


def was_admitted(workload: Workload) -> bool:
    """The Workload held an admission at some time: it has an Admitted condition (True, or False
    since the reservation went). A Workload never admitted has none, so its Job was never started
    and its template is left as its author keeps it."""
    return workload.condition(c.CONDITION_ADMITTED) is not None


def _map_patch(have: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge-patch value turning map `have` into `want` (keys to drop set to null)."""
    if not want:
        return None
    return {**{k: None for k in have if k not in want}, **{k: v for k, v in want.items() if have.get(k) != v}}


def pod_template_restore_patch(job: Mapping[str, Any], workload: Workload) -> dict[str, Any] | None:
    """The Job merge patch that puts back what starting the Job changed in its pod template: the
    nodeSelector, tolerations, scheduling gates, labels and annotations the Workload recorded at creation (Kueue
    restores its pod sets' info the same way when it stops a Job). None when they already match.
    The API server accepts it only on a suspended Job whose pods are gone (see `JobReconciler._stop`)."""
    original, current = recorded_template(workload), (job.get("spec") or {}).get("template") or {}
    spec_patch: dict[str, Any] = {}
    meta_patch: dict[str, Any] = {}
    for field, target, have, want in (
            ("nodeSelector", spec_patch, current.get("spec"), original.get("spec")),
            ("labels", meta_patch, current.get("metadata"), original.get("metadata")),
            ("annotations", meta_patch, current.get("metadata"), original.get("metadata"))):
        have_map, want_map = (have or {}).get(field) or {}, (want or {}).get(field) or {}
        if have_map != want_map:
            target[field] = _map_patch(have_map, want_map)
    for field in ("tolerations", "schedulingGates"):
        want_list = (original.get("spec") or {}).get(field) or []
        if ((current.get("spec") or {}).get(field) or []) != want_list:
            spec_patch[field] = want_list or None  # a merge patch replaces a list whole
    if not spec_patch and not meta_patch:
        return None
    template: dict[str, Any] = {}
    if spec_patch:
        template["spec"] = spec_patch
    if meta_patch:
        template["metadata"] = meta_patch
    return {"metadata": {"resourceVersion": (job.get("metadata") or {}).get("resourceVersion")},
            "spec": {"template": template}}


def pods_left(job: Mapping[str, Any]) -> int:
    """Pods the Job controller still counts for the Job: active ones and, since Kubernetes 1.34
    (JobPodReplacementPolicy), terminating ones, which may still run on their node."""
    status = job.get("status") or {}
    return int(status.get("active") or 0) + int(status.get("terminating") or 0)


def suspension_acknowledged(job: Mapping[str, Any]) -> bool:
    """The Job controller has acted on the Job's suspension: it set the Suspended condition (after
    deleting the pods it counted), so no pod it created before is missing from its counters."""
    return any(isinstance(cond, Mapping) and cond.get("type") == c.CONDITION_JOB_SUSPENDED
               and cond.get("status") == "True" for cond in (job.get("status") or {}).get("conditions") or [])


def job_stopped(job: Mapping[str, Any]) -> bool:
    """The Job is suspended, has no pod left and no startTime: nothing of it runs, so a Workload
    created for it now is admitted like one whose Job never ran (Kueue waits for the same before it
    creates a Workload for a Job it found running)."""
    return (bool((job.get("spec") or {}).get("suspend")) and pods_left(job) == 0
            and not (job.get("status") or {}).get("startTime"))


def missing_priority_class(job: Mapping[str, Any], known: Mapping[str, Any],
                           known_workload_classes: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) when the class that gives the Job's priority does not exist: the
    WorkloadPriorityClass its `kueue.x-k8s.io/priority-class` label names (which wins, so the pod
    template's PriorityClass is then not looked at, as in Kueue), else the pod template's
    PriorityClass. None when nothing is missing."""
    workload_class = workload_priority_class_of(job)
    if workload_class is not None:
        if workload_class in known_workload_classes:
            return None
        return c.EVENT_REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND, f'WorkloadPriorityClass "{workload_class}" not found'
    name = ((((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("priorityClassName"))
    if name and name not in known:
        return c.EVENT_REASON_ERR_WORKLOAD_COMPOSE, f'priorityclasses.scheduling.k8s.io "{name}" not found'
    return None


class JobReconciler:
    """See the module docstring. `notify(job_key)` on any Job or Workload change; `run()` until cancelled."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder,
                 applied: Applied | None = None, evictor: Evictor | None = None,
                 pods_ready: WaitForPodsReady | None = None) -> None:
        self.cache = cache
        self.pods_ready = pods_ready
        """waitForPodsReady's settings (None: off): a running admitted Job's readiness is recorded
        in its Workload's PodsReady condition (`_record_pods_ready`)."""
        self.applied: Applied = applied if applied is not None else cache.upsert
        """Where every Job and Workload this reconciler wrote goes (the operator's
        `EventRouter.applied`): into the cache at once, so the next reconcile sees it and the
        admission loop sees a release at once (the watch echo then carries a known version and is
        skipped), waking the loops the change concerns."""
        self.evictor = evictor if evictor is not None else Evictor(cache, api, recorder, self.applied)
        """Releases an evicted Workload's reservation once its Job is stopped and its pods are gone."""
        self.api = api
        self.recorder = recorder
        self._dirty: dict[str, None] = {}
        """Changed Jobs in the order they changed (a dict as an ordered set): taken first come, first served."""
        self._active: set[str] = set()
        self._wake = asyncio.Event()
        self._found_running: set[str] = set()
        """Jobs this reconciler suspended because they ran with no Workload: their Workload waits
        for the Job controller to acknowledge the suspension (`_stopped_for_good`)."""
        self._refused: set[tuple[str, str]] = set()
        """(Job uid, what is missing) already reported: one Event, not one per change."""
        self._backoff = Backoff()
        """Consecutive failures per Job: a failed reconcile is re-queued after its backoff."""

    def notify(self, job_key: str) -> None:
        self._dirty[job_key] = None
        self._wake.set()

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """`PARALLEL_RECONCILES` workers take changed Jobs as they come (one Job is never reconciled by
        two workers at once: a change arriving meanwhile runs it again afterwards)."""
        workers = [asyncio.create_task(self._work(leading)) for _ in range(PARALLEL_RECONCILES)]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()

    async def _work(self, leading: asyncio.Event | None) -> None:
        while True:
            while not self._dirty:
                self._wake.clear()
                await self._wake.wait()
            if leading is not None and not leading.is_set():
                await leading.wait()
                continue
            # The first changed Job no other worker holds: only held Jobs are skipped, so taking
            # one costs at most PARALLEL_RECONCILES steps however many Jobs wait (a burst).
            key = next((k for k in self._dirty if k not in self._active), None)
            if key is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            del self._dirty[key]
            self._active.add(key)
            try:
                await self.reconcile(key)
            except Exception as e:  # any failure (API, dropped connection, a bug): never dropped
                self._requeue(key, e)
            else:
                self._backoff.succeeded(key)
            finally:
                self._active.discard(key)
                self._wake.set()  # a change to this Job that waited for it, or an idle worker

    def _requeue(self, key: str, error: Exception) -> None:
        """Reconcile `key` again after its backoff (from the cache as it is then: a write whose answer
        was lost shows in the watch meanwhile); the worker is free in between."""
        delay = self._backoff.failed(key)
        log_failure(log, f"job {key}", error, delay)
        asyncio.get_running_loop().call_later(delay, self.notify, key)

    async def reconcile(self, key: str) -> None:
        """Phase dispatch for one Job: decide from the cache which single step it needs."""
        job = self.cache.jobs.get(key)
        wl_key = self.cache.workload_of_job.get(key)
        entry = self.cache.workloads.get(wl_key) if wl_key is not None else None
        if entry is not None and (job is None or not _owned_by(entry, job)):
            await self._delete_workload(entry)
            return
        if job is None:
            return
        view = JobView.from_dict(job)
        if not view.queue_name:
            return
        if entry is None:
            if view.finished or self._stopped_for_good(job, key):
                await self._create_workload(job, view)
            else:
                await self._stop_unadmitted(job, key)
        elif view.finished and not entry.finished:
            await self._finish(entry, view)
        elif entry.finished:
            return
        elif (admission := entry.admission) is not None:
            if is_terminating(entry.obj):
                await self._evict(job, entry, key)
            elif not entry.active:
                await self._deactivate(job, entry)
            elif view.suspend and pods_left(job) == 0 and not self.cache.live_pods_of_job.get(key):
                # else a Job or pod event brings it back
                await self._start(job, entry, admission)
            elif self.pods_ready is not None and not view.suspend:
                await self._record_pods_ready(job, entry)
        elif not view.suspend and not view.finished and not was_admitted(entry.obj):
            await self._discard_workload(entry)
        elif not entry.expecting and not view.finished:
            await self._stop(job, entry)

    def _stopped_for_good(self, job: Mapping[str, Any], key: str) -> bool:
        """The Job may get its Workload: stopped (`job_stopped`), no live pod of it in the cache, and,
        for a Job this reconciler found running and suspended, the Job controller has acknowledged
        the suspension (its Suspended condition): until it has, pods it created just before the
        suspension may not show in the Job's counters or the cache yet."""
        if not job_stopped(job) or self.cache.live_pods_of_job.get(key):
            return False
        if key in self._found_running and not suspension_acknowledged(job):
            return False
        self._found_running.discard(key)
        return True

    async def _stop_unadmitted(self, job: dict[str, Any], key: str) -> None:
        """Phases of stopping a Job found running with no Workload, each decided from the Job as it
        is (a restart between them resumes): 1. suspend it; 2. wait until the Job controller counts
        no pod left, in its counters and in the cache (a Job or pod event brings it back here);
        3. clear the startTime, as Kueue does when it stops a Job; 4. for a Job it suspended here,
        wait for the Job controller's Suspended condition (`_stopped_for_good`). Its template is its author's (tasq never started it), so
        nothing is restored. Then `reconcile` creates the Workload."""
        if not JobView.from_dict(job).suspend:
            self._found_running.add(key)
            await self._suspend(job, "Not admitted by a ClusterQueue: the Job is suspended until its Workload is admitted")
            return
        if pods_left(job) > 0 or self.cache.live_pods_of_job.get(key):
            return  # a Job or pod event brings it back
        if not (job.get("status") or {}).get("startTime"):
            return  # stopped, but not yet acknowledged by the Job controller: its Job event brings it back
        meta = job["metadata"]
        cleared = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": {"startTime": None}}
        try:
            written = await retrying(lambda: self.api.merge_patch(JOBS, meta["namespace"], meta["name"], cleared, "status"))
        except ApiError as e:
            if e.not_found:
                return
            raise  # a conflict too: `run` retries from the cache, which the watch refreshes meanwhile
        self.applied(c.KIND_JOB, written)
        self.notify(key)  # the watch echo of our own write is skipped: go on to the Workload

    async def _discard_workload(self, entry: WorkloadEntry) -> None:
        """A Workload never admitted whose Job runs anyway (someone unsuspended it): delete it, on
        the condition that it is still the version the cache holds (so an admission written
        meanwhile, say by the previous leader that then started the Job, is never thrown away).
        Its Job is then stopped and gets a new Workload (`_stop_unadmitted`): a Workload exists only
        for a stopped Job, so the admission loop cannot admit one while its pods run."""
        version = entry.obj.metadata.resource_version
        log.info("workload %s/%s: never admitted but its Job runs; deleted, recreated once the Job is stopped",
                 entry.info.namespace, entry.info.name)
        try:
            await retrying(lambda: self.api.delete(WORKLOADS, entry.info.namespace, entry.info.name,
                                                   resource_version=version))
        except ApiError as e:
            if not (e.not_found or e.conflict):  # gone, or changed: decided again from the newer version
                raise

    async def _create_workload(self, job: dict[str, Any], view: JobView) -> None:
        missing = missing_priority_class(job, self.cache.priority_classes, self.cache.workload_priority_classes)
        if missing is not None:
            if not view.suspend:
                await self._suspend(job)
            reason, message = missing
            if (view.uid, message) not in self._refused:
                self._refused.add((view.uid, message))
                self.recorder.emit(job, reason, f"{message}: no Workload is created and the Job stays suspended",
                                   c.EVENT_TYPE_WARNING)
            return
        classes, default = self.cache.priority_values()
        workload_classes = {name: wpc.value for name, wpc in self.cache.workload_priority_classes.items()}
        manifest = workload_from_job(job, classes, default, workload_classes)
        manifest["metadata"].pop("creationTimestamp", None)
        try:
            created = await retrying(lambda: self.api.create(WORKLOADS, view.namespace, manifest))
        except ApiError as e:
            if e.conflict:
                return  # already there; its watch event follows
            raise
        self.applied(c.KIND_WORKLOAD, created)
        self.recorder.emit(job, c.EVENT_REASON_CREATED_WORKLOAD,
                                 f"Created Workload: {view.namespace}/{manifest['metadata']['name']}")

    async def _start(self, job: dict[str, Any], entry: WorkloadEntry, admission: Admission) -> None:
        flavors = {name: flavor.spec.to_dict() for name, flavor in self.cache.flavors.items()}
        patch = pod_template_patch(job, entry.info.name, admission, flavors)
        meta = job["metadata"]
        try:
            patched = await retrying(lambda: self.api.merge_patch(JOBS, meta["namespace"], meta["name"], patch))
        except ApiError as e:
            if e.not_found:
                return  # gone
            raise  # 409 too: `run` retries from the cache, which the watch refreshes meanwhile
        self.applied(c.KIND_JOB, patched)  # so a reconcile before the watch echo sees it started
        self.recorder.emit(job, c.EVENT_REASON_STARTED,
                                 f"Admitted by clusterQueue {admission.cluster_queue}")

    async def _suspend(self, job: dict[str, Any], message: str = "No matching admission: the Job is suspended",
                       ) -> dict[str, Any] | None:
        """Set `spec.suspend`; the Job as written, None when it is gone."""
        meta = job["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"suspend": True}}
        try:
            patched = await retrying(lambda: self.api.merge_patch(JOBS, meta["namespace"], meta["name"], patch))
        except ApiError as e:
            if e.not_found:
                return None
            raise
        self.applied(c.KIND_JOB, patched)
        self.recorder.emit(job, c.EVENT_REASON_STOPPED, message)
        return patched

    async def _stop(self, job: dict[str, Any], entry: WorkloadEntry, message: str | None = None) -> bool:
        """Phases of stopping a Job whose Workload has no admission (or is being evicted), each
        decided from the Job as it is, so a restart between them resumes where it stopped:
        1. running -> suspended;
        2. waiting until the Job controller has no active pod left (kube-apiserver 1.36+ lets a
           suspended Job's pod template change only then; the Job's next watch event brings this
           back here);
        3. a startTime the Job controller left -> cleared, as Kueue does (before 1.35 the template
           changes only without one, and the Job controller does not clear it on suspension);
        4. -> the pod template the Workload recorded (the admission's nodeSelector, tolerations,
           topology annotations and tasq's label gone).
        True once the Job is suspended with its template restored (or is gone). `message`: the
        Stopped Event's (an eviction's message; Kueue's)."""
        current: dict[str, Any] | None = job
        if not JobView.from_dict(job).suspend:
            current = await (self._suspend(job, message) if message is not None else self._suspend(job))
        if current is None or not was_admitted(entry.obj):
            return True
        restore = pod_template_restore_patch(current, entry.obj)
        if restore is None:
            return True
        status = current.get("status") or {}
        if int(status.get("active") or 0) > 0:
            return False
        meta = current["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            if status.get("startTime"):
                cleared = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": {"startTime": None}}
                current = await retrying(lambda: self.api.merge_patch(JOBS, namespace, name, cleared, "status"))
                restore["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            restored = await retrying(lambda: self.api.merge_patch(JOBS, namespace, name, restore))
        except ApiError as e:
            if e.not_found:
                return True
            raise  # 409 too: `run` retries from the cache, which the watch refreshes meanwhile
        self.applied(c.KIND_JOB, restored)
        return True

    async def _evict(self, job: dict[str, Any], entry: WorkloadEntry, key: str) -> None:
        """Carry out a decided eviction (Evicted=True, admission held): stop the Job (`_stop`), wait
        until no pod of it is left, in the Job's counters (active and terminating) and in the cache
        (a deleted pod runs until its grace period ends; its deletion brings this back here), then
        release the reservation (`Evictor.release`). Until then the Workload keeps its quota and
        nodes, so no preemptor lands on capacity its pods still use. A restart in between redoes
        what is left."""
        evicted = entry.obj.condition(c.CONDITION_EVICTED)
        if not await self._stop(job, entry, evicted.message if evicted is not None else None):
            return
        current = self.cache.jobs.get(key, job)
        if pods_left(current) > 0 or self.cache.live_pods_of_job.get(key):
            return  # a Job or pod event brings it back
        await self.evictor.release(entry)

    async def _deactivate(self, job: dict[str, Any], entry: WorkloadEntry) -> None:
        """Evict a Workload whose `spec.active` is false: stop its Job (`_stop`), wait until no pod
        of it is left (as `_evict`), then release the reservation in one status write (Kueue's
        Deactivated eviction). A restart in between redoes what is left: the Workload keeps its
        admission (and its quota) until the Job is stopped and its pods are gone."""
        if not await self._stop(job, entry):
            return
        key = entry.obj.owner_job_key or ""
        if pods_left(self.cache.jobs.get(key, job)) > 0 or self.cache.live_pods_of_job.get(key):
            return  # a pod in its grace period still runs: a Job or pod event brings it back
        now = datetime.now(UTC)
        cluster_queue = entry.admission.cluster_queue if entry.admission is not None else None
        model = entry.obj.model_copy(deep=True)
        message = deactivation_message(model)
        if not mark_deactivated(model, now) or model.status is None:
            return
        status = {**model.status.to_dict(), "admission": None, "requeueState": None}
        patch = {"metadata": {"resourceVersion": model.metadata.resource_version}, "status": status}
        try:
            written = await retrying(functools.partial(
                self.api.merge_patch, WORKLOADS, entry.info.namespace, entry.info.name, patch, "status"))
        except ApiError as e:
            if e.not_found:
                return
            raise  # 409: retried from the cache once the watch brings the newer Workload
        self.applied(c.KIND_WORKLOAD, written)
        self.recorder.emit(written, c.EVENT_REASON_EVICTED_DEACTIVATED, message)
        if self.evictor.metrics is not None and cluster_queue is not None:
            self.evictor.metrics.evicted(cluster_queue, c.REASON_DEACTIVATED)

    async def _record_pods_ready(self, job: Mapping[str, Any], entry: WorkloadEntry) -> None:
        """PodsReady from the Job's counters (`job_pods_ready`), written only when it changes
        (controller.core.admission.pods_ready.mark_pods_ready: WaitForStart, Started,
        WaitForRecovery, Recovered)."""
        ready = all_pods_ready(admitted_counts(entry.obj), job_pods_ready(job, entry.obj))
        now = datetime.now(UTC)
        wrote = [False]

        def change(model: Workload) -> bool:
            wrote[0] = model.reserved_admission is not None and mark_pods_ready(model, ready, now)
            return wrote[0]

        written = await write_workload_status(self.api, entry.obj, change)
        if written is not None and wrote[0]:
            self.applied(c.KIND_WORKLOAD, written)

    async def _finish(self, entry: WorkloadEntry, view: JobView) -> None:
        succeeded = view.finished == c.CONDITION_JOB_COMPLETE
        message = "Job finished successfully" if succeeded else "Job failed"
        now = datetime.now(UTC)

        def change(model: Workload) -> bool:
            return not model.is_finished and mark_finished(model, succeeded, message, now)

        written = await write_workload_status(self.api, entry.obj, change)
        if written is not None:
            self.applied(c.KIND_WORKLOAD, written)
            self.recorder.emit(written, c.EVENT_REASON_FINISHED_WORKLOAD, message)

    async def _delete_workload(self, entry: WorkloadEntry) -> None:
        try:
            await retrying(lambda: self.api.delete(WORKLOADS, entry.info.namespace, entry.info.name))
        except ApiError as e:
            if not e.not_found:
                raise


def job_pods_ready(job: Mapping[str, Any], workload: Workload) -> dict[str, int]:
    """A batch/v1 Job's pods ready or succeeded, by its one pod set (Kueue's Job integration:
    `status.ready` + `status.succeeded`); a read of the Job kept apart for the Job adapter."""
    status = job.get("status") or {}
    count = int(status.get("ready") or 0) + int(status.get("succeeded") or 0)
    return {workload.spec.pod_sets[0].name: count}


def _owned_by(entry: WorkloadEntry, job: Mapping[str, Any]) -> bool:
    """The Workload belongs to this very Job (same uid), not to a deleted one of the same name."""
    uid = (job.get("metadata") or {}).get("uid")
    return any(ref.kind == c.KIND_JOB and ref.uid == uid for ref in entry.obj.metadata.owner_references)
