"""Re-queueing failed work with backoff, the one discipline of the operator's loops.

A reconcile or write that fails is never dropped: its key is tried again after a delay that doubles
with each consecutive failure of that key (`Backoff`) and resets once it succeeds. `log_failure`
logs one line per failure: a conflict at debug level (the next try reads afresh), an API or
transport failure (refused, 5xx, dropped connection, timeout) as a warning without a traceback, and
anything else, a bug, with its traceback. `WorkQueue` is the keyed loop of the Job and pod-group
reconcilers and the node-failure handler. Used by the admission loop, those three and the ungater.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from controller.kube.api import TRANSPORT_ERRORS, ApiError

BASE_S = 0.2
"""The delay after a key's first failure."""
MAX_S = 10.0
"""The longest delay: a key failing for minutes (an API server down) is tried at least this often."""

K = TypeVar("K", bound=Hashable)


class Backoff:
    """Per key, the delay before its next try: BASE_S doubled per consecutive failure, up to MAX_S."""

    def __init__(self, base_s: float = BASE_S, max_s: float = MAX_S) -> None:
        self.base_s, self.max_s = base_s, max_s
        self._failures: dict[str, int] = {}

    def failed(self, key: str) -> float:
        """Count a failure of `key`; the delay before its next try."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        return float(min(self.base_s * 2 ** min(n, 30), self.max_s))

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        """Consecutive failures of `key` so far."""
        return self._failures.get(key, 0)


def log_failure(log: logging.Logger, what: str, error: Exception, delay: float) -> None:
    """One line about `what` failing with `error`, retried in `delay` seconds (see the module docstring)."""
    if isinstance(error, ApiError) and error.conflict:
        log.debug("%s: %s; retrying in %.1fs", what, error, delay)
    elif isinstance(error, (ApiError, *TRANSPORT_ERRORS)):
        log.warning("%s: %s; retrying in %.1fs", what, _text(error), delay)
    else:
        log.error("%s failed; retrying in %.1fs", what, delay, exc_info=error)


def _text(error: Exception) -> str:
    detail = str(error).strip()
    return detail if isinstance(error, ApiError) else f"{type(error).__name__}{': ' + detail if detail else ''}"


class WorkQueue(Generic[K]):
    """Changed keys worked by `workers` tasks while leading, first changed first served. A key is never
    worked by two tasks at once (a change arriving meanwhile runs it again afterwards); a failure is
    logged (`log_failure`, naming the key with `describe`) and the key is worked again after its
    backoff, from the cache as it is then, the task free in between. A change wakes one idle task,
    not all of them: with a hundred tasks, waking every one per change cost more than the work."""

    def __init__(self, work: Callable[[K], Awaitable[None]], log: logging.Logger,
                 describe: Callable[[K], str], workers: int = 1) -> None:
        self._work_on, self._log, self._describe, self._workers = work, log, describe, workers
        self._dirty: dict[K, None] = {}
        """Changed keys in the order they changed (a dict as an ordered set)."""
        self._active: set[K] = set()
        self._idle: deque[asyncio.Future[None]] = deque()
        """One future per task waiting for a key, the longest waiting first."""
        self._backoff = Backoff()

    def notify(self, key: K) -> None:
        self._dirty[key] = None
        if key not in self._active:  # a held key is taken again by its holder when it finishes
            self._wake_one()

    def _wake_one(self) -> None:
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _idle_until_woken(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._idle.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake_one()  # woken and cancelled at once: the wake goes to another task
            raise

    async def run(self, leading: asyncio.Event | None = None) -> None:
        tasks = [asyncio.create_task(self._work(leading)) for _ in range(self._workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _work(self, leading: asyncio.Event | None) -> None:
        while True:
            if leading is not None and not leading.is_set():
                await leading.wait()
                continue
            # The first changed key no other task holds: only held keys are skipped, so taking one
            # costs at most `workers` steps however many keys wait (a burst).
            key = next((k for k in self._dirty if k not in self._active), None)
            if key is None:
                await self._idle_until_woken()
                continue
            del self._dirty[key]
            self._active.add(key)
            if self._dirty:
                self._wake_one()  # more keys wait: another idle task takes the next
            await self._work_key(key)

    async def _work_key(self, key: K) -> None:
        """Work one held key, logging and re-queueing a failure; the key is released afterwards."""
        name = self._describe(key)
        try:
            await self._work_on(key)
        except Exception as e:  # any failure (API, dropped connection, a bug): never dropped
            delay = self._backoff.failed(name)
            log_failure(self._log, name, e, delay)
            asyncio.get_running_loop().call_later(delay, self.notify, key)
        else:
            self._backoff.succeeded(name)
        finally:
            self._active.discard(key)
