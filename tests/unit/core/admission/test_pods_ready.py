"""waitForPodsReady's pure core on a fake clock: PodsReady transitions (Kueue's reasons and
messages), the timeout and recovery deadlines, the PodsReadyTimeout eviction with requeueState and
Kueue's backoff, the end of the backoff, deactivation's limit and blockAdmission's rule; and a
property test of a Workload's whole life against a brute-force oracle."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.configuration import RequeuingStrategy, WaitForPodsReady
from controller.api.workload import Workload
from controller.core.admission.conditions import (
    deactivation_message,
    mark_admitted,
    mark_deactivated,
    mark_eviction_done,
)
from controller.core.admission.pods_ready import (
    backoff_seconds,
    holds_admission,
    in_backoff,
    mark_deactivation_target,
    mark_pods_ready,
    mark_pods_ready_timeout,
    mark_requeued,
    readiness_deadline,
    requeue_at,
    requeue_count,
    requeuing_exhausted,
)
from controller.core.admission.workloads import workload_info
from tests.builders.kueue import make_workload

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ADMISSION = {"clusterQueue": "team-a", "podSetAssignments": [{"name": "main", "count": 4}]}
SETTINGS = WaitForPodsReady(timeout_s=10, recovery_timeout_s=5, requeuing_strategy=RequeuingStrategy(
    backoff_limit_count=2, backoff_base_seconds=60, backoff_max_seconds=3600))


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def admitted(seconds: float = 0) -> Workload:
    wl = Workload.from_dict(make_workload("w", "ns").queue("q").pod_set("main", 4, {"cpu": 1}).obj())
    mark_admitted(wl, ADMISSION, at(seconds))
    return wl


def pods_ready(wl: Workload) -> tuple[str, str, str]:
    cond = wl.condition(c.CONDITION_PODS_READY)
    assert cond is not None
    return cond.status, cond.reason, cond.message


@dataclass
class Transition:
    name: str
    readiness: list[bool]  # what the Job reports, one after the other
    want: tuple[str, str, str]


NOT_READY = ("False", "WaitForStart", "Not all pods are ready or succeeded")
STARTED = ("True", "Started", "All pods reached readiness and the workload is running")
RECOVERING = ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery")
RECOVERED = ("True", "Recovered", "All pods reached readiness and the workload is running")


@pytest.mark.parametrize("case", [
    Transition("admitted, pods not ready yet: waiting for them to start", [False], NOT_READY),
    Transition("all ready for the first time: started", [False, True], STARTED),
    Transition("a pod lost after starting: waiting for recovery", [True, False], RECOVERING),
    Transition("still short while recovering: still recovering", [True, False, False], RECOVERING),
    Transition("ready again after a loss: recovered", [True, False, True], RECOVERED),
    Transition("lost again after recovering: recovering again", [True, False, True, False], RECOVERING),
], ids=lambda case: case.name)
def test_pods_ready_transitions_are_kueues(case: Transition) -> None:
    wl = admitted()
    for i, ready in enumerate(case.readiness):
        mark_pods_ready(wl, ready, at(i + 1))
    assert pods_ready(wl) == case.want


def test_a_workload_not_admitted_waits_for_start_whatever_its_pods_say() -> None:
    wl = Workload.from_dict(make_workload("w").queue("q").pod_set("main", 1).obj())
    assert mark_pods_ready(wl, True, T0)
    assert pods_ready(wl) == NOT_READY


def test_an_unchanged_readiness_is_no_change() -> None:
    wl = admitted()
    assert mark_pods_ready(wl, True, at(1))
    assert not mark_pods_ready(wl, True, at(2))


def test_the_start_deadline_counts_from_the_admission() -> None:
    wl = admitted(seconds=100)
    mark_pods_ready(wl, False, at(101))
    deadline = readiness_deadline(wl, SETTINGS)
    assert deadline is not None and (deadline.cause, deadline.at) == ("WaitForStart", at(110).timestamp())


def test_the_recovery_deadline_counts_from_losing_readiness() -> None:
    wl = admitted()
    mark_pods_ready(wl, True, at(3))
    assert readiness_deadline(wl, SETTINGS) is None  # ready: none
    mark_pods_ready(wl, False, at(50))
    deadline = readiness_deadline(wl, SETTINGS)
    assert deadline is not None and (deadline.cause, deadline.at) == ("WaitForRecovery", at(55).timestamp())
    assert readiness_deadline(wl, SETTINGS.model_copy(update={"recovery_timeout_s": None})) is None


@pytest.mark.parametrize(("count", "want"), [(1, 60), (2, 120), (3, 240), (7, 3600), (40, 3600), (0, 0)])
def test_backoff_doubles_from_the_base_up_to_the_max(count: int, want: float) -> None:
    assert backoff_seconds(count, 60, 3600) == want


def test_the_timeout_evicts_with_kueues_reason_and_message_and_counts_a_requeue() -> None:
    wl = admitted()
    assert mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(10))
    evicted = wl.condition(c.CONDITION_EVICTED)
    assert evicted is not None and (evicted.status, evicted.reason, evicted.message) == (
        "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns/w")
    assert (requeue_count(wl), requeue_at(wl)) == (1, at(70).timestamp())
    assert wl.reserved_admission is not None  # released once its Job is stopped
    assert not mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(11))  # evicted once
    assert readiness_deadline(wl, SETTINGS) is None


def test_the_release_requeues_in_backoff_then_backoff_finished_clears_requeue_at() -> None:
    wl = admitted()
    mark_pods_ready(wl, False, at(1))
    mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(10))
    assert mark_eviction_done(wl, at(12))
    requeued = wl.condition(c.CONDITION_REQUEUED)
    assert requeued is not None and (requeued.status, requeued.reason) == ("False", "PodsReadyTimeout")
    assert pods_ready(wl) == NOT_READY
    assert in_backoff(wl, at(69).timestamp()) and not mark_requeued(wl, at(69))
    assert not in_backoff(wl, at(70).timestamp())
    assert mark_requeued(wl, at(70))
    requeued = wl.condition(c.CONDITION_REQUEUED)
    assert requeued is not None and (requeued.status, requeued.reason, requeued.message) == (
        "True", "BackoffFinished", "The workload backoff was finished")
    assert (requeue_count(wl), requeue_at(wl)) == (1, None)


def test_the_second_timeout_waits_twice_as_long() -> None:
    wl = admitted()
    mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(10))
    mark_eviction_done(wl, at(11))
    mark_requeued(wl, at(70))
    mark_admitted(wl, ADMISSION, at(80))
    assert readiness_deadline(wl, SETTINGS) is not None
    assert mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(90))
    assert (requeue_count(wl), requeue_at(wl)) == (2, at(90 + 120).timestamp())


def test_past_the_limit_it_is_deactivated_naming_the_limit_and_reactivated_afresh() -> None:
    wl = admitted()
    for _ in range(2):
        mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(10))
        mark_eviction_done(wl, at(11))
        mark_requeued(wl, at(10**4))
        mark_admitted(wl, ADMISSION, at(10**4))
    assert requeuing_exhausted(wl, SETTINGS)
    assert not requeuing_exhausted(wl, SETTINGS.model_copy(update={"requeuing_strategy": RequeuingStrategy()}))
    assert mark_deactivation_target(wl, at(10**4 + 10))
    wl.spec.active = False
    assert deactivation_message(wl) == ("The workload is deactivated due to exceeding the maximum number of "
                                        "re-queuing retries")
    assert mark_deactivated(wl, at(10**4 + 11))
    assert wl.condition(c.CONDITION_DEACTIVATION_TARGET) is None and wl.status is not None
    assert wl.status.requeue_state is None
    wl.spec.active = True
    assert mark_requeued(wl, at(10**4 + 20))
    requeued = wl.condition(c.CONDITION_REQUEUED)
    assert requeued is not None and (requeued.reason, requeued.message) == (
        "Reactivated", "The workload was reactivated")


def test_an_evicted_workload_queues_from_its_eviction_unless_told_creation() -> None:
    wl = admitted()
    wl.metadata.creation_timestamp = "2025-12-31T00:00:00Z"
    mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(10))
    assert workload_info(wl).created == at(10).timestamp()
    assert workload_info(wl, order_by_eviction=False).created == datetime(2025, 12, 31, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("ready", "evicted", "want"), [
    pytest.param(None, False, True, id="admitted, no PodsReady yet: blocks"),
    pytest.param(False, False, True, id="admitted, not ready: blocks"),
    pytest.param(True, False, False, id="ready: lets others in"),
    pytest.param(False, True, False, id="being evicted: lets others in"),
])
def test_block_admission_holds_while_an_admitted_workload_is_not_ready(ready: bool | None, evicted: bool,
                                                                      want: bool) -> None:
    wl = admitted()
    if ready is not None:
        mark_pods_ready(wl, ready, at(1))
    if evicted:
        mark_pods_ready_timeout(wl, "ns/w", SETTINGS, at(10))
    assert holds_admission(wl) is want


# ---------------------------------------------------------------- the whole life, against an oracle

@st.composite
def lives(draw: st.DrawFn) -> tuple[WaitForPodsReady, list[tuple[int, bool]]]:
    """Settings and a list of (seconds that pass, whether the Job's pods are all ready then)."""
    strategy = RequeuingStrategy(backoff_limit_count=draw(st.none() | st.integers(0, 4)),
                                 backoff_base_seconds=draw(st.integers(1, 30)),
                                 backoff_max_seconds=draw(st.integers(1, 100)))
    config = WaitForPodsReady(timeout_s=draw(st.integers(1, 40)),
                              recovery_timeout_s=draw(st.none() | st.integers(1, 40)), requeuing_strategy=strategy)
    return config, draw(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=40))


@settings(max_examples=300, deadline=None)
@given(lives())
def test_never_evicted_while_ready_never_admitted_during_backoff(life: tuple[WaitForPodsReady,
                                                                            list[tuple[int, bool]]]) -> None:
    """Drive one Workload as the operator does, step by step (the Job reports readiness, the
    admission loop times out, releases, ends backoffs and readmits), and check each step against a
    brute-force oracle that keeps its own clock of admissions, readiness and backoffs."""
    config, steps = life
    strategy = config.requeuing_strategy
    wl = admitted()
    now = 0
    # the oracle's own records
    admitted_since: int | None = 0
    not_ready_since: int | None = 0
    was_ready = False
    requeues = 0
    earliest_readmission = 0
    deactivated = False
    for passed, ready in steps:
        for second in range(now + 1, now + passed + 1):  # every second: deadlines are whole seconds
            now = second
            if wl.reserved_admission is not None and readiness_deadline(wl, config) is not None \
                    and readiness_deadline(wl, config).at <= at(now).timestamp():  # type: ignore[union-attr]
                assert admitted_since is not None and not_ready_since is not None
                limit = config.recovery_timeout_s if was_ready else config.timeout_s
                assert limit is not None and now - not_ready_since >= limit, "evicted before its time"
                if requeuing_exhausted(wl, config):
                    assert strategy.backoff_limit_count is not None and requeues >= strategy.backoff_limit_count
                    deactivated = True
                    break
                assert mark_pods_ready_timeout(wl, "ns/w", config, at(now))
                mark_eviction_done(wl, at(now))
                requeues += 1
                earliest_readmission = now + min(strategy.backoff_base_seconds * 2 ** (requeues - 1),
                                                 strategy.backoff_max_seconds)
                admitted_since = not_ready_since = None
                was_ready = False
            if wl.reserved_admission is None:
                mark_requeued(wl, at(now))
                if not in_backoff(wl, at(now).timestamp()):
                    assert now >= earliest_readmission, "admitted during its backoff"
                    mark_admitted(wl, ADMISSION, at(now))
                    admitted_since = not_ready_since = now
                    was_ready = False
        if deactivated:
            break
        if wl.reserved_admission is not None:
            before = wl.condition_true(c.CONDITION_PODS_READY)
            mark_pods_ready(wl, ready, at(now))
            if ready and not before:
                was_ready, not_ready_since = True, None
            elif not ready and before:
                not_ready_since = now
            assert holds_admission(wl) is not ready
    assert requeue_count(wl) == requeues
