"""The batch/v1 Job integration: a queue-labelled Job's Workload, and the Job following it.

For each changed Job (or its Workload): create the Workload (Kueue's name and owner reference);
refuse one whose PriorityClass is missing (an Event, the Job stays suspended); on admission write
the flavors' nodeSelector/tolerations, the topology-workload/-podset annotations and tasq's label
into the pod template and unsuspend; suspend a Job whose Workload has no admission; mark the
Workload Finished when the Job completes or fails; delete it when the Job is gone. Leader only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.views import JobView
from controller.api.workload import Workload
from controller.cache.cluster import ClusterCache, WorkloadEntry, admission_of, owner_job_key
from controller.core.admission.conditions import mark_finished
from controller.core.admission.workloads import workload_from_job
from controller.kube.api import JOBS, WORKLOADS, ApiError, KubeApi, retrying
from controller.kube.events import EventRecorder
from controller.kube.statuses import write_workload_status

log = logging.getLogger(__name__)

PARALLEL_RECONCILES = 16


def pod_template_patch(job: Mapping[str, Any], workload_name: str, admission: Mapping[str, Any],
                       flavors: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The Job merge patch that starts an admitted Job: its pod template gets every assigned
    flavor's nodeLabels (as nodeSelector) and tolerations, and, for a pod set with a topology
    assignment, the topology-workload/-podset annotations and tasq's label (which the Pod webhook
    selects on to gate the pods); `suspend` becomes false. `flavors`: flavor name -> its spec."""
    template = (job.get("spec") or {}).get("template") or {}
    pod_spec = template.get("spec") or {}
    selector = dict(pod_spec.get("nodeSelector") or {})
    tolerations = list(pod_spec.get("tolerations") or [])
    template_meta: dict[str, Any] = {}
    for psa in admission.get("podSetAssignments") or []:
        for flavor in sorted(set((psa.get("flavors") or {}).values())):
            spec = flavors.get(flavor) or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations.extend(t for t in spec.get("tolerations") or [] if t not in tolerations)
        if psa.get("topologyAssignment"):
            template_meta = {
                "annotations": {c.ANNOTATION_TOPOLOGY_WORKLOAD: workload_name,
                                c.ANNOTATION_TOPOLOGY_PODSET: str(psa.get("name", ""))},
                "labels": {c.LABEL_TAS: c.LABEL_TAS_VALUE}}
    pod_patch: dict[str, Any] = {"nodeSelector": selector or None}
    if tolerations:
        pod_patch["tolerations"] = tolerations
    patched_template: dict[str, Any] = {"spec": pod_patch}
    if template_meta:
        patched_template["metadata"] = template_meta
    return {"metadata": {"resourceVersion": (job.get("metadata") or {}).get("resourceVersion")},
            "spec": {"suspend": False, "template": patched_template}}


def missing_priority_class(job: Mapping[str, Any], known: Mapping[str, Any]) -> str | None:
    """The pod template's priorityClassName when no such PriorityClass exists."""
    name = ((((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("priorityClassName"))
    return str(name) if name and name not in known else None


class JobReconciler:
    """See the module docstring. `notify(job_key)` on any Job or Workload change; `run()` until cancelled."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder,
                 on_cache_change: Callable[[], None] | None = None) -> None:
        self.cache = cache
        self.on_cache_change = on_cache_change
        """Called after this reconciler applied its own write to the cache (the admission loop must
        see a release at once: the watch event that follows carries the same version and is skipped)."""
        self.api = api
        self.recorder = recorder
        self._dirty: set[str] = set()
        self._active: set[str] = set()
        self._wake = asyncio.Event()
        self._refused: set[tuple[str, str]] = set()
        """(Job uid, PriorityClass) already reported missing: one Event, not one per change."""

    def notify(self, job_key: str) -> None:
        self._dirty.add(job_key)
        self._wake.set()

    def notify_workload(self, workload: Mapping[str, Any]) -> None:
        owner = owner_job_key(workload)
        if owner is not None:
            self.notify(owner)

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
            ready = [key for key in sorted(self._dirty) if key not in self._active]
            if not ready:
                self._wake.clear()
                await self._wake.wait()
                continue
            key = ready[0]
            self._dirty.discard(key)
            self._active.add(key)
            try:
                await self.reconcile(key)
            except ApiError as e:
                (log.debug if e.status == 409 else log.warning)("job %s: %s; retrying", key, e)
                await asyncio.sleep(0.2)
                self.notify(key)
            except Exception:  # one Job's bug must not stop the others
                log.exception("job %s: reconcile failed", key)
            finally:
                self._active.discard(key)
                self._wake.set()  # a change to this Job that waited for it, or an idle worker

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
            await self._create_workload(job, view)
        elif view.finished and not entry.finished:
            await self._finish(entry, view)
        elif entry.finished:
            return
        elif (admission := admission_of(entry.obj)) is not None:
            if view.suspend:
                await self._start(job, entry, admission)
        elif not entry.expecting and not view.suspend and not view.finished:
            await self._suspend(job)

    async def _create_workload(self, job: dict[str, Any], view: JobView) -> None:
        missing = missing_priority_class(job, self.cache.priority_classes)
        if missing is not None:
            if not view.suspend:
                await self._suspend(job)
            if (view.uid, missing) not in self._refused:
                self._refused.add((view.uid, missing))
                self.recorder.emit(job, c.EVENT_REASON_ERR_WORKLOAD_COMPOSE,
                                         f'priorityclasses.scheduling.k8s.io "{missing}" not found: '
                                         "no Workload is created and the Job stays suspended",
                                         c.EVENT_TYPE_WARNING)
            return
        classes, default = self.cache.priority_values()
        manifest = workload_from_job(job, classes, default)
        manifest["metadata"].pop("creationTimestamp", None)
        try:
            created = await retrying(lambda: self.api.create(WORKLOADS, view.namespace, manifest))
        except ApiError as e:
            if e.status == 409:
                return  # already there; its watch event follows
            raise
        self._applied(created)
        self.recorder.emit(job, c.EVENT_REASON_CREATED_WORKLOAD,
                                 f"Created Workload: {view.namespace}/{manifest['metadata']['name']}")

    async def _start(self, job: dict[str, Any], entry: WorkloadEntry, admission: Mapping[str, Any]) -> None:
        flavors = {name: flavor.spec.to_dict() for name, flavor in self.cache.flavors.items()}
        patch = pod_template_patch(job, entry.info.name, admission, flavors)
        meta = job["metadata"]
        try:
            patched = await retrying(lambda: self.api.merge_patch(JOBS, meta["namespace"], meta["name"], patch))
        except ApiError as e:
            if e.status == 404:
                return  # gone
            raise  # 409 too: `run` retries from the cache, which the watch refreshes meanwhile
        self.cache.upsert(c.KIND_JOB, patched)  # so a reconcile before the watch echo sees it started
        self.recorder.emit(job, c.EVENT_REASON_STARTED,
                                 f"Admitted by clusterQueue {admission.get('clusterQueue', '')}")

    async def _suspend(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"suspend": True}}
        try:
            patched = await retrying(lambda: self.api.merge_patch(JOBS, meta["namespace"], meta["name"], patch))
        except ApiError as e:
            if e.status == 404:
                return
            raise
        self.cache.upsert(c.KIND_JOB, patched)
        self.recorder.emit(job, c.EVENT_REASON_STOPPED, "No matching admission: the Job is suspended")

    async def _finish(self, entry: WorkloadEntry, view: JobView) -> None:
        succeeded = view.finished == c.CONDITION_JOB_COMPLETE
        message = "Job finished successfully" if succeeded else "Job failed"
        now = datetime.now(UTC)

        def change(model: Workload) -> bool:
            return not model.is_finished and mark_finished(model, succeeded, message, now)

        written = await write_workload_status(self.api, entry.obj, change)
        if written is not None:
            self._applied(written)
            self.recorder.emit(written, c.EVENT_REASON_FINISHED_WORKLOAD, message)

    def _applied(self, workload: Mapping[str, Any]) -> None:
        if self.cache.upsert(c.KIND_WORKLOAD, workload) and self.on_cache_change is not None:
            self.on_cache_change()

    async def _delete_workload(self, entry: WorkloadEntry) -> None:
        try:
            await retrying(lambda: self.api.delete(WORKLOADS, entry.info.namespace, entry.info.name))
        except ApiError as e:
            if e.status != 404:
                raise


def _owned_by(entry: WorkloadEntry, job: Mapping[str, Any]) -> bool:
    """The Workload belongs to this very Job (same uid), not to a deleted one of the same name."""
    uid = (job.get("metadata") or {}).get("uid")
    refs = (entry.obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("kind") == c.KIND_JOB and ref.get("uid") == uid for ref in refs)
