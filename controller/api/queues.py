"""The ClusterQueue and LocalQueue kinds: quotas per flavor, queueing policy, queue statuses.

A ClusterQueue lists resource groups; each group covers some resources and gives, flavor by
flavor in order of preference, a nominal quota (and optional borrowing/lending limits) for each.
A LocalQueue points a namespace at a ClusterQueue. The v1beta2 models (the hub; v1beta1's are in
`controller.api.v1beta1`). Used by the admission cycle, the queue status writers, the validators
and `tasq simulate`.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from controller.api import constants as c
from controller.api.meta import (
    ApiModel,
    Condition,
    DnsSubdomainStr,
    Int32,
    KubeObject,
    LabelSelector,
    QuantityStr,
    find_condition,
    omitempty_list,
)

QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
PreemptionPolicy = Literal["Never", "LowerPriority", "Any", "LowerOrNewerEqualPriority"]
BorrowWithinCohortPolicy = Literal["Never", "LowerPriority"]
# flavorFungibility: v1beta2 has only these two (v1beta1's Borrow and Preempt convert to MayStopSearch).
FlavorFungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]
WhenCanBorrow = FlavorFungibilityPolicy
WhenCanPreempt = FlavorFungibilityPolicy


class ResourceQuota(ApiModel):
    """The quota of one resource in one flavor."""

    name: str
    """The resource (e.g. cpu, memory, nvidia.com/gpu)."""
    nominal_quota: QuantityStr
    """The quantity of the resource this queue holds in this flavor."""
    borrowing_limit: QuantityStr | None = None
    """How much more than nominalQuota the queue may borrow from its cohort; unset: no limit."""
    lending_limit: QuantityStr | None = None
    """How much of nominalQuota others in the cohort may borrow; unset: all of it."""


# Kueue v1beta1's limits: 16 resource groups, 64 resources and 64 flavors in each.
MAX_RESOURCE_GROUPS: Final = 16
MAX_GROUP_ITEMS: Final = 64


class FlavorQuotas(ApiModel):
    """A flavor's quotas for the resources of a group."""

    name: DnsSubdomainStr
    """The ResourceFlavor these quotas are in."""
    resources: list[ResourceQuota] = Field(min_length=1, max_length=MAX_GROUP_ITEMS)
    """The quota of each covered resource, in the order of coveredResources."""


class ResourceGroup(ApiModel):
    """Resources whose quota is given together, flavor by flavor."""

    covered_resources: list[str] = Field(min_length=1, max_length=MAX_GROUP_ITEMS)
    """The resources this group gives quota for; each resource in at most one group."""
    flavors: list[FlavorQuotas] = Field(min_length=1, max_length=MAX_GROUP_ITEMS)
    """Flavors in order of preference, each with quotas for every covered resource."""


class BorrowWithinCohort(ApiModel):
    """Preemption while borrowing in the cohort."""

    policy: BorrowWithinCohortPolicy | None = None
    """Never, or LowerPriority: preempt lower-priority Workloads of the cohort to borrow."""
    max_priority_threshold: Int32 | None = None
    """Only Workloads at or below this priority may be preempted to borrow."""


class ClusterQueuePreemption(ApiModel):
    """When the queue may preempt admitted Workloads."""

    reclaim_within_cohort: PreemptionPolicy | None = None
    """Whether the queue preempts Workloads borrowing its quota in the cohort: Never, LowerPriority or Any."""
    borrow_within_cohort: BorrowWithinCohort | None = None
    """Whether the queue may preempt in the cohort while borrowing."""
    within_cluster_queue: PreemptionPolicy | None = None
    """Whether a Workload may preempt others of the same queue: Never, LowerPriority or
    LowerOrNewerEqualPriority."""


class FlavorFungibility(ApiModel):
    """How admission moves on to the next flavor when the current one would need borrowing or preemption."""

    when_can_borrow: WhenCanBorrow | None = None
    """MayStopSearch: take this flavor even if it means borrowing; TryNextFlavor: try the next flavor first."""
    when_can_preempt: WhenCanPreempt | None = None
    """MayStopSearch: take this flavor even if it means preempting; TryNextFlavor: try the next flavor first."""


class ClusterQueueSpec(ApiModel):
    """The quota a ClusterQueue holds and how it admits Workloads."""

    resource_groups: list[ResourceGroup] = omitempty_list(maxItems=MAX_RESOURCE_GROUPS)
    """Groups of resources with their quota per flavor; a resource appears in at most one group."""
    cohort_name: DnsSubdomainStr | None = None
    """The cohort whose queues this queue borrows unused quota from and lends its own to."""
    queueing_strategy: QueueingStrategy = c.QUEUEING_BEST_EFFORT_FIFO
    """BestEffortFIFO (default): a Workload that does not fit lets later ones try; StrictFIFO: the first Workload
    (by priority, then age) blocks those behind it."""
    namespace_selector: LabelSelector | None = None
    """Namespaces whose LocalQueues may submit to this queue; unset selects none, {} every one."""
    preemption: ClusterQueuePreemption | None = None
    """When the queue may preempt admitted Workloads to admit others."""
    flavor_fungibility: FlavorFungibility | None = None
    """When admission tries the next flavor instead of borrowing or preempting in this one."""
    stop_policy: StopPolicy | None = None
    """Hold stops admitting new Workloads; HoldAndDrain also evicts the admitted ones; None runs."""


class ResourceUsage(ApiModel):
    """Usage of one resource."""

    name: str
    """The resource."""
    total: QuantityStr | None = None
    """The quantity used, including what is borrowed."""
    borrowed: QuantityStr | None = None
    """The part of total borrowed from the cohort."""


class FlavorUsage(ApiModel):
    """Usage of one flavor."""

    name: str
    """The flavor."""
    resources: list[ResourceUsage] = omitempty_list()
    """Usage of each resource in this flavor."""


class ClusterQueueStatus(ApiModel):
    """A ClusterQueue's Workloads and quota use, as the controller last counted them."""

    pending_workloads: Int32 | None = None
    """Workloads waiting for quota in this queue."""
    reserving_workloads: Int32 | None = None
    """Workloads holding quota in this queue, admitted or not yet."""
    admitted_workloads: Int32 | None = None
    """Workloads admitted by this queue and not finished."""
    flavors_reservation: list[FlavorUsage] = omitempty_list()
    """Quota reserved by this queue's Workloads, per flavor and resource."""
    flavors_usage: list[FlavorUsage] = omitempty_list()
    """Quota used by this queue's admitted Workloads, per flavor and resource."""
    conditions: list[Condition] = omitempty_list()
    """The queue's state (Active) with reason and message."""


class ClusterQueue(KubeObject):
    """ClusterQueue holds quota per flavor and admits Workloads against it."""

    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    """What the queue holds and how it admits."""
    status: ClusterQueueStatus | None = None
    """What the queue holds now, as the controller last wrote it."""

    @property
    def flavor_names(self) -> tuple[str, ...]:
        """Every flavor the queue names, in resource-group then preference order."""
        return tuple(fq.name for rg in self.spec.resource_groups for fq in rg.flavors)

    @property
    def stopped(self) -> bool:
        """Hold or HoldAndDrain: the queue admits nothing new."""
        return self.spec.stop_policy in (c.STOP_POLICY_HOLD, c.STOP_POLICY_HOLD_AND_DRAIN)

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None


class LocalQueueSpec(ApiModel):
    """Where a LocalQueue sends its Workloads."""

    cluster_queue: DnsSubdomainStr
    """The ClusterQueue this queue submits its Workloads to; cannot be changed."""
    stop_policy: StopPolicy | None = None
    """Hold stops admitting this queue's Workloads; HoldAndDrain also evicts the admitted ones."""


class LocalQueueResourceUsage(ApiModel):
    """Usage of one resource."""

    name: str
    """The resource."""
    total: QuantityStr | None = None
    """The quantity used."""


class LocalQueueFlavorUsage(ApiModel):
    """Usage of one flavor."""

    name: str
    """The flavor."""
    resources: list[LocalQueueResourceUsage] = omitempty_list()
    """Usage of each resource in this flavor."""


class LocalQueueStatus(ApiModel):
    """A LocalQueue's Workloads and the quota they use."""

    pending_workloads: Int32 | None = None
    """Workloads of this queue waiting for quota."""
    reserving_workloads: Int32 | None = None
    """Workloads of this queue holding quota, admitted or not yet."""
    admitted_workloads: Int32 | None = None
    """Workloads of this queue admitted and not finished."""
    conditions: list[Condition] = omitempty_list()
    """The queue's state (Active) with reason and message."""
    flavors_reservation: list[LocalQueueFlavorUsage] = omitempty_list()
    """Quota reserved by this queue's Workloads, per flavor and resource."""
    flavors_usage: list[LocalQueueFlavorUsage] = omitempty_list()
    """Quota used by this queue's admitted Workloads, per flavor and resource."""


class LocalQueue(KubeObject):
    """LocalQueue lets a namespace submit Workloads to a ClusterQueue."""

    spec: LocalQueueSpec
    """Which ClusterQueue the queue feeds."""
    status: LocalQueueStatus | None = None
    """The queue's Workloads and usage, as the controller last wrote them."""

    @property
    def stopped(self) -> bool:
        """Hold or HoldAndDrain: none of the queue's Workloads is admitted."""
        return self.spec.stop_policy in (c.STOP_POLICY_HOLD, c.STOP_POLICY_HOLD_AND_DRAIN)

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None
