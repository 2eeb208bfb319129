"""The Workload kind (v1beta2, the hub): what a Job asks for (PodSets) and what admission granted.

`status.admission` holds, per PodSet, the chosen flavors, the resource usage and the compact
TopologyAssignment (`controller.api.topology_assignment`). Condition helpers take `now`
as a parameter so pure code can use them. Parsed once per Workload event (the operator's cache
keeps the model), so kept light: pod templates stay plain dicts. `admission_of` reads the wire
form of bodies not yet parsed (watch events, API answers). Used by
the operator's cache, the job reconciler, the admission loop, the ungater and `tasq simulate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from controller.api import constants as c
from controller.api.meta import (
    ApiModel,
    Condition,
    ConditionStatus,
    DateTimeStr,
    DnsLabelStr,
    DnsSubdomainStr,
    Int32,
    KubeObject,
    LabelKeyStr,
    QuantityStr,
    find_condition,
    omitempty_dict,
    omitempty_list,
    set_condition,
)
from controller.api.topology_assignment import TopologyAssignment

# Literal needs the strings themselves: c.GROUP / c.PRIORITY_CLASS_GROUP and the two kinds.
PriorityClassGroup = Literal["kueue.x-k8s.io", "scheduling.k8s.io"]
PriorityClassKind = Literal["WorkloadPriorityClass", "PriorityClass"]
DEFAULT_POD_SET_NAME = "main"
MAX_POD_SETS: Final = 8
"""Kueue's limit on a Workload's podSets."""
MAX_UNHEALTHY_NODES: Final = 8
"""Kueue's limit on `status.unhealthyNodes`."""


class PodSetSliceRequiredTopologyConstraint(ApiModel):
    """One layer of Kueue's multi-layer slices: every `size` pods lie in one domain of `topology`."""

    topology: Annotated[str, Field(min_length=1, max_length=63)]
    """The level (node label) each slice must fit in one domain of."""
    size: Int32 = Field(ge=1)
    """Pods per slice."""


class PodSetTopologyRequest(ApiModel):
    """At most one of required/preferred/unconstrained; the validators enforce that.

    Kueue's slice and group fields come from the pod-template annotations: `podSetSliceRequiredTopology`
    + `podSetSliceSize` (one slice layer), `podsetSliceRequiredTopologyConstraints` (1-3 layers,
    outer first, exclusive with the two) and `podSetGroupName` (pod sets placed together).
    """

    required: LabelKeyStr | None = None
    """The level (node label) all the pod set's pods must run in one domain of."""
    preferred: LabelKeyStr | None = None
    """The level the pods should run in one domain of; wider levels are tried when they do not fit."""
    unconstrained: bool | None = None
    """True: the pods may run anywhere in the topology, packed as closely as possible."""
    pod_index_label: LabelKeyStr | None = None
    """The pod label that holds a pod's index (e.g. a Job's completion index)."""
    sub_group_index_label: LabelKeyStr | None = None
    """The pod label that holds the index of the pod's sub-group (a JobSet's Job index); a pod's rank
    is its sub-group index x (count / subGroupCount) + its pod index."""
    sub_group_count: Int32 | None = Field(default=None, ge=1)
    """How many sub-groups the pod set's pods are split into (a replicatedJob's replicas)."""
    pod_set_group_name: Annotated[str, Field(max_length=256)] | None = None
    """Pod sets with the same group name are placed together under one request."""
    pod_set_slice_required_topology: Annotated[str, Field(max_length=63)] | None = None
    """The level each slice of podSetSliceSize pods must fit in one domain of."""
    pod_set_slice_size: Int32 | None = Field(default=None, ge=1)
    """Pods per slice for podSetSliceRequiredTopology."""
    podset_slice_required_topology_constraints: list[PodSetSliceRequiredTopologyConstraint] | None = Field(
        default=None, max_length=3)
    """Nested slice layers, outermost first (1-3); exclusive with podSetSliceRequiredTopology."""


class PodSet(ApiModel):
    """A group of identical pods."""

    name: DnsLabelStr = DEFAULT_POD_SET_NAME
    """The pod set's name, unique in the Workload (default main)."""
    count: Int32 = Field(default=1, ge=0)
    """How many pods of this template the Workload runs."""
    min_count: Int32 | None = Field(default=None, ge=1)
    """The fewest pods the Workload can run with (partial admission); at most count."""
    template: dict[str, Any] = Field(default_factory=dict)
    """The pod template: its requests, node selector, affinity and tolerations decide the fit."""
    topology_request: PodSetTopologyRequest | None = None
    """Where in the topology the pods must or should run together."""


class PriorityClassRef(ApiModel):
    """The priority class a Workload's priority came from: a WorkloadPriorityClass
    (kueue.x-k8s.io) or a pod PriorityClass (scheduling.k8s.io)."""

    group: PriorityClassGroup
    """kueue.x-k8s.io for a WorkloadPriorityClass, scheduling.k8s.io for a pod PriorityClass."""
    kind: PriorityClassKind
    """WorkloadPriorityClass or PriorityClass, matching the group."""
    name: DnsSubdomainStr
    """The priority class's name."""

    @property
    def is_workload_priority_class(self) -> bool:
        return self.group == c.GROUP and self.kind == c.KIND_WORKLOAD_PRIORITY_CLASS


class WorkloadSpec(ApiModel):
    """What the Workload asks for: its pods, its queue and its priority."""

    pod_sets: list[PodSet] = Field(min_length=1, max_length=MAX_POD_SETS)
    """Groups of identical pods (at most 8), each with a count and a pod template."""
    queue_name: DnsSubdomainStr | None = None
    """The LocalQueue, in the Workload's namespace, the Workload is submitted to."""
    priority_class_ref: PriorityClassRef | None = None
    """The priority class the Workload's priority comes from."""
    priority: Int32 | None = None
    """The Workload's priority: higher is admitted first; set from the priority class when it has one."""
    active: bool | None = None
    """False takes the Workload out of admission (and evicts it if admitted); default true."""


class PodSetAssignment(ApiModel):
    """What one pod set was given."""

    name: DnsLabelStr
    """The pod set this assignment is for."""
    flavors: dict[str, str] = omitempty_dict()
    """The flavor chosen for each resource."""
    resource_usage: dict[str, QuantityStr] = omitempty_dict()
    """The resources the pod set uses in all, per resource."""
    count: Int32 | None = Field(default=None, ge=0)
    """How many pods were admitted (less than the pod set's count under partial admission)."""
    topology_assignment: TopologyAssignment | None = None
    """Where in the topology the pods go."""


class Admission(ApiModel):
    """Where a Workload was admitted."""

    cluster_queue: DnsSubdomainStr
    """The ClusterQueue that reserved quota for the Workload."""
    pod_set_assignments: list[PodSetAssignment] = omitempty_list(maxItems=MAX_POD_SETS)
    """What each pod set was given: flavors, usage, count and topology placement."""

    def assignment(self, pod_set: str) -> PodSetAssignment | None:
        return next((a for a in self.pod_set_assignments if a.name == pod_set), None)


class RequeueState(ApiModel):
    """The requeueing of an evicted Workload."""

    count: Int32 | None = Field(default=None, ge=0)
    """How many times the Workload was requeued after an eviction."""
    requeue_at: DateTimeStr | None = None
    """When the Workload may be tried again."""


class UnhealthyNode(ApiModel):
    """A failed node of the Workload's topology assignment, waiting for a replacement."""

    name: Annotated[str, Field(min_length=1, max_length=63)]
    """The node's name (Kueue's limit: 63 characters)."""


class WorkloadStatus(ApiModel):
    """Where a Workload was admitted and its state."""

    admission: Admission | None = None
    """Where the Workload was admitted; set while it holds quota."""
    conditions: list[Condition] = omitempty_list()
    """The Workload's state: QuotaReserved, Admitted, Evicted, Finished."""
    requeue_state: RequeueState | None = None
    """When an evicted Workload may be tried again."""
    unhealthy_nodes: list[UnhealthyNode] = omitempty_list(maxItems=MAX_UNHEALTHY_NODES)
    """The failed nodes of the topology assignment whose pods wait for a replacement (Kueue's
    TASFailedNodeReplacement); emptied when the assignment is repaired."""


class Workload(KubeObject):
    """Workload is one Job's request for quota, and where it was admitted."""

    spec: WorkloadSpec
    """What the Workload asks for."""
    status: WorkloadStatus | None = None
    """Where it was admitted and its conditions, as the controller last wrote them."""

    # -- spec helpers ---------------------------------------------------------------------------

    @property
    def queue_name(self) -> str:
        return self.spec.queue_name or ""

    @property
    def priority(self) -> int:
        return self.spec.priority or 0

    @property
    def active(self) -> bool:
        """Kueue's default: a Workload is active unless `spec.active` is false."""
        return self.spec.active is not False

    def pod_set(self, name: str) -> PodSet | None:
        return next((ps for ps in self.spec.pod_sets if ps.name == name), None)

    # -- status helpers -------------------------------------------------------------------------

    @property
    def admission(self) -> Admission | None:
        return self.status.admission if self.status else None

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None

    def condition_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"

    def set_condition(self, type_: str, status: ConditionStatus, reason: str, message: str,
                      now: datetime) -> bool:
        """Add or update a condition (time moves only on a status flip); True when it changed."""
        if self.status is None:
            self.status = WorkloadStatus()
        return set_condition(self.status.conditions, type_, status, reason, message, now,
                             observed_generation=self.metadata.generation)

    @property
    def has_quota_reservation(self) -> bool:
        return self.condition_true(c.CONDITION_QUOTA_RESERVED)

    @property
    def is_admitted(self) -> bool:
        return self.condition_true(c.CONDITION_ADMITTED)

    @property
    def is_finished(self) -> bool:
        return self.condition_true(c.CONDITION_FINISHED)

    @property
    def reserved_admission(self) -> Admission | None:
        """`status.admission` while QuotaReserved is True (Kueue's "has quota reservation")."""
        return self.admission if self.has_quota_reservation else None

    @property
    def unhealthy_node_names(self) -> list[str]:
        """`status.unhealthyNodes` by name, in the order recorded."""
        return [node.name for node in self.status.unhealthy_nodes] if self.status else []


def _true_condition(obj: Mapping[str, Any], type_: str) -> bool:
    return any(cond.get("type") == type_ and cond.get("status") == "True"
               for cond in (obj.get("status") or {}).get("conditions") or [])


def admission_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """`Workload.reserved_admission` of a Workload's wire form."""
    admission = (obj.get("status") or {}).get("admission")
    reserved = _true_condition(obj, c.CONDITION_QUOTA_RESERVED)
    return admission if reserved and isinstance(admission, Mapping) else None
