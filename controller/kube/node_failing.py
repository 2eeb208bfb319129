"""Failed-node replacement for admitted Workloads (Kueue's TASFailedNodeReplacement, several nodes at once).

The operator's EventRouter calls `node_changed` on every Node event (the Workloads whose assignment
names that host are looked at again) and `workload_changed` on every Workload event; a not-Ready
host's grace period ends on a timer, never by polling. For a Workload with failed hosts (pure
detection: controller.core.topology.node_failures), in steps each read back from the API objects so
a restarted or newly elected leader carries on:
1. `status.unhealthyNodes` records the failed hosts (Kueue's field);
2. the pure search (controller.core.topology.replacing) finds replacement hosts in each failed host's
   rack, up to the required level's domain; the repaired TopologyAssignment (compact form) and the
   emptied unhealthyNodes go in one resourceVersion-checked write, with a `NodeReplaced` Event per
   failed host. The cache then holds the replacement's capacity and gives the failed host's back;
   or, with no replacement, the Workload is evicted (Evicted=True reason NodeFailures, Kueue's
   message naming the hosts) and the Job reconciler stops and requeues it (controller.kube.evicting);
3. the Workload's pods on the failed hosts are deleted at once (grace period 0: no kubelet confirms
   their end), so the Job controller creates new ones, which the TopologyUngater releases onto the
   replacement hosts. Pods on healthy hosts are never touched. Acts only while the leader gate is set.
Built by controller.kube.operating.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.api import constants as c
from controller.api.meta import object_key
from controller.api.selectors import NO_EXECUTE
from controller.api.topology_assignment import TopologyAssignment, encode
from controller.api.views import NodeView
from controller.api.workload import MAX_UNHEALTHY_NODES, Admission
from controller.cache.cluster import ClusterCache, WorkloadEntry
from controller.core.admission.conditions import (
    forget_recovered_nodes,
    is_evicted,
    mark_evicted,
    mark_nodes_replaced,
    node_failures_message,
    record_unhealthy_nodes,
)
from controller.core.topology import PodSetRequest, TopologyRequest, Usage
from controller.core.topology.node_failures import (
    NODE_FAILURE_DELAY,
    assigned_hosts,
    node_health,
    workload_node_failures,
)
from controller.core.topology.replacing import ReplacementFailure, ReplacementSuccess, find_replacement
from controller.kube.api import PODS, ApiError, KubeApi, retrying
from controller.kube.events import EventRecorder
from controller.kube.metrics import Metrics
from controller.kube.requeuing import WorkQueue
from controller.kube.routing import Applied
from controller.kube.statuses import write_reserved_status, write_workload_status

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_IMPLIED = TopologyRequest("unconstrained", None, implied=True)


def _utc_now() -> datetime:
    return datetime.now(UTC)


_UNSEEN = object()


def _health_of(view: NodeView | None) -> object:
    """What `node_health` reads of a node: gone, its Ready state and since when, its NoExecute taints."""
    if view is None:
        return None
    return view.ready, view.not_ready_since, tuple(t for t in view.taints if t.effect == NO_EXECUTE)


class NodeFailureHandler:
    """See the module docstring. `delay`: how long a not-Ready host waits before it counts as
    failed (Kueue's 30 s; `tasq run --node-failure-delay`); `clock` the time source (tests fake it)."""

    def __init__(self, cache: ClusterCache, api: KubeApi, recorder: EventRecorder, applied: Applied | None = None,
                 metrics: Metrics | None = None, delay: timedelta = NODE_FAILURE_DELAY,
                 clock: Clock = _utc_now) -> None:
        self.cache, self.api, self.recorder, self.metrics = cache, api, recorder, metrics
        self.applied: Applied = applied if applied is not None else cache.upsert
        self.delay, self.clock = delay, clock
        self._queue: WorkQueue[str] = WorkQueue(self.handle, log, lambda key: f"node failures of workload {key}")
        """Workloads to look at, in the order they changed, one at a time."""
        self._on_host: dict[str, set[str]] = {}
        """Host -> the Workloads whose admitted assignment names it (kept as each Workload is looked at)."""
        self._hosts_of: dict[str, set[str]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._health: dict[str, object] = {}
        """Host -> what decided its health when its Workloads were last woken (`_health_of`)."""
        self._deleted: dict[str, str] = {}
        """Pod key -> uid of the pods this handler deleted that the cache still shows: not sent twice."""

    # -- wakes ----------------------------------------------------------------------------------

    def notify(self, key: str) -> None:
        self._queue.notify(key)

    def node_changed(self, obj: Mapping[str, Any]) -> None:
        """A Node changed or went: every Workload placed on it is looked at again, when what decides
        its health changed (a status report that changes nothing of it wakes nobody)."""
        name = str((obj.get("metadata") or {}).get("name", ""))
        keys = self._on_host.get(name)
        if not keys:
            self._health.pop(name, None)
            return
        health = _health_of(self.cache.nodes.get(name))
        if self._health.get(name, _UNSEEN) == health:
            return
        self._health[name] = health
        for key in sorted(keys):
            self.notify(key)

    def workload_changed(self, obj: Mapping[str, Any]) -> None:
        self.notify(object_key(obj))

    # -- the loop -------------------------------------------------------------------------------

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """Take changed Workloads one at a time while leading; a failure is retried after its backoff."""
        try:
            await self._queue.run(leading)
        finally:
            for timer in self._timers.values():
                timer.cancel()

    def _index(self, key: str, entry: WorkloadEntry | None) -> Admission | None:
        """Phase 1: the Workload's admission when it can lose a node (admitted, unfinished, not being
        evicted), with the host index brought up to date either way."""
        admission = entry.admission if entry is not None else None
        live = entry is not None and admission is not None and not entry.finished and not is_evicted(entry.obj) \
            and entry.evicting_for is None
        hosts = set().union(*assigned_hosts(admission).values()) if live and admission is not None else set()
        for host in self._hosts_of.get(key, set()) - hosts:
            self._on_host.get(host, set()).discard(key)
        for host in hosts:
            self._on_host.setdefault(host, set()).add(key)
        self._hosts_of[key] = hosts
        if not hosts:
            del self._hosts_of[key]
        return admission if live else None

    def _recheck_at(self, key: str, when: datetime | None) -> None:
        """Phase 2: look at the Workload again when a not-Ready host's grace period runs out."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if when is not None:
            delay = max((when - self.clock()).total_seconds(), 0.0) + 0.05
            self._timers[key] = asyncio.get_running_loop().call_later(delay, self.notify, key)

    async def handle(self, key: str) -> None:
        """Driver for one Workload: detect, record, replace or evict; then delete its pods on failed
        hosts its assignment no longer names (also after a retry, or once it is being evicted)."""
        entry = self.cache.workloads.get(key)
        admission = self._index(key, entry)
        if entry is None or admission is None:
            self._recheck_at(key, None)
        else:
            await self._repair(key, entry, admission)
        entry = self.cache.workloads.get(key)
        if entry is not None and not entry.finished and entry.admission is not None:
            await self._delete_pods_on_failed(key, entry)

    async def _repair(self, key: str, entry: WorkloadEntry, admission: Admission) -> None:
        """Phases 2-4 for a Workload that can lose a node."""
        tolerations = {ps.name: ps.tolerations for ps in entry.info.pod_sets}
        found = workload_node_failures(admission, self.cache.nodes, tolerations, self.clock(), self.delay)
        self._recheck_at(key, found.recheck_at)
        failed = sorted(found.failed)
        if any(name not in failed for name in entry.obj.unhealthy_node_names):
            written = await write_workload_status(self.api, entry.obj, lambda m: forget_recovered_nodes(m, failed))
            if written is None:
                return
            self.applied(c.KIND_WORKLOAD, written)
            current = self.cache.workloads.get(key)
            if current is None or current.admission is None:
                return
            entry, admission = current, current.admission
        if not failed:
            return
        # The field holds at most MAX_UNHEALTHY_NODES names (Kueue's limit): the first ones are
        # recorded, the search below still replaces every failed host.
        recorded = failed[:MAX_UNHEALTHY_NODES]
        if any(name not in entry.obj.unhealthy_node_names for name in recorded):
            written = await write_workload_status(self.api, entry.obj, lambda m: record_unhealthy_nodes(m, recorded))
            if written is None:
                return
            self.applied(c.KIND_WORKLOAD, written)
            log.info("workload %s: failed node(s) of its topology assignment: %s", key,
                     "; ".join(f"{host} ({why})" for host, why in found.failed.items()))
            current = self.cache.workloads.get(key)
            if current is None or current.admission is None:
                return
            entry, admission = current, current.admission
        outcome = self._search(entry, admission, set(failed))
        if isinstance(outcome, ReplacementFailure):
            await self._evict(key, entry, outcome)
        else:
            await self._replace(key, entry, outcome, found.failed)

    # -- the search -----------------------------------------------------------------------------

    def _search(self, entry: WorkloadEntry, admission: Admission,
                failed: set[str]) -> dict[str, tuple[TopologyAssignment, ReplacementSuccess]] | ReplacementFailure:
        """Phase 3: every pod set with pods on a failed host re-placed (each sees what the earlier took),
        or the first failure."""
        snapshot = self.cache.reserved_snapshot()
        usage: Usage = snapshot.usage.clone()
        infos = {ps.name: ps for ps in entry.info.pod_sets}
        out: dict[str, tuple[TopologyAssignment, ReplacementSuccess]] = {}
        for psa in admission.pod_set_assignments:
            ta, info = psa.topology_assignment, infos.get(psa.name)
            if ta is None or info is None or not failed & {d.values[-1] for d in ta.assigned_domains()}:
                continue
            flavor = next((snapshot.flavors[f] for f in sorted(set(psa.flavors.values()))
                           if f in snapshot.flavors and snapshot.flavors[f].topology is not None), None)
            if flavor is None or flavor.topology is None:
                return ReplacementFailure(c.REASON_NODE_FAILURES, node_failures_message(sorted(failed)) +
                                          f"; pod set {psa.name}: its flavor has no topology now", tuple(sorted(failed)))
            request = PodSetRequest(psa.name, psa.count if psa.count is not None else info.count,
                                    info.placement_requests, info.topology or _IMPLIED, info.node_selector,
                                    info.affinity_terms, info.tolerations)
            outcome = find_replacement(flavor.topology, usage, request, ta.levels, ta.assigned_domains(), failed)
            if isinstance(outcome, ReplacementFailure):
                return outcome
            pods_to: dict[str, int] = {}
            for replaced in outcome.replaced:
                for name, n in replaced.to:
                    pods_to[name] = pods_to.get(name, 0) + n
            usage.reserve(f"{entry.info.key}/replacing/{psa.name}",  # the next pod set sees them taken
                          {name: {r: m * n for r, m in info.placement_requests.items()} for name, n in pods_to.items()})
            out[psa.name] = (encode(ta.levels, outcome.domains), outcome)
        return out

    # -- the writes -----------------------------------------------------------------------------

    async def _replace(self, key: str, entry: WorkloadEntry,
                       found: dict[str, tuple[TopologyAssignment, ReplacementSuccess]],
                       why: Mapping[str, str]) -> bool:
        """Phase 4a: the repaired assignments and emptied unhealthyNodes in one write, then the Events."""
        assignments = {name: ta for name, (ta, _) in found.items()}
        written = await write_workload_status(self.api, entry.obj, lambda m: mark_nodes_replaced(m, assignments))
        if written is None:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        for pod_set, (_, outcome) in sorted(found.items()):
            for replaced in outcome.replaced:
                to = ", ".join(f"{name} ({n} pod{'s' if n != 1 else ''})" for name, n in replaced.to)
                message = (f"Node {replaced.failed} ({why.get(replaced.failed, 'failed')}) replaced by {to} "
                           f"for pod set {pod_set}")
                self.recorder.emit(written, c.EVENT_REASON_NODE_REPLACED, message)
                log.info("workload %s: %s", key, message)
        return True

    async def _evict(self, key: str, entry: WorkloadEntry, failure: ReplacementFailure) -> bool:
        """Phase 4b: no replacement: Evicted=True reason NodeFailures (its Job is then stopped and the
        Workload requeued by the Job reconciler), with its Event and metric."""
        now = self.clock()
        cluster_queue = entry.admission.cluster_queue if entry.admission is not None else ""
        written = await write_reserved_status(
            self.api, entry.obj, lambda model: mark_evicted(model, c.REASON_NODE_FAILURES, failure.message, now))
        if written is None:
            return False
        self.applied(c.KIND_WORKLOAD, written)
        log.info("workload %s evicted: %s", key, failure.message)
        self.recorder.emit(written, c.EVENT_REASON_EVICTED_NODE_FAILURES, failure.message, c.EVENT_TYPE_WARNING)
        if self.metrics is not None:
            self.metrics.evicted(cluster_queue, c.REASON_NODE_FAILURES)
        return True

    async def _delete_pods_on_failed(self, key: str, entry: WorkloadEntry) -> None:
        """Phase 5: the Workload's live pods bound to (or released towards) a failed host that its
        assignment no longer names (replaced), or any failed host once it is being evicted: deleted
        at once, so the Job controller creates their replacements (or the eviction completes)."""
        admission = entry.admission
        named: set[str] = set()
        if admission is not None and not is_evicted(entry.obj):
            named = set().union(*assigned_hosts(admission).values())
        now = self.clock()
        for pod_key, uid in list(self._deleted.items()):
            pod = self.cache.pods.get(pod_key)
            if pod is None or pod.uid != uid:
                del self._deleted[pod_key]
        for pod_key in sorted(self.cache.pods_of.get(key, ())):
            pod = self.cache.pods.get(pod_key)
            host = (pod.node_name or pod.node_selector.get(c.LABEL_HOSTNAME)) if pod is not None else None
            if pod is None or pod.terminal or not host or host in named or self._deleted.get(pod_key) == pod.uid:
                continue
            why = node_health(self.cache.nodes.get(host), now, pod.tolerations, self.delay).failed
            if why is None:
                continue
            try:
                await retrying(functools.partial(self.api.delete, PODS, pod.namespace, pod.name, uid=pod.uid,
                                                 grace_period_seconds=0))
            except ApiError as e:
                if not (e.not_found or e.conflict):
                    raise
                continue
            self._deleted[pod_key] = pod.uid
            log.info("workload %s: deleted its pod %s on failed node %s (%s)", key, pod_key, host, why)
