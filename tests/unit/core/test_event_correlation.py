"""EventCorrelator: a repeated Event (same object, type, reason, message) is a count bump written at
most every bump interval, never a new Event; an object's new Events are rate-limited past a burst."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.event_correlation import Bump, Create, Decision, Drop, EventCorrelator


def emit(correlator: EventCorrelator, at: float, obj: str = "job-uid", reason: str = "Stopped",
         message: str = "suspended") -> Decision:
    decision = correlator.decide(obj, "Normal", reason, message, at)
    if isinstance(decision, Create):
        correlator.named(decision.series, f"{obj}.{at}", at)
    return decision


def kinds(decisions: list[Decision]) -> list[str]:
    return [type(d).__name__ if not isinstance(d, Drop) else f"Drop:{d.why}" for d in decisions]


@pytest.mark.parametrize(("times", "expected"), [
    ([0], ["Create"]),
    # every reconcile re-emits the same Stopped Event: one object, then a bump per 30 s at most
    ([0, 1, 2, 3], ["Create", "Drop:Repeat", "Drop:Repeat", "Drop:Repeat"]),
    ([0, 31], ["Create", "Bump"]),
    ([0, 10, 31, 40, 62], ["Create", "Drop:Repeat", "Bump", "Drop:Repeat", "Bump"]),
    # quiet for longer than the 10-minute window: the series is over, a new Event starts
    ([0, 601], ["Create", "Create"]),
    ([0, 300, 600, 900], ["Create", "Bump", "Bump", "Bump"]),
], ids=["first-occurrence-creates", "repeats-within-the-bump-interval-are-held",
        "a-repeat-after-the-interval-bumps", "bumps-at-most-every-interval",
        "a-repeat-after-the-window-creates-anew", "a-series-kept-alive-by-repeats-keeps-bumping"])
def test_a_repeat_is_a_bump_or_held_never_a_new_event(times: list[float], expected: list[str]) -> None:
    correlator = EventCorrelator()
    assert kinds([emit(correlator, t) for t in times]) == expected


def test_a_bump_carries_every_occurrence_so_far_including_the_held_ones() -> None:
    correlator = EventCorrelator()
    decisions = [emit(correlator, t) for t in (0, 5, 10, 35)]
    bump = decisions[-1]
    assert isinstance(bump, Bump) and bump.count == 4 and bump.name == "job-uid.0"


@pytest.mark.parametrize(("second", "expected"), [
    ({"message": "suspended again"}, "Create"),
    ({"reason": "Started"}, "Create"),
    ({"obj": "other-uid"}, "Create"),
    ({}, "Drop:Repeat"),
], ids=["another-message", "another-reason", "another-object", "the-same-event"])
def test_only_the_same_object_reason_and_message_make_a_series(second: dict[str, str], expected: str) -> None:
    correlator = EventCorrelator()
    emit(correlator, 0)
    assert kinds([emit(correlator, 1, **second)]) == [expected]


def test_a_repeat_while_the_create_is_in_flight_is_held_not_created_twice() -> None:
    correlator = EventCorrelator()
    first = correlator.decide("u", "Normal", "Admitted", "m", 0)
    assert isinstance(first, Create)
    assert correlator.decide("u", "Normal", "Admitted", "m", 40) == Drop("Repeat")  # no name yet


def test_a_forgotten_series_creates_anew() -> None:
    correlator = EventCorrelator()
    first = emit(correlator, 0)
    assert isinstance(first, Create)
    correlator.forget(first.series)  # its create failed, or the API server expired the Event
    assert kinds([emit(correlator, 1)]) == ["Create"]


def test_an_object_past_its_burst_gets_one_new_event_per_refill() -> None:
    correlator = EventCorrelator(burst=3, refill_s=100)
    decisions = [emit(correlator, t, message=f"cause {t}") for t in (0, 1, 2, 3, 50, 104)]
    assert kinds(decisions) == ["Create", "Create", "Create", "Drop:Spam", "Drop:Spam", "Create"]
    assert kinds([emit(correlator, 5, obj="another", message="x")]) == ["Create"]  # per object


def test_memory_is_bounded_by_forgetting_the_least_recent_series() -> None:
    correlator = EventCorrelator(max_series=2)
    for i, obj in enumerate(("a", "b", "c")):
        emit(correlator, i, obj=obj)
    assert kinds([emit(correlator, 10, obj="a")]) == ["Create"]  # forgotten: a new Event
    assert kinds([emit(correlator, 11, obj="c")]) == ["Drop:Repeat"]  # still known


@dataclass
class Oracle:
    """The rules written out the slow way, over the whole history."""

    window: float
    interval: float
    history: list[tuple[float, str, str]]  # (time, message, decision)

    def decide(self, at: float, message: str) -> str:
        same = [(t, d) for t, m, d in self.history if m == message]
        # the series' start: the last Create after which no gap exceeds the window
        live = False
        if same:
            last_seen = same[-1][0]
            live = at - last_seen <= self.window
        if live:
            start = max(i for i, (_, d) in enumerate(same) if d == "Create")
            written = [t for t, d in same[start:] if d in ("Create", "Bump")]
            result = "Bump" if at - written[-1] >= self.interval else "Drop:Repeat"
        else:
            result = "Create"
        self.history.append((at, message, result))
        return result


@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["a", "b"])), max_size=40))
def test_decisions_match_the_rules_over_the_whole_history(steps: list[tuple[int, str]]) -> None:
    correlator = EventCorrelator(window_s=20, bump_interval_s=7, burst=10_000)
    oracle = Oracle(20, 7, [])
    at = 0.0
    for gap, message in steps:
        at += gap
        got = kinds([emit(correlator, at, message=message)])[0]
        assert got == oracle.decide(at, message)
