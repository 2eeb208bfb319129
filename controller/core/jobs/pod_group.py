"""Plain pods as Kueue's pod integration takes them: groups, their Workload, starting and finishing them.

Pure transforms over pods in their wire form (dicts): which pods tasq manages, which group a pod
belongs to (Kueue's `pod-group-name` label and total-count annotation, or the coscheduling plugin's
labels; a pod with only the queue label is a group of one), the group's pod sets by role hash, the
Workload built once the group is complete, the patch that starts one pod of an admitted group, when
the group is finished, which pods an eviction stops, which pods are excess and when a pod's
finalizer may go. `POD_GROUP` is the composable-job adapter over them (`framework.ComposableJob`),
listed by controller.core.jobs.integrations and driven by the generic reconciler
(controller.kube.job_reconciling); the cache and the Pod webhooks call the functions too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from controller.api import constants as c
from controller.api.views import TERMINAL_PHASES, OwnerRef
from controller.api.workload import DEFAULT_POD_SET_NAME, MAX_POD_SETS, Admission
from controller.core.admission.workloads import (
    priority_of,
    topology_request_from_annotations,
    topology_request_to_dict,
)
from controller.core.jobs.framework import (
    Finished,
    GroupVersionKind,
    MemberWrite,
    PodSetRunInfo,
    WebhookAction,
    WebhookRule,
    workload_name_for_owner,
    workload_priority_class_of,
)

INTEGRATED_OWNERS: Final = frozenset({("batch", c.KIND_JOB), ("jobset.x-k8s.io", "JobSet")})
"""(API group, kind) of the controllers whose pods are theirs, not plain pods (Kueue skips a pod
whose controller is an integration it runs; their Workload is the owner's)."""
GROUP_NAME_LABELS: Final = (c.LABEL_POD_GROUP_NAME, c.LABEL_COSCHEDULING_NAME, c.LABEL_SCHEDULING_POD_GROUP)
"""The labels that name a pod's group, Kueue's first (a pod carrying two is named by the first)."""
TASQ_GATES: Final = frozenset({c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY})
POD_GVK: Final = GroupVersionKind("", "v1", c.KIND_POD, "pods")
POD_FINALIZER: Final = c.LABEL_MANAGED
"""Kueue's finalizer on a managed pod (it shares the managed label's key): the pod's end state stays
readable until the group's Workload has recorded it."""
_ROLE_HASH_LENGTH: Final = 8


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _meta(pod).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    notes = _meta(pod).get("annotations")
    return notes if isinstance(notes, Mapping) else {}


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def pod_name(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("name") or "")


def queue_name(pod: Mapping[str, Any]) -> str | None:
    value = _labels(pod).get(c.LABEL_QUEUE_NAME)
    return str(value) if value else None


def _controller_owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(API group, kind) of the pod's controller, if it has one."""
    for ref in _meta(pod).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            api_version = str(ref.get("apiVersion") or "")
            return (api_version.rpartition("/")[0], str(ref.get("kind") or ""))
    return None


def is_managed(pod: Mapping[str, Any]) -> bool:
    """tasq manages the pod as a plain pod: it names a queue and no integrated kind controls it."""
    return queue_name(pod) is not None and _controller_owner(pod) not in INTEGRATED_OWNERS


def group_name(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(label key, group name) of a grouped pod; None for a single pod."""
    labels = _labels(pod)
    for key in GROUP_NAME_LABELS:
        value = labels.get(key)
        if value:
            return key, str(value)
    return None


def workload_name_for_pod(name: str) -> str:
    """Kueue's `pod-<name>-<hash5>` for a single pod (the hash of kind, core group and name)."""
    return workload_name_for_owner(name, c.KIND_POD, "")


def workload_name(pod: Mapping[str, Any]) -> str:
    """The Workload of the pod's group: the group's name (Kueue), or a single pod's own."""
    named = group_name(pod)
    return named[1] if named is not None else workload_name_for_pod(pod_name(pod))


def workload_key(pod: Mapping[str, Any]) -> str | None:
    """`namespace/<Workload name>` for a managed pod, the key its group is reconciled by; else None."""
    if not is_managed(pod):
        return None
    return f"{_meta(pod).get('namespace') or 'default'}/{workload_name(pod)}"


def _positive_int(value: Any) -> int | None:
    if not isinstance(value, str) or not value.isdigit():
        return None
    number = int(value)
    return number if number >= 1 else None


def total_count(pod: Mapping[str, Any]) -> int | None:
    """How many pods the group has: Kueue's total-count annotation; for the coscheduling plugin's
    legacy labels without it, min-available (the gang is exactly its minimum); 1 for a single pod.
    None when it cannot be read (the validating webhook refuses such pods)."""
    named = group_name(pod)
    if named is None:
        return 1
    annotated = _annotations(pod).get(c.ANNOTATION_POD_GROUP_TOTAL_COUNT)
    if annotated is not None:
        return _positive_int(annotated)
    if named[0] == c.LABEL_COSCHEDULING_NAME:
        return min_available(pod)
    return None


def min_available(pod: Mapping[str, Any]) -> int | None:
    """The coscheduling plugin's min-available label (a positive integer), if the pod has it."""
    return _positive_int(_labels(pod).get(c.LABEL_COSCHEDULING_MIN_AVAILABLE))


def role_hash(pod: Mapping[str, Any]) -> str:
    """The role of a grouped pod, as Kueue computes it: the first 8 hex digits of the SHA-256 of
    what matters to admission and scheduling (per container requests and ports, nodeSelector,
    affinity, tolerations, runtimeClassName, priority, topologySpreadConstraints, overhead,
    resourceClaims, pod-level requests when set); env, command or image never split a role. The
    webhook stores it in the role-hash annotation, which wins when present. Quantities are hashed
    as written, so "1" and "1000m" are two roles here (Kueue hashes their canonical form)."""
    annotated = _annotations(pod).get(c.ANNOTATION_ROLE_HASH)
    if isinstance(annotated, str) and annotated:
        return annotated
    spec = _spec(pod)

    def containers(key: str) -> list[dict[str, Any]] | None:
        items = [x for x in spec.get(key) or [] if isinstance(x, Mapping)]
        return [{"resources": {"requests": (x.get("resources") or {}).get("requests")},
                 "ports": x.get("ports")} for x in items] or None
    shape: dict[str, Any] = {
        "initContainers": containers("initContainers"), "containers": containers("containers"),
        **{k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations", "runtimeClassName", "priority",
                                    "topologySpreadConstraints", "overhead", "resourceClaims")}}
    if spec.get("resources") is not None:
        shape["resources"] = (spec.get("resources") or {}).get("requests")
    text = json.dumps({"spec": shape}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:_ROLE_HASH_LENGTH]


def pod_set_name(pod: Mapping[str, Any]) -> str:
    """The pod set a managed pod belongs to: its role for a grouped pod, `main` for a single one."""
    return role_hash(pod) if group_name(pod) is not None else DEFAULT_POD_SET_NAME


def terminated(pod: Mapping[str, Any]) -> bool:
    return str((pod.get("status") or {}).get("phase") or "") in TERMINAL_PHASES


def runnable_or_succeeded(pod: Mapping[str, Any]) -> bool:
    """The pod can still run, runs or succeeded (Kueue's active member): not Failed, and not being
    deleted before it was bound."""
    if _meta(pod).get("deletionTimestamp") and not _spec(pod).get("nodeName"):
        return False
    return str((pod.get("status") or {}).get("phase") or "") != "Failed"


def admission_gated(pod: Mapping[str, Any]) -> bool:
    return any(isinstance(g, Mapping) and g.get("name") == c.SCHEDULING_GATE_ADMISSION
               for g in _spec(pod).get("schedulingGates") or [])


def _creation_order(pod: Mapping[str, Any]) -> tuple[str, str]:
    return (str(_meta(pod).get("creationTimestamp") or ""), pod_name(pod))


def _keeping_order(pod: Mapping[str, Any]) -> tuple[bool, str, str]:
    """Which runnable pods a group keeps when it has more than its total (Kueue's preference): a
    started pod (no admission gate) before a gated one, then the oldest."""
    return (admission_gated(pod), *_creation_order(pod))


@dataclass(frozen=True, slots=True)
class GroupConflict:
    """A pod that disagrees with its group: the pod, the field path and what conflicts."""

    pod: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"pod {self.pod}: {self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """The pods of one group as the cache holds them. `members`: the runnable or succeeded pods
    the Workload counts (`total` of them: started ones first, then the oldest); `extra`: runnable
    pods beyond the total (the excess, deleted); `pods`: every pod of the group (failed ones included)."""

    namespace: str
    workload_name: str
    single: bool
    total: int | None
    min_count: int | None
    members: tuple[Mapping[str, Any], ...]
    extra: tuple[Mapping[str, Any], ...]
    pods: tuple[Mapping[str, Any], ...]
    conflicts: tuple[GroupConflict, ...] = field(default=())

    @property
    def complete(self) -> bool:
        """Every pod the total count announces exists (and none disagrees): the Workload may be built."""
        return not self.conflicts and self.total is not None and len(self.members) >= self.total

    @property
    def waiting_message(self) -> str:
        return (f"pod group {self.namespace}/{self.workload_name}: {len(self.members)} of "
                f"{self.total if self.total is not None else '?'} pods exist; the Workload is created once all do")


def assemble(pods: Sequence[Mapping[str, Any]]) -> PodGroup:
    """Phase 1 of a group's reconcile: the group its pods (all of one Workload key) form. Members
    are taken oldest first; `conflicts` lists each pod disagreeing with the oldest one."""
    ordered = sorted(pods, key=_creation_order)
    active = [p for p in ordered if runnable_or_succeeded(p)]
    first = active[0] if active else (ordered[0] if ordered else {})
    total = total_count(first) if first else None
    cosched_min = min_available(first) if first else None
    conflicts: list[GroupConflict] = []
    for pod in active[1:]:
        conflicts.extend(group_conflicts(pod, [first]))
    keep = active if total is None else sorted(active, key=_keeping_order)[:total]
    kept = {id(p) for p in keep}
    keep = [p for p in active if id(p) in kept]  # members in creation order
    return PodGroup(
        namespace=str(_meta(first).get("namespace") or "default"), workload_name=workload_name(first) if first else "",
        single=group_name(first) is None if first else True, total=total,
        min_count=cosched_min if cosched_min is not None and total is not None and cosched_min < total else None,
        members=tuple(keep), extra=tuple(p for p in active if id(p) not in kept), pods=tuple(ordered),
        conflicts=tuple(conflicts))


def _topology_key(pod: Mapping[str, Any]) -> Any:
    request = topology_request_from_annotations({}, {str(k): str(v) for k, v in _annotations(pod).items()})
    return topology_request_to_dict(request) if request is not None else None


def group_conflicts(pod: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> list[GroupConflict]:
    """What makes `pod` unable to join a group with `others` (its other runnable pods): a different
    queue, total count or min-available; a different PriorityClass (one Workload, one priority);
    the same role with a different topology request (one pod set, one request); or a role that
    would make the group's pod sets more than Kueue's 8. Each names the pod, the field and both
    values. Pure: the validating webhook and the reconciler both call it."""
    name, out = pod_name(pod), []
    checks = (
        (f"metadata.labels[{c.LABEL_QUEUE_NAME}]", queue_name),
        (f"metadata.annotations[{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}]", total_count),
        (f"metadata.labels[{c.LABEL_COSCHEDULING_MIN_AVAILABLE}]", min_available),
        ("spec.priorityClassName", lambda p: _spec(p).get("priorityClassName")),
    )
    roles = {role_hash(o) for o in others}
    mine = role_hash(pod)
    for path, read in checks:
        for other in others:
            if read(other) != read(pod):
                out.append(GroupConflict(name, path, f"{read(pod)!r} differs from {read(other)!r} of pod "
                                                     f"{pod_name(other)} in the same group"))
                break
    for other in others:
        if role_hash(other) == mine and _topology_key(other) != _topology_key(pod):
            out.append(GroupConflict(name, "metadata.annotations", f"the topology request differs from that of pod "
                                     f"{pod_name(other)} of the same role {mine} (one pod set has one request)"))
            break
    if mine not in roles and len(roles) >= MAX_POD_SETS:
        out.append(GroupConflict(name, "spec", f"a new role {mine} would give the group {len(roles) + 1} pod sets; "
                                 f"at most {MAX_POD_SETS} are allowed (pods differing in requests, nodeSelector, "
                                 "affinity or tolerations are different roles)"))
    return out


def _template_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod's spec as a pod set's template: tasq's gates and the binding left out."""
    spec = {k: v for k, v in _spec(pod).items() if k != "nodeName"}
    gates = [g for g in spec.get("schedulingGates") or [] if not (isinstance(g, Mapping) and g.get("name") in TASQ_GATES)]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    return spec


def pod_sets(group: PodGroup) -> list[dict[str, Any]]:
    """The Workload's pod sets: one per role (sorted by role hash), `main` for a single pod; count =
    its members; a topologyRequest from the pods' TAS annotations; the group's minimum (the
    coscheduling plugin's min-available) on the largest role as minCount, less the other roles'
    pods (partial admission may shrink only that pod set, as Kueue allows one pod set to)."""
    by_role: dict[str, list[Mapping[str, Any]]] = {}
    for pod in group.members:
        by_role.setdefault(pod_set_name(pod), []).append(pod)
    out: list[dict[str, Any]] = []
    for name in sorted(by_role):
        first = by_role[name][0]
        pod_set: dict[str, Any] = {"name": name, "count": len(by_role[name]), "template": {"spec": _template_spec(first)}}
        topology = _topology_key(first)
        if topology is not None:
            pod_set["topologyRequest"] = topology
        out.append(pod_set)
    if group.min_count is not None and out:
        largest = max(out, key=lambda ps: (ps["count"], ps["name"]))
        others = sum(ps["count"] for ps in out) - largest["count"]
        if group.min_count - others < largest["count"]:
            largest["minCount"] = max(1, group.min_count - others)
    return out


def _priority_fields(pod: Mapping[str, Any], priority_classes: Mapping[str, int], default_priority: int,
                     workload_priority_classes: Mapping[str, int]) -> dict[str, Any]:
    """Kueue's order: the WorkloadPriorityClass the pod's label names, else the pod's priority (the
    API server's Priority admission sets it) or PriorityClass, else the default."""
    wpc = workload_priority_class_of(pod)
    if wpc is not None and wpc in workload_priority_classes:
        return {"priority": workload_priority_classes[wpc], "priorityClassRef": {
            "group": c.GROUP, "kind": c.KIND_WORKLOAD_PRIORITY_CLASS, "name": wpc}}
    spec = _spec(pod)
    class_name = spec.get("priorityClassName")
    priority = spec.get("priority")
    out: dict[str, Any] = {"priority": priority_of(priority if isinstance(priority, int) else None,
                                                   class_name if isinstance(class_name, str) else None,
                                                   priority_classes, default_priority)}
    if class_name:
        out["priorityClassRef"] = {"group": c.PRIORITY_CLASS_GROUP, "kind": c.KIND_PRIORITY_CLASS, "name": class_name}
    return out


def workload_from_pod_group(group: PodGroup, priority_classes: Mapping[str, int] | None = None,
                            default_priority: int = 0,
                            workload_priority_classes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The Workload manifest of a complete group: Kueue's name (the group's, or `pod-<name>-<hash>`
    for a single pod), the queue, every member as an owner (so the Workload goes with the last of
    them; a single pod is its controller), `is-group-workload` on a group's."""
    first = group.members[0]
    owners = [{"apiVersion": c.CORE_API_VERSION, "kind": c.KIND_POD, "name": pod_name(p),
               "uid": str(_meta(p).get("uid") or ""), **({"controller": True, "blockOwnerDeletion": True}
                                                        if group.single else {})} for p in group.members]
    queue = queue_name(first) or ""
    meta: dict[str, Any] = {"name": group.workload_name, "namespace": group.namespace,
                            "labels": {c.LABEL_QUEUE_NAME: queue}, "ownerReferences": owners}
    if not group.single:
        meta["annotations"] = {c.ANNOTATION_IS_GROUP_WORKLOAD: "true"}
    spec: dict[str, Any] = {
        "queueName": queue,
        **_priority_fields(first, priority_classes or {}, default_priority, workload_priority_classes or {}),
        "podSets": pod_sets(group)}
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD, "metadata": meta, "spec": spec}


def pods_to_start(group: PodGroup, admission: Admission) -> list[Mapping[str, Any]]:
    """The members still behind the admission gate that the admission covers: per pod set, the
    oldest up to its admitted count (all of them unless partial admission gave fewer)."""
    started: dict[str, int] = {}
    waiting: dict[str, list[Mapping[str, Any]]] = {}
    for pod in group.members:
        name = pod_set_name(pod)
        if admission_gated(pod):
            waiting.setdefault(name, []).append(pod)
        else:
            started[name] = started.get(name, 0) + 1
    out: list[Mapping[str, Any]] = []
    for name, pods in sorted(waiting.items()):
        psa = admission.assignment(name)
        if psa is None:
            continue
        room = len(pods) + started.get(name, 0) if psa.count is None else psa.count - started.get(name, 0)
        out.extend(pods[:max(0, room)])
    return out


def start_patch(pod: Mapping[str, Any], info: PodSetRunInfo) -> dict[str, Any]:
    """The pod merge patch that starts one admitted pod with its pod set's run info
    (`framework.pod_set_infos`): the flavors' nodeLabels join its nodeSelector and their tolerations
    its tolerations (both may only grow on a gated pod); a pod set with a topology assignment gets
    the topology-workload/-podset annotations and tasq's label, keeping the topology gate for the
    TopologyUngater; otherwise that gate goes too. The admission gate always goes; other gates stay.
    Carries the pod's resourceVersion."""
    spec = _spec(pod)
    selector = {**(spec.get("nodeSelector") or {}), **info.node_selector}
    tolerations = list(spec.get("tolerations") or [])
    tolerations.extend(t for t in info.tolerations if t not in tolerations)
    dropped = {c.SCHEDULING_GATE_ADMISSION}
    if c.SCHEDULING_GATE_TOPOLOGY not in info.scheduling_gates:
        dropped.add(c.SCHEDULING_GATE_TOPOLOGY)
    gates = [g for g in spec.get("schedulingGates") or [] if not (isinstance(g, Mapping) and g.get("name") in dropped)]
    pod_patch: dict[str, Any] = {"schedulingGates": gates or None}
    if selector:
        pod_patch["nodeSelector"] = selector
    if tolerations:
        pod_patch["tolerations"] = tolerations
    meta: dict[str, Any] = {"resourceVersion": _meta(pod).get("resourceVersion")}
    if info.annotations:
        meta["annotations"] = dict(info.annotations)
    if info.labels:
        meta["labels"] = dict(info.labels)
    return {"metadata": meta, "spec": pod_patch}


def finished(group: PodGroup) -> Finished | None:
    """Kueue's rule. A single pod: when it terminated (Succeeded or not). A group: when as many pods
    succeeded as the total count says; or when none is left running and one that terminated says
    `retriable-in-group: "false"` (its author gives up on replacing failed pods). Until then a
    failed pod waits for its replacement. None while unfinished."""
    if group.single:
        pod = group.pods[-1] if group.pods else None
        if pod is None or not terminated(pod):
            return None
        phase = str((pod.get("status") or {}).get("phase"))
        message = str((pod.get("status") or {}).get("message") or f"Pod {phase.lower()}")
        return Finished(phase == "Succeeded", message)
    if group.total is None:
        return None
    succeeded = sum(1 for p in group.pods if str((p.get("status") or {}).get("phase")) == "Succeeded")
    message = f"Pods succeeded: {succeeded}/{group.total}."
    if succeeded >= group.total:
        return Finished(True, message)
    running = any(not terminated(p) for p in group.pods)
    gave_up = any(terminated(p) and _annotations(p).get(c.ANNOTATION_RETRIABLE_IN_GROUP) == "false"
                  for p in group.pods)
    return Finished(False, message) if not running and gave_up else None


def pods_to_stop(group: PodGroup) -> list[Mapping[str, Any]]:
    """The pods an eviction deletes (pods cannot be suspended): every one not yet terminated or
    being deleted, extra ones included."""
    return [p for p in group.pods if not terminated(p) and not _meta(p).get("deletionTimestamp")]


def pods_left(group: PodGroup) -> int:
    """Pods of the group that may still run on a node: not terminated (being deleted included)."""
    return sum(1 for p in group.pods if not terminated(p))


def being_deleted(pod: Mapping[str, Any]) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return POD_FINALIZER in (_meta(pod).get("finalizers") or [])


def excess_pods(group: PodGroup) -> list[Mapping[str, Any]]:
    """The runnable pods beyond the group's total count that are not being deleted yet (Kueue
    deletes them, the newest gated ones first, rather than leave them gated for ever)."""
    return [p for p in group.extra if not being_deleted(p)]


def finalizer_done(pod: Mapping[str, Any], workload_exists: bool, workload_finished: bool) -> bool:
    """The pod's finalizer may go: the Workload finished; or it is gone while the pod had started
    (so it had been admitted: nothing will record the pod's end any more); or the pod can no longer
    count for it: failed, or being deleted without having succeeded (an eviction, a deactivation,
    an excess pod, a user's deletion: it cannot add to the group's successes, and while its kubelet
    stops it the pod stays listed, so the reservation still waits for it). A succeeded member keeps
    it until the Workload has recorded the group's end; a gated one of a group still forming keeps it."""
    if not has_finalizer(pod):
        return False
    gone = not workload_exists and not admission_gated(pod)
    succeeded = str((pod.get("status") or {}).get("phase") or "") == "Succeeded"
    return workload_finished or gone or not runnable_or_succeeded(pod) or (being_deleted(pod) and not succeeded)


def finalizer_patch(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod merge patch removing Kueue's finalizer (the list is replaced whole; the
    resourceVersion makes it conditional, so a finalizer added meanwhile is never dropped)."""
    rest = [f for f in _meta(pod).get("finalizers") or [] if f != POD_FINALIZER]
    return {"metadata": {"resourceVersion": _meta(pod).get("resourceVersion"), "finalizers": rest or None}}


def ready_or_succeeded(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return True
    return any(isinstance(cond, Mapping) and cond.get("type") == "Ready" and cond.get("status") == "True"
               for cond in status.get("conditions") or [])


def pods_ready(group: PodGroup, admission: Admission) -> bool:
    """waitForPodsReady's PodsReady for a group: as many members ready (or succeeded) as the
    admission started, per pod set its admitted count (all of its members without one)."""
    by_role: dict[str, int] = {}
    for pod in group.members:
        by_role[pod_set_name(pod)] = by_role.get(pod_set_name(pod), 0) + 1
    wanted = sum(min(n, psa.count) if (psa := admission.assignment(name)) is not None and psa.count is not None
                 else n for name, n in by_role.items())
    return sum(1 for p in group.members if ready_or_succeeded(p)) >= wanted


class PodGroupJob:
    """The plain-pod integration as a composable job (`framework.ComposableJob`): a group (or a
    single pod) is the job, its members the pods the cache files under the group's Workload key;
    run and stop are writes to each pod (gates off and the flavors' nodeSelector and tolerations
    on; deletion, since pods cannot be suspended). See the module's functions for each rule."""

    gvk: GroupVersionKind = POD_GVK
    webhooks: tuple[WebhookRule, ...] = (
        WebhookRule(c.WEBHOOK_MUTATE_QUEUED_POD, WebhookAction.MANAGE_POD, ("CREATE",)),
        WebhookRule(c.WEBHOOK_VALIDATE_QUEUED_POD, WebhookAction.VALIDATE_GROUP_MEMBER))

    def member_key(self, obj: Mapping[str, Any]) -> str | None:
        return workload_key(obj)

    def owns_workload(self, owners: Sequence[OwnerRef]) -> bool:
        """Every owner is a Pod (a Job's or a JobSet's Workload is theirs)."""
        return bool(owners) and all(ref.kind == c.KIND_POD for ref in owners)

    def load(self, members: Sequence[Mapping[str, Any]]) -> PodGroup:
        return assemble(members)

    def refusals(self, group: PodGroup) -> list[tuple[Mapping[str, Any], str]]:
        by_name = {pod_name(p): p for p in group.pods}
        return [(by_name.get(conflict.pod, group.pods[0]),
                 f"{conflict}: no Workload is created for group {group.workload_name}") for conflict in group.conflicts]

    def waiting(self, group: PodGroup) -> str | None:
        return None if group.complete else group.waiting_message

    def workload_manifest(self, group: PodGroup, priority_classes: Mapping[str, int], default_priority: int,
                          workload_priority_classes: Mapping[str, int]) -> dict[str, Any]:
        return workload_from_pod_group(group, priority_classes, default_priority, workload_priority_classes)

    def excess_writes(self, group: PodGroup) -> list[MemberWrite]:
        return [MemberWrite(pod_name(p)) for p in excess_pods(group)]

    def run_writes(self, group: PodGroup, admission: Admission, infos: Sequence[PodSetRunInfo]) -> list[MemberWrite]:
        by_name = {info.name: info for info in infos}
        return [MemberWrite(pod_name(p), start_patch(p, by_name[pod_set_name(p)]))
                for p in pods_to_start(group, admission) if pod_set_name(p) in by_name]

    def stop_writes(self, group: PodGroup) -> list[MemberWrite]:
        return [MemberWrite(pod_name(p)) for p in pods_to_stop(group)]

    def release_writes(self, group: PodGroup, workload_exists: bool, workload_finished: bool) -> list[MemberWrite]:
        """Each pod's whose finalizer is done (`finalizer_done`); every pod's once all of them are
        being deleted (the group is given up: its Workload, which they own, goes only after them)."""
        given_up = all(being_deleted(p) for p in group.pods)
        return [MemberWrite(pod_name(p), finalizer_patch(p)) for p in group.pods
                if finalizer_done(p, workload_exists, workload_finished or given_up)]

    def finished(self, group: PodGroup) -> Finished | None:
        return finished(group)

    def pods_left(self, group: PodGroup) -> int:
        return pods_left(group)

    def pods_ready(self, group: PodGroup, admission: Admission) -> bool:
        return pods_ready(group, admission)

    def event_object(self, group: PodGroup) -> Mapping[str, Any]:
        return group.members[0] if group.members else group.pods[0]


POD_GROUP: Final = PodGroupJob()
