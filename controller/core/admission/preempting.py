"""Preemption's victim search: which admitted Workloads to evict so that a pending one fits.

`find_victims(pool, snap, cq_name, wl)` is called by the admission cycle (controller.core.admission
.cycle) for a head that does not fit, and by `explain_preemption`. It never mutates `snap`: every
trial runs on clones of the QuotaLedger and the topology Usage. Phases, per flavor choice of the
ClusterQueue (in its order; `flavor_choices`):

1. `_needs`: what the preemptor would charge, and which flavor/resources are short;
2. `_candidates`: Kueue's candidates and order: workloads already being evicted first, then those of
   other ClusterQueues of the cohort (only while their queue borrows), then lower priority, then the
   most recently admitted; each with the Preempted reason it would get;
3. `_search_scope` per scope: take candidates away in that order until the preemptor fits, then put
   back every one not needed (Kueue's fill back, the last one taken kept): a minimal set. For a pod
   set with a required or preferred topology a scope is one domain of its level (only candidates
   with pods or reservations there), counted per node (pods of the preemptor's shape each node
   holds), so fragmented free capacity never counts; the domain whose victims are already being
   evicted, else of lowest highest priority, else fewest, wins. A preferred level no freed domain
   can hold, and an unconstrained pod set, count the flavor's nodes as one domain; without a
   topology pod set the scope is every candidate, checked with the full flavor assignment;
4. `_confirm`: the chosen set is checked with the real flavor assignment on a clone (slices, groups,
   node filters) before it is returned; a domain that fails it gives way to the next;
5. `_hopeless`, only when nothing was found: every candidate taken away at once; the numbers of why
   even that would not make room (`NoPreemption`, reason PreemptionIneffective).

Kueue's two attempts (with and without the preemptor borrowing, `_attempts`) and its borrowWithinCohort
rules (`maxPriorityThreshold`) decide which cohort candidates count in each attempt.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import numpy as np

from controller.api import constants as c
from controller.api.quantity import format_milli
from controller.core.admission.flavoring import NoFit, WorkloadFit, assign_flavors, quota_requests
from controller.core.admission.quota import ClusterQueueQuota, FlavorResource, QuotaLedger, ResourceGroup
from controller.core.admission.snapshot import AdmissionSnapshot
from controller.core.admission.workloads import PodSetInfo, WorkloadInfo
from controller.core.topology import FlavorTopology, Usage
from controller.core.topology.candidacy import Signature
from controller.core.topology.counting import FIT_CAP, shape_counts

REASON_PREEMPTION_NEVER: Final = "PreemptionNever"
"""The ClusterQueue's policies preempt nothing (withinClusterQueue and reclaimWithinCohort Never)."""
REASON_NO_CANDIDATES: Final = "NoPreemptionCandidates"
"""No admitted workload is a candidate under the policies (priorities, borrowing, flavors)."""
REASON_PREEMPTION_INEFFECTIVE: Final = "PreemptionIneffective"
"""Even every candidate taken away would not make the workload fit."""

MAX_FLAVOR_CHOICES: Final = 16
"""Flavor choices tried per workload (the product of its resource groups' flavors, in order)."""
MAX_CONFIRMED_DOMAINS: Final = 8
"""Domains whose victim set is checked with the full flavor assignment before giving up: each check
is one topology assignment; the per-node count already passed for all of them."""

# Kueue's candidate variants: who may be preempted, and in which attempt.
_WITHIN_CQ: Final = 0
_RECLAIM: Final = 1
"""Another ClusterQueue's workload while the preemptor stays within its nominal quota."""
_RECLAIM_WITHOUT_BORROWING: Final = 2
"""Counts only in the attempt where the preemptor does not borrow afterwards."""
_RECLAIM_WHILE_BORROWING: Final = 3
_REASONS: Final = {_WITHIN_CQ: c.REASON_IN_CLUSTER_QUEUE, _RECLAIM: c.REASON_IN_COHORT_RECLAMATION,
                   _RECLAIM_WITHOUT_BORROWING: c.REASON_IN_COHORT_RECLAMATION,
                   _RECLAIM_WHILE_BORROWING: c.REASON_IN_COHORT_RECLAIM_WHILE_BORROWING}


@dataclass(frozen=True, slots=True)
class VictimPool:
    """The admitted workloads the search may choose from (references into the AdmissionState).

    `admitted_at`: quota reservation time per workload (seconds; absent: its creation time), the
    newest first among equal priorities. `evicting`: victims whose eviction was decided and whose
    quota is not released yet -> the preemptor they were evicted for (None: unknown, e.g. after a
    restart); they still count as used, come first, and are never claimed by another preemptor."""

    fits: Mapping[str, WorkloadFit]
    infos: Mapping[str, WorkloadInfo]
    admitted_at: Mapping[str, float] = field(default_factory=dict)
    evicting: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Victim:
    key: str
    cluster_queue: str
    priority: int
    reason: str
    """InClusterQueue, InCohortReclamation or InCohortReclaimWhileBorrowing (the Preempted reason)."""


@dataclass(frozen=True, slots=True)
class VictimSet:
    """The victims that make the preemptor fit, in the order they were chosen, and where."""

    victims: tuple[Victim, ...]
    flavors: tuple[str, ...]
    domain: str | None
    """`rack "b1/r1"` for a topology pod set's domain, None when quota alone was short."""
    pods: int
    pod_set: str

    def message(self, evicting: int = 0) -> str:
        """`preempting 2 workload(s) in rack "b1/r1" to fit 16 pod(s) of pod set "main" in flavor
        "h100"`, plus how many of them are already being evicted."""
        where = f" in {self.domain}" if self.domain else ""
        flavors = ", ".join(f"\"{f}\"" for f in self.flavors)
        text = (f"preempting {len(self.victims)} workload(s){where} to fit {self.pods} pod(s) of pod set "
                f"\"{self.pod_set}\" in flavor {flavors}")
        if evicting:
            text += f" ({evicting} already being evicted)"
        return text


@dataclass(frozen=True, slots=True)
class NoPreemption:
    """Why preemption would not help: a PascalCase reason and a quantitative message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class _Candidate:
    key: str
    cluster_queue: str
    priority: int
    variant: int
    quota: Mapping[FlavorResource, int]


@dataclass(slots=True)
class _Needs:
    """One flavor choice: the narrowed snapshot, what the preemptor charges there, what is short."""

    snap: AdmissionSnapshot
    flavors: tuple[str, ...]
    requests: dict[FlavorResource, int]
    short: frozenset[FlavorResource]
    topology: bool
    """Some chosen flavor has a topology (only then do node capacities matter)."""


def find_victims(pool: VictimPool, snap: AdmissionSnapshot, cq_name: str, wl: WorkloadInfo,
                 before: WorkloadFit | None = None) -> VictimSet | NoPreemption:
    """Phase driver (see the module docstring): the first flavor choice whose search finds a set.
    `before`: only flavor choices that come before this fit's flavors (whenCanPreempt MayStopSearch)."""
    cq = snap.cluster_queues[cq_name]
    if not cq.preemption.enabled:
        return NoPreemption(REASON_PREEMPTION_NEVER, f"ClusterQueue \"{cq_name}\" preempts nothing "
                            "(withinClusterQueue and reclaimWithinCohort are Never)")
    why: list[NoPreemption] = []
    for needs in flavor_choices(snap, cq, wl, before):
        found = _search_choice(pool, needs, cq, wl)
        if isinstance(found, VictimSet):
            return found
        why.append(found)
    if not why:
        return NoPreemption(REASON_NO_CANDIDATES, "no flavor of ClusterQueue "
                            f"\"{cq_name}\" covers the workload's resources")
    reasons = {w.reason for w in why}
    reason = reasons.pop() if len(reasons) == 1 else REASON_PREEMPTION_INEFFECTIVE
    return NoPreemption(reason, "; ".join(dict.fromkeys(w.message for w in why)))


def flavor_choices(snap: AdmissionSnapshot, cq: ClusterQueueQuota, wl: WorkloadInfo,
                   before: WorkloadFit | None = None) -> Iterator[_Needs]:
    """Every combination of one flavor per resource group the workload touches, in the queue's
    order (at most MAX_FLAVOR_CHOICES), each as a snapshot whose ClusterQueue offers only it."""
    touched: list[ResourceGroup] = []
    for ps in wl.pod_sets:
        for resource in quota_requests(cq, ps):
            group = cq.group_for(resource)
            if group is not None and group not in touched:
                touched.append(group)
    if not touched:
        return
    stop = _flavors_of(before) if before is not None else None
    for combo in itertools.islice(itertools.product(*(g.flavors for g in touched)), MAX_FLAVOR_CHOICES):
        names = tuple(fq.name for fq in combo)
        if stop is not None and all(name in stop for name in names):
            return  # the choice the fit took: only earlier ones may win over it
        chosen = dict(zip((id(g) for g in touched), combo, strict=True))
        groups = tuple(replace(g, flavors=(chosen[id(g)],)) if id(g) in chosen else g for g in cq.groups)
        narrowed = replace(cq, groups=groups)
        view = replace(snap, cluster_queues={**snap.cluster_queues, cq.name: narrowed})
        yield _needs(view, narrowed, wl, names)


def _flavors_of(fit: WorkloadFit) -> set[str]:
    return {flavor for ps in fit.pod_sets for flavor in ps.flavors.values()}


def _needs(snap: AdmissionSnapshot, cq: ClusterQueueQuota, wl: WorkloadInfo, flavors: tuple[str, ...]) -> _Needs:
    """Phase 1: the quota the preemptor charges in this choice and the flavor/resources short of
    it; when none is short (the placement failed, not the quota), every one it charges counts."""
    requests: dict[FlavorResource, int] = {}
    for ps in wl.pod_sets:
        for resource, amount in quota_requests(cq, ps).items():
            group = cq.group_for(resource)
            if group is None:
                continue
            fr = (group.flavors[0].name, resource)
            requests[fr] = requests.get(fr, 0) + amount
    short = frozenset(fr for fr, amount in requests.items()
                      if amount > snap.quota.availability(cq.name, *fr).available)
    topology = any(info is not None and info.has_topology for info in map(snap.flavors.get, flavors))
    return _Needs(snap, flavors, requests, short or frozenset(fr for fr, v in requests.items() if v > 0), topology)


def _search_choice(pool: VictimPool, needs: _Needs, cq: ClusterQueueQuota,
                   wl: WorkloadInfo) -> VictimSet | NoPreemption:
    """Phases 2-5 for one flavor choice: candidates, each attempt's search per scope, then (only when
    nothing was found) why even every candidate gone would not make room."""
    flavors = ", ".join(f"\"{f}\"" for f in needs.flavors)
    candidates = _candidates(pool, needs, cq, wl)
    if not candidates:
        return NoPreemption(REASON_NO_CANDIDATES, f"no admitted workload in flavor {flavors} may be "
                            f"preempted by priority {wl.priority} under the policies of ClusterQueue \"{cq.name}\"")
    scope = _topology_scope(needs, cq, wl)
    footprints = {cand.key: _slots_of(scope, needs.snap.usage, cand.key) for cand in candidates} \
        if scope is not None else {}
    scopes = [scope]
    if scope is not None and scope.level is not None and scope.ps.topology is not None \
            and scope.ps.topology.mode == "preferred":
        scopes.append(_widened(scope))  # a preferred level may spread when no one domain can be freed
    for each in scopes:
        for borrowing in _attempts(needs, cq, candidates):
            found = _search_attempt(pool, needs, cq, wl, candidates, borrowing, each, footprints)
            if found is not None:
                return found
    # Why not, told with numbers: every candidate gone at once (more than any attempt may take).
    hopeless = _hopeless(needs, cq, wl, candidates, scopes[-1], footprints)
    if hopeless is not None:
        return NoPreemption(REASON_PREEMPTION_INEFFECTIVE, f"preempting all {len(candidates)} candidate "
                            f"workload(s) in flavor {flavors} would not make room: {hopeless}")
    return NoPreemption(REASON_PREEMPTION_INEFFECTIVE, f"no set of the {len(candidates)} candidate "
                        f"workload(s) in flavor {flavors} makes room within the preemption policies of "
                        f"ClusterQueue \"{cq.name}\"")


def _uses(fit: WorkloadFit, frs: frozenset[FlavorResource]) -> bool:
    """Whether the workload holds some of these flavor/resources (Kueue's WorkloadUsesResources)."""
    usage = fit.quota_usage
    return any(usage.get(fr) for fr in frs)


def _satisfies(policy: str, preemptor: WorkloadInfo, candidate: WorkloadInfo) -> bool:
    """Kueue's policy test: LowerPriority, LowerOrNewerEqualPriority (equal priority and created
    later than the preemptor), Any; Never admits nobody."""
    if policy == c.PREEMPTION_ANY:
        return True
    lower = candidate.priority < preemptor.priority
    if policy == c.PREEMPTION_LOWER_PRIORITY:
        return lower
    if policy == c.PREEMPTION_LOWER_OR_NEWER_EQUAL_PRIORITY:
        newer = candidate.priority == preemptor.priority and preemptor.created < candidate.created
        return lower or newer
    return False


def _within_nominal(ledger: QuotaLedger, queue: str, frs: frozenset[FlavorResource]) -> bool:
    """No flavor/resource of `frs` is used above the queue's nominal quota (it does not borrow them)."""
    for fr in frs:
        avail = ledger.availability(queue, *fr)
        if avail.used > avail.nominal:
            return False
    return True


def _candidates(pool: VictimPool, needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo) -> list[_Candidate]:
    """Phase 2: who may be preempted, each with its variant, in Kueue's order (module docstring).
    Another preemptor's in-flight victims are not candidates."""
    ledger = needs.snap.quota
    # Kueue's "hierarchical advantage": the preemptor fits within its own nominal quota.
    advantage = all(ledger.availability(cq.name, *fr).used + v <= ledger.availability(cq.name, *fr).nominal
                    for fr, v in needs.requests.items())
    out: list[tuple[tuple[object, ...], _Candidate]] = []
    for key, fit in pool.fits.items():
        info = pool.infos.get(key)
        if info is None or key == wl.key or pool.evicting.get(key, wl.key) not in (None, wl.key) \
                or not _uses(fit, needs.short):
            continue
        variant = _variant(needs, cq, wl, info, fit.cluster_queue, advantage)
        if variant is None:
            continue
        order = (key not in pool.evicting, fit.cluster_queue == cq.name, info.priority,
                 -pool.admitted_at.get(key, info.created), key)
        out.append((order, _Candidate(key, fit.cluster_queue, info.priority, variant, fit.quota_usage)))
    out.sort(key=lambda pair: pair[0])
    return [cand for _, cand in out]


def _variant(needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo, info: WorkloadInfo, queue: str,
             advantage: bool) -> int | None:
    """Kueue's classification of one admitted workload (None: not a candidate): its own queue's under
    withinClusterQueue; another queue of the cohort only while that queue borrows what is short,
    under reclaimWithinCohort; then whether the preemptor may borrow while reclaiming it
    (borrowWithinCohort LowerPriority, at most maxPriorityThreshold)."""
    policy, ledger = cq.preemption, needs.snap.quota
    if queue == cq.name:
        return _WITHIN_CQ if _satisfies(policy.within_cluster_queue, wl, info) else None
    other = ledger.queues.get(queue)
    if cq.cohort is None or other is None or other.cohort != cq.cohort:
        return None
    if not _satisfies(policy.reclaim_within_cohort, wl, info) or _within_nominal(ledger, queue, needs.short):
        return None
    if advantage:
        return _RECLAIM
    threshold = policy.max_priority_threshold
    if policy.borrow_within_cohort == c.PREEMPTION_NEVER or info.priority >= wl.priority or (
            threshold is not None and info.priority > threshold):
        return _RECLAIM_WITHOUT_BORROWING
    return _RECLAIM_WHILE_BORROWING


def _attempts(needs: _Needs, cq: ClusterQueueQuota, candidates: Sequence[_Candidate]) -> tuple[bool, ...]:
    """Kueue's attempts, `True` where the preemptor may borrow afterwards: only that one without
    cohort candidates (or when borrowing is not allowed and the queue is already at nominal);
    without-borrowing first when no cohort candidate has the reclaim advantage; else both, borrowing first."""
    others = [cand for cand in candidates if cand.variant != _WITHIN_CQ]
    forbidden = cq.preemption.borrow_within_cohort == c.PREEMPTION_NEVER
    ledger = needs.snap.quota
    under_nominal = all(ledger.availability(cq.name, *fr).used < ledger.availability(cq.name, *fr).nominal
                        for fr in needs.short)
    if not others or (forbidden and not under_nominal):
        return (True,)
    if forbidden and not any(cand.variant == _RECLAIM for cand in others):
        return (False, True)
    return (True, False)


def _quota_fits(ledger: QuotaLedger, cq: ClusterQueueQuota, requests: Mapping[FlavorResource, int],
                borrowing: bool) -> bool:
    """The preemptor's quota fits the (simulated) ledger; without `borrowing`, within nominal."""
    for fr, amount in requests.items():
        avail = ledger.availability(cq.name, *fr)
        if amount > avail.available or (not borrowing and avail.used + amount > avail.nominal):
            return False
    return True


def _valid(cand: _Candidate, ledger: QuotaLedger, needs: _Needs, borrowing: bool) -> bool:
    """Whether a candidate still counts: a cohort candidate only while its queue borrows what is
    short (earlier victims may have ended that), and not in the borrowing attempt if it may only
    be reclaimed without borrowing."""
    if cand.variant == _WITHIN_CQ:
        return True
    if borrowing and cand.variant == _RECLAIM_WITHOUT_BORROWING:
        return False
    return not _within_nominal(ledger, cand.cluster_queue, needs.short)


def _hopeless(needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo, candidates: Sequence[_Candidate],
              scope: _Scope | None, footprints: Mapping[str, Footprint]) -> str | None:
    """Phase 5: every candidate taken away at once (more than any attempt may take); None when the
    workload might then fit, else why not. With a counting scope: the quota, then the most pods of
    the shape one domain holds (no clone of the Usage); otherwise the flavor assignment itself."""
    if scope is None:
        result = assign_flavors(_without(needs, [cand.key for cand in candidates]), cq.name, wl)
        return result.message if isinstance(result, NoFit) else None
    ledger = needs.snap.quota.clone()
    for cand in candidates:
        ledger.release(cand.key)
    if not _quota_fits(ledger, cq, needs.requests, True):
        return describe_quota(ledger, cq.name, needs.requests)
    held = scope.held.copy()
    counter = _Counter(scope, None, 0)
    for cand in candidates:
        counter.shift(footprints[cand.key], +1)
    for slot, now in counter.fit.items():
        if scope.domain_of[slot] >= 0:
            held[scope.domain_of[slot]] += now - int(scope.fit[slot])
    best = int(held.max(initial=0))
    if best >= scope.ps.count:
        return None
    where = "the flavor's nodes" if scope.level is None else f"one {_level_name(scope)}"
    return f"at most {best} of the {scope.ps.count} pod(s) of pod set \"{scope.ps.name}\" fit in {where}"


def _widened(scope: _Scope) -> _Scope:
    """The scope with the flavor's nodes as one domain (no level)."""
    domain_of = np.zeros(scope.topology.slots, dtype=np.int64)
    held = np.asarray([int(scope.fit.sum())], dtype=np.int64)
    return replace(scope, level=None, domain_of=domain_of, held=held)


def _level_name(scope: _Scope) -> str:
    """`rack` for `cloud.provider.com/topology-rack`: the level label's last segment."""
    assert scope.level is not None
    return scope.topology.levels[scope.level].rsplit("/", 1)[-1].removeprefix("topology-")


def _without(needs: _Needs, keys: Sequence[str]) -> AdmissionSnapshot:
    """A clone of the choice's snapshot with these workloads' quota gone, and, when a chosen flavor
    has a topology, their reservations and bound pods (cloning the Usage costs a copy of its maps)."""
    if not needs.topology:
        sim = replace(needs.snap, quota=needs.snap.quota.clone())
        for key in keys:
            sim.quota.release(key)
        return sim
    sim = needs.snap.clone()
    for key in keys:
        sim.quota.release(key)
        sim.usage.remove_workload(key)
    return sim


def _confirm(needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo, keys: Sequence[str], borrowing: bool) -> bool:
    """Phase 4: with these victims gone the preemptor's quota fits (within nominal unless
    `borrowing`) and the full flavor assignment succeeds in this choice."""
    sim = _without(needs, keys)
    if not _quota_fits(sim.quota, cq, needs.requests, borrowing):
        return False
    return isinstance(assign_flavors(sim, cq.name, wl), WorkloadFit)


@dataclass(slots=True)
class _Scope:
    """Per-node counting for one topology pod set: `fit[slot]` pods of its shape each node holds now,
    `free[slot]` milli per `resources`, `level`/`domain_of` the domains victims are chosen in."""

    topology: FlavorTopology
    ps: PodSetInfo
    resources: tuple[str, ...]
    want: np.typing.NDArray[np.int64]
    mask: np.typing.NDArray[np.bool_]
    fit: np.typing.NDArray[np.int64]
    level: int | None
    domain_of: np.typing.NDArray[np.int64]
    slot_of_row: Mapping[int, int]
    rows: np.typing.NDArray[np.int64]
    held: np.typing.NDArray[np.int64]
    """Pods of the shape each domain holds now (one domain, 0, without a level)."""
    free: np.typing.NDArray[np.int64]
    """[slots x resources] free milli now (allocatable - used)."""
    columns: tuple[int, ...]
    """Usage column of each of `resources` (-1: no node uses it)."""


def _topology_scope(needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo) -> _Scope | None:
    """The counting scope when exactly one pod set goes to a topology flavor in this choice (others
    take none); None otherwise (the search then checks each step with the full assignment)."""
    placed: list[tuple[PodSetInfo, FlavorTopology]] = []
    for ps in wl.pod_sets:
        for resource in quota_requests(cq, ps):
            group = needs.snap.cluster_queues[cq.name].group_for(resource)
            info = needs.snap.flavors.get(group.flavors[0].name) if group is not None else None
            if info is not None and info.topology is not None:
                placed.append((ps, info.topology))
                break
    if len(placed) != 1:
        return None
    ps, topology = placed[0]
    request = ps.topology
    level: int | None = None
    if request is not None and request.mode in ("required", "preferred"):
        name = request.level if request.level is not None else topology.levels[-1]
        level = topology.levels.index(name) if name in topology.levels else None
    signature = Signature.of(ps.node_selector, ps.affinity_terms, ps.tolerations)
    counts = shape_counts(topology, needs.snap.usage, ps.placement_requests, signature)
    registry = needs.snap.usage.registry
    domain_of = topology.domain_of(level) if level is not None else np.zeros(topology.slots, dtype=np.int64)
    known = domain_of >= 0
    held = np.bincount(domain_of[known], weights=counts.fit[known]).astype(np.int64)
    rows = topology.rows_in(registry)
    free = topology.allocatable(list(counts.resources)) - needs.snap.usage.used_matrix(rows, list(counts.resources))
    columns = tuple(registry.cols.get(r, -1) for r in counts.resources)
    return _Scope(topology, ps, counts.resources, counts.want, counts.mask.mask[: topology.slots],
                  counts.fit, level, domain_of, topology.slot_of_row(registry), rows, held, free, columns)


def _search_attempt(pool: VictimPool, needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo,
                    candidates: Sequence[_Candidate], borrowing: bool, scope: _Scope | None,
                    footprints: Mapping[str, Footprint]) -> VictimSet | None:
    """Phase 3 for one attempt: per domain (topology pod set) or over all candidates; the best
    confirmed set. A placement that fits somewhere already needs quota only (no domain); an
    unconstrained one counts the flavor's nodes as one domain."""
    if scope is None:
        keys = _sequential(needs, cq, wl, candidates, borrowing)
        return None if keys is None else _victim_set(needs, wl, candidates, keys, None, None)
    # Domain -> its candidates in order (one pass over the footprints, not one per domain).
    members: dict[int | None, list[_Candidate]] = {}
    if int(scope.held.max(initial=0)) >= scope.ps.count:
        members[None] = list(candidates)
    elif scope.level is None:
        members[0] = list(candidates)
    else:
        domain_of = scope.domain_of.tolist()
        for cand in candidates:
            for touched in sorted({domain_of[slot] for slot in footprints[cand.key]} - {-1}):
                members.setdefault(touched, []).append(cand)
    found: list[tuple[tuple[object, ...], int | None, list[str]]] = []
    ledger = needs.snap.quota.clone()
    for domain in sorted(members, key=lambda d: -1 if d is None else d):
        keys = _search_scope(needs, cq, scope, candidates, members[domain], footprints, domain, borrowing, ledger)
        if keys is not None:
            new = [k for k in keys if k not in pool.evicting]
            priorities = [pool.infos[k].priority for k in new]
            found.append(((bool(new), max(priorities, default=0), len(new), sum(priorities),
                           domain if domain is not None else -1), domain, keys))
    found.sort(key=lambda item: item[0])
    for _, best, keys in found[:MAX_CONFIRMED_DOMAINS]:
        if _confirm(needs, cq, wl, keys, borrowing):
            return _victim_set(needs, wl, candidates, keys, scope, best)
    return None


Footprint = Mapping[int, Mapping[int, int]]
"""Slot -> Usage column -> milli a workload frees on a topology's nodes."""


def _slots_of(scope: _Scope, usage: Usage, key: str) -> dict[int, dict[int, int]]:
    """A workload's Usage footprint on this topology's nodes, by slot."""
    out: dict[int, dict[int, int]] = {}
    slot_of_row = scope.slot_of_row
    for row, amounts in usage.footprint(key).items():
        slot = slot_of_row.get(row)
        if slot is not None:
            out[slot] = amounts
    return out


@dataclass(slots=True)
class _Counter:
    """What taking candidates away frees, for one domain: `free`/`fit` of the nodes touched so far
    (the rest read from the scope), `held` the pods of the preemptor's shape the domain holds.
    Plain integers per node: a few nodes change per step, numpy's per-call cost would dominate."""

    scope: _Scope
    domain: int | None
    held: int
    free: dict[int, list[int]] = field(default_factory=dict)
    fit: dict[int, int] = field(default_factory=dict)
    wanted: tuple[tuple[int, int, int], ...] = ()
    """(index in `resources`, Usage column, per-pod milli) of every resource the pod set requests."""

    def __post_init__(self) -> None:
        scope = self.scope
        self.wanted = tuple((j, col, int(w)) for j, (col, w) in enumerate(zip(scope.columns, scope.want.tolist(),
                                                                                strict=True)) if w > 0)

    def shift(self, footprint: Footprint, sign: int) -> None:
        """A workload leaves (+1) or comes back (-1): its nodes' free capacity and fits change."""
        scope = self.scope
        for slot, amounts in footprint.items():
            free = self.free.get(slot)
            if free is None:
                free = self.free[slot] = scope.free[slot].tolist()
            now = FIT_CAP
            for j, col, want in self.wanted:
                free[j] += sign * amounts.get(col, 0)
                now = min(now, free[j] // want)
            now = max(0, now) if scope.mask[slot] else 0
            before = self.fit.get(slot, int(scope.fit[slot]))
            self.fit[slot] = now
            if self.domain is not None and scope.domain_of[slot] == self.domain:
                self.held += now - before

    def placed(self) -> bool:
        return self.domain is None or self.held >= self.scope.ps.count


def _search_scope(needs: _Needs, cq: ClusterQueueQuota, scope: _Scope, candidates: Sequence[_Candidate],
                  inside: Sequence[_Candidate], footprints: Mapping[str, Footprint],
                  domain: int | None, borrowing: bool, ledger: QuotaLedger) -> list[str] | None:
    """Take the domain's candidates away in order until its nodes hold the pod set and the quota
    fits; when the nodes suffice but the quota does not, candidates outside the domain follow (in
    order) for quota alone. Then put back every one not needed, the last taken kept (fill back).
    `domain` None: no domain constraint (quota alone). State: `ledger` (a clone shared by the
    domains of one attempt, given back as found), `counter`, `chosen`."""
    chosen: list[_Candidate] = []
    try:
        return _choose_in_scope(needs, cq, scope, candidates, inside, footprints, domain, borrowing, ledger, chosen)
    finally:
        for cand in chosen:
            ledger.reserve(cand.key, cand.cluster_queue, cand.quota)


def _choose_in_scope(needs: _Needs, cq: ClusterQueueQuota, scope: _Scope, candidates: Sequence[_Candidate],
                     inside: Sequence[_Candidate], footprints: Mapping[str, Footprint], domain: int | None,
                     borrowing: bool, ledger: QuotaLedger, chosen: list[_Candidate]) -> list[str] | None:
    """`_search_scope`'s work; `chosen` holds what is taken out of `ledger` at every point."""
    counter = _Counter(scope, domain, int(scope.held[domain]) if domain is not None else 0)
    within = {cand.key for cand in inside}
    # Only once the domain holds the pod set, and only lazily: most domains never get there.
    outside = (cand for cand in candidates if cand.key not in within)

    def fits() -> bool:
        return counter.placed() and _quota_fits(ledger, cq, needs.requests, borrowing)

    found = _take_until(inside, chosen, ledger, counter, footprints, needs, borrowing, fits)
    if not found and domain is not None and counter.placed():
        found = _take_until(outside, chosen, ledger, counter, footprints, needs, borrowing, fits)
    if not found:
        return None
    for cand in reversed(chosen[:-1]):  # fill back: Kueue keeps the last one taken
        ledger.reserve(cand.key, cand.cluster_queue, cand.quota)
        counter.shift(footprints[cand.key], -1)
        if fits():
            chosen.remove(cand)
        else:
            ledger.release(cand.key)
            counter.shift(footprints[cand.key], +1)
    return [cand.key for cand in chosen]


def _take_until(cands: Iterable[_Candidate], chosen: list[_Candidate], ledger: QuotaLedger, counter: _Counter,
                footprints: Mapping[str, Footprint], needs: _Needs, borrowing: bool,
                fits: Callable[[], bool]) -> bool:
    """Take valid candidates away in order (into `chosen`) until `fits`; False when they run out."""
    for cand in cands:
        if not _valid(cand, ledger, needs, borrowing):
            continue
        ledger.release(cand.key)
        counter.shift(footprints[cand.key], +1)
        chosen.append(cand)
        if fits():
            return True
    return False


def _sequential(needs: _Needs, cq: ClusterQueueQuota, wl: WorkloadInfo, candidates: Sequence[_Candidate],
                borrowing: bool) -> list[str] | None:
    """Without a counting scope (several topology pod sets, or none): take candidates away in order,
    checking the quota and then the full flavor assignment after each, then fill back likewise."""
    ledger = needs.snap.quota.clone()
    chosen: list[str] = []

    def fits(keys: Sequence[str]) -> bool:
        return _quota_fits(ledger, cq, needs.requests, borrowing) and _confirm(needs, cq, wl, keys, borrowing)

    for cand in candidates:
        if not _valid(cand, ledger, needs, borrowing):
            continue
        ledger.release(cand.key)
        chosen.append(cand.key)
        if fits(chosen):
            break
    else:
        return None
    by_key = {cand.key: cand for cand in candidates}
    for key in reversed(chosen[:-1]):
        cand = by_key[key]
        ledger.reserve(key, cand.cluster_queue, cand.quota)
        rest = [k for k in chosen if k != key]
        if fits(rest):
            chosen = rest
        else:
            ledger.release(key)
    return chosen


def _victim_set(needs: _Needs, wl: WorkloadInfo, candidates: Sequence[_Candidate], keys: Sequence[str],
                scope: _Scope | None, domain: int | None) -> VictimSet:
    by_key = {cand.key: cand for cand in candidates}
    victims = tuple(Victim(k, by_key[k].cluster_queue, by_key[k].priority, _REASONS[by_key[k].variant]) for k in keys)
    where = None
    if scope is not None and domain is not None and scope.level is not None:
        where = f"{_level_name(scope)} \"{'/'.join(scope.topology.domains[scope.level].keys[domain])}\""
    ps = scope.ps if scope is not None else wl.pod_sets[0]
    return VictimSet(victims, needs.flavors, where, ps.count if scope is not None else sum(p.count for p in wl.pod_sets),
                     ps.name if scope is not None else ", ".join(p.name for p in wl.pod_sets))


def describe_quota(ledger: QuotaLedger, cq: str, requests: Mapping[FlavorResource, int]) -> str:
    """`nvidia.com/gpu in flavor "h100": requests 16, available 8` for each short flavor/resource."""
    parts = []
    for (flavor, resource), amount in sorted(requests.items()):
        avail = ledger.availability(cq, flavor, resource)
        if amount > avail.available:
            parts.append(f"{resource} in flavor \"{flavor}\": requests {format_milli(amount, resource)}, "
                         f"available {format_milli(avail.available, resource)}")
    return "; ".join(parts)
