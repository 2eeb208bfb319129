"""The job framework's contract: what the generic reconciler asks of each integrated kind.

`GenericJob` is the Protocol one pure adapter per single-object kind implements (Kueue's GenericJob,
with the object passed in rather than wrapped); `ComposableJob` the one for a kind whose Workload
belongs to a group of objects read from the cache (Kueue's ComposableJob: a pod group); the shared pure types and transforms every kind uses live
here too: Kueue's Workload naming for any owner kind, the pod-set infos an admission gives
(`pod_set_infos`), a merge patch of one pod template from such an info, and its restore.
Called by controller.kube.job_reconciling (through controller.core.jobs.integrations) and the adapters.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from controller.api import constants as c
from controller.api.views import OwnerRef
from controller.api.workload import Admission, PodSet, Workload
from controller.core.admission.workloads import priority_of

_MAX_NAME_PREFIX = 63 - 6  # the name must stay a DNS label: prefix + "-" + 5 hex characters
_HASH_LENGTH = 5


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    """An integrated kind's identity and its REST resource (plural)."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True, slots=True)
class Finished:
    """A job that ended: whether it succeeded, and the Workload's Finished message."""

    succeeded: bool
    message: str


@dataclass(frozen=True, slots=True)
class PodSetRunInfo:
    """What an admission puts into one pod set's template (Kueue's podset.PodSetInfo): the flavors'
    nodeSelector and tolerations, the topology annotations, tasq's label and scheduling gate, and the
    admitted count (smaller than the pod set's with partial admission)."""

    name: str
    count: int | None
    """Pods admitted; None when the admission does not say (all of the pod set's)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()


class WebhookAction(enum.Enum):
    """What an integration's admission webhook does to its kind's objects (webhooks.handlers holds
    one handler per action, so a kind names actions, never handler code)."""

    SUSPEND = "suspend"
    """Mutating: a queued object is created suspended (`spec.suspend`), started once admitted."""
    MANAGE_POD = "manage-pod"
    """Mutating: a queued plain pod is created behind the admission and topology gates, labelled
    and finalized as Kueue's managed pods are."""
    VALIDATE = "validate"
    """Validating: the kind's own rules (webhooks.validation) on CREATE, and on UPDATE what may not change."""
    VALIDATE_RUNNING_JOB = "validate-running-job"
    """Validating: as VALIDATE, plus what a running (admitted) Job may not change."""
    VALIDATE_GROUP_MEMBER = "validate-group-member"
    """Validating: as VALIDATE, plus on CREATE the conflicts with the pods of its group the process knows."""

    @property
    def mutating(self) -> bool:
        return self in (WebhookAction.SUSPEND, WebhookAction.MANAGE_POD)


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
"""An admission request's operation, as a webhook rule names it."""


@dataclass(frozen=True, slots=True)
class WebhookRule:
    """One admission webhook an integration needs on its kind, for objects naming a queue: its
    handler id (the URL path), what it does and on which operations. The webhook configurations
    and the handler registrations are built from these (webhooks.configurations, webhooks.handlers)."""

    handler_id: str
    action: WebhookAction
    operations: tuple[Operation, ...] = ("CREATE", "UPDATE")


@dataclass(frozen=True, slots=True)
class MemberWrite:
    """One write to one member of a composable job (pods cannot be suspended, so a group runs and
    stops by writes to each member): a merge patch of the member, or, with `patch` None, its
    deletion. `name`: the member's name (in the group's namespace)."""

    name: str
    patch: Mapping[str, Any] | None = None

    @property
    def deletes(self) -> bool:
        return self.patch is None


def workload_name_for_owner(name: str, kind: str, group: str) -> str:
    """Kueue's Workload name for an owner of any kind: `<kind lowercased>-<name>` cut to leave room
    for `-<hash5>`, the hash of the owner's kind, group and name keeping it unique."""
    prefix = f"{kind.lower()}-{name}"[:_MAX_NAME_PREFIX]
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}".encode()).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def pod_set_infos(workload_name: str, admission: Admission,
                  flavors: Mapping[str, Mapping[str, Any]]) -> list[PodSetRunInfo]:
    """One info per admitted pod set: its flavors' nodeLabels and tolerations (in flavor-name
    order), and for a pod set with a topology assignment the topology-workload/-podset annotations,
    tasq's label and the `kueue.x-k8s.io/topology` gate. `flavors`: flavor name -> its spec."""
    out = []
    for psa in admission.pod_set_assignments:
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor in sorted(set(psa.flavors.values())):
            spec = flavors.get(flavor) or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations.extend(t for t in spec.get("tolerations") or [] if t not in tolerations)
        topology = psa.topology_assignment is not None
        out.append(PodSetRunInfo(
            name=psa.name, count=psa.count,
            node_selector=selector, tolerations=tuple(tolerations),
            annotations={c.ANNOTATION_TOPOLOGY_WORKLOAD: workload_name,
                         c.ANNOTATION_TOPOLOGY_PODSET: psa.name} if topology else {},
            labels={c.LABEL_TAS: c.LABEL_TAS_VALUE} if topology else {},
            scheduling_gates=(c.SCHEDULING_GATE_TOPOLOGY,) if topology else ()))
    return out


def template_run_patch(template: Mapping[str, Any], infos: Sequence[PodSetRunInfo]) -> dict[str, Any]:
    """The merge-patch value of a pod template that the `infos` start (several infos for one
    template merge, later ones winning on a key): the nodeSelector and tolerations added to the
    template's own, the annotations and labels, and the gates the template lacks appended (the gate
    in the template makes every pod start gated even when no Pod webhook answers; the Pod webhook,
    selected by the label, stays a second line and never adds it twice)."""
    pod_spec = template.get("spec") or {}
    selector = dict(pod_spec.get("nodeSelector") or {})
    tolerations = list(pod_spec.get("tolerations") or [])
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    wanted_gates: list[str] = []
    for info in infos:
        selector.update(info.node_selector)
        tolerations.extend(t for t in info.tolerations if t not in tolerations)
        annotations.update(info.annotations)
        labels.update(info.labels)
        wanted_gates.extend(g for g in info.scheduling_gates if g not in wanted_gates)
    pod_patch: dict[str, Any] = {"nodeSelector": selector or None}
    if tolerations:
        pod_patch["tolerations"] = tolerations
    gates = list(pod_spec.get("schedulingGates") or [])
    missing = [g for g in wanted_gates if not any(have.get("name") == g for have in gates)]
    if missing:
        pod_patch["schedulingGates"] = [*gates, *({"name": g} for g in missing)]  # replaced whole
    patched: dict[str, Any] = {"spec": pod_patch}
    meta = {k: v for k, v in (("annotations", annotations), ("labels", labels)) if v}
    if meta:
        patched["metadata"] = meta
    return patched


def _map_patch(have: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge-patch value turning map `have` into `want` (keys to drop set to null)."""
    if not want:
        return None
    return {**{k: None for k in have if k not in want}, **{k: v for k, v in want.items() if have.get(k) != v}}


def template_restore_patch(current: Mapping[str, Any], original: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge-patch value of a pod template putting back what starting it changed: the
    nodeSelector, tolerations, scheduling gates, labels and annotations of `original` (the template
    the Workload recorded at creation; Kueue restores its pod sets' info the same way when it stops
    a job). None when they already match."""
    spec_patch: dict[str, Any] = {}
    meta_patch: dict[str, Any] = {}
    for name, target, have, want in (
            ("nodeSelector", spec_patch, current.get("spec"), original.get("spec")),
            ("labels", meta_patch, current.get("metadata"), original.get("metadata")),
            ("annotations", meta_patch, current.get("metadata"), original.get("metadata"))):
        have_map, want_map = (have or {}).get(name) or {}, (want or {}).get(name) or {}
        if have_map != want_map:
            target[name] = _map_patch(have_map, want_map)
    for name in ("tolerations", "schedulingGates"):
        want_list = (original.get("spec") or {}).get(name) or []
        if ((current.get("spec") or {}).get(name) or []) != want_list:
            spec_patch[name] = want_list or None  # a merge patch replaces a list whole
    if not spec_patch and not meta_patch:
        return None
    template: dict[str, Any] = {}
    if spec_patch:
        template["spec"] = spec_patch
    if meta_patch:
        template["metadata"] = meta_patch
    return template


def stopped(job: GenericJob, obj: Mapping[str, Any]) -> bool:
    """The object is suspended, its controller counts no pod left and no run leaves anything to
    clear: nothing of it runs, so a Workload created for it now is admitted like one whose object
    never ran (Kueue waits for the same before it creates a Workload for a job it found running)."""
    return job.is_suspended(obj) and job.pods_left(obj) == 0 and job.clear_start_patch(obj) is None


def workload_owner_refs(wl: Workload) -> tuple[OwnerRef, ...]:
    """The Workload's owner references as the adapters read them."""
    return tuple(OwnerRef(r.api_version, r.kind, r.name, r.uid, bool(r.controller)) for r in wl.metadata.owner_references)


def workload_priority_class_of(obj: Mapping[str, Any]) -> str | None:
    """The WorkloadPriorityClass an object's `kueue.x-k8s.io/priority-class` label names, if any."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    name = labels.get(c.LABEL_PRIORITY_CLASS)
    return str(name) if name else None


def queue_name_of(obj: Mapping[str, Any]) -> str | None:
    """The LocalQueue an object's `kueue.x-k8s.io/queue-name` label names, if any."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    name = labels.get(c.LABEL_QUEUE_NAME)
    return str(name) if name is not None else None


def missing_priority_class(job: GenericJob, obj: Mapping[str, Any], known: Mapping[str, Any],
                           known_workload_classes: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) when the class that gives the object's priority does not exist: the
    WorkloadPriorityClass its `kueue.x-k8s.io/priority-class` label names (which wins, so the pods'
    PriorityClass is then not looked at, as in Kueue), else the pods' PriorityClass. None when
    nothing is missing."""
    workload_class = workload_priority_class_of(obj)
    if workload_class is not None:
        if workload_class in known_workload_classes:
            return None
        return c.EVENT_REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND, f'WorkloadPriorityClass "{workload_class}" not found'
    name = job.priority_class_name(obj)
    if name and name not in known:
        return c.EVENT_REASON_ERR_WORKLOAD_COMPOSE, f'priorityclasses.scheduling.k8s.io "{name}" not found'
    return None


def _workload_priority(job: GenericJob, obj: Mapping[str, Any], priority_classes: Mapping[str, int],
                       default_priority: int, workload_priority_classes: Mapping[str, int]) -> dict[str, Any]:
    """Kueue's order: the WorkloadPriorityClass the object's label names wins (its value, whatever
    the pods say); else the pods' priority or PriorityClass; else the default. The Workload spec
    fields that say so (priority, and the priorityClassRef). A label naming a class not in
    `workload_priority_classes` is the caller's to refuse before (`missing_priority_class`: Kueue
    creates no Workload then): here it counts as no label."""
    wpc = workload_priority_class_of(obj)
    if wpc is not None and wpc in workload_priority_classes:
        return {"priority": workload_priority_classes[wpc], "priorityClassRef": {
            "group": c.GROUP, "kind": c.KIND_WORKLOAD_PRIORITY_CLASS, "name": wpc}}
    class_name = job.priority_class_name(obj)
    out: dict[str, Any] = {"priority": priority_of(job.pod_priority(obj), class_name, priority_classes,
                                                   default_priority)}
    if class_name:
        out["priorityClassRef"] = {"group": c.PRIORITY_CLASS_GROUP, "kind": c.KIND_PRIORITY_CLASS,
                                   "name": class_name}
    return out


def workload_manifest(job: GenericJob, obj: Mapping[str, Any], priority_classes: Mapping[str, int] | None = None,
                      default_priority: int = 0,
                      workload_priority_classes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The Workload the reconciler creates for an object of an integrated kind: Kueue's name, the
    queue label and name, a controller owner reference to the object, its creation time, priority
    (`_workload_priority`; `priority_classes` and `workload_priority_classes` map class names to
    values) and the adapter's pod sets."""
    meta = obj.get("metadata") or {}
    queue = job.queue_name(obj)
    name = str(meta.get("name", ""))
    wl_meta: dict[str, Any] = {
        "name": job.workload_name(obj),
        "namespace": str(meta.get("namespace") or "default"),
        "labels": {c.LABEL_QUEUE_NAME: queue} if queue is not None else {},
        "ownerReferences": [{
            "apiVersion": job.gvk.api_version, "kind": job.gvk.kind, "name": name,
            "uid": str(meta.get("uid", "")), "controller": True, "blockOwnerDeletion": True,
        }],
    }
    if meta.get("creationTimestamp"):
        wl_meta["creationTimestamp"] = str(meta["creationTimestamp"])
    wl_spec: dict[str, Any] = {
        "queueName": queue or "",
        **_workload_priority(job, obj, priority_classes or {}, default_priority, workload_priority_classes or {}),
        "podSets": job.pod_sets(obj),
    }
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD, "metadata": wl_meta, "spec": wl_spec}


class SingleObjectJob:
    """The identity half of `GenericJob` for a kind whose one object owns its Workload (a Job, a
    JobSet; not a composable kind): the object's own key, the Workload's owner reference of this
    kind, Kueue's name `<kind>-<name>-<hash5>` and the queue label. An adapter subclasses it, sets
    `gvk` and adds the rest (its pods' owner key, pod sets, patches and reads)."""

    gvk: GroupVersionKind

    def owner_key(self, obj: Mapping[str, Any]) -> str | None:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def workload_owner_key(self, namespace: str, owners: Sequence[OwnerRef]) -> str | None:
        """The object the Workload's owner reference of this kind (and apiVersion) names."""
        for owner in owners:
            if owner.kind == self.gvk.kind and owner.api_version == self.gvk.api_version:
                return f"{namespace}/{owner.name}"
        return None

    def owns(self, obj: Mapping[str, Any], owners: Sequence[OwnerRef]) -> bool:
        uid = (obj.get("metadata") or {}).get("uid")
        return any(owner.kind == self.gvk.kind and owner.uid == uid for owner in owners)

    def workload_name(self, obj: Mapping[str, Any]) -> str:
        return workload_name_for_owner(str((obj.get("metadata") or {}).get("name", "")), self.gvk.kind, self.gvk.group)

    def queue_name(self, obj: Mapping[str, Any]) -> str | None:
        return queue_name_of(obj)


class GenericJob(Protocol):
    """One integrated kind, as the generic reconciler drives it. Stateless: one instance per kind;
    every method reads the object passed in (the kind's object as the API serves it) and returns a
    value or a merge patch, never writes. A composable kind (several objects, one Workload, such as a
    pod group) maps each of its objects to the one owner key (`owner_key`) the reconciler works on."""

    gvk: GroupVersionKind
    webhooks: tuple[WebhookRule, ...]
    """The admission webhooks its queued objects go through (defaulting, then validation)."""

    def owner_key(self, obj: Mapping[str, Any]) -> str | None:
        """`namespace/name` of the Workload owner this object belongs to (itself for a Job; the
        group for a member of a composable kind); None when it takes no part."""
        ...

    def pod_owner_key(self, namespace: str, labels: Mapping[str, str], owners: Sequence[OwnerRef]) -> str | None:
        """The owner key of this kind's object a pod belongs to (a Job: its controller reference),
        None when it belongs to none: a stopped object gets its Workload, or restarts, only once
        the cache holds no live pod of it."""
        ...

    def workload_owner_key(self, namespace: str, owners: Sequence[OwnerRef]) -> str | None:
        """The owner key of this kind's object a Workload (in `namespace`, with these owner
        references) belongs to, None when it belongs to none of this kind."""
        ...

    def owns(self, obj: Mapping[str, Any], owners: Sequence[OwnerRef]) -> bool:
        """The Workload with these owner references belongs to this very object (same uid), not to
        a deleted one of the same name."""
        ...

    def workload_name(self, obj: Mapping[str, Any]) -> str:
        """The name of the object's Workload (`workload_name_for_owner` for a plain kind)."""
        ...

    def queue_name(self, obj: Mapping[str, Any]) -> str | None:
        ...

    def priority_class_name(self, obj: Mapping[str, Any]) -> str | None:
        """The pod PriorityClass the object's pods name (the Workload's priority when no
        WorkloadPriorityClass label names one)."""
        ...

    def pod_priority(self, obj: Mapping[str, Any]) -> int | None:
        """The explicit priority the object's pod template sets, if any (wins over its PriorityClass)."""
        ...

    def pod_sets(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The Workload's `spec.podSets` (name, count, template, topologyRequest) built from the object."""
        ...

    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        ...

    def suspend_patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The merge patch that suspends the object (its controller then deletes its pods)."""
        ...

    def run_patch(self, obj: Mapping[str, Any], infos: Sequence[PodSetRunInfo]) -> dict[str, Any]:
        """The merge patch that starts the admitted object: each pod set's template gets its info;
        the object is unsuspended."""
        ...

    def restore_patch(self, obj: Mapping[str, Any], recorded: Sequence[PodSet]) -> dict[str, Any] | None:
        """The merge patch that puts back the pod templates the Workload recorded at creation
        (`recorded`: its pod sets); None when nothing differs. Sent only once the object is
        suspended and `pods_active` is 0."""
        ...

    def clear_start_patch(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status merge patch clearing what a stopped run leaves (a Job's startTime), None when
        there is nothing to clear (Kueue clears it when it stops a job)."""
        ...

    def finished(self, obj: Mapping[str, Any]) -> Finished | None:
        ...

    def pods_left(self, obj: Mapping[str, Any]) -> int:
        """Pods the object's controller still counts (active and terminating): a stopped object's
        reservation is released, and its template restored, only once none is left."""
        ...

    def pods_active(self, obj: Mapping[str, Any]) -> int:
        """Pods the object's controller counts as active (terminating ones not): the API server lets
        a suspended object's pod templates change only once none is (`restore_patch` waits for it)."""
        ...

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        """All pods the admission started are ready (waitForPodsReady's PodsReady condition)."""
        ...

    def suspension_acknowledged(self, obj: Mapping[str, Any]) -> bool:
        """The object's controller has acted on its suspension (no pod it made before is missing
        from its counters)."""
        ...


Group = TypeVar("Group")
"""A composable kind's view of one group, as its adapter assembles it from the members."""


class ComposableJob(Protocol[Group]):
    """One composable kind (Kueue's ComposableJob), as the generic reconciler drives it: several
    objects (members) form one job, keyed by its Workload's `namespace/name` (`member_key`); the
    reconciler reads the members from the cache, the adapter assembles them (`load`) and answers
    every question about the group with a value or the per-member writes it needs, never writing.
    Stateless: one instance per kind."""

    gvk: GroupVersionKind
    webhooks: tuple[WebhookRule, ...]
    """The admission webhooks its queued members go through (defaulting, then validation)."""

    def member_key(self, obj: Mapping[str, Any]) -> str | None:
        """`namespace/<Workload name>` of the group this object is a member of; None when it takes no part."""
        ...

    def owns_workload(self, owners: Sequence[OwnerRef]) -> bool:
        """A Workload with these owner references is this kind's (not another integration's)."""
        ...

    def load(self, members: Sequence[Mapping[str, Any]]) -> Group:
        """The group the members (every object the cache files under one key) form."""
        ...

    def refusals(self, group: Group) -> list[tuple[Mapping[str, Any], str]]:
        """(member, message) for each member that disagrees with its group: no Workload is built."""
        ...

    def waiting(self, group: Group) -> str | None:
        """Why the group cannot have its Workload yet (members missing), None once it can."""
        ...

    def workload_manifest(self, group: Group, priority_classes: Mapping[str, int], default_priority: int,
                          workload_priority_classes: Mapping[str, int]) -> dict[str, Any]:
        """The Workload built from a complete group."""
        ...

    def excess_writes(self, group: Group) -> list[MemberWrite]:
        """The writes that remove members beyond the group's count (never started ones first)."""
        ...

    def run_writes(self, group: Group, admission: Admission, infos: Sequence[PodSetRunInfo]) -> list[MemberWrite]:
        """The writes that start the members the admission covers and that have not started."""
        ...

    def stop_writes(self, group: Group) -> list[MemberWrite]:
        """The writes that stop the group (an eviction, a deactivation): each running member's."""
        ...

    def release_writes(self, group: Group, workload_exists: bool, workload_finished: bool) -> list[MemberWrite]:
        """The writes that let members go whose end the Workload no longer needs to see (their
        finalizer removed): every member's once the Workload finished, a started member's once
        its Workload is gone, a member's that can no longer count for it."""
        ...

    def finished(self, group: Group) -> Finished | None:
        ...

    def pods_left(self, group: Group) -> int:
        """Members that may still run on a node: the reservation is released only once none is."""
        ...

    def pods_ready(self, group: Group, admission: Admission) -> bool:
        """Every member the admission started is ready or succeeded (waitForPodsReady's PodsReady)."""
        ...

    def event_object(self, group: Group) -> Mapping[str, Any]:
        """The member Events about the group as a whole are recorded on."""
        ...
