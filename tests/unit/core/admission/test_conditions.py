"""Workload conditions as Kueue writes them (admitted, pending, finished, evicted as deactivated), with
`now` passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.api import constants as c
from controller.api.workload import Workload
from controller.core.admission.conditions import mark_admitted, mark_deactivated, mark_finished, mark_pending
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
