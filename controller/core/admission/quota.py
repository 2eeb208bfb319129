"""Quota: ClusterQueue quotas per flavor x resource, cohorts, borrowing and lending, and usage.

`ClusterQueueQuota` is the static quota shape of a ClusterQueue; `QuotaLedger` holds every queue's
per-cycle usage and answers "how much of resource R in flavor F may queue Q still take" the way
Kueue does (see `QuotaLedger`). Used by flavor assignment and the admission cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.api import constants as c
from controller.api.meta import LabelSelector
from controller.api.quantity import UNBOUNDED, format_milli, to_milli
from controller.api.queues import ClusterQueue
from controller.api.queues import ResourceQuota as QueueResourceQuota

FlavorResource = tuple[str, str]
"""(flavor name, resource name)."""


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def lendable(self) -> int:
        return self.nominal if self.lending_limit is None else min(self.nominal, self.lending_limit)

    @property
    def guaranteed(self) -> int:
        return self.nominal - self.lendable


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class ClusterQueueQuota:
    """The parts of a ClusterQueue that admission reads."""

    name: str
    cohort: str | None
    groups: tuple[ResourceGroup, ...]
    queueing_strategy: str = c.QUEUEING_BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    """An empty one matches every namespace; None matches none (Kueue)."""
    stopped: bool = False
    try_next_flavor_before_borrowing: bool = False
    """flavorFungibility.whenCanBorrow: TryNextFlavor (Kueue's default, Borrow, takes the first
    flavor that fits even if it must borrow)."""

    def group_for(self, resource: str) -> ResourceGroup | None:
        for group in self.groups:
            if resource in group.covered:
                return group
        return None

    def quota(self, flavor: str, resource: str) -> ResourceQuota:
        for group in self.groups:
            for fq in group.flavors:
                if fq.name == flavor and resource in fq.resources:
                    return fq.resources[resource]
        return ResourceQuota(0, 0, 0)

    @classmethod
    def from_model(cls, cq: ClusterQueue) -> ClusterQueueQuota:
        """Quantities become milli-units, absent limits stay None (unlimited)."""
        def quota(r: QueueResourceQuota) -> ResourceQuota:
            return ResourceQuota(to_milli(r.nominal_quota),
                                 None if r.borrowing_limit is None else to_milli(r.borrowing_limit),
                                 None if r.lending_limit is None else to_milli(r.lending_limit))
        spec = cq.spec
        groups = tuple(
            ResourceGroup(tuple(rg.covered_resources),
                          tuple(FlavorQuotas(fl.name, {r.name: quota(r) for r in fl.resources}) for fl in rg.flavors))
            for rg in spec.resource_groups)
        fungibility = spec.flavor_fungibility
        return cls(
            name=cq.name,
            cohort=spec.cohort_name or None,
            groups=groups,
            queueing_strategy=spec.queueing_strategy,
            namespace_selector=spec.namespace_selector,
            stopped=spec.stop_policy not in (c.STOP_POLICY_NONE, None),
            try_next_flavor_before_borrowing=fungibility is not None
            and fungibility.when_can_borrow == c.FUNGIBILITY_TRY_NEXT_FLAVOR,
        )


@dataclass(frozen=True, slots=True)
class Availability:
    """How much of one flavor x resource a ClusterQueue may still take, with the numbers behind it."""

    available: int
    nominal: int
    used: int
    borrowing_limit: int | None
    cohort: str | None
    cohort_free: int

    def describe(self, resource: str) -> str:
        def q(milli: int) -> str:
            return format_milli(milli, resource)
        text = f"nominal {q(self.nominal)}, used {q(self.used)}"
        if self.cohort is not None:
            text += f", unused in cohort \"{self.cohort}\" {q(self.cohort_free)}"
            if self.borrowing_limit is not None:
                text += f", borrowingLimit {q(self.borrowing_limit)}"
        return text


@dataclass(slots=True)
class QuotaLedger:
    """Per-cycle usage of every ClusterQueue (cheap to clone) over static specs.

    Cohort model (Kueue v1beta1): each member lends `lendingLimit` (default: all) of its nominal
    quota to the cohort pool and keeps the rest guaranteed; a member may take its own guaranteed
    quota plus whatever is left in the pool, but never more than nominal + borrowingLimit.
    """

    queues: Mapping[str, ClusterQueueQuota]
    used: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    cohort_pool: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    """Per cohort: the sum of what the members lend (static)."""
    cohort_lent: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    """Per cohort: how much of the pool members use beyond their guaranteed quota."""
    by_workload: dict[str, tuple[str, dict[FlavorResource, int]]] = field(default_factory=dict)

    @classmethod
    def build(cls, queues: Mapping[str, ClusterQueueQuota]) -> QuotaLedger:
        ledger = cls(queues)
        for cq in queues.values():
            if cq.cohort is None:
                continue
            pool = ledger.cohort_pool.setdefault(cq.cohort, {})
            for group in cq.groups:
                for fq in group.flavors:
                    for res, quota in fq.resources.items():
                        pool[(fq.name, res)] = pool.get((fq.name, res), 0) + quota.lendable
        return ledger

    def clone(self) -> QuotaLedger:
        return QuotaLedger(
            self.queues,
            {q: dict(u) for q, u in self.used.items()},
            self.cohort_pool,
            {k: dict(u) for k, u in self.cohort_lent.items()},
            dict(self.by_workload),
        )

    def availability(self, queue: str, flavor: str, resource: str) -> Availability:
        cq = self.queues[queue]
        quota = cq.quota(flavor, resource)
        used = self.used.get(queue, {}).get((flavor, resource), 0)
        if cq.cohort is None:
            return Availability(max(0, quota.nominal - used), quota.nominal, used, None, None, 0)
        fr = (flavor, resource)
        pool_free = self.cohort_pool.get(cq.cohort, {}).get(fr, 0) - self.cohort_lent.get(cq.cohort, {}).get(fr, 0)
        own_left = max(0, quota.guaranteed - used)
        cap = UNBOUNDED if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit - used
        available = max(0, min(own_left + max(0, pool_free), cap))
        return Availability(available, quota.nominal, used, quota.borrowing_limit, cq.cohort, max(0, pool_free))

    def reserve(self, workload_key: str, queue: str, usage: Mapping[FlavorResource, int]) -> None:
        self._apply(queue, usage, +1)
        self.by_workload[workload_key] = (queue, dict(usage))

    def release(self, workload_key: str) -> bool:
        """Give back what the workload reserved; False when it held nothing."""
        held = self.by_workload.pop(workload_key, None)
        if held is None:
            return False
        self._apply(held[0], held[1], -1)
        return True

    def _apply(self, queue: str, usage: Mapping[FlavorResource, int], sign: int) -> None:
        cq = self.queues[queue]
        mine = self.used.setdefault(queue, {})
        lent = self.cohort_lent.setdefault(cq.cohort, {}) if cq.cohort is not None else None
        for fr, amount in usage.items():
            before = mine.get(fr, 0)
            after = before + sign * amount
            mine[fr] = after
            if lent is not None:
                guaranteed = cq.quota(*fr).guaranteed
                delta = max(0, after - guaranteed) - max(0, before - guaranteed)
                lent[fr] = lent.get(fr, 0) + delta
