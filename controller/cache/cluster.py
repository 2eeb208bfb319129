"""The operator's in-memory cluster: every watched object, one node Usage and the quota ledger.

Fed one watch event at a time (`upsert` / `delete`) by controller.kube; each object is parsed once,
as it enters, into its model (tasq's kinds) or view (Node, Pod; a plain pod tasq manages is kept whole too, under its group); a Workload entry keeps its model
beside the WorkloadInfo admission reads, as Kueue's `workload.Info{Obj}`; Workloads' and Jobs' keys
and short strings are shared with every other's (`_sharing`). An object that does not
parse is refused whole (recorded in `malformed`, the previous version kept). Patches what the event
touches (a node patches the flavor trees and the Usage, a pod its node's row, a Workload its
reservation) and rebuilds only on configuration changes (flavors, topologies, ClusterQueues, Cohorts).
`admission_state()` hands the admission loop an AdmissionState sharing that Usage and ledger, so
what a cycle admits is reserved here at once. Pure data: no API calls, no clock, no kopf.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import ValidationError

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.features import FeatureGates
from controller.api.flavor import ResourceFlavor
from controller.api.meta import object_key
from controller.api.priority_class import WorkloadPriorityClass
from controller.api.quantity import add_into
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.topology_assignment import DomainPods
from controller.api.views import NodeView, OwnerRef, PodView, owner_refs
from controller.api.workload import Admission, PodSetTopologyRequest, Workload
from controller.cache.backlog import BacklogReads
from controller.core.admission.conditions import is_evicted, is_terminating
from controller.core.admission.cycle import AdmissionState, Pending
from controller.core.admission.flavoring import WorkloadFit, fit_from_admission
from controller.core.admission.pods_ready import in_backoff
from controller.core.admission.quota import ClusterQueueQuota, CohortQuota, QuotaLedger
from controller.core.admission.restoring import domain_holdings
from controller.core.admission.snapshot import (
    AdmissionSnapshot,
    FlavorInfo,
    flavor_infos,
    stopped_local_queues,
)
from controller.core.admission.workloads import WorkloadInfo, parse_timestamp, workload_info
from controller.core.jobs.framework import GenericJob, workload_owner_refs
from controller.core.jobs.integrations import INTEGRATIONS, POD_GROUP
from controller.core.topology import Usage, workload_key_of
from controller.core.ungating.planning import PodState, UngatingInput, pod_rank

KIND_NODE = "Node"
KIND_POD = "Pod"
KIND_NAMESPACE = "Namespace"
KIND_PRIORITY_CLASS = "PriorityClass"
WATCHED_KINDS = (KIND_NODE, KIND_POD, *(job.gvk.kind for job in INTEGRATIONS), c.KIND_WORKLOAD,
                 c.KIND_RESOURCE_FLAVOR, c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE, c.KIND_TOPOLOGY,
                 KIND_PRIORITY_CLASS, KIND_NAMESPACE, c.KIND_COHORT, c.KIND_WORKLOAD_PRIORITY_CLASS)
"""The kinds the cache keeps, by Kind name (what `upsert` / `delete` accept): the integrated kinds
(controller.core.jobs.integrations) among them."""

DELETED_UIDS_KEPT = 65_536
"""Deleted objects' UIDs kept (about 6 MiB at most), and as many names a relist found gone: far more
than get deleted while one of tasq's writes to them is in flight, even when a namespace of
thousands goes at once."""
_K = TypeVar("_K")
_V = TypeVar("_V")

OwnerKey = tuple[str, str]
"""(kind, `namespace/name`) of an integrated object that owns a Workload (a Job)."""

_DOMAIN_SLICES = "/domain-slices"
"""Suffix of the scratch key `domain_holdings` reserves under while restoring."""
_ELSEWHERE = "/elsewhere"
"""Suffix of the key (never reserved) a Workload's pod on a host its assignment does not name counts under."""


@dataclass(slots=True)
class WorkloadEntry:
    """One Workload: its model (parsed once, as its event came), what admission reads of it and
    what the cache holds for it.

    `fit` is set while the workload holds quota and nodes here (admitted by us, or restored from
    its `status.admission`); `restoring` holds an admission seen but not yet re-reserved (done at the
    next `admission_state`, once nodes and pods are known); `expecting` is True from our own
    admission decision until the watch shows it written, so a stale event cannot release it;
    `evicting_for` names the preemptor the admission loop decided to evict it for, from that decision
    until its reservation is released (its Evicted condition may not be written yet).
    """

    obj: Workload
    info: WorkloadInfo
    fit: WorkloadFit | None = None
    restoring: Admission | None = None
    expecting: bool = False
    evicting_for: str | None = None
    held_read: tuple[float | None, bool] | None = None
    """What `admission_state` read of an admitted one's object: (when QuotaReserved turned True,
    whether it is terminating). Every cycle reads every admitted Workload; this is forgotten when a
    new version of the object comes, so only that one is read again."""

    @property
    def finished(self) -> bool:
        return self.obj.is_finished

    @property
    def active(self) -> bool:
        return self.obj.active

    @property
    def admission(self) -> Admission | None:
        """`status.admission` while QuotaReserved is True."""
        return self.obj.reserved_admission


@dataclass(frozen=True, slots=True)
class KindHandlers:
    """How the cache takes one kind: `parse` the wire form (raising ValueError or TypeError on a
    malformed object, before anything changes), `upsert` the parsed form under its key (True when
    admission could react), `delete` a key."""

    parse: Callable[[Mapping[str, Any]], Any]
    upsert: Callable[[str, Any], bool]
    delete: Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Refusal:
    """An object version `upsert` refused because it does not parse: `message` names the object and
    every field path with what is wrong there."""

    version: str
    message: str


def _parse_errors(error: ValueError | TypeError) -> str:
    """Every field path and what is wrong there (pydantic's locations are the wire's camelCase)."""
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(object)'}: {e['msg']}" for e in error.errors())
    return str(error)


@dataclass(slots=True)
class ClusterCache:
    """See the module docstring. `generation` grows on every change admission could react to (not
    on a queue's status)."""

    nodes: dict[str, NodeView] = field(default_factory=dict)
    pods: dict[str, PodView] = field(default_factory=dict)
    pods_of: dict[str, set[str]] = field(default_factory=dict)
    """Workload key -> keys of its pods (by the topology-workload annotation)."""
    live_pods_of: dict[OwnerKey, set[str]] = field(default_factory=dict)
    """Owner (a Job) -> keys of its pods that may still run (not terminal; deleting ones included):
    what an owner found running still has on its nodes, whatever its status counters say yet."""
    group_pods: dict[str, dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    """Workload key of a plain-pod group (or single pod) -> its pods' keys -> the pods as the API has
    them: the only pods kept whole, since their specs become the Workload's pod sets."""
    _group_of_pod: dict[str, str] = field(default_factory=dict)
    integrations: tuple[GenericJob, ...] = INTEGRATIONS
    """The integrated kinds whose objects the cache keeps in `owners` (tests give their own)."""
    owners: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Integrated kind -> owner key -> the object, as the API serves it."""
    workloads: dict[str, WorkloadEntry] = field(default_factory=dict)
    workload_of: dict[OwnerKey, str] = field(default_factory=dict)
    """Owner -> the key of its Workload."""
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    priority_classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    workload_priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    features: FeatureGates = field(default_factory=FeatureGates)
    """Kueue's placement feature gates (`--feature-gates` of `tasq run` and `tasq dev`)."""
    order_by_eviction: bool = True
    """waitForPodsReady's requeuing timestamp is `Eviction` (Kueue's default): a Workload evicted by
    a PodsReady timeout queues from that eviction, not from its creation."""
    generation: int = 0
    stale_events: int = 0
    """Objects offered to `upsert` at a version already applied (kopf's initial listing after the
    priming read, the watch echoing the operator's own writes): skipped."""
    unchanged_nodes: int = 0
    """Node versions whose view equals the one held (a status beat): recorded, nothing woken."""
    primed: int = 0
    """Objects the priming read put here (controller.kube.watching sets it)."""
    malformed: dict[tuple[str, str], Refusal] = field(default_factory=dict)
    """(kind, key) -> the latest version refused as malformed and why; kept until a version that
    parses, or its deletion, arrives. The previous version stays applied."""
    _versions: dict[str, dict[str, int | str]] = field(default_factory=dict)
    """Kind -> key -> the resourceVersion applied: an int when it is one (as kube-apiserver's and the
    devcluster's are; a tenth of the memory of a tuple key and a string at 50,000 nodes), else as sent."""
    _deleted_uids: dict[str, None] = field(default_factory=dict)
    """UIDs of the objects deleted lately, oldest first (at most `DELETED_UIDS_KEPT`): the answer to
    a write that raced the object's deletion (a status patch sent before, answered after the watch
    said it was gone) carries such a UID and must not bring the object back."""
    _tombstones: dict[tuple[str, str], int] = field(default_factory=dict)
    """(kind, key) -> the resourceVersion at which an object was found gone, oldest first (at most
    `DELETED_UIDS_KEPT`): a deletion a relist found (no UID: only the list's version) refuses any
    version of that name up to it, as the UID does for a deletion the watch told."""
    _flavor_infos: dict[str, FlavorInfo] | None = None
    _quotas: dict[str, ClusterQueueQuota] | None = None
    _ledger: QuotaLedger | None = None
    _seq: int = 0
    _backlog: BacklogReads = field(default_factory=BacklogReads)
    """What the status of each Workload that cannot be queued says, per version of its object."""
    _handlers: dict[str, KindHandlers] = field(init=False)
    _kept_whole: frozenset[str] = field(init=False)
    """The kinds held as the API serves them or as a model of their whole object (Workloads, the
    integrated kinds), by the thousand in a burst: their strings are shared on arrival (`_sharing`)."""

    def __post_init__(self) -> None:
        self._handlers = {
            KIND_NODE: KindHandlers(NodeView.from_dict, self._upsert_node, self._delete_node),
            KIND_POD: KindHandlers(PodView.from_dict, self._upsert_pod, self._delete_pod),
            c.KIND_WORKLOAD: KindHandlers(Workload.model_validate, self._upsert_workload, self._delete_workload),
            c.KIND_RESOURCE_FLAVOR: KindHandlers(ResourceFlavor.model_validate, self._upsert_flavor,
                                                 self._delete_flavor),
            c.KIND_TOPOLOGY: KindHandlers(Topology.model_validate, self._upsert_topology, self._delete_topology),
            c.KIND_CLUSTER_QUEUE: KindHandlers(ClusterQueue.model_validate, self._upsert_cluster_queue,
                                               self._delete_cluster_queue),
            c.KIND_LOCAL_QUEUE: KindHandlers(LocalQueue.model_validate, self._upsert_local_queue,
                                             self._delete_local_queue),
            KIND_PRIORITY_CLASS: KindHandlers(dict, self._upsert_priority_class, self._delete_priority_class),
            KIND_NAMESPACE: KindHandlers(_namespace_labels, self._upsert_namespace, self._delete_namespace),
            c.KIND_COHORT: KindHandlers(Cohort.model_validate, self._upsert_cohort, self._delete_cohort),
            c.KIND_WORKLOAD_PRIORITY_CLASS: KindHandlers(WorkloadPriorityClass.model_validate,
                                                         self._upsert_workload_priority_class,
                                                         self._delete_workload_priority_class),
        }
        self._kept_whole = frozenset((c.KIND_WORKLOAD, *(job.gvk.kind for job in self.integrations)))
        for job in self.integrations:
            kind = job.gvk.kind
            store = self.owners.setdefault(kind, {})
            self._handlers[kind] = KindHandlers(dict, _storing(store), _forgetting(store))

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        """The batch/v1 Jobs, by key (the Job integration's `owners`)."""
        return self.owners.setdefault(c.KIND_JOB, {})

    def owner_of_pod(self, namespace: str, labels: Mapping[str, str], owners: Sequence[OwnerRef]) -> OwnerKey | None:
        """The integrated object a pod belongs to, if any (the first integration that claims it)."""
        for job in self.integrations:
            key = job.pod_owner_key(namespace, labels, owners)
            if key is not None:
                return job.gvk.kind, key
        return None

    def owner_of_workload(self, wl: Workload) -> OwnerKey | None:
        """The integrated object a Workload belongs to, if any."""
        return self._owner_of(wl.namespace, workload_owner_refs(wl))

    def owner_of_workload_body(self, obj: Mapping[str, Any]) -> OwnerKey | None:
        """`owner_of_workload` of a Workload's wire form (a deleted Workload's last body too)."""
        return self._owner_of(str((obj.get("metadata") or {}).get("namespace", "")), owner_refs(obj))

    def _owner_of(self, namespace: str, refs: Sequence[OwnerRef]) -> OwnerKey | None:
        for job in self.integrations:
            key = job.workload_owner_key(namespace, refs)
            if key is not None:
                return job.gvk.kind, key
        return None

    # -- events ---------------------------------------------------------------------------------

    def upsert(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """An object was added or changed; False when this version, or a newer one, was already
        applied, when it does not parse (then `malformed` says why and nothing changed), or when it is
        a Node whose view equals the one held (its version is recorded). The
        operator applies its own writes as the API answers them, so the watch may deliver older
        versions afterwards: resourceVersions are compared as the integers both kube-apiserver
        (etcd revisions) and the devcluster issue; other forms only by equality."""
        key = object_key(obj)
        meta = obj.get("metadata") or {}
        if self._deleted_uids and meta.get("uid") in self._deleted_uids:
            self.stale_events += 1  # a version from before its deletion
            return False
        version = str(meta.get("resourceVersion") or "")
        if self._tombstones and (gone := self._tombstones.get((kind, key))) is not None:
            if not version.isdigit() or int(version) <= gone:
                self.stale_events += 1  # a version from before it was found gone
                return False
            del self._tombstones[(kind, key)]  # created again since
        versions = self._versions.setdefault(kind, {})
        known = versions.get(key)
        if version and known is not None and _not_newer(version, known):
            self.stale_events += 1
            return False
        obj = _compact(kind, obj, meta)
        if kind in self._kept_whole:
            obj = _sharing(obj)
        handlers = self._handlers[kind]
        try:
            parsed = handlers.parse(obj)
        except (ValueError, TypeError) as e:
            self.malformed[(kind, key)] = Refusal(version, f"{kind} {key} (resourceVersion {version or 'none'}) "
                                                  f"refused, the previous version stays: {_parse_errors(e)}")
            return False
        self.malformed.pop((kind, key), None)
        versions[key] = int(version) if version.isdigit() else version
        if kind == KIND_NODE and self.nodes.get(key) == parsed:
            # A node's status beats (heartbeats, images, addresses) change nothing the view keeps.
            self.unchanged_nodes += 1
            return False
        if handlers.upsert(key, parsed):
            self.generation += 1
        if kind == KIND_POD:
            self._track_group_member(key, obj)
        return True

    def holds(self, kind: str, key: str) -> bool:
        """Whether the cache holds an object of `kind` under `key`."""
        return key in self._versions.get(kind, ())

    def keys_of(self, kind: str) -> set[str]:
        """The keys of every object of `kind` the cache holds (a relist deletes those it lacks)."""
        return set(self._versions.get(kind, ()))

    def delete(self, kind: str, obj: Mapping[str, Any]) -> None:
        """An object is gone; its UID is remembered a while, so no older version of it comes back.
        Without a UID (a relist found it missing) its name is, up to the version given (the list's)."""
        key = object_key(obj)
        meta = obj.get("metadata") or {}
        uid, version = meta.get("uid"), str(meta.get("resourceVersion") or "")
        if isinstance(uid, str) and uid:
            _remember(self._deleted_uids, uid, None)
        elif version.isdigit():
            _remember(self._tombstones, (kind, key), int(version))
        self._versions.get(kind, {}).pop(key, None)
        self.malformed.pop((kind, key), None)
        self._handlers[kind].delete(key)
        self.generation += 1

    def _upsert_node(self, key: str, view: NodeView) -> bool:
        self.nodes[key] = view
        for info in (self._flavor_infos or {}).values():
            if info.topology is not None:
                info.topology.upsert_node(view)
        return True

    def _delete_node(self, key: str) -> None:
        self.nodes.pop(key, None)
        for info in (self._flavor_infos or {}).values():
            if info.topology is not None:
                info.topology.remove_node(key)
        self.usage.remove_node(key)

    def _upsert_pod(self, key: str, view: PodView) -> bool:
        self.pods[key] = view
        wl_key = workload_key_of(view)
        if wl_key is not None:
            self.pods_of.setdefault(wl_key, set()).add(key)
        owner = self.owner_of_pod(view.namespace, view.labels, view.owners)
        if owner is not None:
            if view.terminal:
                self._forget_live_pod(owner, key)
            else:
                self.live_pods_of.setdefault(owner, set()).add(key)
        self.usage.add_bound_pod(view)
        return True

    def _track_group_member(self, key: str, pod: Mapping[str, Any]) -> None:
        """File a plain pod tasq manages under its group's Workload key (a pod whose labels no longer
        make it one leaves its group)."""
        group = POD_GROUP.member_key(pod)
        before = self._group_of_pod.get(key)
        if before is not None and before != group:
            self._forget_group_member(key)
        if group is not None:
            self._group_of_pod[key] = group
            self.group_pods.setdefault(group, {})[key] = pod

    def _forget_group_member(self, key: str) -> None:
        group = self._group_of_pod.pop(key, None)
        members = self.group_pods.get(group) if group is not None else None
        if group is not None and members is not None:
            members.pop(key, None)
            if not members:
                del self.group_pods[group]

    def group_members(self, workload_key: str) -> list[Mapping[str, Any]]:
        """The pods of a plain-pod group (or a single pod) by its Workload key, as the API has them."""
        return list((self.group_pods.get(workload_key) or {}).values())

    def _delete_pod(self, key: str) -> None:
        self._forget_group_member(key)
        view = self.pods.pop(key, None)
        if view is not None:
            wl_key = workload_key_of(view)
            if wl_key is not None and wl_key in self.pods_of:
                self.pods_of[wl_key].discard(key)
            owner = self.owner_of_pod(view.namespace, view.labels, view.owners)
            if owner is not None:
                self._forget_live_pod(owner, key)
        self.usage.remove_bound_pod(key)

    def _forget_live_pod(self, owner: OwnerKey, key: str) -> None:
        live = self.live_pods_of.get(owner)
        if live is not None:
            live.discard(key)
            if not live:
                del self.live_pods_of[owner]

    def _upsert_workload(self, key: str, wl: Workload) -> bool:
        """Phase: follow a Workload. A new admission (ours written, or one made before a restart) is
        reserved; a lost one (finished, evicted) is released; one rewritten in place (its failed
        nodes replaced) is released and reserved as it now reads; a pending one's spec is re-read."""
        entry = self.workloads.get(key)
        previous = entry.admission if entry is not None else None
        if entry is None:  # `workloads` thus iterates in `seq` order (an entry keeps its place and seq)
            self._seq += 1
            entry = self.workloads[key] = WorkloadEntry(wl, self._info(wl, self._seq))
        else:
            entry.obj, entry.held_read = wl, None
            if entry.fit is None and entry.restoring is None:
                entry.info = self._info(wl, entry.info.seq)
        owner = self.owner_of_workload(wl)
        if owner is not None:
            self.workload_of[owner] = key
        admission = entry.admission
        if admission is not None:
            entry.expecting = False
        if entry.finished or (admission is None and not entry.expecting):
            self._release(key)
        elif admission is not None and entry.fit is None:
            entry.restoring = admission  # (a newer version of one not yet restored replaces it)
        elif admission is not None and previous is not None and admission != previous:
            # Rewritten in place (failed nodes replaced): hold what it names now, not what it named.
            self._release(key)
            entry.restoring = admission
        return True

    def _delete_workload(self, key: str) -> None:
        entry = self.workloads.get(key)
        self._release(key)
        self.workloads.pop(key, None)
        if entry is not None:
            owner = self.owner_of_workload(entry.obj)
            if owner is not None and self.workload_of.get(owner) == key:
                del self.workload_of[owner]

    def _info(self, wl: Workload, seq: int) -> WorkloadInfo:
        return workload_info(wl, seq=seq, priority_classes=self.priority_values()[0],
                             order_by_eviction=self.order_by_eviction)

    # Flavors, topologies and queues: rare changes, so the parts built from them are rebuilt.

    def _upsert_flavor(self, key: str, flavor: ResourceFlavor) -> bool:
        before = self.flavors.get(key)
        self.flavors[key] = flavor
        # The trees are built from the spec alone: tasq's own finalizer patch (metadata) must not
        # rebuild every flavor's tree, a second or more at 10,000 nodes in one turn of the loop.
        if before is None or before.spec != flavor.spec:
            self._flavor_infos = None
        return True

    def _delete_flavor(self, key: str) -> None:
        self.flavors.pop(key, None)
        self._flavor_infos = None

    def _upsert_topology(self, key: str, topology: Topology) -> bool:
        self.topologies[key] = topology
        self._flavor_infos = None
        return True

    def _delete_topology(self, key: str) -> None:
        self.topologies.pop(key, None)
        self._flavor_infos = None

    def _upsert_cluster_queue(self, key: str, cq: ClusterQueue) -> bool:
        """False (nothing rebuilt) when only the status or the finalizers changed: tasq writes those
        itself, and admission does not read them; a deletion (it stops admissions) does rebuild."""
        before, self.cluster_queues[key] = self.cluster_queues.get(key), cq
        if (before is not None and before.spec == cq.spec
                and before.metadata.deletion_timestamp == cq.metadata.deletion_timestamp):
            return False
        self._quotas = self._ledger = None
        return True

    def _delete_cluster_queue(self, key: str) -> None:
        self.cluster_queues.pop(key, None)
        self._quotas = self._ledger = None

    def _upsert_cohort(self, key: str, cohort: Cohort) -> bool:
        """False when only the status changed (tasq writes it; the tree reads only the spec)."""
        before, self.cohorts[key] = self.cohorts.get(key), cohort
        if before is not None and before.spec == cohort.spec:
            return False
        self._quotas = self._ledger = None
        return True

    def _delete_cohort(self, key: str) -> None:
        self.cohorts.pop(key, None)
        self._quotas = self._ledger = None

    def _upsert_workload_priority_class(self, key: str, wpc: WorkloadPriorityClass) -> bool:
        """Read when a Job's Workload is created; changing a class does not change Workloads that
        already have its value (Kueue's rule), so admission has nothing to react to."""
        self.workload_priority_classes[key] = wpc
        return False

    def _delete_workload_priority_class(self, key: str) -> None:
        self.workload_priority_classes.pop(key, None)

    def _upsert_local_queue(self, key: str, lq: LocalQueue) -> bool:
        """False when only the status changed (as for a ClusterQueue)."""
        before, self.local_queues[key] = self.local_queues.get(key), lq
        return before is None or before.spec != lq.spec

    def _delete_local_queue(self, key: str) -> None:
        self.local_queues.pop(key, None)

    def _upsert_priority_class(self, key: str, obj: dict[str, Any]) -> bool:
        self.priority_classes[key] = obj
        return True

    def _delete_priority_class(self, key: str) -> None:
        self.priority_classes.pop(key, None)

    def _upsert_namespace(self, key: str, labels: dict[str, str]) -> bool:
        self.namespaces[key] = labels
        return True

    def _delete_namespace(self, key: str) -> None:
        self.namespaces.pop(key, None)

    # -- reservations ---------------------------------------------------------------------------

    def _release(self, key: str) -> None:
        """Give back what a workload holds (quota, nodes); its bound pods keep counting as pods."""
        entry = self.workloads.get(key)
        if entry is not None:
            entry.fit, entry.restoring, entry.expecting, entry.evicting_for = None, None, False, None
        self.usage.release(key)
        self.usage.release(key + _DOMAIN_SLICES)
        if self._ledger is not None:
            self._ledger.release(key)

    def record_admission(self, key: str, fit: WorkloadFit) -> None:
        """The loop admitted `key` (its nodes and quota are already reserved by the cycle)."""
        entry = self.workloads[key]
        entry.fit, entry.expecting = fit, True
        self.generation += 1

    def record_eviction(self, key: str, preemptor: str) -> None:
        """The loop decided to evict `key` for `preemptor`: it stays admitted (its quota and nodes
        held) but is claimed, until its reservation is released or `forget_eviction`."""
        entry = self.workloads.get(key)
        if entry is not None and entry.fit is not None:
            entry.evicting_for = preemptor

    def forget_eviction(self, key: str) -> None:
        """Writing the eviction of `key` did not happen (it finished, or lost its admission meanwhile)."""
        entry = self.workloads.get(key)
        if entry is not None:
            entry.evicting_for = None

    def forget_admission(self, key: str) -> None:
        """Writing our admission failed for good (the Workload is gone or changed): release it."""
        self._release(key)
        self.generation += 1

    def _restore(self, snapshot: AdmissionSnapshot) -> None:
        """Phase: re-reserve admissions seen in Workload statuses (after a restart, or written by
        another replica): quota from `status.admission`, hosts named by slices, and nodes of the
        rack/block slices placed as the topology engine would; then the workload's bound pods are
        counted again so each converts its share of the reservation exactly once."""
        for key, entry in self.workloads.items():  # in arrival (`seq`) order: see `_upsert_workload`
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
            # With every slice naming its host, a pod bound elsewhere (on a failed host that was
            # replaced, until its deletion shows) converts no share of the hosts named.
            named = set(node_usage) if not held else None
            for pod in mine:
                self.usage.remove_bound_pod(pod.key)
                elsewhere = named is not None and bool(pod.node_name) and pod.node_name not in named
                self.usage.add_bound_pod(pod, key + _ELSEWHERE if elsewhere else None)
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
            self._ledger = QuotaLedger.build(self._quotas, {name: CohortQuota.from_model(co)
                                                            for name, co in self.cohorts.items()})
            for key, entry in self.workloads.items():
                if entry.fit is not None and entry.fit.cluster_queue in self._quotas:
                    self._ledger.reserve(key, entry.fit.cluster_queue, entry.fit.quota_usage)
        return AdmissionSnapshot(
            cluster_queues=self._quotas,
            local_queues={key: lq.spec.cluster_queue for key, lq in self.local_queues.items()},
            flavors=self._flavor_infos, namespaces=self.namespaces, quota=self._ledger, usage=self.usage,
            features=self.features,
            stopped_local_queues=stopped_local_queues(self.local_queues.values()))

    def reserved_snapshot(self) -> AdmissionSnapshot:
        """The live snapshot with every admission seen in a Workload status reserved (`_restore`):
        what a failed-node replacement searches, so it never lands on capacity one already holds."""
        snapshot = self.snapshot()
        self._restore(snapshot)
        return snapshot

    def admission_state(self, now: float | None = None) -> AdmissionState:
        """One cycle's state: every held admission (with its reservation time, and marked evicting
        while an eviction decided or written has not released it yet, so no preemptor counts on it
        twice), and every waiting active workload queued (in arrival order) unless, at `now`, its
        requeue backoff has not ended (`status.requeueState.requeueAt`), or it cannot be queued and
        its status already says why (`_submit_waiting`). Admissions the cycle makes are reserved in
        this cache's Usage and ledger."""
        snapshot = self.snapshot()
        self._restore(snapshot)
        state = AdmissionState(snapshot)
        for key, entry in self.workloads.items():  # in arrival (`seq`) order: see `_upsert_workload`
            if entry.fit is not None:
                state.admitted[key] = entry.fit
                state.workloads[key] = entry.info
                state.queue_of[key] = entry.fit.cluster_queue
                read = entry.held_read
                if read is None:
                    reserved = entry.obj.condition(c.CONDITION_QUOTA_RESERVED)
                    since = (parse_timestamp(reserved.last_transition_time, entry.info.created)
                             if reserved is not None and reserved.status == "True" else None)
                    read = entry.held_read = (since, is_terminating(entry.obj))
                if read[0] is not None:
                    state.admitted_at[key] = read[0]
                if entry.evicting_for is not None or read[1]:
                    state.mark_evicting(key, entry.evicting_for)
            else:
                self._submit_waiting(state, key, entry, now)
        self._backlog.forget_unseen()
        return state

    def _submit_waiting(self, state: AdmissionState, key: str, entry: WorkloadEntry, now: float | None) -> None:
        """Queue a waiting Workload unless it finished, is inactive, or is in its requeue backoff at
        `now`. One that cannot be queued at all (its queue stopped, missing...) and whose status
        already says exactly why is left out: there is nothing to decide or write for it, and a held
        backlog of thousands would otherwise be re-explained every cycle. What its status says is
        read once per version of its object (controller.cache.backlog)."""
        obj = entry.obj
        if obj.is_finished or not obj.active or (now is not None and in_backoff(obj, now)):
            return
        resolved = state.resolved(entry.info)
        if isinstance(resolved, Pending) and self._backlog.says(key, obj) == (resolved.reason, resolved.message):
            return
        state.submit(entry.info, resolved)

    def workload_of_pod(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """(namespace, Workload name) a pod belongs to, by its topology-workload annotation."""
        meta = pod.get("metadata") or {}
        name = (meta.get("annotations") or {}).get(c.ANNOTATION_TOPOLOGY_WORKLOAD)
        return (str(meta.get("namespace", "")), str(name)) if name else None

    def ungating_input(self, namespace: str, workload: str) -> UngatingInput | None:
        """What the TopologyUngater plans from: the admitted, unfinished Workload's slices per pod
        set and the states of its pods; None when it is not (or no longer) admitted, or is being evicted."""
        key = f"{namespace}/{workload}"
        entry = self.workloads.get(key)
        admission = entry.admission if entry is not None else None
        if entry is None or admission is None or entry.finished or is_evicted(entry.obj):
            return None  # an evicted one's pods are being deleted: none is ungated any more
        slices: dict[str, list[DomainPods]] = {
            psa.name: psa.topology_assignment.domains() if psa.topology_assignment is not None else []
            for psa in admission.pod_set_assignments}
        ranking = {ps.name: (ps.topology_request, ps.count) for ps in entry.obj.spec.pod_sets}
        pods = [_pod_state(self.pods[p], ranking) for p in sorted(self.pods_of.get(key, ())) if p in self.pods]
        return UngatingInput(namespace=namespace, workload=workload, slices=slices, pods=pods)


def _remember(table: dict[_K, _V], key: _K, value: _V) -> None:
    """Put `key` last in a table of recent deletions, the oldest dropped past `DELETED_UIDS_KEPT`."""
    table.pop(key, None)
    table[key] = value
    if len(table) > DELETED_UIDS_KEPT:
        del table[next(iter(table))]


def _shared(value: Any) -> Any:
    """The one copy of a string (anything else as it is: the parse judges it)."""
    return sys.intern(value) if type(value) is str else value


SHARED_STRING_MAX = 64
"""Strings up to this long are shared by `_sharing`: names, UIDs, timestamps, images, quantities,
reasons; longer ones (messages) are left as decoded."""


def _sharing(value: Any) -> Any:
    """`value` rebuilt with every dict key and every string up to SHARED_STRING_MAX long the one copy
    (`sys.intern`). Each decoded object has its own copies of its keys (the JSON decoder shares
    them within one document only) and of the values every Job of a kind repeats (a template's image,
    restartPolicy, terminationMessagePath, the queue label): about half the memory of a Job kept
    whole. An object nested too deep for that is kept as it came."""
    try:
        return _shared_tree(value)
    except RecursionError:
        return value


def _shared_tree(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {sys.intern(k) if type(k) is str else k: _shared_tree(v) for k, v in value.items()}
    if kind is list:
        return [_shared_tree(v) for v in value]
    if kind is str and len(value) <= SHARED_STRING_MAX:
        return sys.intern(value)
    return value


def _not_newer(version: str, known: int | str) -> bool:
    """Whether `version` was already applied given the `known` one: equal, or, both integers, older."""
    if isinstance(known, int):
        return version.isdigit() and int(version) <= known
    return version == known


def _compact(kind: str, obj: Mapping[str, Any], meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` without its managedFields, which tasq never reads (often the largest part of an object
    kept whole: Jobs, plain pods, Workloads' metadata); a Node's label keys and values shared with
    every other node's (`sys.intern`: a block's, a rack's, a flavor's values repeat across
    thousands of nodes, and each decoded page has its own copies)."""
    labels = meta.get("labels")
    if kind == KIND_NODE and isinstance(labels, Mapping) and labels:
        labels = {_shared(k): _shared(v) for k, v in labels.items()}
        return {**obj, "metadata": {**{k: v for k, v in meta.items() if k != "managedFields"}, "labels": labels}}
    if "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _storing(store: dict[str, dict[str, Any]]) -> Callable[[str, dict[str, Any]], bool]:
    def upsert(key: str, obj: dict[str, Any]) -> bool:
        store[key] = obj
        return True
    return upsert


def _forgetting(store: dict[str, dict[str, Any]]) -> Callable[[str], None]:
    def delete(key: str) -> None:
        store.pop(key, None)
    return delete


def _pod_state(pod: PodView, ranking: Mapping[str, tuple[PodSetTopologyRequest | None, int]]) -> PodState:
    """The planner's view of a pod; its rank read by its pod set's topology request (`pod_rank`)."""
    gated = c.SCHEDULING_GATE_TOPOLOGY in pod.scheduling_gates
    pod_set = pod.annotations.get(c.ANNOTATION_TOPOLOGY_PODSET, "")
    request, count = ranking.get(pod_set, (None, 0))
    return PodState(
        name=pod.name, uid=pod.uid, pod_set=pod_set,
        completion_index=pod_rank(pod.labels, request, count), gated=gated,
        assigned=None if gated else dict(pod.node_selector), terminated=pod.terminal or pod.deleting,
        created=pod.creation_timestamp)


def _namespace_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    """What admission reads of a Namespace: its labels (a ClusterQueue's namespaceSelector)."""
    return {str(k): str(v) for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items()}
