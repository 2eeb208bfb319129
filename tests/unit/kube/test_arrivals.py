"""The arrivals' gate: open while nothing arrives, shut by a burst (`burst_arrivals` within
`window_s`; most tests take one arrival as a burst), open again once the burst ends or, under a
steady stream, `defer_max_s` after it began; a waiter is let through when it opens. The clock is a
hand-moved one and the timer's `check` is called by hand, except in the test that lets the loop's
own timer open the gate."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from controller.kube.arrivals import BURST_ARRIVALS, DEFER_MAX_S, WINDOW_S, Arrivals


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate(clock: Clock) -> Arrivals:
    return Arrivals(clock, window_s=0.25, burst_arrivals=1, defer_max_s=5.0)


def quiet_after(make: Callable[[Clock], Arrivals], arrivals_at: list[float], checked_at: float) -> bool:
    """Whether the gate `make` builds is open at `checked_at` after arrivals at `arrivals_at` (seconds)."""
    clock = Clock()
    start = clock.now
    arrivals = make(clock)
    for at in arrivals_at:
        clock.now = start + at
        arrivals.arrived()
    clock.now = start + checked_at
    arrivals.check()
    return arrivals.quiet


@pytest.mark.parametrize(("arrivals_at", "checked_at", "quiet"), [
    ([], 0.0, True),
    ([0.0], 0.1, False),
    ([0.0], 0.25, True),
    ([0.0, 0.2, 0.4], 0.5, False),
    ([0.0, 0.2, 0.4], 0.65, True),
    ([i * 0.2 for i in range(25)], 4.9, False),
    ([i * 0.2 for i in range(25)], 5.0, True),
], ids=["nothing-arrived", "just-after-one", "a-lull-after-one", "a-stream-going-on",
        "a-lull-after-a-stream", "a-steady-stream-short-of-the-limit", "a-steady-stream-at-the-limit"])
def test_the_gate_opens_after_a_lull_or_at_the_limit_of_a_burst(
        arrivals_at: list[float], checked_at: float, quiet: bool) -> None:
    assert quiet_after(gate, arrivals_at, checked_at) is quiet


@pytest.mark.parametrize(("arrivals_at", "checked_at", "quiet"), [
    ([i * 0.25 for i in range(9)], 2.0, True),
    ([i * 0.1 for i in range(10)], 0.95, False),
    ([i * 0.1 for i in range(10)] + [1.3 + i * 0.05 for i in range(10)], 1.35, False),
    ([i * 0.1 for i in range(10)], 1.9, True),
    ([i * 0.05 for i in range(109)], 5.4, False),
    ([i * 0.05 for i in range(120)], 5.95, True),
], ids=["a-steady-four-a-second-never-shuts-it", "ten-within-a-second-shut-it",
        "a-gap-of-400ms-inside-a-burst-keeps-it-shut", "it-opens-once-fewer-than-ten-came-in-the-last-second",
        "twenty-a-second-short-of-the-limit", "twenty-a-second-at-the-limit-five-seconds-after-it-shut"])
def test_ten_arrivals_within_a_second_are_a_burst_and_a_gap_between_batches_does_not_end_it(
        arrivals_at: list[float], checked_at: float, quiet: bool) -> None:
    def as_shipped(clock: Clock) -> Arrivals:  # the cases are drawn for 10 within 1 s, a 5 s cap
        return Arrivals(clock, window_s=WINDOW_S, burst_arrivals=BURST_ARRIVALS, defer_max_s=DEFER_MAX_S)

    assert quiet_after(as_shipped, arrivals_at, checked_at) is quiet


def test_an_arrival_after_the_gate_opened_shuts_it_again_and_the_limit_counts_from_there() -> None:
    clock = Clock()
    arrivals = gate(clock)
    arrivals.arrived()
    clock.now += 5.0
    arrivals.check()
    assert arrivals.quiet
    arrivals.arrived()
    clock.now += 0.1
    arrivals.check()
    assert not arrivals.quiet


async def test_a_waiter_passes_at_once_when_quiet_and_when_the_gate_opens_otherwise() -> None:
    clock = Clock()
    arrivals = gate(clock)
    await asyncio.wait_for(arrivals.lull(), 1)  # nothing arrived: no wait
    assert arrivals.deferred == 0
    arrivals.arrived()
    waiter = asyncio.create_task(arrivals.lull())
    await asyncio.sleep(0)
    clock.now += 0.1
    arrivals.check()
    await asyncio.sleep(0)
    assert not waiter.done() and arrivals.deferred == 1
    clock.now += 0.2
    arrivals.check()
    await asyncio.wait_for(waiter, 1)
    arrivals.arrived()  # shut again: a new waiter waits, the one let through stays through
    late = asyncio.create_task(arrivals.lull())
    await asyncio.sleep(0)
    assert not late.done()
    late.cancel()


async def test_the_loops_timer_opens_the_gate_once_arrivals_stop() -> None:
    arrivals = Arrivals(window_s=0.05, burst_arrivals=1, defer_max_s=10.0)
    arrivals.arrived()
    waiter = asyncio.create_task(arrivals.lull())
    await asyncio.wait_for(waiter, 5)
    assert arrivals.quiet


async def test_a_released_gate_lets_every_waiter_through_and_no_later_arrival_shuts_it() -> None:
    clock = Clock()
    arrivals = gate(clock)
    arrivals.arrived()
    waiter = asyncio.create_task(arrivals.lull())
    await asyncio.sleep(0)
    arrivals.release()
    await asyncio.wait_for(waiter, 1)
    arrivals.arrived()
    assert arrivals.quiet
