"""Time for the devcluster: the injectable clock type and Kubernetes' timestamp format.

`ApiServer(now=...)` takes a `Clock`; simulated components format times with `timestamp` and the
Job controller and Table printer read them back with `parse_time`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Clock = Callable[[], datetime]
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # metav1.Time: RFC 3339, UTC, whole seconds


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time serializes."""
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def parse_time(value: Any) -> datetime | None:
    """A metav1.Time string (`2026-01-01T00:00:00Z`) as a UTC datetime; None when absent or malformed."""
    try:
        return datetime.strptime(str(value), _TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
