"""The plain-pod integration: a queued pod group's Workload, and the pods following it.

For each changed group (keyed by its Workload, `namespace/name`; a single pod is a group of one):
while no Workload exists, wait until every pod the total count announces exists, refuse a group
whose pods disagree (a Warning Event on each disagreeing pod, no Workload), then create the
Workload (controller.core.jobs.pod_group builds it). Once admitted, start the gated pods the
admission covers (one patch per pod: the admission gate goes, the flavors' nodeSelector and
tolerations come, a topology pod set keeps the topology gate for the TopologyUngater); mark the
Workload Finished when the group is (Kueue's rule); on eviction delete the group's pods (pods
cannot be suspended) and release the reservation once none is left. The Workload goes with its
pods (they own it). Leader only; a failed reconcile is re-queued with backoff. Started by
controller.kube.operating, whose EventRouter wakes it for managed pods and pod-owned Workloads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.workload import Admission, Workload
from controller.cache.cluster import ClusterCache, WorkloadEntry
from controller.core.admission.conditions import is_terminating, mark_finished
from controller.core.jobs import pod_group
from controller.core.jobs.framework import Finished, pod_set_infos
from controller.core.jobs.pod_group import PodGroup
from controller.kube.api import PODS, WORKLOADS, ApiError, KubeApi, retrying
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor
from controller.kube.requeuing import WorkQueue
from controller.kube.routing import Applied
from controller.kube.statuses import write_workload_status

log = logging.getLogger(__name__)

PARALLEL_RECONCILES = 8
PARALLEL_POD_WRITES = 16
"""Pod patches or deletions of one group in flight at once."""


def owned_by_pods(workload: Workload) -> bool:
    """A Workload of the plain-pod integration: every owner is a Pod (a Job's or JobSet's is theirs)."""
    owners = workload.metadata.owner_references
    return bool(owners) and all(ref.kind == c.KIND_POD for ref in owners)


class PodGroupReconciler:
    """See the module docstring. `notify(workload_key)` on any change of a group's pods or Workload."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder, applied: Applied | None = None,
                 evictor: Evictor | None = None) -> None:
        self.cache = cache
        self.api = api
        self.recorder = recorder
        self.applied: Applied = applied if applied is not None else cache.upsert
        self.evictor = evictor if evictor is not None else Evictor(cache, api, recorder, self.applied)
        self._queue: WorkQueue[str] = WorkQueue(self.reconcile, log, lambda key: f"pod group {key}",
                                                PARALLEL_RECONCILES)
        self._reported: set[tuple[str, str]] = set()
        """(pod uid, message) of a conflict already reported: one Event, not one per change."""
        self._writes = asyncio.Semaphore(PARALLEL_POD_WRITES)

    def notify(self, key: str) -> None:
        self._queue.notify(key)

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """`PARALLEL_RECONCILES` workers; one group is never reconciled by two at once."""
        await self._queue.run(leading)

    async def reconcile(self, key: str) -> None:
        """Phase dispatch for one group: decide from the cache which single step it needs."""
        pods = self.cache.group_members(key)
        entry = self.cache.workloads.get(key)
        if entry is not None and not owned_by_pods(entry.obj):
            return  # a Workload of another integration
        if not pods:
            if entry is not None and entry.admission is not None and is_terminating(entry.obj):
                await self.evictor.release(entry)  # evicted and its pods gone (unless GC took it first)
            return  # else its Workload goes with its owners (the garbage collector)
        group = pod_group.assemble(pods)
        if entry is None:
            await self._create_when_complete(group)
        elif entry.finished:
            return
        elif (admission := entry.admission) is not None:
            if is_terminating(entry.obj):
                await self._evict(group, entry)
            elif (finish := pod_group.finished(group)) is not None:
                await self._finish(entry, finish)
            else:
                await self._start(group, entry, admission)

    async def _create_when_complete(self, group: PodGroup) -> None:
        """Refuse a group whose pods disagree (an Event per conflict, once); wait while pods are
        missing (a pod event brings the group back); then create its Workload."""
        if group.conflicts:
            by_name = {pod_group.pod_name(p): p for p in group.pods}
            for conflict in group.conflicts:
                pod = by_name.get(conflict.pod, group.pods[0])
                uid = str((pod.get("metadata") or {}).get("uid") or "")
                if (uid, conflict.message) not in self._reported:
                    self._reported.add((uid, conflict.message))
                    self.recorder.emit(pod, c.EVENT_REASON_ERR_WORKLOAD_COMPOSE,
                                       f"{conflict}: no Workload is created for group {group.workload_name}",
                                       c.EVENT_TYPE_WARNING)
            return
        if not group.complete:
            log.debug("%s", group.waiting_message)
            return
        classes, default = self.cache.priority_values()
        workload_classes = {name: wpc.value for name, wpc in self.cache.workload_priority_classes.items()}
        manifest = pod_group.workload_from_pod_group(group, classes, default, workload_classes)
        try:
            created = await retrying(lambda: self.api.create(WORKLOADS, group.namespace, manifest))
        except ApiError as e:
            if e.conflict:
                return  # already there; its watch event follows
            raise
        self.applied(c.KIND_WORKLOAD, created)
        self.recorder.emit(group.members[0], c.EVENT_REASON_CREATED_WORKLOAD,
                           f"Created Workload: {group.namespace}/{group.workload_name}")

    async def _start(self, group: PodGroup, entry: WorkloadEntry, admission: Admission) -> None:
        """Patch every gated pod the admission covers (`pod_group.pods_to_start`), in parallel."""
        todo = pod_group.pods_to_start(group, admission)
        if not todo:
            return
        flavors = {name: flavor.spec.to_dict() for name, flavor in self.cache.flavors.items()}
        infos = {info.name: info for info in pod_set_infos(entry.info.name, admission, flavors)}

        async def start(pod: Mapping[str, Any]) -> None:
            info = infos.get(pod_group.pod_set_name(pod))
            if info is None:
                return
            patch = pod_group.start_patch(pod, info)
            name = pod_group.pod_name(pod)
            async with self._writes:
                try:
                    patched = await retrying(lambda: self.api.merge_patch(PODS, group.namespace, name, patch))
                except ApiError as e:
                    if e.not_found:
                        return
                    raise  # 409 too: retried from the cache, which the watch refreshes meanwhile
            self.applied(c.KIND_POD, patched)
        await asyncio.gather(*(start(p) for p in todo))
        self.recorder.emit(entry.obj.to_dict(), c.EVENT_REASON_STARTED,
                           f"Admitted by clusterQueue {admission.cluster_queue}: {len(todo)} pods ungated")

    async def _evict(self, group: PodGroup, entry: WorkloadEntry) -> None:
        """Carry out a decided eviction: delete the group's pods; once none is left in the cache (a
        deleted pod counts until its deletion is seen), release the reservation. A restart in
        between redoes what is left."""
        stop = pod_group.pods_to_stop(group)

        async def delete(pod: Mapping[str, Any]) -> None:
            name = pod_group.pod_name(pod)
            async with self._writes:
                try:
                    await retrying(lambda: self.api.delete(PODS, group.namespace, name))
                except ApiError as e:
                    if not e.not_found:
                        raise
        if stop:
            evicted = entry.obj.condition(c.CONDITION_EVICTED)
            await asyncio.gather(*(delete(p) for p in stop))
            self.recorder.emit(entry.obj.to_dict(), c.EVENT_REASON_STOPPED,
                               evicted.message if evicted is not None else "The workload is evicted")
            return  # the pods' deletions bring the group back here
        if pod_group.pods_left(group) == 0:
            await self.evictor.release(entry)

    async def _finish(self, entry: WorkloadEntry, finish: Finished) -> None:
        now = datetime.now(UTC)

        def change(model: Workload) -> bool:
            return not model.is_finished and mark_finished(model, finish.succeeded, finish.message, now)

        written = await write_workload_status(self.api, entry.obj, change)
        if written is not None:
            self.applied(c.KIND_WORKLOAD, written)
            self.recorder.emit(written, c.EVENT_REASON_FINISHED_WORKLOAD, finish.message)
