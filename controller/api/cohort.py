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
    """Fair sharing settings: accepted and kept; tasq does not do fair sharing."""

    weight: QuantityStr | None = None
    """The cohort's advantage when competing for unused quota (Kueue's default 1); 0, or above 1n."""


class FairSharingStatus(ApiModel):
    """Fair sharing state (Kueue writes it; tasq does not)."""

    weighted_share: Int64
    """The largest ratio of usage above nominal quota to lendable quota, divided by the weight."""


class CohortSpec(ApiModel):
    """Where the cohort hangs in its tree and the quota it adds there."""

    parent_name: DnsSubdomainStr | None = None
    """The parent cohort; unset: a root. A parent with no Cohort object acts as an empty root; a
    cycle makes every ClusterQueue in or under it inactive until it is broken."""
    resource_groups: list[ResourceGroup] = omitempty_list(maxItems=MAX_RESOURCE_GROUPS)
    """Quota the cohort adds to its subtree, shaped as a ClusterQueue's; borrowingLimit caps what the
    subtree takes from the parent, lendingLimit what it lends up (both need a parent)."""
    fair_sharing: FairSharing | None = None
    """Fair sharing settings (accepted, not used by tasq)."""


class CohortStatus(ApiModel):
    """What tasq (and Kueue's fair sharing) report about the cohort."""

    fair_sharing: FairSharingStatus | None = None
    """Fair sharing state (not written by tasq)."""
    conditions: list[Condition] = omitempty_list()
    """Active: False when the cohort is in or under a cycle of cohorts (reason CohortHasCycle); True
    otherwise, with reason ParentNotFound when its parent has no Cohort object."""


class Cohort(KubeObject):
    spec: CohortSpec = Field(default_factory=CohortSpec)
    """The cohort's parent and own quota."""
    status: CohortStatus | None = None
    """The cohort's conditions."""

    @property
    def parent(self) -> str | None:
        return self.spec.parent_name or None

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.status.conditions, type_) if self.status else None
