"""Workloads as admission sees them, and the topology requests pod templates carry.

`workload_info` turns a Workload model (parsed once by its reader) into a WorkloadInfo;
`topology_request_from_annotations` / `topology_request_to_dict` read and write the TAS requests
(the job adapters in controller.core.jobs build Workloads with them). Called by the operator's
cache, the admission cycle, `tasq simulate` and the admission benchmarks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.booleans import parse_boolean
from controller.api.quantity import Resources
from controller.api.selectors import NodeSelectorTerm, Toleration
from controller.api.views import PodTemplateView
from controller.api.workload import (
    PodSet,
    PodSetTopologyRequest,
    PriorityClassRef,
    Workload,
)
from controller.core.topology import SliceLayer, TopologyRequest


def topology_request_to_dict(request: TopologyRequest) -> dict[str, Any]:
    """The Workload's `podSets[].topologyRequest` form; a preferred level None is written `auto`.
    A slice-only request (Kueue: slices without a required or preferred level) has no mode field."""
    out: dict[str, Any] = {}
    if request.mode != "unconstrained":
        out[request.mode] = request.level if request.level is not None else c.TOPOLOGY_AUTO
    elif not request.slices:
        out["unconstrained"] = True
    if len(request.slices) == 1:
        out["podSetSliceRequiredTopology"] = request.slices[0].level
        out["podSetSliceSize"] = request.slices[0].size
    elif request.slices:
        out["podsetSliceRequiredTopologyConstraints"] = [
            {"topology": layer.level, "size": layer.size} for layer in request.slices]
    if request.group is not None:
        out["podSetGroupName"] = request.group
    return out


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _annotated_slices(notes: Mapping[str, str]) -> tuple[SliceLayer, ...]:
    """Kueue's slice layers from a pod template's annotations: the constraints one (JSON, a list
    of `{topology, size}`, outer first), else one level + size. Malformed values give no layers
    (the validators refuse them before they get here)."""
    raw = notes.get(c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS)
    if raw:
        try:
            layers = json.loads(raw)
        except ValueError:
            return ()
        if isinstance(layers, list) and layers:
            out = []
            for layer in layers:
                parsed = _int_or_none(layer.get("size")) if isinstance(layer, Mapping) else None
                if parsed is None or not isinstance(layer.get("topology"), str):
                    return ()
                out.append(SliceLayer(layer["topology"], parsed))
            return tuple(out)
    level, size = notes.get(c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY), \
        _int_or_none(notes.get(c.ANNOTATION_PODSET_SLICE_SIZE))
    return (SliceLayer(level, size),) if level and size is not None else ()


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """One PodSet with the per-pod requests kube-scheduler would compute (no `pods` entry)."""

    name: str
    count: int
    requests: Resources
    placement_requests: Resources
    """`requests` plus 1000 milli `pods`: what one pod takes on a node (the topology engine's unit)."""
    topology: TopologyRequest | None
    node_selector: Mapping[str, str]
    affinity_terms: tuple[NodeSelectorTerm, ...]
    tolerations: tuple[Toleration, ...]
    min_count: int | None = None
    """Kueue's `minCount`: the fewest pods a partial admission may give this pod set (None: all or none)."""

    def signature(self) -> tuple[Any, ...]:
        """Everything admission looks at, as a hashable value (used to memoise failures)."""
        return (self.name, self.count, tuple(sorted(self.requests.items())), self.topology,
                tuple(sorted(self.node_selector.items())), self.affinity_terms, self.tolerations,
                self.min_count)


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """A Workload as admission sees it: identity, queue, order keys and pod sets."""

    namespace: str
    name: str
    queue_name: str
    priority: int
    created: float
    """Creation time in seconds since the epoch (the FIFO key after priority)."""
    seq: int
    """Arrival order; breaks ties between equal creation times deterministically."""
    pod_sets: tuple[PodSetInfo, ...]
    shape: tuple[Any, ...] = field(default=(), compare=False)
    """The pod sets' signatures (computed once): workloads of one shape fit or fail alike."""
    key: str = field(default="", compare=False)
    """`namespace/name` (computed once: admission reads it several times per Workload)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(ps.signature() for ps in self.pod_sets))
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    def order_key(self) -> tuple[int, float, int, str]:
        """Queue order: priority descending, then creation time, then arrival, then name."""
        return (-self.priority, self.created, self.seq, self.key)


def parse_timestamp(text: str | None, default: float) -> float:
    """RFC 3339 seconds (as the API server writes creationTimestamp); default when absent."""
    if not text:
        return default
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return default
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def topology_request_from_annotations(job_annotations: Mapping[str, str],
                                      template_annotations: Mapping[str, str]) -> TopologyRequest | None:
    """The KEP Job annotations win over Kueue's pod-template annotations; required over preferred.
    Kueue's slice and group annotations are read on the pod template; slices alone (no level) are
    Kueue's slice-only request."""
    slices = _annotated_slices(template_annotations)
    group = template_annotations.get(c.ANNOTATION_PODSET_GROUP_NAME) or None
    for notes in (job_annotations, template_annotations):
        required = notes.get(c.ANNOTATION_REQUIRE_TOPOLOGY) or \
            notes.get(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY)
        if required:
            return TopologyRequest("required", required, slices, group)
        preferred = notes.get(c.ANNOTATION_PREFER_TOPOLOGY) or \
            notes.get(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY)
        if preferred:
            return TopologyRequest("preferred", None if preferred == c.TOPOLOGY_AUTO else preferred, slices, group)
        if parse_boolean(notes.get(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY)):
            return TopologyRequest("unconstrained", None, slices, group)
    if slices:
        return TopologyRequest("unconstrained", None, slices, group)
    return None


def priority_of(priority: int | None, class_name: str | None, priority_classes: Mapping[str, int],
              default: int) -> int:
    """`priority` if set, else the named PriorityClass's value, else the default (a pod spec and a
    Workload spec carry both fields under the same names)."""
    if priority is not None:
        return priority
    if class_name and class_name in priority_classes:
        return priority_classes[class_name]
    return default


def _pod_priority_class(ref: PriorityClassRef | None) -> str | None:
    """The pod PriorityClass a Workload's priorityClassRef names (None for a WorkloadPriorityClass)."""
    return ref.name if ref is not None and not ref.is_workload_priority_class else None


def _topology_request(request: PodSetTopologyRequest | None) -> TopologyRequest | None:
    if request is None:
        return None
    layers = request.podset_slice_required_topology_constraints
    level, size = request.pod_set_slice_required_topology, request.pod_set_slice_size
    if layers:
        slices: tuple[SliceLayer, ...] = tuple(SliceLayer(layer.topology, layer.size) for layer in layers)
    else:
        slices = (SliceLayer(level, size),) if level and size is not None else ()
    group = request.pod_set_group_name or None
    if request.required:
        return TopologyRequest("required", request.required, slices, group)
    if request.preferred:
        preferred = request.preferred
        return TopologyRequest("preferred", None if preferred == c.TOPOLOGY_AUTO else preferred, slices, group)
    if request.unconstrained or slices:
        return TopologyRequest("unconstrained", None, slices, group)
    return None


def pod_set_info(pod_set: PodSet) -> PodSetInfo:
    """One `spec.podSets[]` entry; its topologyRequest, else Kueue's pod-template annotations."""
    template = PodTemplateView.from_dict(pod_set.template)
    topology = _topology_request(pod_set.topology_request) or topology_request_from_annotations(
        {}, template.annotations)
    return PodSetInfo(
        name=pod_set.name,
        count=pod_set.count,
        requests=template.requests,
        placement_requests=template.placement_requests,
        topology=topology,
        node_selector=template.node_selector,
        affinity_terms=template.affinity_terms,
        tolerations=template.tolerations,
        min_count=pod_set.min_count,
    )


def workload_info(workload: Workload, seq: int = 0, priority_classes: Mapping[str, int] | None = None,
                  default_created: float = 0.0, order_by_eviction: bool = True) -> WorkloadInfo:
    """A parsed Workload as admission sees it; priority from spec.priority, else its PriorityClass,
    else 0; the queue from spec.queueName, else the queue-name label. Its queue time is its
    creation, or, for one evicted by a PodsReady timeout and `order_by_eviction` (Kueue's requeuing
    timestamp `Eviction`, the default), the time of that eviction: it goes behind those that waited."""
    meta, spec = workload.metadata, workload.spec
    created = parse_timestamp(meta.creation_timestamp, default_created)
    evicted = workload.condition(c.CONDITION_EVICTED)
    if (order_by_eviction and evicted is not None and evicted.status == "True"
            and evicted.reason == c.REASON_PODS_READY_TIMEOUT):
        created = parse_timestamp(evicted.last_transition_time, created)
    return WorkloadInfo(
        namespace=meta.namespace or "default",
        name=workload.name,
        queue_name=spec.queue_name or meta.labels.get(c.LABEL_QUEUE_NAME, ""),
        priority=priority_of(spec.priority, _pod_priority_class(spec.priority_class_ref), priority_classes or {}, 0),
        created=created,
        seq=seq,
        pod_sets=tuple(pod_set_info(ps) for ps in spec.pod_sets),
    )
