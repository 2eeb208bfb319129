"""The Workload kind as served in v1beta1 (for its CRD schema only).

Where it differs from v1beta2: `spec.priorityClassName` + `spec.priorityClassSource` (v1beta2 one
`spec.priorityClassRef`), and each pod set's topologyAssignment lists its `domains` (v1beta2's is
compact). Pod sets and the rest of the admission status are the hub's models. Used by
`controller.api.crds`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from controller.api import workload as hub
from controller.api.meta import ApiModel, DnsSubdomainStr, Int32, KubeObject, omitempty_list
from controller.api.topology_assignment import V1Beta1TopologyAssignment
from controller.api.workload import MAX_POD_SETS, PodSet

# Literal needs the strings themselves: c.PRIORITY_SOURCE_WORKLOAD, c.PRIORITY_SOURCE_POD or none.
PriorityClassSource = Literal["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""]


class WorkloadSpec(ApiModel):
    """What the Workload asks for: its groups of identical pods, its queue and its priority."""

    pod_sets: list[PodSet] = Field(min_length=1, max_length=MAX_POD_SETS)
    """Groups of identical pods (at most 8), each with a count and a pod template."""
    queue_name: DnsSubdomainStr | None = None
    """The LocalQueue, in the Workload's namespace, the Workload is submitted to."""
    priority_class_name: DnsSubdomainStr | None = None
    """The priority class the Workload's priority comes from; which kind it names is in
    priorityClassSource."""
    priority_class_source: PriorityClassSource | None = None
    """`kueue.x-k8s.io/workloadpriorityclass` or `scheduling.k8s.io/priorityclass`: the kind of
    class priorityClassName names."""
    priority: Int32 | None = None
    """The Workload's priority: higher is admitted first; set from the priority class when it has one."""
    active: bool | None = None
    """False takes the Workload out of admission (and evicts it if admitted); default true."""


class PodSetAssignment(hub.PodSetAssignment):
    """What one pod set was granted: flavors, resource usage, pod count and topology assignment."""

    topology_assignment: V1Beta1TopologyAssignment | None = None  # type: ignore[assignment]  # v1beta1's form
    """Where the pod set's pods go (v1beta1: every domain listed with its values)."""


class Admission(hub.Admission):
    """The ClusterQueue a Workload was admitted in and what each pod set was granted."""

    pod_set_assignments: list[PodSetAssignment] = omitempty_list(maxItems=MAX_POD_SETS)  # type: ignore[assignment]  # v1beta1's form
    """What each pod set was given: flavors, usage, count and topology placement."""


class WorkloadStatus(hub.WorkloadStatus):
    """Where the Workload was admitted and its conditions."""

    admission: Admission | None = None  # v1beta1's form
    """Where the Workload was admitted; set while it holds quota."""


class Workload(KubeObject):
    """Workload is one Job's request for quota, and where it was admitted."""

    spec: WorkloadSpec
    """What the Workload asks for."""
    status: WorkloadStatus | None = None
    """Where it was admitted and its conditions, as the controller last wrote them."""
