"""webhooks.exchanging: HTTP/1.1 requests read off a stream and answered in turn, bad ones refused.

Each case feeds raw bytes to a connection as a client would and reads back what the server wrote;
the answer function echoes what it was given, so the tests see exactly what was parsed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from webhooks.exchanging import MAX_HEADER_BYTES, Request, response_bytes, serve_connection

LIMIT = 1000


class Written:
    """A stand-in for the connection's writer: what the server wrote, and whether it closed."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def responses(data: bytes) -> list[tuple[int, dict[str, str], Any]]:
    """The responses in what was written: (status, headers, decoded JSON body or None)."""
    out = []
    rest = bytes(data)
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0"))
        body, rest = rest[:length], rest[length:]
        out.append((status, headers, json.loads(body) if body else None))
    return out


async def echo(request: Request) -> tuple[int, Any]:
    return 200, {"method": request.method, "path": request.path, "body": request.body.decode()}


async def exchange(sent: bytes, closing: bool = False) -> tuple[list[tuple[int, dict[str, str], Any]], bool]:
    """Serve one connection on which the client sent `sent` and then stopped sending."""
    reader = asyncio.StreamReader(limit=MAX_HEADER_BYTES)
    reader.feed_data(sent)
    reader.feed_eof()
    writer = Written()
    await serve_connection(reader, writer, echo, lambda path: LIMIT, lambda: closing)  # type: ignore[arg-type]
    return responses(bytes(writer.data)), writer.closed


def post(path: str, body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


async def test_requests_on_one_kept_alive_connection_are_answered_in_turn() -> None:
    found, closed = await exchange(post("/a?dryRun=1", b'{"x":1}') + post("/b", b"two"))
    assert [(s, b) for s, _, b in found] == [(200, {"method": "POST", "path": "/a", "body": '{"x":1}'}),
                                            (200, {"method": "POST", "path": "/b", "body": "two"})]
    assert all("connection" not in h for _, h, _ in found) and closed  # closed when the client stopped


async def test_a_client_asking_to_close_gets_one_answer_that_says_so() -> None:
    found, _ = await exchange(post("/a", b"1", "Connection: close") + post("/b", b"2"))
    assert [(s, h.get("connection"), b["path"]) for s, h, b in found] == [(200, "close", "/a")]


@pytest.mark.parametrize(("version", "connection", "answers"), [
    pytest.param("HTTP/1.0", "", 1, id="HTTP/1.0 closes by default"),
    pytest.param("HTTP/1.0", "Connection: keep-alive", 2, id="HTTP/1.0 asking for keep-alive keeps it"),
    pytest.param("HTTP/1.1", "", 2, id="HTTP/1.1 keeps it by default"),
])
async def test_the_protocol_version_decides_keep_alive_unless_the_client_says(
        version: str, connection: str, answers: int) -> None:
    first = post("/a", b"1", *([connection] if connection else [])).replace(b"HTTP/1.1", version.encode(), 1)
    found, _ = await exchange(first + post("/b", b"2"))
    assert len(found) == answers and (found[0][1].get("connection") == "close") == (answers == 1)


async def test_a_draining_server_closes_after_each_answer() -> None:
    found, _ = await exchange(post("/a", b"1") + post("/b", b"2"), closing=True)
    assert [(s, h.get("connection")) for s, h, _ in found] == [(200, "close")]


async def test_a_chunked_body_is_read_whole() -> None:
    sent = b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nTrailer: t\r\n\r\n"
    found, _ = await exchange(sent + post("/d", b"next"))
    assert [b["body"] for _, _, b in found] == ["abcdefg", "next"]


async def test_a_client_expecting_100_continue_gets_it_before_sending_the_body() -> None:
    found, _ = await exchange(post("/e", b"body", "Expect: 100-continue"))
    assert [(s, b and b["body"]) for s, _, b in found] == [(100, None), (200, "body")]


@pytest.mark.parametrize(("sent", "status", "why"), [
    pytest.param(b"GARBAGE\r\n\r\n", 400, "request line", id="a request line that is not METHOD /path HTTP/1.1"),
    pytest.param(b"POST / HTTP/2\r\n\r\n", 400, "request line", id="another protocol than HTTP/1.x"),
    pytest.param(b"POST / HTTP/1.1\r\nno colon here\r\n\r\n", 400, "Name: value", id="a header line without a colon"),
    pytest.param(b"POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400, "Content-Length must be a number",
                 id="a length that is not a number"),
    pytest.param(b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "must not be negative", id="a negative length"),
    pytest.param(post("/", b"x" * (LIMIT + 1)), 413, f"must not exceed {LIMIT} bytes", id="a body over the limit"),
    pytest.param(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "hexadecimal",
                 id="a chunk size that is not hexadecimal"),
    pytest.param(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"3e8\r\n" + b"x" * 1000 + b"\r\n1\r\ny\r\n",
                 413, f"must not exceed {LIMIT} bytes", id="chunks adding up past the limit"),
    pytest.param(b"POST / HTTP/1.1\r\nX: " + b"a" * MAX_HEADER_BYTES + b"\r\n\r\n", 431, "request head must not exceed",
                 id="a head over the limit"),
    pytest.param(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nabc\r\n", 400, "hexadecimal",
                 id="a negative chunk size"),
    pytest.param(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * (MAX_HEADER_BYTES + 10) + b"\r\n",
                 400, "line of a chunked body", id="a chunk size line over the head limit"),
])
async def test_a_request_that_cannot_be_read_gets_a_4xx_naming_why_and_the_connection_closes(
        sent: bytes, status: int, why: str) -> None:
    found, closed = await exchange(sent + post("/after", b"never answered"))
    assert len(found) == 1 and closed
    got, headers, body = found[0]
    assert (got, headers.get("connection")) == (status, "close") and why in body["message"]


async def test_a_client_gone_in_the_middle_of_a_body_gets_no_answer_and_no_error() -> None:
    found, closed = await exchange(b"POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
    assert found == [] and closed


def test_a_response_carries_its_length_and_reason() -> None:
    assert response_bytes(404, {"message": "no"}, close=False) == (
        b'HTTP/1.1 404 Not Found\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 16\r\n\r\n'
        b'{"message":"no"}')
