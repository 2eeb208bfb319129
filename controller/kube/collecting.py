"""The garbage collector's policy in the operator process: full passes kept short by freezing survivors.

A full pass walks every unfrozen object, so its pause grows with the cache (up to 0.8 s at 10,000 nodes
in a 1,000-Job burst, bench/heap.py). `install()` (by controller.kube.operating, once per process) adds
a `gc.callbacks` hook that freezes what survived a full pass slower than FREEZE_AFTER_S (`freeze_due`);
priming calls `freeze_young()` after each list page. bench/heap.py reads the hook's counts.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

FREEZE_AFTER_S = 0.02
"""A full pass longer than this freezes its survivors: the next full pass, which comes once the
unfrozen old objects grew by a quarter (CPython's rule), then walks about a quarter as many."""
FULL = 2
"""The oldest generation: its passes walk every unfrozen object."""

# Why freezing is safe here: a frozen object is still freed the moment its last reference goes (by
# reference counting); only a frozen object that later becomes part of a garbage *cycle* is never
# reclaimed. What is frozen right after a full pass is what survived it: the cache's objects (JSON
# dicts, views, pydantic models: trees without cycles, freed by reference counting when replaced or
# deleted) and the long-lived loops' tasks; the objects in flight at that moment (a request's
# futures and frames) are few. A freeze follows only a full pass that was slow, i.e. only after the
# unfrozen objects grew by thousands, so what can leak is bounded by a few in-flight objects per
# such growth (bench/heap.py prints the frozen count after each phase: it stays at the cache's size).


def freeze_due(generation: int, pause_s: float, budget_s: float = FREEZE_AFTER_S) -> bool:
    """Whether the pass just ended should freeze its survivors: a full pass that took longer than
    `budget_s` (the next one would walk those survivors again)."""
    return generation == FULL and pause_s > budget_s


@dataclass
class CollectorWatch:
    """The `gc.callbacks` hook: times each pass; after a full pass due (`freeze_due`) freezes its
    survivors. `freezes` and `longest` (seconds, per generation) are what it saw."""

    budget_s: float = FREEZE_AFTER_S
    freezes: int = 0
    longest: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = int(info.get("generation", 0))
        self.longest[generation] = max(self.longest[generation], pause)
        if freeze_due(generation, pause, self.budget_s):
            # Called as the pass ends: the young generations are empty and the oldest holds exactly
            # the survivors, so nothing else is frozen.
            gc.freeze()
            self.freezes += 1
            log.debug("a full garbage-collector pass took %.0f ms: its %d survivors frozen", pause * 1000,
                      gc.get_freeze_count())


_installed: CollectorWatch | None = None


def install() -> CollectorWatch:
    """Add the hook to `gc.callbacks` (once per process; the same hook is returned again)."""
    global _installed
    if _installed is None:
        _installed = CollectorWatch()
        gc.callbacks.append(_installed)
    return _installed


def freeze_young() -> None:
    """Freeze what is alive now after collecting the young generations' cycles (so in-flight garbage
    is not frozen with it): priming calls it after each list page, whose objects will live."""
    gc.collect(1)
    gc.freeze()


def release_free_memory() -> None:
    """Hand the C allocator's free pages back to the system (glibc's `malloc_trim`; nothing elsewhere):
    after priming, the decoded list pages are freed but glibc keeps their pages mapped."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, looked up once (`find_library` runs ldconfig); None without glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    trim: Callable[[int], int] | None = getattr(ctypes.CDLL(name), "malloc_trim", None)
    return trim
