"""Time for the devcluster: the injectable clock type and Kubernetes' timestamp format.

`ApiServer(now=...)` takes a `Clock`; simulated components format times with `timestamp`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time serializes."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
