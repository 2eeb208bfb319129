"""Warnings for the client of the current request, sent as `Warning: 299 - "<text>"` headers.

Admission webhooks' `response.warnings` are added here (`admission.WebhookChain`) and the HTTP layer
(`serving.HttpFrontend`) collects them per request and writes the headers, as kube-apiserver's warning
recorder does; kubectl prints each as `Warning: <text>`. In-process callers collect nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

HEADER = "Warning"
_CODE_MISC_PERSISTENT = 299  # RFC 7234's "Miscellaneous Persistent Warning", the code Kubernetes uses
_sink: ContextVar[list[str] | None] = ContextVar("devcluster_warnings", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[list[str]]:
    """Collect the warnings of everything awaited inside (tasks started inside share the list)."""
    sink: list[str] = []
    token = _sink.set(sink)
    try:
        yield sink
    finally:
        _sink.reset(token)


def add(text: str) -> None:
    """Record a warning for the current request (blank and repeated ones are dropped, as Kubernetes)."""
    sink = _sink.get()
    text = " ".join(text.split())  # header values hold no line breaks or control whitespace
    if sink is not None and text and text not in sink:
        sink.append(text)


def header_value(text: str) -> str:
    """`299 - "<text>"` with `\\` and `"` escaped (RFC 7230 quoted-string), no agent, no date."""
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'{_CODE_MISC_PERSISTENT} - "{quoted}"'
