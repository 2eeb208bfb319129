"""Queue stop policies over admitted Workloads: whom a HoldAndDrain evicts (LocalQueue first, then
ClusterQueue; Hold evicts nothing) and whom a queue running again requeues, as table cases."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from controller.api import constants as c
from controller.api.queues import ClusterQueue, LocalQueue
from controller.core.admission.draining import QueueStops, StandingWorkload, drains, restarts
from tests.builders.kueue import make_cluster_queue, make_local_queue

# Two ClusterQueues, each fed by one LocalQueue of namespace ns:  ns/lq-a -> cq-a, ns/lq-b -> cq-b.


def stops(local: dict[str, str] | None = None, cluster: dict[str, str] | None = None,
          missing_cq: str | None = None) -> QueueStops:
    """The two queue pairs with the given stopPolicies (LocalQueue name or ClusterQueue name ->
    policy); `missing_cq`: that ClusterQueue does not exist."""
    lqs: dict[str, LocalQueue] = {}
    cqs: dict[str, ClusterQueue] = {}
    for suffix in ("a", "b"):
        lq = make_local_queue(f"lq-{suffix}", f"cq-{suffix}", namespace="ns")
        if (local or {}).get(f"lq-{suffix}"):
            lq.set("spec.stopPolicy", (local or {})[f"lq-{suffix}"])
        lqs[f"ns/lq-{suffix}"] = lq.model()
        cq = make_cluster_queue(f"cq-{suffix}").flavor("gpu", {"cpu": 8})
        if (cluster or {}).get(f"cq-{suffix}"):
            cq.set("spec.stopPolicy", (cluster or {})[f"cq-{suffix}"])
        if f"cq-{suffix}" != missing_cq:
            cqs[f"cq-{suffix}"] = cq.model()
    return QueueStops.of(lqs, cqs)


def admitted(name: str, queue: str = "a", evicted: bool = False, finished: bool = False,
             released_by: str | None = None) -> StandingWorkload:
    """Workload ns/<name> of LocalQueue ns/lq-<queue>, admitted in cq-<queue>."""
    return StandingWorkload(f"ns/{name}", f"ns/lq-{queue}", f"cq-{queue}", evicted, finished, released_by)


def waiting(name: str, queue: str = "a", released_by: str | None = None, finished: bool = False) -> StandingWorkload:
    return StandingWorkload(f"ns/{name}", f"ns/lq-{queue}", None, released_by is not None, finished, released_by)


@dataclass
class DrainCase:
    name: str
    stops: QueueStops
    workloads: list[StandingWorkload]
    want: list[tuple[str, str, str]] = field(default_factory=list)
    """(key, ClusterQueue, Evicted reason) of each Drain, by key."""


DRAIN_CASES = [
    DrainCase("nothing stopped drains nothing", stops(), [admitted("w")]),
    DrainCase("a LocalQueue on Hold keeps its admitted Workloads running", stops(local={"lq-a": "Hold"}),
              [admitted("w")]),
    DrainCase("a ClusterQueue on Hold keeps its admitted Workloads running", stops(cluster={"cq-a": "Hold"}),
              [admitted("w")]),
    DrainCase("a LocalQueue's HoldAndDrain evicts its admitted Workloads and no other queue's",
              stops(local={"lq-a": "HoldAndDrain"}), [admitted("w2"), admitted("w1"), admitted("other", "b")],
              [("ns/w1", "cq-a", c.REASON_LOCAL_QUEUE_STOPPED), ("ns/w2", "cq-a", c.REASON_LOCAL_QUEUE_STOPPED)]),
    DrainCase("a ClusterQueue's HoldAndDrain evicts what it admitted", stops(cluster={"cq-b": "HoldAndDrain"}),
              [admitted("w"), admitted("other", "b")], [("ns/other", "cq-b", c.REASON_CLUSTER_QUEUE_STOPPED)]),
    DrainCase("both queues draining: the LocalQueue's reason, as Kueue asks it first",
              stops(local={"lq-a": "HoldAndDrain"}, cluster={"cq-a": "HoldAndDrain"}), [admitted("w")],
              [("ns/w", "cq-a", c.REASON_LOCAL_QUEUE_STOPPED)]),
    DrainCase("a LocalQueue on Hold under a draining ClusterQueue: drained by the ClusterQueue",
              stops(local={"lq-a": "Hold"}, cluster={"cq-a": "HoldAndDrain"}), [admitted("w")],
              [("ns/w", "cq-a", c.REASON_CLUSTER_QUEUE_STOPPED)]),
    DrainCase("already evicted, finished or waiting: nothing to drain", stops(local={"lq-a": "HoldAndDrain"}),
              [admitted("evicted", evicted=True), admitted("done", finished=True), waiting("pending")]),
    DrainCase("the ClusterQueue of its admission decides, not the one its LocalQueue points at now",
              stops(cluster={"cq-b": "HoldAndDrain"}), [StandingWorkload("ns/w", "ns/lq-a", "cq-b")],
              [("ns/w", "cq-b", c.REASON_CLUSTER_QUEUE_STOPPED)]),
]


@pytest.mark.parametrize("case", DRAIN_CASES, ids=lambda case: case.name)
def test_drains(case: DrainCase) -> None:
    assert [(d.key, d.cluster_queue, d.reason) for d in drains(case.workloads, case.stops)] == case.want


def test_a_drains_message_names_the_queue_and_its_policy() -> None:
    by_lq = drains([admitted("w")], stops(local={"lq-a": "HoldAndDrain"}))
    by_cq = drains([admitted("w")], stops(cluster={"cq-a": "HoldAndDrain"}))
    assert [d.message for d in by_lq + by_cq] == [
        'LocalQueue "lq-a" in namespace "ns" is stopped (stopPolicy HoldAndDrain): its admitted Workloads are evicted',
        'ClusterQueue "cq-a" is stopped (stopPolicy HoldAndDrain): its admitted Workloads are evicted']


@dataclass
class RestartCase:
    name: str
    stops: QueueStops
    workloads: list[StandingWorkload]
    want: list[tuple[str, str]] = field(default_factory=list)
    """(key, Requeued reason) of each Restart, by key."""


LQ_STOPPED, CQ_STOPPED = c.REASON_LOCAL_QUEUE_STOPPED, c.REASON_CLUSTER_QUEUE_STOPPED
RESTART_CASES = [
    RestartCase("released by its LocalQueue's drain, the LocalQueue running again",
                stops(), [waiting("w", released_by=LQ_STOPPED)], [("ns/w", c.REASON_LOCAL_QUEUE_RESTARTED)]),
    RestartCase("released by its ClusterQueue's drain, the ClusterQueue running again",
                stops(), [waiting("w", released_by=CQ_STOPPED)], [("ns/w", c.REASON_CLUSTER_QUEUE_RESTARTED)]),
    RestartCase("its LocalQueue still stopped (even on Hold only): not requeued",
                stops(local={"lq-a": "Hold"}), [waiting("w", released_by=LQ_STOPPED)]),
    RestartCase("its ClusterQueue still stopped: not requeued",
                stops(cluster={"cq-a": "Hold"}), [waiting("w", released_by=CQ_STOPPED)]),
    RestartCase("its LocalQueue runs but its ClusterQueue is still stopped: requeued by the LocalQueue only",
                stops(cluster={"cq-a": "HoldAndDrain"}),
                [waiting("by-lq", released_by=LQ_STOPPED), waiting("by-cq", released_by=CQ_STOPPED)],
                [("ns/by-lq", c.REASON_LOCAL_QUEUE_RESTARTED)]),
    RestartCase("its ClusterQueue gone: nothing runs again", stops(missing_cq="cq-a"),
                [waiting("w", released_by=CQ_STOPPED)]),
    RestartCase("its LocalQueue gone: nothing runs again", stops(),
                [StandingWorkload("ns/w", "ns/gone", None, True, False, LQ_STOPPED)]),
    RestartCase("never drained, or finished since: nothing to requeue", stops(),
                [waiting("held"), waiting("done", released_by=LQ_STOPPED, finished=True)]),
    RestartCase("admitted again before its Requeued was written: still requeued", stops(),
                [admitted("w", released_by=LQ_STOPPED)], [("ns/w", c.REASON_LOCAL_QUEUE_RESTARTED)]),
]


@pytest.mark.parametrize("case", RESTART_CASES, ids=lambda case: case.name)
def test_restarts(case: RestartCase) -> None:
    assert [(r.key, r.reason) for r in restarts(case.workloads, case.stops)] == case.want


def test_the_stop_fingerprint_changes_exactly_when_a_queue_stops_runs_again_or_changes_policy() -> None:
    running, held = stops(), stops(local={"lq-a": "Hold"})
    assert running.fingerprint() == stops().fingerprint() == ()
    assert held.fingerprint() == (("LocalQueue ns/lq-a", "Hold"),)
    assert stops(local={"lq-a": "HoldAndDrain"}).fingerprint() != held.fingerprint()
    assert stops(cluster={"cq-a": "Hold"}).fingerprint() == (("ClusterQueue cq-a", "Hold"),)
    assert [s.draining for s in (running, held, stops(cluster={"cq-b": "HoldAndDrain"}))] == [False, False, True]


def test_an_explicit_none_policy_runs() -> None:
    assert stops(local={"lq-a": "None"}, cluster={"cq-a": "None"}).fingerprint() == ()
