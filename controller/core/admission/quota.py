"""Quota: ClusterQueue quotas per flavor x resource, trees of cohorts, borrowing and lending, usage.

`ClusterQueueQuota` and `CohortQuota` are the static quota shapes; `CohortTree` (static, built once
per configuration) links queues and cohorts into Kueue's hierarchy and sums subtree quotas;
`QuotaLedger` holds per-cycle usage over it and answers "how much of resource R in flavor F may
queue Q still take" as Kueue's hierarchical cohorts do. Used by flavor assignment, the admission
cycle, the queue statuses and the operator's cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.meta import LabelSelector
from controller.api.quantity import format_milli, to_milli
from controller.api.queues import ClusterQueue
from controller.api.queues import ResourceGroup as QueueResourceGroup
from controller.api.queues import ResourceQuota as QueueResourceQuota
from controller.core.admission.preemption import PreemptionPolicy

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


def _quota(r: QueueResourceQuota) -> ResourceQuota:
    return ResourceQuota(to_milli(r.nominal_quota),
                         None if r.borrowing_limit is None else to_milli(r.borrowing_limit),
                         None if r.lending_limit is None else to_milli(r.lending_limit))


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


def _groups(resource_groups: Iterable[QueueResourceGroup]) -> tuple[ResourceGroup, ...]:
    return tuple(
        ResourceGroup(tuple(rg.covered_resources),
                      tuple(FlavorQuotas(fl.name, {r.name: _quota(r) for r in fl.resources}) for fl in rg.flavors))
        for rg in resource_groups)


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
    terminating: bool = False
    """Being deleted (waiting for its resource-in-use finalizer): admits nothing new, as Kueue."""
    try_next_flavor_before_borrowing: bool = False
    """flavorFungibility.whenCanBorrow: TryNextFlavor (Kueue's default, Borrow, takes the first
    flavor that fits even if it must borrow)."""
    preemption: PreemptionPolicy = field(default_factory=PreemptionPolicy)
    """spec.preemption and whenCanPreempt (all Never: this queue's workloads never preempt)."""

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
        spec = cq.spec
        groups = _groups(spec.resource_groups)
        fungibility = spec.flavor_fungibility
        return cls(
            name=cq.name,
            cohort=spec.cohort_name or None,
            groups=groups,
            queueing_strategy=spec.queueing_strategy,
            namespace_selector=spec.namespace_selector,
            stopped=spec.stop_policy not in (c.STOP_POLICY_NONE, None),
            terminating=cq.metadata.deletion_timestamp is not None,
            try_next_flavor_before_borrowing=fungibility is not None
            and fungibility.when_can_borrow == c.FUNGIBILITY_TRY_NEXT_FLAVOR,
            preemption=PreemptionPolicy.from_model(cq),
        )


@dataclass(frozen=True, slots=True)
class CohortQuota:
    """The parts of a Cohort that quota reads: its parent and its own quota (milli-units).

    `explicit` is False for a cohort no Cohort object defines, only named by a ClusterQueue's
    cohort or a Cohort's parentName: Kueue's implicit cohort, a root with no quota and no limits.
    """

    name: str
    parent: str | None = None
    groups: tuple[ResourceGroup, ...] = ()
    explicit: bool = True

    def quota(self, flavor: str, resource: str) -> ResourceQuota:
        """A flavor x resource the cohort lists no quota for: nothing of its own, no limits."""
        for group in self.groups:
            for fq in group.flavors:
                if fq.name == flavor and resource in fq.resources:
                    return fq.resources[resource]
        return ResourceQuota(0)

    @classmethod
    def from_model(cls, cohort: Cohort) -> CohortQuota:
        return cls(cohort.name, cohort.parent, _groups(cohort.spec.resource_groups))


Node = tuple[bool, str]
"""A node of the cohort tree: (is a cohort, name); ClusterQueues are the leaves (False)."""


def _own_nominal(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, int]:
    return {(fq.name, res): q.nominal for g in groups for fq in g.flavors for res, q in fq.resources.items()}


@dataclass(frozen=True, slots=True)
class CohortTree:
    """Kueue's cohort hierarchy, static (built once per set of ClusterQueues and Cohorts).

    `parent`: node -> its parent cohort, for every node whose parent is usable (a node in or under
    a cycle has none); `cycles`: cohort -> the cycle its chain of parents runs into (Kueue disables
    such a cohort and every ClusterQueue in it); `subtree`: node -> Kueue's SubtreeQuota (its own
    nominal quota plus what its children lend up, each child at most its lendingLimit); `local`:
    node -> the part of its subtree quota it does not lend to its parent (subtree - lendingLimit).
    """

    queues: Mapping[str, ClusterQueueQuota]
    cohorts: Mapping[str, CohortQuota]
    parent: Mapping[Node, str]
    cycles: Mapping[str, tuple[str, ...]]
    subtree: Mapping[Node, Mapping[FlavorResource, int]]
    local: Mapping[Node, Mapping[FlavorResource, int]]

    def quota_of(self, node: Node, fr: FlavorResource) -> ResourceQuota:
        is_cohort, name = node
        return (self.cohorts[name] if is_cohort else self.queues[name]).quota(*fr)

    def cycle_of_queue(self, queue: str) -> tuple[str, ...] | None:
        """The cohort cycle that disables the queue, None when its tree has none."""
        cohort = self.queues[queue].cohort
        return None if cohort is None else self.cycles.get(cohort)

    def root_of_queue(self, queue: str) -> str | None:
        """The root cohort of the queue's tree (Kueue's reclaim reaches every ClusterQueue under it);
        None without a cohort or when its chain of parents runs into a cycle."""
        cohort = self.queues[queue].cohort if queue in self.queues else None
        if cohort is None or cohort in self.cycles:
            return None
        while (parent := self.parent.get((True, cohort))) is not None:
            cohort = parent
        return cohort

    @classmethod
    def build(cls, queues: Mapping[str, ClusterQueueQuota],
              cohorts: Mapping[str, CohortQuota] | None = None) -> CohortTree:
        all_cohorts = _with_implicit_cohorts(queues, cohorts or {})
        cycles = _find_cycles(all_cohorts)
        parent: dict[Node, str] = {}
        for cohort in all_cohorts.values():
            if cohort.parent is not None and cohort.name not in cycles:
                parent[(True, cohort.name)] = cohort.parent
        for cq in queues.values():
            if cq.cohort is not None and cq.cohort not in cycles:
                parent[(False, cq.name)] = cq.cohort
        subtree, local = _sum_subtrees(queues, all_cohorts, parent)
        return cls(queues, all_cohorts, parent, cycles, subtree, local)


def cycle_text(cycle: tuple[str, ...]) -> str:
    """A cycle as its parent links, back to where it starts: `x -> y -> x`."""
    return " -> ".join((*cycle, cycle[0]))


def _with_implicit_cohorts(queues: Mapping[str, ClusterQueueQuota],
                           cohorts: Mapping[str, CohortQuota]) -> dict[str, CohortQuota]:
    """Phase 1: every cohort of the tree: the Cohort objects, plus an implicit root for each name
    a ClusterQueue or a Cohort's parentName refers to that no Cohort object defines (Kueue's
    default cohort: no quota, no limits)."""
    out = dict(cohorts)
    named = [cq.cohort for cq in queues.values()] + [co.parent for co in cohorts.values()]
    for name in named:
        if name is not None and name not in out:
            out[name] = CohortQuota(name, None, (), explicit=False)
    return out


def _find_cycles(cohorts: Mapping[str, CohortQuota]) -> dict[str, tuple[str, ...]]:
    """Phase 2: cohort -> the cycle (its members in parent order, starting from the smallest name)
    that its chain of parents runs into, for every cohort in or under a cycle (Kueue's HasCycle).
    Each cohort is walked once: `settled` remembers where a chain already ended."""
    settled: dict[str, tuple[str, ...] | None] = {}
    for start in cohorts:
        chain: list[str] = []
        at: str | None = start
        position: dict[str, int] = {}
        while at is not None and at not in settled and at not in position:
            position[at] = len(chain)
            chain.append(at)
            at = cohorts[at].parent if at in cohorts else None
        if at is not None and at in position:
            loop = chain[position[at]:]
            first = loop.index(min(loop))
            found: tuple[str, ...] | None = tuple(loop[first:] + loop[:first])
        else:
            found = settled.get(at) if at is not None else None
        for name in chain:
            settled[name] = found
    return {name: cycle for name, cycle in settled.items() if cycle is not None}


def _sum_subtrees(queues: Mapping[str, ClusterQueueQuota], cohorts: Mapping[str, CohortQuota],
                  parent: Mapping[Node, str]) -> tuple[dict[Node, dict[FlavorResource, int]],
                                                       dict[Node, dict[FlavorResource, int]]]:
    """Phase 3: subtree and local quota of every node outside cycles, children before parents.
    A node's subtree is its own nominal quota plus, per child, the child's subtree minus the part
    the child keeps (its local quota); its local quota is what exceeds its lendingLimit."""
    children: dict[str, list[Node]] = {}
    for node, name in parent.items():
        children.setdefault(name, []).append(node)
    subtree: dict[Node, dict[FlavorResource, int]] = {}
    local: dict[Node, dict[FlavorResource, int]] = {}

    def settle(node: Node, own: dict[FlavorResource, int]) -> None:
        subtree[node] = own
        is_cohort, name = node
        spec: CohortQuota | ClusterQueueQuota = cohorts[name] if is_cohort else queues[name]
        keep = {}
        for fr, amount in own.items():
            limit = spec.quota(*fr).lending_limit
            if limit is not None and amount > limit:
                keep[fr] = amount - limit
        local[node] = keep

    for cq in queues.values():
        settle((False, cq.name), _own_nominal(cq.groups))
    roots = [(True, name) for name in cohorts if (True, name) not in parent]
    order: list[Node] = []
    stack = list(roots)
    while stack:  # pre-order; reversed it puts every child before its parent
        node = stack.pop()
        order.append(node)
        stack.extend(child for child in children.get(node[1], ()) if child[0])
    for node in reversed(order):
        total = _own_nominal(cohorts[node[1]].groups)
        for child in children.get(node[1], ()):
            kept = local[child]
            for fr, amount in subtree[child].items():
                total[fr] = total.get(fr, 0) + amount - kept.get(fr, 0)
        settle(node, total)
    return subtree, local


@dataclass(frozen=True, slots=True)
class Availability:
    """How much of one flavor x resource a ClusterQueue may still take, with the numbers behind it.
    `cohort_free`: what its cohort (and the cohorts above, within their limits) could still give."""

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
    """Per-cycle usage of every ClusterQueue and Cohort (cheap to clone) over the static tree.

    Kueue's hierarchical model: a ClusterQueue's usage is what its workloads hold; a cohort's usage
    is what its children use beyond the quota they keep (their local quota). A node may take what
    it keeps unused plus what its parent can give, and from its parent at most what it lends plus
    its borrowingLimit. A usage change walks the path to the root only.
    """

    queues: Mapping[str, ClusterQueueQuota]
    tree: CohortTree
    used: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    """Per ClusterQueue: the quota its workloads hold."""
    cohort_used: dict[str, dict[FlavorResource, int]] = field(default_factory=dict)
    """Per cohort: what its children use beyond their local quota."""
    by_workload: dict[str, tuple[str, dict[FlavorResource, int]]] = field(default_factory=dict)

    @classmethod
    def build(cls, queues: Mapping[str, ClusterQueueQuota],
              cohorts: Mapping[str, CohortQuota] | None = None) -> QuotaLedger:
        return cls(queues, CohortTree.build(queues, cohorts))

    def clone(self) -> QuotaLedger:
        return QuotaLedger(
            self.queues,
            self.tree,
            {q: dict(u) for q, u in self.used.items()},
            {k: dict(u) for k, u in self.cohort_used.items()},
            dict(self.by_workload),
        )

    def cohort_cycle(self, queue: str) -> tuple[str, ...] | None:
        """The cycle of cohorts that disables `queue` (Kueue admits nothing there), else None."""
        return self.tree.cycle_of_queue(queue)

    def _usage(self, node: Node) -> dict[FlavorResource, int]:
        return (self.cohort_used if node[0] else self.used).setdefault(node[1], {})

    def used_and_nominal(self, queue: str, flavor: str, resource: str) -> tuple[int, int]:
        """(used, nominal) of a ClusterQueue for one flavor/resource, as `availability` reports them,
        without walking its cohorts (whether an admission borrows needs only these)."""
        return self.used.get(queue, {}).get((flavor, resource), 0), self.queues[queue].quota(flavor, resource).nominal

    def availability(self, queue: str, flavor: str, resource: str) -> Availability:
        """Kueue's `available`: from the root down the queue's path, each node adds what it keeps
        unused to what its parent can give it (capped by its borrowingLimit)."""
        cq = self.queues[queue]
        fr = (flavor, resource)
        quota = cq.quota(flavor, resource)
        used = self.used.get(queue, {}).get(fr, 0)
        if self.cohort_cycle(queue) is not None:
            return Availability(0, quota.nominal, used, quota.borrowing_limit, cq.cohort, 0)
        path: list[Node] = [(False, queue)]
        while path[-1] in self.tree.parent:
            path.append((True, self.tree.parent[path[-1]]))
        root = path[-1]
        avail = self.tree.subtree[root].get(fr, 0) - self._usage(root).get(fr, 0)
        from_parent = avail
        for node in reversed(path[:-1]):
            from_parent = avail
            node_quota = self.tree.quota_of(node, fr)
            kept = self.tree.local[node].get(fr, 0)
            use = self._usage(node).get(fr, 0)
            if node_quota.borrowing_limit is not None:
                lent = self.tree.subtree[node].get(fr, 0) - kept
                avail = min(lent - max(0, use - kept) + node_quota.borrowing_limit, avail)
            avail = max(0, kept - use) + avail
        if len(path) == 1:
            return Availability(max(0, avail), quota.nominal, used, None, None, 0)
        return Availability(max(0, avail), quota.nominal, used, quota.borrowing_limit, cq.cohort, max(0, from_parent))

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
        for fr, amount in usage.items():
            if sign > 0:
                self._add(fr, amount, (False, queue))
            else:
                self._remove(fr, amount, (False, queue))

    def _add(self, fr: FlavorResource, amount: int, node: Node) -> None:
        """Kueue's addUsage: a node charges its parent with what exceeds its unused local quota."""
        while True:
            mine = self._usage(node)
            before = mine.get(fr, 0)
            unused_local = max(0, self.tree.local[node].get(fr, 0) - before) if node in self.tree.local else 0
            mine[fr] = before + amount
            parent = self.tree.parent.get(node)
            if parent is None or amount <= unused_local:
                return
            amount, node = amount - unused_local, (True, parent)

    def _remove(self, fr: FlavorResource, amount: int, node: Node) -> None:
        """Kueue's removeUsage: a node gives back to its parent at most what it held there."""
        while True:
            mine = self._usage(node)
            before = mine.get(fr, 0)
            held_in_parent = before - (self.tree.local[node].get(fr, 0) if node in self.tree.local else 0)
            mine[fr] = before - amount
            parent = self.tree.parent.get(node)
            if parent is None or held_in_parent <= 0:
                return
            amount, node = min(amount, held_in_parent), (True, parent)
