"""The ClusterQueue and LocalQueue kinds: quotas per flavor, queueing policy, queue statuses.

A ClusterQueue lists resource groups; each group covers some resources and gives, flavor by
flavor in order of preference, a nominal quota (and optional borrowing/lending limits) for each.
A LocalQueue points a namespace at a ClusterQueue. Used by the admission cycle, the queue status
writers, the validators and `tasq simulate`.
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
    name: str
    nominal_quota: QuantityStr
    borrowing_limit: QuantityStr | None = None
    lending_limit: QuantityStr | None = None


# Kueue v1beta1's limits: 16 resource groups, 64 resources and 64 flavors in each.
MAX_RESOURCE_GROUPS: Final = 16
MAX_GROUP_ITEMS: Final = 64


class FlavorQuotas(ApiModel):
    name: DnsSubdomainStr
    resources: list[ResourceQuota] = Field(min_length=1, max_length=MAX_GROUP_ITEMS)


class ResourceGroup(ApiModel):
    covered_resources: list[str] = Field(min_length=1, max_length=MAX_GROUP_ITEMS)
    flavors: list[FlavorQuotas] = Field(min_length=1, max_length=MAX_GROUP_ITEMS)


class BorrowWithinCohort(ApiModel):
    policy: BorrowWithinCohortPolicy | None = None
    max_priority_threshold: Int32 | None = None


class ClusterQueuePreemption(ApiModel):
    reclaim_within_cohort: PreemptionPolicy | None = None
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: PreemptionPolicy | None = None


class FlavorFungibility(ApiModel):
    """How admission moves on to the next flavor when the current one would need borrowing or preemption."""

    when_can_borrow: WhenCanBorrow | None = None
    when_can_preempt: WhenCanPreempt | None = None


class ClusterQueueSpec(ApiModel):
    resource_groups: list[ResourceGroup] = omitempty_list(maxItems=MAX_RESOURCE_GROUPS)
    cohort_name: DnsSubdomainStr | None = None
    queueing_strategy: QueueingStrategy = c.QUEUEING_BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    preemption: ClusterQueuePreemption | None = None
    flavor_fungibility: FlavorFungibility | None = None
    stop_policy: StopPolicy | None = None


class ResourceUsage(ApiModel):
    name: str
    total: QuantityStr | None = None
    borrowed: QuantityStr | None = None


class FlavorUsage(ApiModel):
    name: str
    resources: list[ResourceUsage] = omitempty_list()


class ClusterQueueStatus(ApiModel):
    pending_workloads: Int32 | None = None
    reserving_workloads: Int32 | None = None
    admitted_workloads: Int32 | None = None
    flavors_reservation: list[FlavorUsage] = omitempty_list()
    flavors_usage: list[FlavorUsage] = omitempty_list()
    conditions: list[Condition] = omitempty_list()


class ClusterQueue(KubeObject):
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None

    @property
    def flavor_names(self) -> tuple[str, ...]:
        """Every flavor the queue names, in resource-group then preference order."""
        return tuple(fq.name for rg in self.spec.resource_groups for fq in rg.flavors)

    @property
    def stopped(self) -> bool:
        return self.spec.stop_policy in ("Hold", "HoldAndDrain")

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None


class LocalQueueSpec(ApiModel):
    cluster_queue: DnsSubdomainStr
    stop_policy: StopPolicy | None = None


class LocalQueueResourceUsage(ApiModel):
    name: str
    total: QuantityStr | None = None


class LocalQueueFlavorUsage(ApiModel):
    name: str
    resources: list[LocalQueueResourceUsage] = omitempty_list()


class LocalQueueStatus(ApiModel):
    pending_workloads: Int32 | None = None
    reserving_workloads: Int32 | None = None
    admitted_workloads: Int32 | None = None
    conditions: list[Condition] = omitempty_list()
    flavors_reservation: list[LocalQueueFlavorUsage] = omitempty_list()
    flavors_usage: list[LocalQueueFlavorUsage] = omitempty_list()


class LocalQueue(KubeObject):
    spec: LocalQueueSpec
    status: LocalQueueStatus | None = None

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None
