"""How the operator logs (`tasq run --log-level/--log-format`): at the default level, info, one line
per decision that matters (leader gained or lost, ready, a Workload admitted, a webhook error); the
libraries' per-request and per-handler lines (kopf, the Kubernetes client, aiohttp) only at debug.
Lines are text or JSON objects, one per line. Called once by `tasq run` before it starts.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Final

LEVELS: Final = ("debug", "info", "warning", "error")
FORMATS: Final = ("text", "json")
CHATTY: Final = ("kopf", "kubernetes", "kubernetes_asyncio", "urllib3", "aiohttp", "asyncio")
"""Libraries whose INFO lines narrate each handler, request or connection: shown only at debug."""
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_OURS: Final = "tasq_log_handler"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (RFC 3339, UTC), level, logger, msg and, with an exception,
    error (its traceback as text)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
                "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str = "info", fmt: str = "text", stream: IO[str] | None = None, *,
                      force: bool = False) -> logging.Handler | None:
    """Give the root logger one handler writing to `stream` (stderr) at `level` in `fmt`; the CHATTY
    libraries log at warning unless `level` is debug. As `logging.basicConfig`, nothing changes when
    the root logger already has a handler tasq did not install (a program embedding tasq, or pytest,
    configured logging itself), unless `force`. Returns the handler installed, or None."""
    if level not in LEVELS or fmt not in FORMATS:
        raise ValueError(f"log level {level!r} / format {fmt!r}: want one of {LEVELS} / {FORMATS}")
    root = logging.getLogger()
    if not force and any(not getattr(h, _OURS, False) for h in root.handlers):
        return None
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    setattr(handler, _OURS, True)
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = getattr(logging, level.upper())
    root.setLevel(numeric)
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "debug" else max(numeric, logging.WARNING))
    return handler
