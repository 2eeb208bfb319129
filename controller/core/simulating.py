"""What-if admission: apply manifests step by step and run admission cycles until nothing changes.

Queued plain pods not yet bound form Workloads as their pod groups would (controller.core.jobs.pod_group).
`Simulation.apply` takes one step's objects (later ones replace earlier ones of the same kind,
namespace and name, as `kubectl apply` does); `run` rebuilds the snapshot, keeps unfinished
admissions and cycles until quiet. Step i happens at `start + i` simulated seconds, so the same
input always gives the same output. A `Preempt` decision evicts its victims at once (a simulation
has no pods to wait for): Kueue's conditions on each victim, its quota released, the victim back in
its queue, and `preemptions` records who preempted whom and why. A queue stopped with HoldAndDrain
evicts its admitted Workloads the same way before each run (controller.core.admission.draining), and
one that runs again requeues them. Pure; `tasq simulate` reads the files and prints.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.features import FeatureGates
from controller.api.flavor import ResourceFlavor
from controller.api.meta import KubeObject, format_time
from controller.api.priority_class import WorkloadPriorityClass
from controller.api.quantity import add_into
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.views import NodeView, PodView
from controller.api.workload import Admission, Workload
from controller.core.admission.conditions import (
    is_evicted,
    is_terminating,
    mark_admitted,
    mark_evicted,
    mark_eviction_done,
    mark_finished,
    mark_pending,
    mark_preempted,
    mark_queue_restarted,
    preemption_message,
    released_by_drain,
)
from controller.core.admission.cycle import AdmissionState, Admit, Pending, Preempt, explain, rounds
from controller.core.admission.draining import QueueStops, StandingWorkload, drains, restarts
from controller.core.admission.flavoring import WorkloadFit, fit_from_admission
from controller.core.admission.restoring import domain_holdings
from controller.core.admission.snapshot import AdmissionSnapshot, build_snapshot
from controller.core.admission.workloads import WorkloadInfo, workload_info
from controller.core.jobs import pod_group
from controller.core.jobs.framework import (
    Finished,
    GenericJob,
    workload_manifest,
    workload_owner_refs,
    workload_priority_class_of,
)
from controller.core.jobs.integrations import INTEGRATIONS, POD_GROUP

SIMULATION_START = datetime(2026, 1, 1, tzinfo=UTC)
"""The simulated clock's origin: never the wall clock, so output is reproducible."""
GENERATE_NAME_SEED = 0
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The API server's alphabet for generated name suffixes (no vowels, no confusable characters)."""
NAME_SUFFIX_LENGTH = 5

_NAMESPACED = {c.KIND_POD, c.KIND_LOCAL_QUEUE, c.KIND_WORKLOAD, *(job.gvk.kind for job in INTEGRATIONS)}

ObjectKey = tuple[str, str, str]
"""(kind, namespace, name)."""
OwnerOf = ObjectKey
"""(kind, namespace, name) of the integrated object (a Job) that owns a Workload."""
_Model = TypeVar("_Model", bound=KubeObject)


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind", ""))
    namespace = str(meta.get("namespace") or "default") if kind in _NAMESPACED else ""
    return kind, namespace, str(meta.get("name", ""))


@dataclass(slots=True)
class _Tracked:
    """One workload across steps: its own copy of the model (status grows; its spec is the one it
    was built from, a Job's changes are compared with it), order keys and last fit."""

    model: Workload
    info: WorkloadInfo
    finished: str | None = None
    """"Succeeded" / "Failed" once its Job (or itself) finished."""
    fit: WorkloadFit | None = None
    restoring: Admission | None = None
    """The `status.admission` it came with, until its domain slices hold nodes (`_restore_domains`)."""


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """One victim of one preemption: at which step, who was preempted by whom, and why."""

    step: int
    victim: str
    victim_cluster_queue: str
    preemptor: str
    preemptor_cluster_queue: str
    reason: str
    """InClusterQueue, InCohortReclamation or InCohortReclaimWhileBorrowing."""
    message: str
    """The preemption's own message (`preempting 1 workload(s) in rack ...`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "victim": self.victim, "victimClusterQueue": self.victim_cluster_queue,
                "preemptor": self.preemptor, "preemptorClusterQueue": self.preemptor_cluster_queue,
                "reason": self.reason, "message": self.message}


MAX_PREEMPTIONS_PER_WORKLOAD = 4
"""A run stops preempting after this many evictions per tracked workload: policies such as
reclaimWithinCohort Any could otherwise let two queues take the same quota back and forth."""


@dataclass(slots=True)
class Simulation:
    """Everything applied so far and the workloads' outcomes; see the module docstring."""

    start: datetime = SIMULATION_START
    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    tracked: dict[str, _Tracked] = field(default_factory=dict)
    step: int = 0
    state: AdmissionState | None = None
    _explained: list[Pending] = field(default_factory=list)
    refused_jobs: dict[OwnerOf, str] = field(default_factory=dict)
    """(kind, namespace, name) of a queued object (a Job) that gets no Workload -> why (its label
    names a WorkloadPriorityClass that does not exist: Kueue creates none then)."""
    integrations: tuple[GenericJob, ...] = INTEGRATIONS
    """The integrated kinds whose queued objects get Workloads (controller.core.jobs.integrations)."""
    """Why each workload waits after the last `run`, by key (computed once there)."""
    preemptions: list[PreemptionRecord] = field(default_factory=list)
    """Every victim so far, in the order of the preemptions."""
    preempting: bool = True
    """Carry out Preempt decisions (`tasq simulate`); False leaves every Workload as it is and keeps
    only the evictions the input itself shows in flight (`tasq explain` on a live cluster)."""
    admitting: bool = True
    """Admit waiting Workloads; False keeps the input's admissions only (`tasq top` on a live
    cluster shows what is placed, not what the next cycle would place)."""
    _nodes: dict[ObjectKey, NodeView] = field(default_factory=dict)
    _pods: dict[ObjectKey, PodView] = field(default_factory=dict)
    _queued_pods: dict[ObjectKey, Mapping[str, Any]] = field(default_factory=dict)
    """Queued plain pods as given (their specs become their group's pod sets)."""
    _models: dict[ObjectKey, KubeObject] = field(default_factory=dict)
    """The applied Nodes and Pods as views, and tasq's kinds as models, each parsed once when applied
    (`objects` holds every other kind as given)."""
    features: FeatureGates = field(default_factory=FeatureGates)
    """Kueue's placement feature gates (`tasq simulate --feature-gates`)."""
    seed: int = GENERATE_NAME_SEED
    _random: random.Random = field(init=False)
    """Draws generated names; seeded, so the same input always gives the same names."""

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    @property
    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.step)

    def apply(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """One step's objects (known kinds only; the caller reports the others). One with
        `metadata.generateName` and no name is created under a new name, as the API server does."""
        self.step += 1
        for obj in objects:
            obj = self._named(obj)
            key = object_key(obj)
            if key[0] == c.KIND_NODE:
                self._nodes[key] = NodeView.from_dict(obj)
            elif key[0] == c.KIND_POD:
                self._pods[key] = PodView.from_dict(obj)
                self._queued_pods.pop(key, None)
                if POD_GROUP.member_key(obj) is not None:
                    self._queued_pods[key] = obj
            elif key[0] in _MODELS:
                self._models[key] = _MODELS[key[0]].model_validate(obj)
            else:
                self.objects[key] = dict(obj)

    def _named(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """The object itself, or a copy named generateName + 5 characters of the API server's
        alphabet, drawn from the simulation's seeded generator (never one already taken)."""
        meta = obj.get("metadata") or {}
        prefix = meta.get("generateName")
        if meta.get("name") or not prefix:
            return obj
        while True:
            name = prefix + "".join(self._random.choice(NAME_ALPHABET) for _ in range(NAME_SUFFIX_LENGTH))
            named = {**obj, "metadata": {**meta, "name": name}}
            key = object_key(named)
            if all(key not in taken for taken in (self.objects, self._nodes, self._pods, self._models)):
                return named

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for (k, _, _), obj in self.objects.items() if k == kind]

    def models_of(self, kind: type[_Model]) -> list[_Model]:
        """The applied objects of one of tasq's kinds, as parsed when applied."""
        return [m for m in self._models.values() if isinstance(m, kind)]

    def run(self) -> None:
        """Phases: sync workloads from Jobs/Workloads, rebuild the snapshot with the still-admitted
        ones re-reserved, queue the rest, cycle until quiet, write statuses."""
        self._sync_workloads()
        self._apply_stop_policies()
        state = self._rebuild()
        for tracked in sorted(self.tracked.values(), key=lambda t: t.info.seq):
            if self.admitting and tracked.finished is None and tracked.fit is None:
                state.submit(tracked.info)
        state.now = self.now.timestamp()
        in_flight = dict(state.evicting)
        budget = MAX_PREEMPTIONS_PER_WORKLOAD * len(self.tracked) if self.preempting else 0
        for step in rounds(state):
            for decision in step:
                if isinstance(decision, Admit):
                    tracked = self.tracked[decision.key]
                    tracked.fit = state.admitted[decision.key]
                    mark_admitted(tracked.model, decision.admission, self.now)
                elif isinstance(decision, Preempt) and budget >= len(decision.victims):
                    budget -= len(decision.victims)
                    self._evict(state, decision)
        if not self.preempting:
            state.evicting = in_flight  # claims of evictions not carried out are no one's
        self._explained = []
        for key in state.waiting():
            why = explain(state, key)
            if why is not None:
                mark_pending(self.tracked[key].model, why.reason, why.message, self.now)
                self._explained.append(why)
        self.state = state

    def _evict(self, state: AdmissionState, decision: Preempt) -> None:
        """Carry out a preemption at once: each victim gets Evicted=True (Preempted), Preempted=True
        with its reason, then (its pods being gone at once here) QuotaReserved=False, Admitted=False
        and no admission; its quota and nodes are released and it waits in its queue again."""
        preemptor = self.tracked[decision.key].model
        job = self._owner_of(preemptor)
        for victim in decision.victims:
            tracked = self.tracked[victim.key]
            message = preemption_message(
                decision.key, preemptor.metadata.uid or "", f"{job[1]}/{job[2]}" if job else None, None,
                victim.reason, _queue_path(state, decision.cluster_queue), _queue_path(state, victim.cluster_queue))
            mark_preempted(tracked.model, victim.reason, message, self.now)
            mark_eviction_done(tracked.model, self.now)
            tracked.fit = None
            state.release(victim.key, requeue=True)
            self.preemptions.append(PreemptionRecord(self.step, victim.key, victim.cluster_queue, decision.key,
                                                     decision.cluster_queue, victim.reason, decision.message))

    def _apply_stop_policies(self) -> None:
        """Queues stopped with HoldAndDrain evict their admitted Workloads at once (no pods to wait
        for: Evicted=True, then released, held by the queue), and a Workload a drain released whose
        queue runs again gets Requeued=True, as the operator's admission loop does."""
        stops = QueueStops.of({f"{lq.namespace or 'default'}/{lq.name}": lq for lq in self.models_of(LocalQueue)},
                              {cq.name: cq for cq in self.models_of(ClusterQueue)})
        standing = []
        for key, tracked in self.tracked.items():
            admission = tracked.model.reserved_admission
            standing.append(StandingWorkload(key, f"{tracked.info.namespace}/{tracked.info.queue_name}",
                                             admission.cluster_queue if admission is not None else None,
                                             is_evicted(tracked.model), tracked.finished is not None,
                                             released_by_drain(tracked.model)))
        for drain in drains(standing, stops):
            tracked = self.tracked[drain.key]
            mark_evicted(tracked.model, drain.reason, drain.message, self.now)
            mark_eviction_done(tracked.model, self.now)
            tracked.fit, tracked.restoring = None, None
        for restart in restarts(standing, stops):
            mark_queue_restarted(self.tracked[restart.key].model, restart.reason, restart.message, self.now)

    def _priority_classes(self) -> tuple[dict[str, int], int]:
        classes: dict[str, int] = {}
        default = 0
        for pc in self.of_kind(c.KIND_PRIORITY_CLASS):
            name = str((pc.get("metadata") or {}).get("name", ""))
            classes[name] = int(pc.get("value", 0))
            if pc.get("globalDefault"):
                default = classes[name]
        return classes, default

    def _sync_workloads(self) -> None:
        """Workload manifests as given, plus one per queued object of an integrated kind (a Job) that
        has none, built by its adapter; note which finished. A Workload owned by such an object
        stands for it, and finishes when it does (Kueue's job reconciler marks it Finished), even
        when the manifest itself says nothing."""
        classes, default = self._priority_classes()
        workload_classes = {wpc.name: wpc.value for wpc in self.models_of(WorkloadPriorityClass)}
        owners = {(job.gvk.kind, str((obj.get("metadata") or {}).get("namespace") or "default"),
                   str((obj.get("metadata") or {}).get("name", ""))): (job, obj)
                  for job in self.integrations for obj in self.of_kind(job.gvk.kind)}
        done = {key: _finished_reason(job.finished(obj)) for key, (job, obj) in owners.items()}
        workloads: list[tuple[Workload, str | None]] = []
        owned: set[OwnerOf] = set()
        for wl in self.models_of(Workload):
            owner = self._owner_of(wl)
            if owner is not None:
                owned.add(owner)
            workloads.append((wl, _workload_finished(wl) or done.get(owner or ("", "", ""))))
        given = {(wl.namespace, wl.name) for wl, _ in workloads}
        workloads += [(Workload.from_dict(wl), None) for wl in self._pod_group_workloads(classes, default, workload_classes)
                      if (wl["metadata"]["namespace"], wl["metadata"]["name"]) not in given]
        for key, (job, obj) in owners.items():
            wanted = workload_priority_class_of(obj)
            self.refused_jobs.pop(key, None)
            if not job.queue_name(obj) or key in owned:
                continue
            if wanted is not None and wanted not in workload_classes:
                self.refused_jobs[key] = f'WorkloadPriorityClass "{wanted}" not found: no Workload is created'
            else:
                manifest = workload_manifest(job, obj, classes, default, workload_classes)
                workloads.append((Workload.from_dict(manifest), done[key]))
        for wl, finished in workloads:
            self._track(wl, finished, classes)
            self._follow_spec(wl, classes)

    def _pod_group_workloads(self, classes: Mapping[str, int], default: int,
                             workload_classes: Mapping[str, int]) -> list[dict[str, Any]]:
        """One Workload per complete group of queued plain pods not yet bound (as the pod-group
        reconciler creates it); incomplete or disagreeing groups get none."""
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for pod in self._queued_pods.values():
            key = POD_GROUP.member_key(pod)
            if key is not None and not (pod.get("spec") or {}).get("nodeName"):
                groups.setdefault(key, []).append(pod)
        out = []
        for key in sorted(groups):
            group = pod_group.assemble(groups[key])
            if group.complete:
                out.append(pod_group.workload_from_pod_group(group, classes, default, workload_classes))
        return out

    def _owner_of(self, wl: Workload) -> OwnerOf | None:
        """(kind, namespace, name) of the integrated object that owns a Workload, if one does."""
        namespace = wl.metadata.namespace or "default"
        refs = workload_owner_refs(wl)
        for job in self.integrations:
            key = job.workload_owner_key(namespace, refs)
            if key is not None:
                return job.gvk.kind, namespace, key.split("/", 1)[1]
        return None

    def _track(self, wl: Workload, finished: str | None, classes: Mapping[str, int]) -> None:
        """Start tracking a workload the first time it is seen (a pre-admitted one keeps its quota);
        mark it Finished the first time it is seen finished."""
        key = _key_of(wl)
        tracked = self.tracked.get(key)
        if tracked is None:
            model = wl.model_copy(deep=True)
            if not model.metadata.creation_timestamp:  # created at the step that brought it
                model.metadata.creation_timestamp = format_time(self.now)
            info = workload_info(model, seq=len(self.tracked), priority_classes=classes,
                                 default_created=self.now.timestamp())
            tracked = self.tracked[key] = _Tracked(model, info)
            admission = model.reserved_admission
            if finished is None and admission is not None:
                # Admitted before this simulation: it keeps its quota (and named hosts).
                tracked.fit = fit_from_admission(info, admission)
                tracked.restoring = admission
        if finished is not None and tracked.finished is None:
            tracked.finished = finished
            tracked.fit = None
            message = "Job finished successfully" if finished == c.REASON_SUCCEEDED else "Job failed"
            mark_finished(tracked.model, finished == c.REASON_SUCCEEDED, message, self.now)

    def _follow_spec(self, wl: Workload, classes: Mapping[str, int]) -> None:
        """A Job (parallelism, requests, annotations...) or a Workload re-applied with a changed spec
        while the Workload waits: the Workload takes the new spec, keeping its creation time, place in
        line and status, as Kueue's job reconciler updates a suspended Job's Workload and the API an
        updated Workload. An admitted or finished one is left as is."""
        tracked = self.tracked[_key_of(wl)]
        if tracked.fit is not None or tracked.finished is not None or wl.spec == tracked.model.spec:
            return
        model = wl.model_copy(deep=True)
        model.metadata.creation_timestamp = tracked.model.metadata.creation_timestamp
        info = workload_info(model, seq=tracked.info.seq, priority_classes=classes,
                             default_created=self.now.timestamp())
        model.status = tracked.model.status
        tracked.model, tracked.info = model, info

    def _rebuild(self) -> AdmissionState:
        """A fresh snapshot of everything applied; admissions still running keep quota and nodes."""
        nodes = list(self._nodes.values())
        pods = list(self._pods.values())
        ns_metas = [ns.get("metadata") or {} for ns in self.of_kind(c.KIND_NAMESPACE)]
        namespaces = {str(meta.get("name", "")): dict(meta.get("labels") or {}) for meta in ns_metas}
        running = {key: t.fit for key, t in self.tracked.items() if t.fit is not None and t.finished is None}
        snapshot = build_snapshot(
            self.models_of(ClusterQueue), self.models_of(LocalQueue), self.models_of(ResourceFlavor),
            self.models_of(Topology),
            nodes, pods, namespaces, {key: fit.node_usage for key, fit in running.items() if fit.node_usage},
            self.models_of(Cohort))
        snapshot.features = self.features
        running.update(self._restore_domains(snapshot, pods, nodes))
        state = AdmissionState(snapshot)
        for key, fit in running.items():
            if fit.cluster_queue in snapshot.cluster_queues:
                snapshot.quota.reserve(key, fit.cluster_queue, fit.quota_usage)
            state.admitted[key] = fit
            state.workloads[key] = self.tracked[key].info
            state.queue_of[key] = fit.cluster_queue
            if is_terminating(self.tracked[key].model):
                state.mark_evicting(key)  # evicted, its quota held until its pods are gone
        return state

    def _restore_domains(self, snapshot: AdmissionSnapshot, pods: Sequence[PodView],
                         nodes: Sequence[NodeView]) -> dict[str, WorkloadFit]:
        """Workloads admitted before the simulation, seen for the first time: their slices naming a
        rack or block (not a host) take nodes of that domain in `snapshot.usage` now, and keep them
        in later steps through their fit (in input order, each seeing those restored before it)."""
        by_name = {node.name: node for node in nodes}
        out: dict[str, WorkloadFit] = {}
        for key, tracked in sorted(self.tracked.items(), key=lambda kv: kv[1].info.seq):
            if tracked.restoring is None or tracked.fit is None or tracked.finished is not None:
                continue
            held = domain_holdings(snapshot, tracked.info, tracked.restoring, pods, by_name)
            node_usage = {node: dict(vector) for node, vector in tracked.fit.node_usage.items()}
            for node, vector in held.items():
                add_into(node_usage.setdefault(node, {}), vector)
            tracked.fit = out[key] = replace(tracked.fit, node_usage=node_usage)
            tracked.restoring = None
        return out

    def workloads(self) -> list[Workload]:
        """Every workload with its status, by namespace then name."""
        return [self.tracked[key].model for key in sorted(self.tracked)]

    def explanations(self) -> list[Pending]:
        """Why each pending workload waits, by key (after the last `run`, which wrote the same
        reasons into the QuotaReserved conditions; not recomputed)."""
        return list(self._explained)


def _queue_path(state: AdmissionState, cluster_queue: str) -> str:
    """Kueue's path of a ClusterQueue in its cohort tree: `/cohort/cq`, `/cq` without a cohort."""
    quota = state.snapshot.cluster_queues.get(cluster_queue)
    cohort = quota.cohort if quota is not None else None
    return f"/{cohort}/{cluster_queue}" if cohort else f"/{cluster_queue}"


def _finished_reason(finished: Finished | None) -> str | None:
    """The Workload's Finished reason for an object that ended (None while it runs)."""
    if finished is None:
        return None
    return c.REASON_SUCCEEDED if finished.succeeded else c.REASON_FAILED


def _key_of(wl: Workload) -> str:
    """`namespace/name` of a Workload (namespace `default` when absent)."""
    return f"{wl.metadata.namespace or 'default'}/{wl.name}"


def _workload_finished(wl: Workload) -> str | None:
    cond = wl.condition(c.CONDITION_FINISHED)
    if cond is None or cond.status != "True":
        return None
    return c.REASON_FAILED if cond.reason == c.REASON_FAILED else c.REASON_SUCCEEDED


_MODELS: dict[str, type[KubeObject]] = {
    c.KIND_WORKLOAD: Workload, c.KIND_CLUSTER_QUEUE: ClusterQueue, c.KIND_LOCAL_QUEUE: LocalQueue,
    c.KIND_RESOURCE_FLAVOR: ResourceFlavor, c.KIND_TOPOLOGY: Topology, c.KIND_COHORT: Cohort,
    c.KIND_WORKLOAD_PRIORITY_CLASS: WorkloadPriorityClass}
"""tasq's kinds, parsed into their models when applied."""
