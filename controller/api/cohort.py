"""The Cohort kind (v1beta2): a node of a tree of cohorts that ClusterQueues borrow and lend in.

A Cohort names its parent (`spec.parentName`, none for a root) and may hold quota of its own
(`spec.resourceGroups`, the ClusterQueue's shape): quota its subtree shares, lendable upwards up to
its lendingLimit, and borrowingLimit capping what its subtree takes from the parent. tasq adds an
`Active` condition to the status saying whether the Cohort's tree can admit (a cycle cannot). Used
by the cache, the quota ledger (controller.core.admission.quota), the validators and `tasq simulate`.
"""

from __future__ import annotations

from pydantic import Field

from controller.api.meta import (
    ApiModel,
    Condition,
    DnsSubdomainStr,
    Int64,
    KubeObject,
    QuantityStr,
    find_condition,
    omitempty_list,
)
from controller.api.queues import MAX_RESOURCE_GROUPS, ResourceGroup


class FairSharing(ApiModel):
    """Accepted and kept; tasq does not do fair sharing (weight 1 is Kueue's default)."""

    weight: QuantityStr | None = None


class FairSharingStatus(ApiModel):
    weighted_share: Int64


class CohortSpec(ApiModel):
    parent_name: DnsSubdomainStr | None = None
    resource_groups: list[ResourceGroup] = omitempty_list(maxItems=MAX_RESOURCE_GROUPS)
    fair_sharing: FairSharing | None = None


class CohortStatus(ApiModel):
    fair_sharing: FairSharingStatus | None = None
    conditions: list[Condition] = omitempty_list()


class Cohort(KubeObject):
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None

    @property
    def parent(self) -> str | None:
        return self.spec.parent_name or None

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None
