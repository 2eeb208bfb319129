"""Workload conditions as Kueue writes them (admitted, pending, finished, evicted as deactivated or
preempted, the eviction's release), with `now` passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.workload import Workload
from controller.core.admission.conditions import (
    is_terminating,
    mark_admitted,
    mark_deactivated,
    mark_eviction_done,
    mark_finished,
    mark_pending,
    mark_preempted,
    mark_queue_restarted,
    preemption_message,
    record_unhealthy_nodes,
    released_by_drain,
    says_pending,
)
from tests.builders.kueue import make_workload

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ADMISSION = {"clusterQueue": "team-a", "podSetAssignments": [
    {"name": "main", "count": 2, "flavors": {"cpu": "a100"}, "resourceUsage": {"cpu": "2"}}]}


def workload() -> Workload:
    return Workload.from_dict(make_workload("w").queue("q").pod_set("main", 2, {"cpu": 1}).obj())


def test_pending_then_admitted_flips_quota_reserved_and_moves_its_time() -> None:
    wl = workload()
    assert mark_pending(wl, c.REASON_PENDING, "insufficient quota", T0)
    assert not mark_pending(wl, c.REASON_PENDING, "insufficient quota", T0 + timedelta(seconds=5))
    assert mark_admitted(wl, ADMISSION, T0 + timedelta(seconds=9))
    reserved, admitted = wl.condition(c.CONDITION_QUOTA_RESERVED), wl.condition(c.CONDITION_ADMITTED)
    assert reserved is not None and admitted is not None
    assert (reserved.status, reserved.reason, reserved.message) == (
        "True", c.REASON_QUOTA_RESERVED, "Quota reserved in ClusterQueue team-a")
    assert reserved.last_transition_time == "2026-01-01T00:00:09Z"
    assert (admitted.status, admitted.reason) == ("True", c.REASON_ADMITTED)
    assert wl.admission is not None and wl.admission.cluster_queue == "team-a"
    assert not mark_admitted(wl, ADMISSION, T0 + timedelta(seconds=20))


def test_finished_keeps_the_admission_and_says_how_it_ended() -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    assert mark_finished(wl, False, "Job failed", T0 + timedelta(seconds=1))
    finished = wl.condition(c.CONDITION_FINISHED)
    assert finished is not None and (finished.status, finished.reason) == ("True", c.REASON_FAILED)
    assert wl.admission is not None


def test_readmission_ends_an_eviction_and_keeps_what_it_was() -> None:
    wl = workload()
    wl.set_condition(c.CONDITION_EVICTED, "True", c.REASON_DEACTIVATED, "The workload is deactivated", T0)
    assert mark_admitted(wl, ADMISSION, T0 + timedelta(seconds=3))
    evicted = wl.condition(c.CONDITION_EVICTED)
    assert evicted is not None
    assert (evicted.status, evicted.reason, evicted.message) == (
        "False", c.REASON_QUOTA_RESERVED, "Previously: The workload is deactivated")
    assert not mark_admitted(wl, ADMISSION, T0 + timedelta(seconds=4))  # stays ended: nothing to write


def test_deactivation_evicts_releases_the_reservation_and_says_why() -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    assert mark_deactivated(wl, T0 + timedelta(seconds=2))
    assert wl.status is not None and wl.status.admission is None
    conds = {x.type: (x.status, x.reason) for x in wl.status.conditions}
    assert conds == {c.CONDITION_EVICTED: ("True", c.REASON_DEACTIVATED),
                     c.CONDITION_QUOTA_RESERVED: ("False", c.REASON_PENDING),
                     c.CONDITION_ADMITTED: ("False", c.REASON_NO_RESERVATION)}
    assert not mark_deactivated(wl, T0 + timedelta(seconds=3))  # already evicted: nothing to write


def test_deactivating_a_workload_never_admitted_adds_no_admitted_condition() -> None:
    wl = workload()
    assert mark_deactivated(wl, T0)
    assert wl.status is not None
    assert {x.type for x in wl.status.conditions} == {c.CONDITION_EVICTED, c.CONDITION_QUOTA_RESERVED}


def conditions(wl: Workload) -> dict[str, tuple[str, str, str]]:
    assert wl.status is not None
    return {x.type: (x.status, x.reason, x.message) for x in wl.status.conditions}


def test_a_preemption_evicts_but_keeps_the_reservation_until_the_pods_are_gone() -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    assert not is_terminating(wl)
    assert mark_preempted(wl, c.REASON_IN_CLUSTER_QUEUE, "for ns/high", T0 + timedelta(seconds=1))
    conds = conditions(wl)
    assert conds[c.CONDITION_EVICTED] == ("True", c.REASON_PREEMPTED, "for ns/high")
    assert conds[c.CONDITION_PREEMPTED] == ("True", c.REASON_IN_CLUSTER_QUEUE, "for ns/high")
    assert conds[c.CONDITION_QUOTA_RESERVED][0] == "True" and wl.admission is not None
    assert is_terminating(wl)  # what a restarted operator reads: its Job must be stopped, then released


def test_a_second_preemption_of_a_terminating_workload_keeps_the_first_reason() -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    mark_preempted(wl, c.REASON_IN_COHORT_RECLAMATION, "first", T0)
    assert not mark_preempted(wl, c.REASON_IN_CLUSTER_QUEUE, "second", T0 + timedelta(seconds=1))
    assert conditions(wl)[c.CONDITION_PREEMPTED] == ("True", c.REASON_IN_COHORT_RECLAMATION, "first")


@pytest.mark.parametrize(("evicted_reason", "requeued"), [
    (c.REASON_PREEMPTED, "True"),      # a preempted workload goes back to its queue (Kueue's Requeued)
    (c.REASON_DEACTIVATED, "False"),   # a deactivated one does not
    (c.REASON_LOCAL_QUEUE_STOPPED, "False"),    # nor one its stopped queue drained, until that queue runs again
    (c.REASON_CLUSTER_QUEUE_STOPPED, "False"),
])
def test_the_release_of_an_eviction_clears_the_admission_and_says_whether_it_requeues(
        evicted_reason: str, requeued: str) -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    wl.set_condition(c.CONDITION_EVICTED, "True", evicted_reason, "why", T0 + timedelta(seconds=1))
    assert mark_eviction_done(wl, T0 + timedelta(seconds=30))
    assert wl.status is not None and wl.status.admission is None
    conds = conditions(wl)
    assert conds[c.CONDITION_QUOTA_RESERVED] == ("False", c.REASON_PENDING, "why")
    assert conds[c.CONDITION_ADMITTED] == ("False", c.REASON_NO_RESERVATION, "The workload has no reservation")
    assert conds[c.CONDITION_REQUEUED] == (requeued, evicted_reason, "why")
    assert conds[c.CONDITION_EVICTED][0] == "True"  # until it is admitted again
    assert not is_terminating(wl)
    assert not mark_eviction_done(wl, T0 + timedelta(seconds=31))


def test_no_release_without_an_eviction() -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    assert not mark_eviction_done(wl, T0)
    assert wl.admission is not None


def test_readmission_after_a_preemption_ends_both_evicted_and_preempted() -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    mark_preempted(wl, c.REASON_IN_CLUSTER_QUEUE, "for ns/high", T0)
    mark_eviction_done(wl, T0 + timedelta(seconds=5))
    assert mark_admitted(wl, ADMISSION, T0 + timedelta(seconds=60))
    conds = conditions(wl)
    for type_ in (c.CONDITION_EVICTED, c.CONDITION_PREEMPTED):
        assert conds[type_] == ("False", c.REASON_QUOTA_RESERVED, "Previously: for ns/high")


@pytest.mark.parametrize(("reason", "cause"), [
    (c.REASON_IN_CLUSTER_QUEUE, "prioritization in the ClusterQueue"),
    (c.REASON_IN_COHORT_RECLAMATION, "reclamation within the cohort"),
    (c.REASON_IN_COHORT_RECLAIM_WHILE_BORROWING, "reclamation within the cohort while borrowing"),
    ("SomethingElse", "UNKNOWN"),
])
def test_the_preemption_message_names_the_preemptor_and_says_why_in_kueues_words(reason: str, cause: str) -> None:
    text = preemption_message("ns/high", "u1", "ns/train-high", "j1", reason, "/lab/cq-a", "/lab/cq-b")
    assert text == (f"Preempted to accommodate a workload (UID: u1, JobUID: j1) due to {cause}; preemptor path: "
                    "/lab/cq-a; preemptee path: /lab/cq-b; preemptor: workload ns/high, job ns/train-high")


def test_a_preemption_message_with_what_is_not_known() -> None:
    assert preemption_message("ns/high", "", None, None, c.REASON_IN_CLUSTER_QUEUE, "/cq", "") == (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to prioritization in the "
        "ClusterQueue; preemptor path: /cq; preemptee path: UNKNOWN; preemptor: workload ns/high")


def test_unhealthy_nodes_keep_to_kueues_limit_of_eight() -> None:
    # A write of more names would be refused by the CRD and retried for ever.
    wl = workload()
    assert record_unhealthy_nodes(wl, [f"n{i}" for i in range(6)])
    assert record_unhealthy_nodes(wl, [f"n{i}" for i in range(4, 12)])
    assert wl.unhealthy_node_names == [f"n{i}" for i in range(8)]
    assert not record_unhealthy_nodes(wl, ["n9", "n10"])  # full: nothing more is recorded, nothing changed


@pytest.mark.parametrize(("evicted_reason", "released_by"), [
    pytest.param(c.REASON_LOCAL_QUEUE_STOPPED, c.REASON_LOCAL_QUEUE_STOPPED, id="drained-by-its-local-queue"),
    pytest.param(c.REASON_CLUSTER_QUEUE_STOPPED, c.REASON_CLUSTER_QUEUE_STOPPED, id="drained-by-its-cluster-queue"),
    pytest.param(c.REASON_PREEMPTED, None, id="preempted-is-requeued-at-once-not-held"),
    pytest.param(c.REASON_DEACTIVATED, None, id="deactivated-waits-for-reactivation-not-for-a-queue"),
])
def test_a_drained_workload_is_requeued_once_its_queue_runs_again_and_only_then(
        evicted_reason: str, released_by: str | None) -> None:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    assert released_by_drain(wl) is None  # admitted: nothing to requeue
    wl.set_condition(c.CONDITION_EVICTED, "True", evicted_reason, "stopped", T0 + timedelta(seconds=1))
    assert released_by_drain(wl) is None  # evicted, its Job not stopped yet
    mark_eviction_done(wl, T0 + timedelta(seconds=2))
    assert released_by_drain(wl) == released_by
    restarted = mark_queue_restarted(wl, c.REASON_LOCAL_QUEUE_RESTARTED, "runs again", T0 + timedelta(seconds=3))
    assert restarted is (released_by is not None)
    if released_by is not None:
        assert conditions(wl)[c.CONDITION_REQUEUED] == ("True", c.REASON_LOCAL_QUEUE_RESTARTED, "runs again")
        assert released_by_drain(wl) is None
        assert not mark_queue_restarted(wl, c.REASON_LOCAL_QUEUE_RESTARTED, "again", T0 + timedelta(seconds=4))


def _pending_as(reason: str, message: str) -> Workload:
    wl = workload()
    mark_pending(wl, reason, message, T0)
    return wl


def _of_a_newer_generation() -> Workload:
    wl = _pending_as(c.REASON_PENDING, "insufficient quota")
    wl.metadata.generation = (wl.metadata.generation or 0) + 1
    return wl


def _admitted() -> Workload:
    wl = workload()
    mark_admitted(wl, ADMISSION, T0)
    return wl


@pytest.mark.parametrize(("build", "says"), [
    pytest.param(workload, False, id="never-told-anything"),
    pytest.param(lambda: _pending_as(c.REASON_PENDING, "insufficient quota"), True, id="already-says-it"),
    pytest.param(lambda: _pending_as(c.REASON_PENDING, "other figures"), False, id="another-message"),
    pytest.param(lambda: _pending_as(c.REASON_INADMISSIBLE, "insufficient quota"), False, id="another-reason"),
    pytest.param(_of_a_newer_generation, False, id="said-for-an-older-generation"),
    pytest.param(_admitted, True, id="holds-a-reservation-nothing-to-write"),
])
def test_says_pending_exactly_when_mark_pending_would_change_nothing(build: Any, says: bool) -> None:
    wl = build()
    assert says_pending(wl, c.REASON_PENDING, "insufficient quota") is says
    if not wl.has_quota_reservation:  # the write it stands for: a change exactly when not said yet
        assert mark_pending(wl, c.REASON_PENDING, "insufficient quota", T0 + timedelta(seconds=1)) is not says
