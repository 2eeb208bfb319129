"""Re-queueing failed work with backoff, the one discipline of the operator's loops.

A reconcile or write that fails is never dropped: its key is tried again after a delay that doubles
with each consecutive failure of that key (`Backoff`) and resets once it succeeds. `log_failure`
logs one line per failure: a conflict at debug level (the next try reads afresh), an API or
transport failure (refused, 5xx, dropped connection, timeout) as a warning without a traceback, and
anything else, a bug, with its traceback. Used by the admission loop and the Job reconciler.
"""

from __future__ import annotations

import logging

from controller.kube.api import TRANSPORT_ERRORS, ApiError

BASE_S = 0.2
"""The delay after a key's first failure."""
MAX_S = 10.0
"""The longest delay: a key failing for minutes (an API server down) is tried at least this often."""

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
