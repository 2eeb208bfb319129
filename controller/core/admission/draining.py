"""Queue stop policies over admitted Workloads: whom a HoldAndDrain evicts, whom a restart requeues.

`drains` lists the admitted Workloads of every LocalQueue or ClusterQueue stopped with HoldAndDrain
that are not being evicted yet, each as a `Drain` (Kueue's Evicted reason LocalQueueStopped or
ClusterQueueStopped); `restarts` lists the Workloads such a drain released whose queue runs again
(Kueue's Requeued=True reason LocalQueueRestarted or ClusterQueueRestarted). Hold alone evicts
nothing: holding waiting Workloads is `cycle.resolve_cluster_queue`'s. Pure. Called by the admission
loop (controller.kube.admitting), which carries each Drain out through the graceful eviction
(controller.kube.evicting) and writes each Restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.api import constants as c
from controller.api.queues import ClusterQueue, LocalQueue

RESTARTED_AFTER = {c.REASON_LOCAL_QUEUE_STOPPED: c.REASON_LOCAL_QUEUE_RESTARTED,
                   c.REASON_CLUSTER_QUEUE_STOPPED: c.REASON_CLUSTER_QUEUE_RESTARTED}
"""The Requeued=False reason a drained Workload keeps once released -> its Requeued=True reason once
that queue runs again."""


@dataclass(frozen=True, slots=True)
class QueueStops:
    """The queues as a stop policy reads them. `local_queues`: every LocalQueue `namespace/name` ->
    its ClusterQueue; `local_policies` and `cluster_policies`: the stopPolicy of each stopped queue
    (Hold or HoldAndDrain; a running queue is absent); `cluster_queues`: every ClusterQueue name."""

    local_queues: Mapping[str, str]
    local_policies: Mapping[str, str]
    cluster_queues: frozenset[str]
    cluster_policies: Mapping[str, str]

    @classmethod
    def of(cls, local_queues: Mapping[str, LocalQueue], cluster_queues: Mapping[str, ClusterQueue]) -> QueueStops:
        """From the queue models, keyed as the cache keys them (`namespace/name`, name)."""
        return cls({key: lq.spec.cluster_queue for key, lq in local_queues.items()},
                   {key: str(lq.spec.stop_policy) for key, lq in local_queues.items() if lq.stopped},
                   frozenset(cluster_queues),
                   {name: str(cq.spec.stop_policy) for name, cq in cluster_queues.items() if cq.stopped})

    @property
    def draining(self) -> bool:
        """Whether some queue is stopped with HoldAndDrain (else `drains` finds nothing)."""
        return c.STOP_POLICY_HOLD_AND_DRAIN in {*self.local_policies.values(), *self.cluster_policies.values()}

    def fingerprint(self) -> tuple[tuple[str, str], ...]:
        """Every stopped queue and its policy, sorted: equal fingerprints, no queue stopped or ran again."""
        return tuple(sorted([*((f"LocalQueue {key}", policy) for key, policy in self.local_policies.items()),
                             *((f"ClusterQueue {name}", policy) for name, policy in self.cluster_policies.items())]))


@dataclass(frozen=True, slots=True)
class StandingWorkload:
    """One Workload as a stop policy reads it. `local_queue`: `namespace/name` of its LocalQueue;
    `admitted_in`: the ClusterQueue of its `status.admission` while it holds one (None otherwise);
    `evicted`: Evicted=True already; `released_by`: the reason of its Requeued=False condition when
    that is a drain's (LocalQueueStopped, ClusterQueueStopped), else None."""

    key: str
    local_queue: str
    admitted_in: str | None
    evicted: bool = False
    finished: bool = False
    released_by: str | None = None


@dataclass(frozen=True, slots=True)
class Drain:
    """Evict the admitted Workload `key` of ClusterQueue `cluster_queue`: Evicted=True with `reason`
    (LocalQueueStopped or ClusterQueueStopped) and `message`, then the graceful eviction's steps."""

    key: str
    cluster_queue: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Restart:
    """The Workload `key`, released by a drain, may be admitted again: Requeued=True with `reason`
    (LocalQueueRestarted or ClusterQueueRestarted) and `message`."""

    key: str
    reason: str
    message: str


def local_queue_text(key: str) -> str:
    """`LocalQueue "q" in namespace "ns"` for the key `ns/q`."""
    namespace, _, name = key.partition("/")
    return f"LocalQueue \"{name}\" in namespace \"{namespace}\""


def drains(workloads: Iterable[StandingWorkload], stops: QueueStops) -> list[Drain]:
    """Every admitted, unfinished Workload not yet evicted whose LocalQueue, else whose ClusterQueue
    (Kueue asks the LocalQueue first), is stopped with HoldAndDrain; by key."""
    if not stops.draining:
        return []
    out = []
    for wl in workloads:
        if wl.admitted_in is None or wl.evicted or wl.finished:
            continue
        if stops.local_policies.get(wl.local_queue) == c.STOP_POLICY_HOLD_AND_DRAIN:
            out.append(Drain(wl.key, wl.admitted_in, c.REASON_LOCAL_QUEUE_STOPPED,
                             f"{local_queue_text(wl.local_queue)} is stopped (stopPolicy HoldAndDrain): "
                             "its admitted Workloads are evicted"))
        elif stops.cluster_policies.get(wl.admitted_in) == c.STOP_POLICY_HOLD_AND_DRAIN:
            out.append(Drain(wl.key, wl.admitted_in, c.REASON_CLUSTER_QUEUE_STOPPED,
                             f"ClusterQueue \"{wl.admitted_in}\" is stopped (stopPolicy HoldAndDrain): "
                             "its admitted Workloads are evicted"))
    return sorted(out, key=lambda d: d.key)


def restarts(workloads: Iterable[StandingWorkload], stops: QueueStops) -> list[Restart]:
    """Every unfinished Workload a drain released (`released_by`) whose queue of that drain exists
    and runs again: its LocalQueue (LocalQueueStopped), or the ClusterQueue that LocalQueue points at
    (ClusterQueueStopped); by key. A queue still stopped, or gone, requeues nothing."""
    out = []
    for wl in workloads:
        if wl.released_by not in RESTARTED_AFTER or wl.finished or wl.local_queue not in stops.local_queues:
            continue
        cq = stops.local_queues[wl.local_queue]
        if wl.released_by == c.REASON_LOCAL_QUEUE_STOPPED:
            runs, queue = wl.local_queue not in stops.local_policies, local_queue_text(wl.local_queue)
        else:
            runs, queue = cq in stops.cluster_queues and cq not in stops.cluster_policies, f"ClusterQueue \"{cq}\""
        if runs:
            out.append(Restart(wl.key, RESTARTED_AFTER[wl.released_by], f"{queue} runs again after being stopped"))
    return sorted(out, key=lambda r: r.key)
