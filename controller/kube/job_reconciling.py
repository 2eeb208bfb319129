"""The generic job reconciler: a queue-labelled object of an integrated kind, its Workload, and the
object following it (stopped, started, restored, finished). Each kind is a pure adapter, picked by
kind: a single-object kind's (controller.core.jobs `GenericJob`: a Job, a JobSet) from the cache's
integrations, a composable kind's (`ComposableJob`: a plain pod group, whose members the cache
files under the group's Workload key) from the registry; this module owns the state machine and
the writes for both. Leader only; started by controller.kube.operating, whose EventRouter wakes it
and takes every object and Workload it writes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.workload import Admission, Workload
from controller.cache.cluster import ClusterCache, OwnerKey, WorkloadEntry
from controller.core.admission.conditions import (
    deactivation_message,
    is_terminating,
    mark_deactivated,
    mark_finished,
)
from controller.core.admission.pods_ready import mark_pods_ready
from controller.core.jobs.framework import (
    ComposableJob,
    Finished,
    GenericJob,
    MemberWrite,
    controller_kind,
    missing_priority_class,
    pod_set_infos,
    stopped,
    workload_manifest,
    workload_owner_refs,
)
from controller.core.jobs.integrations import COMPOSABLE_INTEGRATIONS
from controller.kube.api import WORKLOADS, ApiError, KubeApi, retrying
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor
from controller.kube.requeuing import WorkQueue
from controller.kube.routing import Applied
from controller.kube.statuses import write_workload_status

log = logging.getLogger(__name__)

PARALLEL_RECONCILES = 128
"""Owners reconciled at once. A reconcile mostly waits for the API server (a Workload create, a Job
patch): with 16, a 1,000-Job burst on a busy API server (each create answered in 100-300 ms) got
its Workloads at about 120 a second, behind the Jobs' creation; 128 kept pace better than 64
(bench/RESULTS.md, "operator")."""
PARALLEL_MEMBER_WRITES = 16
"""Writes to the members of one composable job (pod patches, deletions) in flight at once."""


def _integrated_resource(adapter: GenericJob) -> tuple[str, str]:
    """The kind's (apiVersion, plural), as KubeApi addresses it."""
    return adapter.gvk.api_version, adapter.gvk.plural


def was_admitted(workload: Workload) -> bool:
    """The Workload held an admission at some time: it has an Admitted condition (True, or False
    since the reservation went). A Workload never admitted has none, so its Job was never started
    and its template is left as its author keeps it."""
    return workload.condition(c.CONDITION_ADMITTED) is not None


class JobReconciler:
    """The state machine, read from the cache through each kind's adapter. For each changed owner
    (kind, key), or its Workload or pods: one found running without an admission (created while the
    webhook configurations were absent, or unsuspended by someone else) is stopped first
    (suspended, its pods gone, what the run left cleared) and only then gets its Workload (Kueue's
    name and owner reference), so the admission loop never sees a Workload whose object runs pods
    tasq did not place; refuse one whose PriorityClass, or the WorkloadPriorityClass its label
    names, is missing (an Event, it stays suspended); on admission apply the adapter's run patch
    (the flavors' nodeSelector and tolerations, the topology annotations, tasq's label and the
    topology scheduling gate per pod set) and unsuspend; suspend one whose Workload lost its
    admission and put back the pod templates the Workload recorded at creation; stop the object of
    an evicted Workload (Evicted=True, admission still held: a preemption victim) the same way and,
    once its pods are gone, release its reservation (controller.kube.evicting); evict a deactivated
    Workload (`spec.active: false`) the same way, then release its reservation; mark the Workload
    Finished when the object ends; delete it when the object is gone. A reconcile that fails in any
    way (refused, a dropped connection, a bug) is re-queued with backoff (controller.kube.requeuing).
    A composable kind's job (a pod group, keyed by its Workload) goes through the same states with
    writes to each member instead of a suspend flag (`_reconcile_group`).
    `notify(key, kind)` on any change of the object, its Workload or its pods; `run()` until cancelled."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder,
                 applied: Applied | None = None, evictor: Evictor | None = None,
                 pods_ready: WaitForPodsReady | None = None,
                 composables: Sequence[ComposableJob[Any]] = COMPOSABLE_INTEGRATIONS) -> None:
        self.cache = cache
        self.pods_ready = pods_ready
        """waitForPodsReady's settings (None: off): a running admitted object's readiness (its
        adapter's `pods_ready`) is recorded in its Workload's PodsReady condition (`_record_pods_ready`)."""
        self.adapters: Mapping[str, GenericJob] = {job.gvk.kind: job for job in cache.integrations}
        """Kind -> its adapter (the cache's integrations): every read, patch and manifest of an
        integrated object comes from its adapter; this module holds the state machine and the writes."""
        self.integrated_kinds = frozenset((job.gvk.group, job.gvk.kind) for job in cache.integrations)
        """(API group, kind) of every single-object integration: an object one of them controls (a
        JobSet's child Job) is its controller's job, never reconciled as one of its own."""
        self.composables: Mapping[str, ComposableJob[Any]] = {job.gvk.kind: job for job in composables}
        """Kind -> the adapter of a composable kind (a pod group): its owner key is its Workload's key."""
        self.applied: Applied = applied if applied is not None else cache.upsert
        """Where every Job and Workload this reconciler wrote goes (the operator's
        `EventRouter.applied`): into the cache at once, so the next reconcile sees it and the
        admission loop sees a release at once (the watch echo then carries a known version and is
        skipped), waking the loops the change concerns."""
        self.evictor = evictor if evictor is not None else Evictor(cache, api, recorder, self.applied)
        """Releases an evicted Workload's reservation once its Job is stopped and its pods are gone."""
        self.api = api
        self.recorder = recorder
        self._queue: WorkQueue[OwnerKey] = WorkQueue(lambda owner: self.reconcile(owner[1], owner[0]), log,
                                                     lambda owner: f"{owner[0].lower()} {owner[1]}",
                                                     PARALLEL_RECONCILES)
        """Changed owners (kind, key): `PARALLEL_RECONCILES` workers, a failed reconcile re-queued
        after its backoff."""
        self._found_running: set[OwnerKey] = set()
        """Jobs this reconciler suspended because they ran with no Workload: their Workload waits
        for the Job controller to acknowledge the suspension (`_stopped_for_good`)."""
        self._refused: set[tuple[str, str]] = set()
        """(Job uid, what is missing) already reported: one Event, not one per change."""
        self._member_writes = asyncio.Semaphore(PARALLEL_MEMBER_WRITES)

    def notify(self, key: str, kind: str = c.KIND_JOB) -> None:
        """The owner `key` of `kind` (a Job), or its Workload or one of its pods, changed."""
        self._queue.notify((kind, key))

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """`PARALLEL_RECONCILES` workers take changed owners as they come (one owner is never
        reconciled by two workers at once: a change arriving meanwhile runs it again afterwards)."""
        await self._queue.run(leading)

    async def reconcile(self, key: str, kind: str = c.KIND_JOB) -> None:
        """Phase dispatch for one owner (`key` of the integrated `kind`, a Job by default): decide
        from the cache which single step it needs."""
        if kind in self.composables:
            await self._reconcile_group(self.composables[kind], key)
            return
        adapter = self.adapters[kind]
        owner = (kind, key)
        job = self.cache.owners.get(kind, {}).get(key)
        wl_key = self.cache.workload_of.get(owner)
        entry = self.cache.workloads.get(wl_key) if wl_key is not None else None
        if entry is not None and (job is None or not adapter.owns(job, workload_owner_refs(entry.obj))):
            await self._delete_workload(entry)
            return
        if job is None:
            self._found_running.discard(owner)  # deleted before its suspension was acknowledged
            return
        if not adapter.queue_name(job) or controller_kind(job) in self.integrated_kinds:
            return
        finished = adapter.finished(job)
        if entry is None:
            if finished is not None or self._stopped_for_good(adapter, job, owner):
                await self._create_workload(adapter, job)
            else:
                await self._stop_unadmitted(adapter, job, owner)
        elif finished is not None and not entry.finished:
            await self._finish(entry, finished)
        elif entry.finished:
            return
        elif (admission := entry.admission) is not None:
            if is_terminating(entry.obj):
                await self._evict(adapter, job, entry, owner)
            elif not entry.active:
                await self._deactivate(adapter, job, entry, owner)
            elif adapter.is_suspended(job) and adapter.pods_left(job) == 0 and not self.cache.live_pods_of.get(owner):
                # else an event of it or of its pods brings it back
                await self._start(adapter, job, entry, admission)
            elif self.pods_ready is not None and not adapter.is_suspended(job):
                await self._record_pods_ready(adapter.pods_ready(job), entry)
        elif not adapter.is_suspended(job) and finished is None and not was_admitted(entry.obj):
            await self._discard_workload(entry)
        elif not entry.expecting and finished is None:
            await self._stop(adapter, job, entry)

    def _stopped_for_good(self, adapter: GenericJob, job: Mapping[str, Any], owner: OwnerKey) -> bool:
        """The Job may get its Workload: stopped (`framework.stopped`), no live pod of it in the cache, and,
        for a Job this reconciler found running and suspended, the Job controller has acknowledged
        the suspension (its Suspended condition): until it has, pods it created just before the
        suspension may not show in the Job's counters or the cache yet."""
        if not stopped(adapter, job) or self.cache.live_pods_of.get(owner):
            return False
        if owner in self._found_running and not adapter.suspension_acknowledged(job):
            return False
        self._found_running.discard(owner)
        return True

    async def _stop_unadmitted(self, adapter: GenericJob, job: dict[str, Any], owner: OwnerKey) -> None:
        """Phases of stopping a Job found running with no Workload, each decided from the Job as it
        is (a restart between them resumes): 1. suspend it; 2. wait until the Job controller counts
        no pod left, in its counters and in the cache (a Job or pod event brings it back here);
        3. clear the startTime, as Kueue does when it stops a Job; 4. for a Job it suspended here,
        wait for the Job controller's Suspended condition (`_stopped_for_good`). Its template is its author's (tasq never started it), so
        nothing is restored. Then `reconcile` creates the Workload."""
        if not adapter.is_suspended(job):
            self._found_running.add(owner)
            await self._suspend(adapter, job, f"Not admitted by a ClusterQueue: the {adapter.gvk.kind} is suspended until its Workload is admitted")
            return
        if adapter.pods_left(job) > 0 or self.cache.live_pods_of.get(owner):
            return  # a Job or pod event brings it back
        cleared = adapter.clear_start_patch(job)
        if cleared is None:
            return  # stopped, but not yet acknowledged by the Job controller: its Job event brings it back
        meta = job["metadata"]
        try:
            written = await retrying(lambda: self.api.merge_patch(_integrated_resource(adapter), meta["namespace"], meta["name"],
                                                                  cleared, "status"))
        except ApiError as e:
            if e.not_found:
                return
            raise  # a conflict too: `run` retries from the cache, which the watch refreshes meanwhile
        self.applied(adapter.gvk.kind, written)
        self.notify(owner[1], owner[0])  # the watch echo of our own write is skipped: go on to the Workload

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

    async def _create_workload(self, adapter: GenericJob, job: dict[str, Any]) -> None:
        missing = missing_priority_class(adapter, job, self.cache.priority_classes,
                                         self.cache.workload_priority_classes)
        meta = job.get("metadata") or {}
        if missing is not None:
            if not adapter.is_suspended(job):
                await self._suspend(adapter, job)
            reason, message = missing
            uid = str(meta.get("uid", ""))
            if (uid, message) not in self._refused:
                self._refused.add((uid, message))
                self.recorder.emit(job, reason, f"{message}: no Workload is created and the {adapter.gvk.kind} stays suspended",
                                   c.EVENT_TYPE_WARNING)
            return
        classes, default = self.cache.priority_values()
        workload_classes = {name: wpc.value for name, wpc in self.cache.workload_priority_classes.items()}
        manifest = workload_manifest(adapter, job, classes, default, workload_classes)
        manifest["metadata"].pop("creationTimestamp", None)
        await self._create(manifest, job)

    async def _create(self, manifest: dict[str, Any], about: Mapping[str, Any]) -> None:
        """Create the Workload `manifest`; the CreatedWorkload Event goes on `about` (the object, or
        the group's first member). One already there is left (its watch event follows)."""
        namespace = manifest["metadata"]["namespace"]
        try:
            created = await retrying(lambda: self.api.create(WORKLOADS, namespace, manifest))
        except ApiError as e:
            if e.conflict:
                return  # already there; its watch event follows
            raise
        self.applied(c.KIND_WORKLOAD, created)
        self.recorder.emit(about, c.EVENT_REASON_CREATED_WORKLOAD,
                           f"Created Workload: {namespace}/{manifest['metadata']['name']}")

    async def _start(self, adapter: GenericJob, job: dict[str, Any], entry: WorkloadEntry, admission: Admission) -> None:
        flavors = {name: flavor.spec.to_dict() for name, flavor in self.cache.flavors.items()}
        patch = adapter.run_patch(job, pod_set_infos(entry.info.name, admission, flavors))
        meta = job["metadata"]
        try:
            patched = await retrying(lambda: self.api.merge_patch(_integrated_resource(adapter), meta["namespace"], meta["name"], patch))
        except ApiError as e:
            if e.not_found:
                return  # gone
            raise  # 409 too: `run` retries from the cache, which the watch refreshes meanwhile
        self.applied(adapter.gvk.kind, patched)  # so a reconcile before the watch echo sees it started
        self.recorder.emit(job, c.EVENT_REASON_STARTED,
                                 f"Admitted by clusterQueue {admission.cluster_queue}")

    async def _suspend(self, adapter: GenericJob, job: dict[str, Any], message: str | None = None,
                       ) -> dict[str, Any] | None:
        """Suspend it (the adapter's suspend patch); the object as written, None when it is gone.
        `message`: the Stopped Event's, by default that no admission matches."""
        meta = job["metadata"]
        patch = adapter.suspend_patch(job)
        try:
            patched = await retrying(lambda: self.api.merge_patch(_integrated_resource(adapter), meta["namespace"], meta["name"], patch))
        except ApiError as e:
            if e.not_found:
                return None
            raise
        self.applied(adapter.gvk.kind, patched)
        self.recorder.emit(job, c.EVENT_REASON_STOPPED,
                           message or f"No matching admission: the {adapter.gvk.kind} is suspended")
        return patched

    async def _stop(self, adapter: GenericJob, job: dict[str, Any], entry: WorkloadEntry, message: str | None = None) -> bool:
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
        if not adapter.is_suspended(job):
            current = await self._suspend(adapter, job, message)
        if current is None or not was_admitted(entry.obj):
            return True
        restore = adapter.restore_patch(current, entry.obj.spec.pod_sets)
        if restore is None:
            return True
        if adapter.pods_active(current) > 0:
            return False
        meta = current["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            if (cleared := adapter.clear_start_patch(current)) is not None:
                current = await retrying(lambda: self.api.merge_patch(_integrated_resource(adapter), namespace, name, cleared, "status"))
                restore["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            restored = await retrying(lambda: self.api.merge_patch(_integrated_resource(adapter), namespace, name, restore))
        except ApiError as e:
            if e.not_found:
                return True
            raise  # 409 too: `run` retries from the cache, which the watch refreshes meanwhile
        self.applied(adapter.gvk.kind, restored)
        return True

    async def _evict(self, adapter: GenericJob, job: dict[str, Any], entry: WorkloadEntry, owner: OwnerKey) -> None:
        """Carry out a decided eviction (Evicted=True, admission held): stop the Job (`_stop`), wait
        until no pod of it is left, in the Job's counters (active and terminating) and in the cache
        (a deleted pod runs until its grace period ends; its deletion brings this back here), then
        release the reservation (`Evictor.release`). Until then the Workload keeps its quota and
        nodes, so no preemptor lands on capacity its pods still use. A restart in between redoes
        what is left."""
        evicted = entry.obj.condition(c.CONDITION_EVICTED)
        if not await self._stop(adapter, job, entry, evicted.message if evicted is not None else None):
            return
        current = self.cache.owners.get(owner[0], {}).get(owner[1], job)
        if adapter.pods_left(current) > 0 or self.cache.live_pods_of.get(owner):
            return  # a Job or pod event brings it back
        await self.evictor.release(entry)

    async def _deactivate(self, adapter: GenericJob, job: dict[str, Any], entry: WorkloadEntry,
                          owner: OwnerKey) -> None:
        """Evict a Workload whose `spec.active` is false: stop its Job (`_stop`), wait until no pod
        of it is left (as `_evict`), then release the reservation in one status write (Kueue's
        Deactivated eviction). A restart in between redoes what is left: the Workload keeps its
        admission (and its quota) until the Job is stopped and its pods are gone."""
        if not await self._stop(adapter, job, entry):
            return
        current = self.cache.owners.get(owner[0], {}).get(owner[1], job)
        if adapter.pods_left(current) > 0 or self.cache.live_pods_of.get(owner):
            return  # a pod in its grace period still runs: a Job or pod event brings it back
        await self._release_deactivated(entry)

    async def _release_deactivated(self, entry: WorkloadEntry) -> None:
        """The deactivated Workload's job is stopped and its pods are gone: release its reservation
        in one status write (Kueue's Deactivated eviction)."""
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

    async def _record_pods_ready(self, ready: bool, entry: WorkloadEntry) -> None:
        """PodsReady from the adapter's `pods_ready` (`ready`), written only when it changes
        (controller.core.admission.pods_ready.mark_pods_ready: WaitForStart, Started,
        WaitForRecovery, Recovered)."""
        now = datetime.now(UTC)
        wrote = [False]

        def change(model: Workload) -> bool:
            wrote[0] = model.reserved_admission is not None and mark_pods_ready(model, ready, now)
            return wrote[0]

        written = await write_workload_status(self.api, entry.obj, change)
        if written is not None and wrote[0]:
            self.applied(c.KIND_WORKLOAD, written)

    async def _finish(self, entry: WorkloadEntry, finished: Finished) -> None:
        succeeded, message = finished.succeeded, finished.message
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


    # -- composable kinds (a pod group): many members, one Workload ---------------------------------

    async def _reconcile_group(self, adapter: ComposableJob[Any], key: str) -> None:
        """Phase dispatch for one composable job (`key`: its Workload's): the same states as a
        single object's, with run and stop done by writes to each member. Members whose end the
        Workload no longer needs lose their finalizer first; excess members are deleted; then: no
        Workload yet -> refuse a disagreeing group, wait for a missing member, or create it;
        admitted -> stop an evicted or deactivated group (its members deleted) and release the
        reservation once none is left, mark it Finished when the group is, or start the members
        the admission covers and record PodsReady."""
        members = self.cache.group_members(key)
        entry = self.cache.workloads.get(key)
        if entry is not None and not adapter.owns_workload(workload_owner_refs(entry.obj)):
            return  # a Workload of another integration
        if not members:
            if entry is not None and entry.admission is not None and is_terminating(entry.obj):
                await self.evictor.release(entry)  # evicted and its members gone (unless GC took it first)
            elif entry is not None and entry.admission is not None and not entry.active:
                await self._release_deactivated(entry)
            return  # else its Workload goes with its members (the garbage collector)
        group = adapter.load(members)
        namespace = key.partition("/")[0]
        released = adapter.release_writes(group, entry is not None, entry is not None and entry.finished)
        if await self._write_members(adapter, namespace, released):
            return  # the finalizers' removal brings the group back
        if entry is None:
            await self._create_group_workload(adapter, group)
            return
        excess = adapter.excess_writes(group)
        if excess and await self._write_members(adapter, namespace, excess):
            self.recorder.emit(adapter.event_object(group), c.EVENT_REASON_EXCESS_PODS_DELETED,
                               f"Deleted {len(excess)} pods beyond the group's count: "
                               + ", ".join(w.name for w in excess), c.EVENT_TYPE_WARNING)
        if entry.finished:
            return
        if (admission := entry.admission) is None:
            return
        if is_terminating(entry.obj) or not entry.active:
            await self._stop_group(adapter, group, entry)
        elif (finish := adapter.finished(group)) is not None:
            await self._finish(entry, finish)
        else:
            await self._start_group(adapter, group, entry, admission)
            if self.pods_ready is not None:
                await self._record_pods_ready(adapter.pods_ready(group, admission), entry)

    async def _create_group_workload(self, adapter: ComposableJob[Any], group: Any) -> None:
        """Refuse a group whose members disagree (an Event per conflict, once); wait while members
        are missing (a member's event brings the group back); then create its Workload."""
        refusals = adapter.refusals(group)
        if refusals:
            for member, message in refusals:
                uid = str((member.get("metadata") or {}).get("uid") or "")
                if (uid, message) not in self._refused:
                    self._refused.add((uid, message))
                    self.recorder.emit(member, c.EVENT_REASON_ERR_WORKLOAD_COMPOSE, message, c.EVENT_TYPE_WARNING)
            return
        waiting = adapter.waiting(group)
        if waiting is not None:
            log.debug("%s", waiting)
            return
        classes, default = self.cache.priority_values()
        workload_classes = {name: wpc.value for name, wpc in self.cache.workload_priority_classes.items()}
        await self._create(adapter.workload_manifest(group, classes, default, workload_classes),
                           adapter.event_object(group))

    async def _start_group(self, adapter: ComposableJob[Any], group: Any, entry: WorkloadEntry,
                           admission: Admission) -> None:
        """Start every member the admission covers that has not started (the adapter's run writes)."""
        flavors = {name: flavor.spec.to_dict() for name, flavor in self.cache.flavors.items()}
        todo = adapter.run_writes(group, admission, pod_set_infos(entry.info.name, admission, flavors))
        if await self._write_members(adapter, entry.info.namespace, todo):
            self.recorder.emit(entry.obj.to_dict(), c.EVENT_REASON_STARTED,
                               f"Admitted by clusterQueue {admission.cluster_queue}: {len(todo)} pods ungated")

    async def _stop_group(self, adapter: ComposableJob[Any], group: Any, entry: WorkloadEntry) -> None:
        """Carry out a decided eviction or a deactivation: delete the running members; once none
        is left in the cache (a deleted pod counts until its deletion is seen, or its end while a
        finalizer holds it), release the reservation. A restart in between redoes what is left."""
        stop = adapter.stop_writes(group)
        if stop:
            await self._write_members(adapter, entry.info.namespace, stop)
            evicted = entry.obj.condition(c.CONDITION_EVICTED)
            message = (evicted.message if evicted is not None and is_terminating(entry.obj)
                       else deactivation_message(entry.obj) if not entry.active else "The workload is evicted")
            self.recorder.emit(entry.obj.to_dict(), c.EVENT_REASON_STOPPED, message)
            return  # the members' deletions bring the group back here
        if adapter.pods_left(group) > 0:
            return
        if is_terminating(entry.obj):
            await self.evictor.release(entry)
        else:
            await self._release_deactivated(entry)

    async def _write_members(self, adapter: ComposableJob[Any], namespace: str, writes: Sequence[MemberWrite]) -> bool:
        """Send the member writes in parallel (a member already gone is skipped; a conflict fails
        the reconcile, retried from the cache the watch refreshes meanwhile); each patched member
        goes to the cache. True when there were any."""
        resource = (adapter.gvk.api_version, adapter.gvk.plural)

        async def write(item: MemberWrite) -> None:
            async with self._member_writes:
                try:
                    if item.patch is None:
                        await retrying(lambda: self.api.delete(resource, namespace, item.name))
                        return
                    patch = item.patch
                    patched = await retrying(lambda: self.api.merge_patch(resource, namespace, item.name, patch))
                except ApiError as e:
                    if e.not_found:
                        return
                    raise
            self.applied(adapter.gvk.kind, patched)
        await asyncio.gather(*(write(w) for w in writes))
        return bool(writes)
