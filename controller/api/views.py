"""Light, fast read-only views of the core objects tasq reads: Node, Pod, Job and pod templates.

Built from plain dicts (as the API, the devcluster or a YAML file gives them) without pydantic,
because the cache holds tens of thousands of them. Also computes a pod's effective requests the
way kube-scheduler does. Used by the cache, the topology engine, admission and `tasq simulate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from controller.api import constants as c
from controller.api.quantity import Resources, add_into, resources_from
from controller.api.selectors import NodeSelectorTerm, Taint, Toleration, required_node_affinity_terms

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
POD_SLOT_MILLI: Final = 1000
"""What one pod takes of the `pods` resource (1 pod, in milli-units)."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _objects(items: Any) -> list[Mapping[str, Any]]:
    """The object items of a list field; a null (or other non-object) item is skipped, never read.
    Objects from the API server never hold one; a manifest can (`tasq simulate` zeroes them first)."""
    return [item for item in items or () if isinstance(item, Mapping)]


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    ready: bool
    unschedulable: bool
    not_ready_since: str | None = None
    """The Ready condition's lastTransitionTime while it is not True (None when Ready, or when the
    condition or its time is missing): when the node-failure grace period started."""

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NodeView:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        conditions = _objects(status.get("conditions"))
        condition = next((cd for cd in conditions if cd.get("type") == "Ready"), None)
        ready = condition is not None and condition.get("status") == "True"
        since = condition.get("lastTransitionTime") if condition is not None and not ready else None
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(meta.get("labels") or {}),
            taints=tuple(Taint.from_dict(t) for t in _objects(spec.get("taints"))),
            allocatable=resources_from(status.get("allocatable")),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable", False)),
            not_ready_since=str(since) if since else None,
        )


def container_requests(container: Mapping[str, Any]) -> Resources:
    """A container's requests; limits stand in for absent requests (API server defaulting)."""
    resources = container.get("resources") or {}
    req = resources_from(resources.get("requests"))
    for name, milli in resources_from(resources.get("limits")).items():
        req.setdefault(name, milli)
    return req


def _max_into(acc: Resources, other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > acc.get(k, 0):
            acc[k] = v


def pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """Effective pod requests as kube-scheduler computes them, without the `pods` resource.

    max(sum of app containers + restartable (sidecar) init containers, each init container step
    (the init container plus the sidecars started before it)), plus the pod overhead.
    """
    regular: Resources = {}
    for ctr in _objects(pod_spec.get("containers")):
        add_into(regular, container_requests(ctr))
    init_peak: Resources = {}
    sidecars: Resources = {}
    for ctr in _objects(pod_spec.get("initContainers")):
        req = container_requests(ctr)
        if ctr.get("restartPolicy") == "Always":
            add_into(sidecars, req)
            _max_into(init_peak, sidecars)
        else:
            step = dict(sidecars)
            add_into(step, req)
            _max_into(init_peak, step)
    add_into(regular, sidecars)
    _max_into(regular, init_peak)
    add_into(regular, resources_from(pod_spec.get("overhead")))
    return {k: v for k, v in regular.items() if v > 0}


def placement_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """What one pod takes on a node: its effective requests plus 1 `pods` (the topology engine's unit)."""
    requests = pod_requests(pod_spec)
    requests[c.RESOURCE_PODS] = POD_SLOT_MILLI
    return requests


@dataclass(frozen=True, slots=True)
class PodTemplateView:
    """A pod template (`{"metadata":..., "spec":...}`) as a Job or a Workload's pod set carries it:
    what admission and placement read of it."""

    annotations: Mapping[str, str]
    requests: Resources
    """Effective requests of one pod, without the `pods` resource (`pod_requests`)."""
    node_selector: Mapping[str, str]
    affinity_terms: tuple[NodeSelectorTerm, ...]
    tolerations: tuple[Toleration, ...]
    priority: int | None
    priority_class_name: str | None

    @classmethod
    def from_dict(cls, template: Mapping[str, Any]) -> PodTemplateView:
        spec: Mapping[str, Any] = template.get("spec") or {}
        priority = spec.get("priority")
        return cls(
            annotations=dict(_meta(template).get("annotations") or {}),
            requests=pod_requests(spec),
            node_selector=dict(spec.get("nodeSelector") or {}),
            affinity_terms=required_node_affinity_terms(spec),
            tolerations=tolerations_from(spec.get("tolerations")),
            priority=None if priority is None else int(priority),
            priority_class_name=str(spec.get("priorityClassName") or "") or None,
        )

    @property
    def placement_requests(self) -> Resources:
        """What one pod takes on a node: `requests` plus 1 `pods`."""
        return {**self.requests, c.RESOURCE_PODS: POD_SLOT_MILLI}


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


def owner_refs(obj: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    return tuple(OwnerRef(str(o.get("apiVersion", "")), str(o.get("kind", "")), str(o.get("name", "")),
                          str(o.get("uid", "")), bool(o.get("controller", False)))
                 for o in _objects(_meta(obj).get("ownerReferences")))


@dataclass(frozen=True, slots=True)
class PodView:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node_name: str
    phase: str
    requests: Resources
    """What the pod takes on its node (`placement_requests`: effective requests plus 1 `pods`)."""
    scheduling_gates: tuple[str, ...]
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    affinity_terms: tuple[NodeSelectorTerm, ...]
    owners: tuple[OwnerRef, ...]
    deleting: bool
    creation_timestamp: str = ""
    conditions: tuple[Mapping[str, Any], ...] = field(default=())

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> PodView:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            node_name=str(spec.get("nodeName") or ""),
            phase=str(status.get("phase") or "Pending"),
            requests=placement_requests(spec),
            scheduling_gates=tuple(str(g.get("name", "")) for g in _objects(spec.get("schedulingGates"))),
            node_selector=dict(spec.get("nodeSelector") or {}),
            tolerations=tolerations_from(spec.get("tolerations")),
            affinity_terms=required_node_affinity_terms(spec),
            owners=owner_refs(obj),
            deleting=bool(meta.get("deletionTimestamp")),
            creation_timestamp=str(meta.get("creationTimestamp") or ""),
            conditions=tuple(_objects(status.get("conditions"))),
        )


@dataclass(frozen=True, slots=True)
class JobView:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    parallelism: int
    completions: int | None
    completion_mode: str
    suspend: bool
    template: Mapping[str, Any]
    creation_timestamp: str
    conditions: tuple[Mapping[str, Any], ...]

    @property
    def queue_name(self) -> str | None:
        return self.labels.get(c.LABEL_QUEUE_NAME)

    @property
    def finished(self) -> str | None:
        """"Complete" or "Failed" once the Job has that condition with status True."""
        for cond in self.conditions:
            if cond.get("type") in (c.CONDITION_JOB_COMPLETE, c.CONDITION_JOB_FAILED) and cond.get("status") == "True":
                return str(cond["type"])
        return None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> JobView:
        meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
        parallelism = spec.get("parallelism")
        completions = spec.get("completions")
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            parallelism=1 if parallelism is None else int(parallelism),
            completions=None if completions is None else int(completions),
            completion_mode=str(spec.get("completionMode") or "NonIndexed"),
            suspend=bool(spec.get("suspend", False)),
            template=spec.get("template") or {},
            creation_timestamp=str(meta.get("creationTimestamp") or ""),
            conditions=tuple(_objects(status.get("conditions"))),
        )


def tolerations_from(items: Sequence[Mapping[str, Any]] | None) -> tuple[Toleration, ...]:
    return tuple(Toleration.from_dict(t) for t in _objects(items))
