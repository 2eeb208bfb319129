"""HTTP/2 on the webhook server's connections: a client built on the same `h2` state machine over a
real TLS socket with ALPN h2 (the way kube-apiserver's Go client talks), against `Multiplexer`
behind a small server of the test's own (its own answer and body limit), and against the
`AdmissionServer` (ALPN picks h2; a client that offers only http/1.1 still gets HTTP/1.1)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import DataReceived, ResponseReceived, StreamEnded, StreamReset
from h2.frame_buffer import FrameBuffer
from h2.settings import SettingCodes
from hyperframe.frame import GoAwayFrame

from controller.api import constants as c
from tests.unit.webhooks.manifests import valid_job
from tests.unit.webhooks.reviews import Admission, review
from tests.unit.webhooks.test_serving import tls_files, trusting
from webhooks.certificates import write_serving_files
from webhooks.exchanging import Request
from webhooks.multiplexing import CONNECTION_WINDOW, MAX_CONCURRENT_STREAMS, STREAM_WINDOW, Multiplexer
from webhooks.serving import WEBHOOK_ALPN, AdmissionServer

LIMIT = 100_000
"""The body limit of the test server's paths, but /large's."""
LARGE_LIMIT = 16 << 20


@dataclass
class Response:
    status: int = 0
    body: bytearray = field(default_factory=bytearray)
    reset: int | None = None
    ended: bool = False

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """An HTTP/2 client on `h2`: sends requests (bodies within the server's windows), reads until
    the streams it waits for ended. GOAWAY frames are taken out before the state machine sees them
    (h2 itself would refuse every frame after one), so that a graceful GOAWAY can be observed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, window: int = 65_535) -> None:
        self.reader, self.writer = reader, writer
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.local_settings.initial_window_size = window
        self.frames = FrameBuffer(server=False)
        self.frames.max_frame_size = 1 << 24
        self.responses: dict[int, Response] = {}
        self.goaways: list[GoAwayFrame] = []
        self.server_settings: dict[int, int] = {}
        self.closed = False

    @classmethod
    async def connect(cls, port: int, ca_pem: bytes, window: int = 65_535) -> Client:
        context = trusting(ca_pem)
        context.set_alpn_protocols(["h2"])
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "h2"
        client = cls(reader, writer, window)
        client.conn.initiate_connection()
        client.flush()
        return client

    def flush(self) -> None:
        self.writer.write(self.conn.data_to_send())

    async def request(self, path: str, body: bytes, *, end: bool = True, headers: tuple[tuple[str, str], ...] = ()) -> int:
        """Open a stream with a POST to `path` and send `body` (ending the stream when `end`)."""
        stream_id = self.conn.get_next_available_stream_id()
        self.responses[stream_id] = Response()
        self.conn.send_headers(stream_id, [(":method", "POST"), (":path", path), (":scheme", "https"),
                                           (":authority", "127.0.0.1"), ("content-type", "application/json"),
                                           *headers], end_stream=not body and end)
        self.flush()
        sent = 0
        while sent < len(body):
            size = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size,
                       len(body) - sent)
            if size == 0:
                await self.read_once()
                continue
            self.conn.send_data(stream_id, body[sent:sent + size], end_stream=end and sent + size == len(body))
            sent += size
            self.flush()
        return stream_id

    async def read_once(self) -> None:
        data = await asyncio.wait_for(self.reader.read(65536), 10)
        if not data:
            self.closed = True
            return
        self.frames.add_data(data)
        for frame in self.frames:
            if isinstance(frame, GoAwayFrame):
                self.goaways.append(frame)
                continue
            self.on_events(self.conn.receive_data(frame.serialize()))
        self.flush()

    def on_events(self, events: list[Any]) -> None:
        for event in events:
            if isinstance(event, ResponseReceived):
                self.responses[event.stream_id].status = int({str(k): v for k, v in event.headers}[":status"])
            elif isinstance(event, DataReceived):
                self.responses[event.stream_id].body += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                self.responses[event.stream_id].ended = True
            elif isinstance(event, StreamReset):
                self.responses[event.stream_id].reset = event.error_code
            elif hasattr(event, "changed_settings") and not hasattr(event, "stream_id"):
                self.server_settings.update({k: v.new_value for k, v in event.changed_settings.items()})

    async def until(self, done: Callable[[], bool]) -> None:
        while not done() and not self.closed:
            await self.read_once()

    async def answered(self, *stream_ids: int) -> list[Response]:
        await self.until(lambda: all(self.responses[s].ended or self.responses[s].reset is not None
                                     for s in stream_ids))
        return [self.responses[s] for s in stream_ids]


Answerer = Callable[[Request], Any]


@dataclass
class Served:
    port: int
    ca_pem: bytes
    requests: list[Request]
    draining: list[bool]
    connections: list[Multiplexer] = field(default_factory=list)


@pytest.fixture
async def serving(tmp_path: Path) -> AsyncIterator[Callable[[Answerer], Any]]:
    """Start a TLS server (ALPN h2) whose connections `serve_multiplexed` answers with `answer`."""
    ca = write_serving_files(tmp_path, datetime.now(UTC))
    context = tls_files(tmp_path).context(alpn=WEBHOOK_ALPN)
    servers: list[asyncio.Server] = []

    async def start(answer: Answerer) -> Served:
        served = Served(0, ca.cert_pem, [], [False])

        async def answering(request: Request) -> tuple[int, Any]:
            served.requests.append(request)
            result = answer(request)
            return (await result) if asyncio.iscoroutine(result) else result  # type: ignore[no-any-return]

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(asyncio.CancelledError):  # at the test's end, as AdmissionServer does
                multiplexer = Multiplexer(reader, writer, answering, lambda path: LARGE_LIMIT if path == "/large" else LIMIT,
                                          lambda: served.draining[0])
                served.connections.append(multiplexer)
                await multiplexer.serve()

        server = await asyncio.start_server(connected, "127.0.0.1", 0, ssl=context)
        servers.append(server)
        served.port = server.sockets[0].getsockname()[1]
        return served

    yield start
    for server in servers:
        server.close()


def echo(request: Request) -> tuple[int, Any]:
    return 200, {"path": request.path, "size": len(request.body), "method": request.method,
                 "type": request.headers.get("content-type")}


async def test_the_server_states_its_stream_limit(serving: Callable[[Answerer], Any]) -> None:
    served = await serving(echo)
    client = await Client.connect(served.port, served.ca_pem)
    await client.until(lambda: bool(client.server_settings))
    assert client.server_settings[SettingCodes.MAX_CONCURRENT_STREAMS] == MAX_CONCURRENT_STREAMS


async def test_streams_are_answered_concurrently_each_with_its_request(serving: Callable[[Answerer], Any]) -> None:
    # Every answer waits until all five requests arrived: served one after another, the first would
    # wait forever.
    arrived: list[Request] = []
    everyone = asyncio.Event()

    async def gathered(request: Request) -> tuple[int, Any]:
        arrived.append(request)
        if len(arrived) == 5:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), 5)
        return echo(request)

    served = await serving(gathered)
    client = await Client.connect(served.port, served.ca_pem)
    streams = [await client.request(f"/path-{i}?dryRun=All", b"x" * i) for i in range(5)]
    responses = await client.answered(*streams)
    assert [(r.status, r.json()) for r in responses] == [
        (200, {"path": f"/path-{i}", "size": i, "method": "POST", "type": "application/json"}) for i in range(5)]


async def test_a_body_over_the_limit_gets_413_on_its_stream_while_the_others_succeed(
        serving: Callable[[Answerer], Any], caplog: pytest.LogCaptureFixture) -> None:
    served = await serving(echo)
    client = await Client.connect(served.port, served.ca_pem)
    small = await client.request("/small", b"a" * 10)
    declared = await client.request("/declared", b"", end=False, headers=(("content-length", str(LIMIT + 1)),))
    streamed = await client.request("/streamed", b"b" * (LIMIT + 1))
    after = await client.request("/after", b"c" * 20)
    responses = await client.answered(small, declared, streamed, after)
    assert [r.status for r in responses] == [200, 413, 413, 200]
    assert responses[1].json() == {"message": f"the body must not exceed {LIMIT} bytes"}
    assert responses[3].json()["size"] == 20
    assert [r.path for r in served.requests] == ["/small", "/after"]
    assert not client.goaways and not client.closed
    assert "Webhook request refused: the body must not exceed" in caplog.text


async def test_a_large_body_and_a_large_response_cross_flow_control_windows(
        serving: Callable[[Answerer], Any]) -> None:
    # The request is 5 times the server's stream window (1 MiB) and past its connection window
    # (4 MiB); the response is over 16 times the client's 16 KiB window: neither fits without
    # WINDOW_UPDATEs.
    big = 5 * STREAM_WINDOW

    def large(request: Request) -> tuple[int, Any]:
        return 200, {"items": ["y" * 100] * 3000, "size": len(request.body)}

    served = await serving(large)
    client = await Client.connect(served.port, served.ca_pem, window=16_384)
    stream = await client.request("/large", b"z" * big)
    (response,) = await client.answered(stream)
    assert response.status == 200 and response.ended
    assert response.json() == {"items": ["y" * 100] * 3000, "size": big}
    assert len(response.body) > 16 * 16_384 and big > CONNECTION_WINDOW


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@pytest.mark.parametrize(("garbage", "code"), [
    pytest.param(PREFACE + b"\x00\x00\x03\x00\x00\x00\x00\x00\x00abc", ErrorCodes.PROTOCOL_ERROR,
                 id="a DATA frame on stream 0 after the preface"),
    pytest.param(PREFACE + b"\x00\x00\x05\x04\x00\x00\x00\x00\x00hello", ErrorCodes.FRAME_SIZE_ERROR,
                 id="a SETTINGS frame whose length is not a multiple of 6"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", ErrorCodes.PROTOCOL_ERROR,
                 id="HTTP/1.1 on a connection that chose h2"),
])
async def test_garbage_ends_the_connection_with_goaway_and_a_log_line_never_a_traceback(
        serving: Callable[[Answerer], Any], caplog: pytest.LogCaptureFixture, garbage: bytes,
        code: ErrorCodes) -> None:
    served = await serving(echo)
    context = trusting(served.ca_pem)
    context.set_alpn_protocols(["h2"])
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port, ssl=context)
    writer.write(garbage)
    received = await asyncio.wait_for(reader.read(), 10)  # until the server closes the connection
    frames = FrameBuffer(server=False)
    frames.max_frame_size = 1 << 24
    frames.add_data(received)
    goaways = [f for f in frames if isinstance(f, GoAwayFrame)]
    assert [g.error_code for g in goaways] == [code]
    warnings = [r for r in caplog.records if r.name == "webhooks.multiplexing" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"ended with GOAWAY {code.name}" in warnings[0].getMessage()
    assert not any(r.exc_info for r in caplog.records) and "Traceback" not in caplog.text
    assert served.requests == []
    writer.close()


async def test_a_draining_server_sends_goaway_finishes_the_streams_in_flight_then_closes(
        serving: Callable[[Answerer], Any]) -> None:
    # Three streams in flight; the first answer comes while draining: GOAWAY naming the last stream
    # seen (5), then the other two are still answered, then the connection ends.
    released = {path: asyncio.Event() for path in ("/first", "/second", "/third")}

    async def held(request: Request) -> tuple[int, Any]:
        await asyncio.wait_for(released[request.path].wait(), 5)
        return echo(request)

    served = await serving(held)
    client = await Client.connect(served.port, served.ca_pem)
    streams = [await client.request(path, b"{}") for path in released]
    await client.until(lambda: len(served.requests) == 3)
    served.draining[0] = True
    released["/first"].set()
    (first,) = await client.answered(streams[0])
    await client.until(lambda: bool(client.goaways))
    assert first.status == 200
    assert [(g.last_stream_id, g.error_code) for g in client.goaways] == [(5, ErrorCodes.NO_ERROR)]
    assert not client.responses[streams[1]].ended and not client.closed
    released["/second"].set()
    released["/third"].set()
    responses = await client.answered(*streams[1:])
    assert [r.status for r in responses] == [200, 200]
    await client.until(lambda: False)  # the server closes the connection
    assert client.closed and [g.last_stream_id for g in client.goaways] == [5, 5]


async def test_drain_sends_goaway_at_once_on_a_connection_with_nothing_in_flight(
        serving: Callable[[Answerer], Any]) -> None:
    served = await serving(echo)
    client = await Client.connect(served.port, served.ca_pem)
    (answered,) = await client.answered(await client.request("/before", b"{}"))
    assert answered.status == 200 and not client.goaways
    served.connections[0].drain()
    await client.until(lambda: False)  # the server closes the connection
    assert client.closed and [(g.last_stream_id, g.error_code) for g in client.goaways] == [
        (1, ErrorCodes.NO_ERROR), (1, ErrorCodes.NO_ERROR)]


async def test_an_idle_connection_ends_with_goaway(serving: Callable[[Answerer], Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("webhooks.multiplexing.KEEP_ALIVE_S", 0.2)
    served = await serving(echo)
    client = await Client.connect(served.port, served.ca_pem)
    (answered,) = await client.answered(await client.request("/once", b"{}"))
    await client.until(lambda: False)  # nothing more sent: the server closes the connection
    assert answered.status == 200 and client.closed
    assert [(g.last_stream_id, g.error_code) for g in client.goaways] == [(1, ErrorCodes.NO_ERROR)]


async def test_a_stream_the_peer_resets_ends_alone(serving: Callable[[Answerer], Any]) -> None:
    release = asyncio.Event()

    async def held(request: Request) -> tuple[int, Any]:
        if request.path == "/held":
            await release.wait()
        return echo(request)

    served = await serving(held)
    client = await Client.connect(served.port, served.ca_pem)
    abandoned = await client.request("/held", b"{}")
    await client.until(lambda: len(served.requests) == 1)
    client.conn.reset_stream(abandoned, ErrorCodes.CANCEL)
    client.flush()
    other = await client.request("/other", b"{}")
    (response,) = await client.answered(other)
    assert response.status == 200 and response.json()["path"] == "/other"


# ---------------------------------------------------------------- behind the AdmissionServer


@pytest.fixture
async def admission(tmp_path: Path) -> AsyncIterator[tuple[AdmissionServer, bytes]]:
    ca = write_serving_files(tmp_path, datetime.now(UTC))
    server = AdmissionServer(tls_files(tmp_path))
    serving = server(Admission().fn)
    await anext(serving)
    try:
        yield server, ca.cert_pem
    finally:
        await serving.aclose()  # type: ignore[attr-defined]


async def test_the_admission_server_answers_reviews_over_h2(admission: tuple[AdmissionServer, bytes]) -> None:
    server, ca_pem = admission
    client = await Client.connect(server.port, ca_pem)
    body = json.dumps(review(valid_job().obj())).encode()
    streams = [await client.request(f"/{c.WEBHOOK_MUTATE_JOB}", body) for _ in range(3)]
    streams.append(await client.request("/nowhere", body))
    responses = await client.answered(*streams)
    assert [r.status for r in responses] == [200, 200, 200, 404]
    assert all(r.json()["response"]["allowed"] is True for r in responses[:3])
    assert responses[3].json() == {"message": "no webhook at /nowhere"}


async def test_a_draining_admission_server_sends_goaway_on_its_h2_connections(
        admission: tuple[AdmissionServer, bytes]) -> None:
    server, ca_pem = admission
    client = await Client.connect(server.port, ca_pem)
    await client.until(lambda: bool(client.server_settings))
    server.draining = True
    await client.until(lambda: False)
    assert client.closed and [g.error_code for g in client.goaways] == [ErrorCodes.NO_ERROR] * 2
    late = await Client.connect(server.port, ca_pem)  # connected while draining: told at once
    await late.until(lambda: False)
    assert late.closed and [g.last_stream_id for g in late.goaways] == [0, 0]


async def test_a_client_offering_only_http11_is_served_http11(admission: tuple[AdmissionServer, bytes]) -> None:
    server, ca_pem = admission
    context = trusting(ca_pem)
    context.set_alpn_protocols(["http/1.1"])
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=context)
    assert writer.get_extra_info("ssl_object").selected_alpn_protocol() == "http/1.1"
    writer.write(b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    received = await asyncio.wait_for(reader.read(), 10)
    assert received.startswith(b"HTTP/1.1 404 Not Found\r\n") and received.endswith(b'{"message":"no webhook at /nowhere"}')
    writer.close()

