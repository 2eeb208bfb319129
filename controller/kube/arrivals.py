"""When new Workloads and Jobs arrive, and a gate that opens in the lulls between them.

In a burst of creations the API server's cores belong to the creates and to the admissions; what
only explains (a waiting Workload's pending status, Events) can wait a little. The EventRouter calls
`Arrivals.arrived()` when a Workload or an integrated Job enters the cache; `await Arrivals.lull()`
returns at once when none is arriving, else once none came for `lull_s`, and at the latest
`defer_max_s` after the burst began. Awaited by controller.kube.admitting and controller.kube.events.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Final

LULL_S: Final = 0.1
"""No arrival for this long is a lull: Jobs created faster than ten a second keep the gate shut, a
steady few a second (each explained as it comes) do not."""
DEFER_MAX_S: Final = 5.0
"""The longest a burst keeps the gate shut: past it, what waits is written even while Workloads
keep arriving, so a steady stream never leaves a Workload unexplained for long."""


class Arrivals:
    """See the module docstring. `clock` is monotonic seconds; `check` is what the timer calls."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, lull_s: float = LULL_S,
                 defer_max_s: float = DEFER_MAX_S) -> None:
        self.clock = clock
        self.lull_s = lull_s
        self.defer_max_s = defer_max_s
        self.deferred = 0
        """How many `lull` calls met a shut gate (the operator bench reports it)."""
        self._last = -math.inf
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
        """A new Workload or Job: the gate shuts if it was open, and stays shut until the next lull."""
        now = self._last = self.clock()
        if self._burst_began is None and not self._released:
            self._burst_began = now
            if self._open is not None:
                self._open.clear()
            self._arm(self.lull_s)

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
        self._arm(self.lull_s)  # `arrived` may have been called where no loop ran
        await self._open.wait()

    def check(self) -> None:
        """Open the gate if the lull came or the burst has lasted `defer_max_s`; else look again
        when one of them can have happened."""
        self._timer = None
        if self._burst_began is None:
            return
        now = self.clock()
        quiet_for, lasted = now - self._last, now - self._burst_began
        if quiet_for >= self.lull_s or lasted >= self.defer_max_s:
            self._burst_began = None
            if self._open is not None:
                self._open.set()
        else:
            self._arm(min(self.lull_s - quiet_for, self.defer_max_s - lasted))

    def _arm(self, delay: float) -> None:
        """One timer at a time calls `check`; none without a running loop (a plain call in a test)."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(delay, self.check)
