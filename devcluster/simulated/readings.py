"""What the simulated scheduler and kubelet read from Node and Pod objects: taints, tolerations,
node affinity and effective requests, as kube-scheduler's filters read them.

`NodeView.from_dict` / `PodView.from_dict` never raise: a pod whose quantities do not parse (only
possible if one got past validation) carries `invalid`, and the scheduler reports it instead of failing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devcluster.constants import NO_EXECUTE, NO_SCHEDULE, RESOURCE_PODS
from devcluster.server.quantities import QuantityError, Resources, add_into, resources_from
from devcluster.server.selecting import requirement_matches


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Taint:
        return cls(str(d.get("key") or ""), str(d.get("value") or ""), str(d.get("effect") or ""))


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Toleration:
        return cls(str(d.get("key") or ""), str(d.get("operator") or "Equal"), str(d.get("value") or ""),
                   str(d.get("effect") or ""))

    def tolerates(self, taint: Taint) -> bool:
        """ToleratesTaint: an empty effect matches every effect, an empty key (with Exists) every key;
        Exists ignores the value, Equal compares it."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint no toleration tolerates (PreferNoSchedule never filters)."""
    return next((t for t in taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)
                 and not any(tol.tolerates(t) for tol in tolerations)), None)


Requirement = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One required node affinity term: label expressions and `metadata.name` fields, ANDed."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeSelectorTerm:
        def requirements(name: str) -> tuple[Requirement, ...]:
            return tuple((str(e.get("key") or ""), str(e.get("operator") or ""),
                          tuple(str(v) for v in e.get("values") or ())) for e in d.get(name) or ())
        return cls(requirements("matchExpressions"), requirements("matchFields"))

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term selects no node
        node_fields = {"metadata.name": node_name}
        return (all(requirement_matches(labels, *r) for r in self.expressions)
                and all(requirement_matches(node_fields, *r) for r in self.fields))


def node_matches_pod(node_name: str, labels: Mapping[str, str], node_selector: Mapping[str, str],
                     terms: Sequence[NodeSelectorTerm]) -> bool:
    """The NodeAffinity filter: every nodeSelector pair, and any required term when there are terms."""
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    return not terms or any(t.matches(node_name, labels) for t in terms)


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    unschedulable: bool

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> NodeView:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        try:
            allocatable = resources_from(status.get("allocatable"))
        except QuantityError:
            allocatable = {}  # a node whose capacity does not parse offers nothing
        return cls(str(meta.get("name") or ""), dict(meta.get("labels") or {}),
                   tuple(Taint.from_dict(t) for t in spec.get("taints") or ()), allocatable,
                   bool(spec.get("unschedulable")))


def _container_requests(container: Mapping[str, Any]) -> Resources:
    """Requests, with limits standing in for absent requests (as defaulting fills them in)."""
    resources = container.get("resources") or {}
    requests = resources_from(resources.get("requests"))
    for name, milli in resources_from(resources.get("limits")).items():
        requests.setdefault(name, milli)
    return requests


def _raise_to(acc: Resources, other: Mapping[str, int]) -> None:
    for name, milli in other.items():
        acc[name] = max(acc.get(name, 0), milli)


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What a pod takes on its node, as NodeResourcesFit counts it: the larger of the app containers
    (plus sidecar init containers) and the peak of any init step, plus overhead, plus one `pods`."""
    running: Resources = {}
    for container in spec.get("containers") or ():
        add_into(running, _container_requests(container))
    sidecars: Resources = {}
    peak: Resources = {}
    for container in spec.get("initContainers") or ():
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            add_into(sidecars, requests)  # a sidecar keeps running beside the later steps
            _raise_to(peak, sidecars)
        else:
            step = dict(sidecars)
            add_into(step, requests)
            _raise_to(peak, step)
    add_into(running, sidecars)
    _raise_to(running, peak)
    add_into(running, resources_from(spec.get("overhead")))
    requests = {name: milli for name, milli in running.items() if milli > 0}
    requests[RESOURCE_PODS] = 1000
    return requests


@dataclass(frozen=True, slots=True)
class PodView:
    namespace: str
    name: str
    requests: Resources
    scheduling_gates: tuple[str, ...]
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    affinity_terms: tuple[NodeSelectorTerm, ...]
    invalid: str = ""
    """Why the pod's requests could not be read ("" when they could)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> PodView:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or {}
        invalid = ""
        try:
            requests = pod_requests(spec)
        except QuantityError as e:
            requests, invalid = {RESOURCE_PODS: 1000}, f"invalid resource quantity: {e}"
        return cls(
            namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""), requests=requests,
            scheduling_gates=tuple(str(g.get("name") or "") for g in spec.get("schedulingGates") or ()),
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            tolerations=tuple(Toleration.from_dict(t) for t in spec.get("tolerations") or ()),
            affinity_terms=tuple(NodeSelectorTerm.from_dict(t) for t in affinity.get("nodeSelectorTerms") or ()),
            invalid=invalid)
