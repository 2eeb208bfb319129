"""Evicting admitted Workloads gracefully: the decision written, the Job stopped, then the release.

`Evictor.preempt` writes a victim's eviction for the admission loop (`Evictor.drain` that of a
Workload whose queue is stopped with HoldAndDrain, `Evictor.time_out` a PodsReady timeout);
`Evictor.release` gives its reservation back for the Job reconciler once no pod of its Job is left
(`Evictor` says how). Each step reads the API objects only, so a restarted or newly elected operator
carries on.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.workload import Workload
from controller.cache.cluster import ClusterCache, WorkloadEntry
from controller.core.admission.conditions import (
    is_evicted,
    is_terminating,
    mark_evicted,
    mark_eviction_done,
    mark_preempted,
    preemption_message,
)
from controller.core.admission.draining import Drain
from controller.core.admission.pods_ready import (
    mark_deactivation_target,
    mark_pods_ready_timeout,
    readiness_deadline,
    requeue_count,
    requeuing_exhausted,
    timeout_message,
)
from controller.kube.api import WORKLOADS, ApiError, KubeApi, retrying
from controller.kube.events import EventRecorder
from controller.kube.metrics import Metrics
from controller.kube.routing import Applied
from controller.kube.statuses import write_reserved_status, write_workload_status

log = logging.getLogger(__name__)

DRAIN_EVENTS = {c.REASON_LOCAL_QUEUE_STOPPED: c.EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED,
                c.REASON_CLUSTER_QUEUE_STOPPED: c.EVENT_REASON_EVICTED_CLUSTER_QUEUE_STOPPED}
"""A drain's Evicted reason -> the reason of the Event posted on its Workload."""


@dataclass(frozen=True, slots=True)
class Preemption:
    """One victim of a `Preempt` decision: evict `victim` (a Workload key) so that `preemptor`, of
    ClusterQueue `preempting_cluster_queue`, fits; `reason` is its Preempted reason."""

    victim: str
    preemptor: str
    preempting_cluster_queue: str
    reason: str


class Evictor:
    """Eviction in three steps; a Workload with Evicted=True and its admission still set is
    "terminating" (`conditions.is_terminating`) between the first and the last:
    1. `preempt` (the admission loop, for each victim of a `Preempt` decision): one
       resourceVersion-checked status write, Evicted=True reason Preempted and Preempted=True with
       its reason; the admission and QuotaReserved stay, so the victim's quota and nodes stay taken.
       Events (Kueue's): `Preempted` and `EvictedDueToPreempted` on the victim, `Preempted` on its
       Job, all naming the preemptor's Workload and Job; `PreemptedWorkload` on the preemptor.
       Metrics.
    2. The Job reconciler (controller.kube.job_reconciling) stops the victim's Job: suspended (the
       Job controller deletes its pods, each ending with its grace period), its template restored.
    3. `release`, called by the Job reconciler once no pod of the Job is left (its counters and the
       cache): QuotaReserved=False, Admitted=False, Requeued=True, no admission. The cache gives the
       quota and nodes back on that write and the admission loop wakes: the victim waits in its
       queue again and is admitted when room exists."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder,
                 applied: Applied | None = None, metrics: Metrics | None = None) -> None:
        self.cache = cache
        self.api = api
        self.recorder = recorder
        self.applied: Applied = applied if applied is not None else cache.upsert
        self.metrics = metrics

    def cluster_queue_path(self, name: str) -> str:
        """Kueue's path of a ClusterQueue in its preemption messages: `/cohort/queue`, `/queue` alone."""
        quota = self.cache.snapshot().cluster_queues.get(name)
        cohort = quota.cohort if quota is not None else None
        return f"/{cohort}/{name}" if cohort else f"/{name}"

    def preemption_message(self, preemption: Preemption, victim: WorkloadEntry) -> str:
        """The victim's Evicted/Preempted message, naming the preemptor's Workload and Job."""
        preemptor = self.cache.workloads.get(preemption.preemptor)
        owner = self.cache.owner_of_workload(preemptor.obj) if preemptor is not None else None
        job_key = owner[1] if owner is not None else None
        owners = preemptor.obj.metadata.owner_references if preemptor is not None else []
        job_uid = next((ref.uid for ref in owners if owner is not None and ref.kind == owner[0]), None)
        uid = preemptor.obj.metadata.uid if preemptor is not None else None
        admission = victim.admission
        preemptee_queue = admission.cluster_queue if admission is not None else ""
        return preemption_message(preemption.preemptor, uid or "", job_key, job_uid, preemption.reason,
                                  self.cluster_queue_path(preemption.preempting_cluster_queue),
                                  self.cluster_queue_path(preemptee_queue) if preemptee_queue else "")

    async def preempt(self, preemption: Preemption) -> bool:
        """Step 1 for one victim: write its eviction (nothing when it is gone, finished, no longer
        admitted or already being evicted); True when this call wrote it."""
        victim = self.cache.workloads.get(preemption.victim)
        if victim is None or victim.admission is None or victim.finished or is_evicted(victim.obj):
            return False
        message = self.preemption_message(preemption, victim)
        cluster_queue = victim.admission.cluster_queue
        now = datetime.now(UTC)
        written = await write_reserved_status(
            self.api, victim.obj, lambda model: mark_preempted(model, preemption.reason, message, now))
        if written is None:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        log.info("workload %s preempted by %s (%s): %s", preemption.victim, preemption.preemptor,
                 preemption.reason, message)
        self._report_preemption(preemption, written, message, cluster_queue)
        return True

    def _report_preemption(self, preemption: Preemption, written: Mapping[str, Any], message: str,
                           cluster_queue: str) -> None:
        """Events and metrics of a preemption just written (Kueue's)."""
        self.recorder.emit(written, c.EVENT_REASON_PREEMPTED, message)
        self.recorder.emit(written, c.EVENT_REASON_EVICTED_PREEMPTED, message)
        owner = self.cache.owner_of_workload_body(written)
        job = self.cache.owners[owner[0]].get(owner[1]) if owner is not None else None
        if job is not None:
            self.recorder.emit(job, c.EVENT_REASON_PREEMPTED, message)
        preemptor = self.cache.workloads.get(preemption.preemptor)
        if preemptor is not None:
            self.recorder.emit(preemptor.obj.to_dict(), c.EVENT_REASON_PREEMPTED_WORKLOAD,
                               f"Preempted workload {preemption.victim} (UID: "
                               f"{(written.get('metadata') or {}).get('uid', '')}) in ClusterQueue {cluster_queue}")
        if self.metrics is not None:
            self.metrics.preempted(preemption.preempting_cluster_queue, preemption.reason)
            self.metrics.evicted(cluster_queue, c.REASON_PREEMPTED)

    async def drain(self, drain: Drain) -> bool:
        """Step 1 for an admitted Workload of a queue stopped with HoldAndDrain (the admission loop
        decides which, controller.core.admission.draining): one resourceVersion-checked status
        write, Evicted=True reason LocalQueueStopped or ClusterQueueStopped; the Event
        `EvictedDueTo<reason>` on the Workload and `kueue_evicted_workloads_total`. Steps 2 and 3
        follow as for a preemption; once released it waits, held by its queue's stopPolicy. Nothing
        when it is gone, finished, no longer admitted or already being evicted; True when this call
        wrote it."""
        entry = self.cache.workloads.get(drain.key)
        if entry is None or entry.admission is None or entry.finished or is_evicted(entry.obj):
            return False
        now = datetime.now(UTC)
        written = await write_reserved_status(
            self.api, entry.obj, lambda model: mark_evicted(model, drain.reason, drain.message, now))
        if written is None:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        log.info("workload %s evicted (%s): %s", drain.key, drain.reason, drain.message)
        self.recorder.emit(written, DRAIN_EVENTS[drain.reason], drain.message)
        if self.metrics is not None:
            self.metrics.evicted(drain.cluster_queue, drain.reason)
        return True

    async def time_out(self, entry: WorkloadEntry, settings: WaitForPodsReady) -> bool:
        """waitForPodsReady's step 1 for an admitted Workload whose pods were not all ready in time
        (the admission loop decides when, controller.core.admission.pods_ready): one status write,
        Evicted=True reason PodsReadyTimeout with `status.requeueState` counted up and its requeueAt
        (Kueue's backoff); the Event `EvictedDueToPodsReadyTimeout` and
        `kueue_evicted_workloads_total{reason="PodsReadyTimeout"}`. Steps 2 and 3 follow as for a
        preemption. Once `backoffLimitCount` requeues are used up it is deactivated instead
        (`_deactivate_for_limit`). True when this call wrote something."""
        if requeuing_exhausted(entry.obj, settings):
            return await self._deactivate_for_limit(entry)
        key = entry.info.key
        cluster_queue = entry.admission.cluster_queue if entry.admission is not None else ""
        now = datetime.now(UTC)
        wrote = [False]

        def change(model: Workload) -> bool:
            wrote[0] = (readiness_deadline(model, settings) is not None
                        and mark_pods_ready_timeout(model, key, settings, now))
            return wrote[0]

        written = await write_workload_status(self.api, entry.obj, change)
        if written is None or not wrote[0]:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        message = timeout_message(key)
        state = (written.get("status") or {}).get("requeueState") or {}
        log.info("workload %s: %s; evicted, requeue %s at %s", key, message, state.get("count"), state.get("requeueAt"))
        self.recorder.emit(written, c.EVENT_REASON_EVICTED_PODS_READY_TIMEOUT, message)
        if self.metrics is not None and cluster_queue:
            self.metrics.evicted(cluster_queue, c.REASON_PODS_READY_TIMEOUT)
        return True

    async def _deactivate_for_limit(self, entry: WorkloadEntry) -> bool:
        """Kueue's end of the requeues: DeactivationTarget=True reason RequeuingLimitExceeded, then
        `spec.active: false` (resourceVersion-checked); the Job reconciler evicts a deactivated
        Workload (reason Deactivated, its message naming the limit). True when written."""
        now = datetime.now(UTC)
        written = await write_workload_status(self.api, entry.obj, lambda model: mark_deactivation_target(model, now))
        if written is None:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        meta = written.get("metadata") or {}
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {"active": False}}
        try:
            deactivated = await retrying(functools.partial(self.api.merge_patch, WORKLOADS, entry.info.namespace,
                                                           entry.info.name, patch))
        except ApiError as e:
            if e.not_found or e.conflict:  # gone, or changed meanwhile: decided again from the newer one
                return False
            raise
        self.applied(c.KIND_WORKLOAD, deactivated)
        log.info("workload %s: its pods were not ready in time and it was requeued %d time(s), the limit: "
                 "deactivated", entry.info.key, requeue_count(entry.obj))
        return True

    async def release(self, entry: WorkloadEntry) -> bool:
        """Step 3: the terminating Workload's Job is stopped and its pods are gone; give its
        reservation back (`mark_eviction_done`). True when this call wrote it."""
        if not is_terminating(entry.obj):
            return False
        now = datetime.now(UTC)
        wrote = [False]

        def change(model: Workload) -> bool:
            wrote[0] = is_terminating(model) and mark_eviction_done(model, now)
            return wrote[0]

        written = await write_workload_status(self.api, entry.obj, change)
        if written is None or not wrote[0]:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        log.info("workload %s: evicted, its pods are gone; its quota is released and it waits in its queue again",
                 entry.info.key)
        return True
