"""When new Workloads and Jobs arrive, and a gate that stays shut while they come in a burst.

In a burst of creations the API server's cores belong to the creates and to the admissions; what
only explains (a waiting Workload's pending status, Events) can wait a little. The EventRouter calls
`Arrivals.arrived()` when a Workload or an integrated Job enters the cache; `await Arrivals.lull()`
returns at once when no burst is going on, else once it ends (fewer than `burst_arrivals` arrivals
in the last `window_s`), and at the latest `defer_max_s` after it began. Awaited by
controller.kube.admitting and controller.kube.events.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Final

WINDOW_S: Final = 1.0
BURST_ARRIVALS: Final = 10
"""Ten arrivals or more within `WINDOW_S` are a burst; a steady few a second are each explained as
they come. A rate and not a gap: a client creating 32 Jobs at a time through busy webhooks leaves
gaps of a few hundred milliseconds between its batches, and a gate that opened in each of them let
the writes it held slow the next batch (held creates/s fell from 183-200 to 100-170)."""
DEFER_MAX_S: Final = 5.0
"""The longest a burst keeps the gate shut: past it, what waits is written even while Workloads
keep arriving, so a steady stream never leaves a Workload unexplained for long."""


class Arrivals:
    """See the module docstring. `clock` is monotonic seconds; `check` is what the timer calls."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S,
                 burst_arrivals: int = BURST_ARRIVALS, defer_max_s: float = DEFER_MAX_S) -> None:
        self.clock = clock
        self.window_s = window_s
        self.defer_max_s = defer_max_s
        self.deferred = 0
        """How many `lull` calls met a shut gate (the operator bench reports it)."""
        self._recent: deque[float] = deque([-math.inf] * burst_arrivals, maxlen=burst_arrivals)
        """The times of the latest `burst_arrivals` arrivals, the oldest first."""
        self._burst_began: float | None = None
        """When the current burst began; None while the gate is open."""
        self._open: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._released = False

    @property
    def quiet(self) -> bool:
        """Whether the gate is open: no burst of arrivals is going on."""
        return self._burst_began is None

    def arrived(self) -> None:
        """A new Workload or Job: the gate shuts if this arrival makes a burst, and stays shut until
        it ends."""
        now = self.clock()
        self._recent.append(now)
        if self._burst_began is None and not self._released and self._bursting(now):
            self._burst_began = now
            if self._open is not None:
                self._open.clear()
            self._arm(self._calm_in(now))

    def _calm_in(self, now: float) -> float:
        """Seconds until the burst ends if nothing more arrives: the oldest of the latest
        `burst_arrivals` arrivals leaves the window (0 or less: it has ended)."""
        return self._recent[0] + self.window_s - now

    def _bursting(self, now: float) -> bool:
        """Whether the latest `burst_arrivals` arrivals all came within the last `window_s`."""
        return self._calm_in(now) > 0

    def release(self) -> None:
        """Open the gate for good: the operator is stopping, and what waits is written now."""
        self._released = True
        self._burst_began = None
        if self._open is not None:
            self._open.set()

    async def lull(self) -> None:
        """Return once the gate is open (at once when it is)."""
        if self._burst_began is None:
            return
        self.deferred += 1
        if self._open is None:
            self._open = asyncio.Event()
        self._arm(max(self._calm_in(self.clock()), 0.0))  # `arrived` may have run with no loop
        await self._open.wait()

    def check(self) -> None:
        """Open the gate if the burst ended or has lasted `defer_max_s`; else look again when one of
        them can have happened."""
        self._timer = None
        if self._burst_began is None:
            return
        now = self.clock()
        lasted = now - self._burst_began
        if not self._bursting(now) or lasted >= self.defer_max_s:
            self._burst_began = None
            if self._open is not None:
                self._open.set()
        else:
            self._arm(min(self._calm_in(now), self.defer_max_s - lasted))

    def _arm(self, delay: float) -> None:
        """One timer at a time calls `check`; none without a running loop (a plain call in a test)."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(delay, self.check)
