"""HTTP/1.1 exchanges on one connection, on the standard library alone: what the webhook server needs.

`serve_connection(reader, writer, answer)` reads requests one after the other (keep-alive; bodies by
Content-Length or chunked), passes each (`Request`) to `answer`, which returns (status, JSON body),
and writes the response with a Content-Length; a request it cannot read gets a 4xx naming why and
the connection is closed, never a traceback. Called by `webhooks.serving.AdmissionServer` for every
connection that did not negotiate HTTP/2 (`webhooks.multiplexing` serves those; the devcluster's
client and tests speak HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

logger = logging.getLogger(__name__)

KEEP_ALIVE_S: Final = 75.0
"""How long an idle connection waits for its next request (aiohttp's default, which this replaces)."""
READ_TIMEOUT_S: Final = 30.0
"""How long the rest of a request may take once its first line came."""
MAX_HEADER_BYTES: Final = 64 * 1024
Answer = Callable[["Request"], Awaitable[tuple[int, Any]]]
"""Answers one request: (HTTP status, a JSON-encodable body)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request as read: method, path (without a query), headers (names lower case), body, and
    whether it came as HTTP/1.0."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    http10: bool = False

    @property
    def closes(self) -> bool:
        """Whether the connection closes after this answer: the client asked for it, or spoke
        HTTP/1.0 without asking for keep-alive."""
        connection = self.headers.get("connection", "").lower()
        return "close" in connection or (self.http10 and "keep-alive" not in connection)


class BadRequest(Exception):
    """A request that cannot be read: its status (4xx) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _head(raw: bytes) -> tuple[str, str, dict[str, str], bool]:
    """(method, path, headers, HTTP/1.0?) of a request's head (request line and header lines)."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"the request line must be 'METHOD /path HTTP/1.1', not {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise BadRequest(400, f"a header line must be 'Name: value', not {line[:80]!r}")
        headers[name.lower()] = value.strip()
    return parts[0], parts[1].split("?", 1)[0], headers, parts[2] == "HTTP/1.0"


async def _chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
    """A chunked body (RFC 9112 section 7.1), trailers skipped; 413 past `limit` bytes."""
    body = bytearray()
    while True:
        size_line = (await _line(reader)).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16) if size_line.isalnum() else -1
        except ValueError:
            size = -1
        if size < 0:
            raise BadRequest(400, f"a chunk size must be hexadecimal, not {size_line[:20]!r}")
        if size == 0:
            while (await _line(reader)) != b"\r\n":
                pass
            return bytes(body)
        if len(body) + size > limit:
            raise BadRequest(413, f"the body must not exceed {limit} bytes")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise BadRequest(400, "a chunk must end with CRLF")


async def _line(reader: asyncio.StreamReader) -> bytes:
    """One CRLF-ended line of a chunked body; 400 past the stream's limit (MAX_HEADER_BYTES)."""
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise BadRequest(400, f"a line of a chunked body must not exceed {MAX_HEADER_BYTES} bytes") from None


async def read_request(reader: asyncio.StreamReader, body_limit: Callable[[str], int]) -> Request | None:
    """The next request on the connection, or None when the client closed it (or stayed idle past
    KEEP_ALIVE_S) between requests; BadRequest when it cannot be read. `body_limit(path)`: the
    largest body accepted at that path."""
    try:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), KEEP_ALIVE_S)
    except (asyncio.IncompleteReadError, TimeoutError):
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest(431, f"the request head must not exceed {MAX_HEADER_BYTES} bytes") from None
    method, path, headers, http10 = _head(raw[:-4])
    limit = body_limit(path)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return Request(method, path, headers, await asyncio.wait_for(_chunked(reader, limit), READ_TIMEOUT_S), http10)
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest(400, f"Content-Length must be a number, not {headers['content-length'][:20]!r}") from None
    if length < 0:
        raise BadRequest(400, "Content-Length must not be negative")
    if length > limit:
        raise BadRequest(413, f"the body must not exceed {limit} bytes")
    if length and headers.get("expect", "").lower() == "100-continue":
        raise _Continue(Request(method, path, headers, b"", http10), length)
    body = await asyncio.wait_for(reader.readexactly(length), READ_TIMEOUT_S) if length else b""
    return Request(method, path, headers, body, http10)


class _Continue(Exception):
    """The client waits for '100 Continue' before it sends the body of `length` bytes."""

    def __init__(self, request: Request, length: int) -> None:
        super().__init__()
        self.request, self.length = request, length


def json_bytes(body: Any) -> bytes:
    """A response body as sent over HTTP/1.1 and HTTP/2 alike: compact JSON in UTF-8."""
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def response_bytes(status: int, body: Any, close: bool) -> bytes:
    """A whole HTTP/1.1 response: JSON body, its length, and `Connection: close` when closing."""
    data = json_bytes(body)
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(data)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n")
    return head.encode("latin-1") + data


async def _next(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                body_limit: Callable[[str], int]) -> Request | None:
    """`read_request`, answering an `Expect: 100-continue` before reading the body."""
    try:
        return await read_request(reader, body_limit)
    except _Continue as waiting:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await asyncio.wait_for(reader.readexactly(waiting.length), READ_TIMEOUT_S)
        found = waiting.request
        return Request(found.method, found.path, found.headers, body, found.http10)


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: Answer,
                           body_limit: Callable[[str], int], closing: Callable[[], bool]) -> None:
    """Answer the connection's requests in turn until the client closes it, asks to, sends one that
    cannot be read (answered 4xx, then closed), or `closing()` (a draining server) says so after an answer."""
    try:
        while True:
            try:
                request = await _next(reader, writer, body_limit)
            except BadRequest as e:
                logger.warning("Webhook request refused: %s", e)
                writer.write(response_bytes(e.status, {"message": str(e)}, close=True))
                await writer.drain()
                return
            if request is None:
                return
            status, body = await answer(request)
            close = request.closes or closing()
            writer.write(response_bytes(status, body, close))
            await writer.drain()
            if close:
                return
    except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError) as e:
        logger.debug("Webhook connection ended: %s", e)
    finally:
        writer.close()
