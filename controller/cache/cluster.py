"""The operator's in-memory cluster: every watched object, one node Usage and the quota ledger.

Fed one watch event at a time (`upsert` / `delete`) by controller.kube; patches what the event
touches (a node patches the flavor trees and the Usage, a pod its node's row, a Workload its
reservation) and rebuilds only on configuration changes (flavors, topologies, ClusterQueues).
`admission_state()` hands the admission loop an AdmissionState sharing that Usage and ledger, so
what a cycle admits is reserved here at once. Pure data: no API calls, no clock, no kopf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from controller.api import constants as c
from controller.api.features import FeatureGates
from controller.api.flavor import ResourceFlavor
from controller.api.quantity import add_into
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.views import JobView, NodeView, PodView
from controller.api.workload import TopologySlice
from controller.core.admission.cycle import AdmissionState
from controller.core.admission.flavoring import WorkloadFit, fit_from_admission
from controller.core.admission.quota import ClusterQueueQuota, QuotaLedger
from controller.core.admission.restoring import domain_holdings
from controller.core.admission.snapshot import AdmissionSnapshot, FlavorInfo, flavor_infos
from controller.core.admission.workloads import WorkloadInfo, workload_info
from controller.core.topology import Usage, workload_key_of
from controller.core.ungating.planning import PodState, UngatingInput

KIND_NODE = "Node"
KIND_POD = "Pod"
KIND_NAMESPACE = "Namespace"
KIND_PRIORITY_CLASS = "PriorityClass"
WATCHED_KINDS = (KIND_NODE, KIND_POD, c.KIND_JOB, c.KIND_WORKLOAD, c.KIND_RESOURCE_FLAVOR,
                 c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE, c.KIND_TOPOLOGY, KIND_PRIORITY_CLASS, KIND_NAMESPACE)
"""The kinds the cache keeps, by Kind name (what `upsert` / `delete` accept)."""

_DOMAIN_SLICES = "/domain-slices"
"""Suffix of the scratch key `domain_holdings` reserves under while restoring."""


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` of a namespaced object, `name` of a cluster-scoped one."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def owner_job_key(workload: Mapping[str, Any]) -> str | None:
    """`namespace/name` of the Job that controls a Workload, if one does."""
    meta = workload.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == c.KIND_JOB and ref.get("apiVersion") == c.JOB_API_VERSION:
            return f"{meta.get('namespace', '')}/{ref.get('name', '')}"
    return None


def is_finished(workload: Mapping[str, Any]) -> bool:
    return any(cond.get("type") == c.CONDITION_FINISHED and cond.get("status") == "True"
               for cond in (workload.get("status") or {}).get("conditions") or [])


def admission_of(workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`status.admission` when QuotaReserved is True (Kueue's "has quota reservation")."""
    status = workload.get("status") or {}
    reserved = any(cond.get("type") == c.CONDITION_QUOTA_RESERVED and cond.get("status") == "True"
                   for cond in status.get("conditions") or [])
    admission = status.get("admission")
    return admission if reserved and isinstance(admission, Mapping) else None


@dataclass(slots=True)
class WorkloadEntry:
    """One Workload: its latest object, parsed form and what the cache holds for it.

    `fit` is set while the workload holds quota and nodes here (admitted by us, or restored from
    its `status.admission`); `restoring` holds an admission seen but not yet re-reserved (done at the
    next `admission_state`, once nodes and pods are known); `expecting` is True from our own
    admission decision until the watch shows it written, so a stale event cannot release it.
    """

    obj: dict[str, Any]
    info: WorkloadInfo
    fit: WorkloadFit | None = None
    restoring: Mapping[str, Any] | None = None
    expecting: bool = False

    @property
    def finished(self) -> bool:
        return is_finished(self.obj)

    @property
    def active(self) -> bool:
        return (self.obj.get("spec") or {}).get("active", True) is not False


@dataclass(slots=True)
class ClusterCache:
    """See the module docstring. `generation` grows on every change admission could react to (not
    on a queue's status)."""

    nodes: dict[str, NodeView] = field(default_factory=dict)
    pods: dict[str, PodView] = field(default_factory=dict)
    pods_of: dict[str, set[str]] = field(default_factory=dict)
    """Workload key -> keys of its pods (by the topology-workload annotation)."""
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    workloads: dict[str, WorkloadEntry] = field(default_factory=dict)
    workload_of_job: dict[str, str] = field(default_factory=dict)
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    priority_classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    features: FeatureGates = field(default_factory=FeatureGates)
    """Kueue's placement feature gates (`--feature-gates` of `tasq run` and `tasq dev`)."""
    generation: int = 0
    stale_events: int = 0
    primed: int = 0
    """Objects the priming read put here (controller.kube.watching sets it)."""
    """Objects offered to `upsert` at a version already applied (kopf's initial listing after the
    priming read, the watch echoing the operator's own writes): skipped."""
    _versions: dict[tuple[str, str], str] = field(default_factory=dict)
    _flavor_infos: dict[str, FlavorInfo] | None = None
    _quotas: dict[str, ClusterQueueQuota] | None = None
    _ledger: QuotaLedger | None = None
    _seq: int = 0

    # -- events ---------------------------------------------------------------------------------

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """An object was added or changed; False when this version, or a newer one, was already
        applied. The operator applies its own writes as the API answers them, so the watch may
        deliver older versions afterwards: resourceVersions are compared as the integers both
        kube-apiserver (etcd revisions) and the devcluster issue; other forms only by equality."""
        key = object_key(obj)
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        known = self._versions.get((kind, key))
        if version and known is not None and (
                version == known or (version.isdigit() and known.isdigit() and int(version) < int(known))):
            self.stale_events += 1
            return False
        self._versions[(kind, key)] = version
        if kind in _CONFIG_KINDS:
            if self._upsert_config(kind, key, dict(obj)):
                self.generation += 1
        else:
            getattr(self, "_upsert_" + _OBJECT_HANDLERS[kind])(key, dict(obj))
            self.generation += 1
        return True

    def delete(self, kind: str, obj: Mapping[str, Any]) -> None:
        """An object is gone."""
        key = object_key(obj)
        self._versions.pop((kind, key), None)
        if kind in _CONFIG_KINDS:
            self._delete_config(kind, key)
        else:
            getattr(self, "_delete_" + _OBJECT_HANDLERS[kind])(key)
        self.generation += 1

    def _upsert_node(self, key: str, obj: dict[str, Any]) -> None:
        view = NodeView.from_dict(obj)
        self.nodes[key] = view
        for info in (self._flavor_infos or {}).values():
            if info.topology is not None:
                info.topology.upsert_node(view)

    def _delete_node(self, key: str) -> None:
        self.nodes.pop(key, None)
        for info in (self._flavor_infos or {}).values():
            if info.topology is not None:
                info.topology.remove_node(key)
        self.usage.remove_node(key)

    def _upsert_pod(self, key: str, obj: dict[str, Any]) -> None:
        view = PodView.from_dict(obj)
        self.pods[key] = view
        wl_key = workload_key_of(view)
        if wl_key is not None:
            self.pods_of.setdefault(wl_key, set()).add(key)
        self.usage.add_bound_pod(view)

    def _delete_pod(self, key: str) -> None:
        view = self.pods.pop(key, None)
        if view is not None:
            wl_key = workload_key_of(view)
            if wl_key is not None and wl_key in self.pods_of:
                self.pods_of[wl_key].discard(key)
        self.usage.remove_bound_pod(key)

    def _upsert_job(self, key: str, obj: dict[str, Any]) -> None:
        self.jobs[key] = obj

    def _delete_job(self, key: str) -> None:
        self.jobs.pop(key, None)

    def _upsert_workload(self, key: str, obj: dict[str, Any]) -> None:
        """Phase: follow a Workload. A new admission (ours written, or one made before a restart) is
        reserved; a lost one (finished, evicted) is released; a pending one's spec is re-read."""
        entry = self.workloads.get(key)
        if entry is None:
            self._seq += 1
            entry = self.workloads[key] = WorkloadEntry(obj, self._info(obj, self._seq))
        else:
            entry.obj = obj
            if entry.fit is None and entry.restoring is None:
                entry.info = self._info(obj, entry.info.seq)
        owner = owner_job_key(obj)
        if owner is not None:
            self.workload_of_job[owner] = key
        admission = admission_of(obj)
        if admission is not None:
            entry.expecting = False
        if entry.finished or (admission is None and not entry.expecting):
            self._release(key)
        elif admission is not None and entry.fit is None and entry.restoring is None:
            entry.restoring = admission

    def _delete_workload(self, key: str) -> None:
        entry = self.workloads.get(key)
        self._release(key)
        self.workloads.pop(key, None)
        if entry is not None:
            owner = owner_job_key(entry.obj)
            if owner is not None and self.workload_of_job.get(owner) == key:
                del self.workload_of_job[owner]

    def _info(self, obj: Mapping[str, Any], seq: int) -> WorkloadInfo:
        return workload_info(obj, seq=seq, priority_classes=self.priority_values()[0])

    def _upsert_config(self, kind: str, key: str, obj: dict[str, Any]) -> bool:
        """Flavors, topologies and queues: rare changes, so the parts built from them are rebuilt.
        False (nothing rebuilt) when only a queue's status changed: tasq writes those itself after
        admissions, and admission does not read them."""
        if kind in (c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE):
            queues: dict[str, Any] = self.cluster_queues if kind == c.KIND_CLUSTER_QUEUE else self.local_queues
            before = queues.get(key)
            queues[key] = (ClusterQueue if kind == c.KIND_CLUSTER_QUEUE else LocalQueue).from_dict(obj)
            if before is not None and before.spec == queues[key].spec:
                return False
        elif kind == c.KIND_RESOURCE_FLAVOR:
            self.flavors[key] = ResourceFlavor.from_dict(obj)
        elif kind == c.KIND_TOPOLOGY:
            self.topologies[key] = Topology.from_dict(obj)
        elif kind == KIND_PRIORITY_CLASS:
            self.priority_classes[key] = obj
        elif kind == KIND_NAMESPACE:
            self.namespaces[key] = dict((obj.get("metadata") or {}).get("labels") or {})
        self._invalidate(kind)
        return True

    def _delete_config(self, kind: str, key: str) -> None:
        stores: dict[str, dict[str, Any]] = {
            c.KIND_RESOURCE_FLAVOR: self.flavors, c.KIND_TOPOLOGY: self.topologies,
            c.KIND_CLUSTER_QUEUE: self.cluster_queues, c.KIND_LOCAL_QUEUE: self.local_queues,
            KIND_PRIORITY_CLASS: self.priority_classes, KIND_NAMESPACE: self.namespaces}
        stores[kind].pop(key, None)
        self._invalidate(kind)

    def _invalidate(self, kind: str) -> None:
        if kind in (c.KIND_RESOURCE_FLAVOR, c.KIND_TOPOLOGY):
            self._flavor_infos = None
        elif kind == c.KIND_CLUSTER_QUEUE:
            self._quotas = self._ledger = None

    # -- reservations ---------------------------------------------------------------------------

    def _release(self, key: str) -> None:
        """Give back what a workload holds (quota, nodes); its bound pods keep counting as pods."""
        entry = self.workloads.get(key)
        if entry is not None:
            entry.fit, entry.restoring, entry.expecting = None, None, False
        self.usage.release(key)
        self.usage.release(key + _DOMAIN_SLICES)
        if self._ledger is not None:
            self._ledger.release(key)

    def record_admission(self, key: str, fit: WorkloadFit) -> None:
        """The loop admitted `key` (its nodes and quota are already reserved by the cycle)."""
        entry = self.workloads[key]
        entry.fit, entry.expecting = fit, True
        self.generation += 1

    def forget_admission(self, key: str) -> None:
        """Writing our admission failed for good (the Workload is gone or changed): release it."""
        self._release(key)
        self.generation += 1

    def _restore(self, snapshot: AdmissionSnapshot) -> None:
        """Phase: re-reserve admissions seen in Workload statuses (after a restart, or written by
        another replica): quota from `status.admission`, hosts named by slices, and nodes of the
        rack/block slices placed as the topology engine would; then the workload's bound pods are
        counted again so each converts its share of the reservation exactly once."""
        for key, entry in sorted(self.workloads.items(), key=lambda kv: kv[1].info.seq):
            if entry.restoring is None:
                continue
            admission, entry.restoring = entry.restoring, None
            fit = fit_from_admission(entry.info, admission)
            mine = [self.pods[p] for p in sorted(self.pods_of.get(key, ())) if p in self.pods]
            held = domain_holdings(snapshot, entry.info, admission, mine, self.nodes)
            self.usage.release(key + _DOMAIN_SLICES)
            node_usage = {node: dict(vector) for node, vector in fit.node_usage.items()}
            for node, vector in held.items():
                add_into(node_usage.setdefault(node, {}), vector)
            entry.fit = replace(fit, node_usage=node_usage)
            self.usage.reserve(key, node_usage)
            for pod in mine:
                self.usage.remove_bound_pod(pod.key)
                self.usage.add_bound_pod(pod)
            if self._ledger is not None and fit.cluster_queue in self._ledger.queues:
                self._ledger.reserve(key, fit.cluster_queue, fit.quota_usage)

    # -- reads ----------------------------------------------------------------------------------

    def priority_values(self) -> tuple[dict[str, int], int]:
        """PriorityClass name -> value, and the globalDefault's value (0 without one)."""
        values = {name: int(pc.get("value", 0)) for name, pc in self.priority_classes.items()}
        default = next((int(pc.get("value", 0)) for pc in self.priority_classes.values() if pc.get("globalDefault")), 0)
        return values, default

    def snapshot(self) -> AdmissionSnapshot:
        """The live snapshot: static parts built when missing, the Usage and ledger shared (not copies)."""
        if self._flavor_infos is None:
            self._flavor_infos = flavor_infos(self.flavors.values(), self.topologies.values(), list(self.nodes.values()))
        if self._quotas is None or self._ledger is None:
            self._quotas = {name: ClusterQueueQuota.from_model(cq) for name, cq in self.cluster_queues.items()}
            self._ledger = QuotaLedger.build(self._quotas)
            for key, entry in self.workloads.items():
                if entry.fit is not None and entry.fit.cluster_queue in self._quotas:
                    self._ledger.reserve(key, entry.fit.cluster_queue, entry.fit.quota_usage)
        return AdmissionSnapshot(
            cluster_queues=self._quotas,
            local_queues={key: lq.spec.cluster_queue for key, lq in self.local_queues.items()},
            flavors=self._flavor_infos, namespaces=self.namespaces, quota=self._ledger, usage=self.usage,
            features=self.features)

    def admission_state(self) -> AdmissionState:
        """One cycle's state: every held admission, and every waiting active workload queued (in
        arrival order). Admissions the cycle makes are reserved in this cache's Usage and ledger."""
        snapshot = self.snapshot()
        self._restore(snapshot)
        state = AdmissionState(snapshot)
        for key, entry in sorted(self.workloads.items(), key=lambda kv: kv[1].info.seq):
            if entry.fit is not None:
                state.admitted[key] = entry.fit
                state.workloads[key] = entry.info
                state.queue_of[key] = entry.fit.cluster_queue
            elif not entry.finished and entry.active:
                state.submit(entry.info)
        return state

    def job_of_workload(self, key: str) -> JobView | None:
        entry = self.workloads.get(key)
        owner = owner_job_key(entry.obj) if entry is not None else None
        job = self.jobs.get(owner) if owner is not None else None
        return JobView.from_dict(job) if job is not None else None

    def flavor_info(self, name: str) -> FlavorInfo | None:
        return self.snapshot().flavors.get(name)

    def workload_of_pod(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """(namespace, Workload name) a pod belongs to, by its topology-workload annotation."""
        meta = pod.get("metadata") or {}
        name = (meta.get("annotations") or {}).get(c.ANNOTATION_TOPOLOGY_WORKLOAD)
        return (str(meta.get("namespace", "")), str(name)) if name else None

    def ungating_input(self, namespace: str, workload: str) -> UngatingInput | None:
        """What the TopologyUngater plans from: the admitted, unfinished Workload's slices per pod
        set and the states of its pods; None when it is not (or no longer) admitted."""
        key = f"{namespace}/{workload}"
        entry = self.workloads.get(key)
        admission = admission_of(entry.obj) if entry is not None else None
        if entry is None or admission is None or entry.finished:
            return None
        slices: dict[str, list[TopologySlice]] = {}
        for psa in admission.get("podSetAssignments") or []:
            raw = (psa.get("topologyAssignment") or {}).get("slices") or []
            slices[str(psa.get("name", ""))] = [TopologySlice.model_validate(sl) for sl in raw]
        pods = [_pod_state(self.pods[p]) for p in sorted(self.pods_of.get(key, ())) if p in self.pods]
        return UngatingInput(namespace=namespace, workload=workload, slices=slices, pods=pods)


def _pod_state(pod: PodView) -> PodState:
    index = pod.labels.get(c.LABEL_JOB_COMPLETION_INDEX, "")
    gated = c.SCHEDULING_GATE_TOPOLOGY in pod.scheduling_gates
    return PodState(
        name=pod.name, uid=pod.uid, pod_set=pod.annotations.get(c.ANNOTATION_TOPOLOGY_PODSET, ""),
        completion_index=int(index) if index.isdigit() else None, gated=gated,
        assigned=None if gated else dict(pod.node_selector), terminated=pod.terminal or pod.deleting,
        created=pod.creation_timestamp)


_CONFIG_KINDS = frozenset({c.KIND_RESOURCE_FLAVOR, c.KIND_TOPOLOGY, c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE,
                           KIND_PRIORITY_CLASS, KIND_NAMESPACE})
_OBJECT_HANDLERS = {KIND_NODE: "node", KIND_POD: "pod", c.KIND_JOB: "job", c.KIND_WORKLOAD: "workload"}
"""Kind -> the suffix of its `_upsert_*` / `_delete_*` methods (the config kinds share one pair)."""
