"""HTTP/2 exchanges on one connection (TLS with ALPN `h2`), on python-hyper's sans-IO `h2` state machine.

`Multiplexer(reader, writer, answer, body_limit, closing).serve()` answers every request stream of
the connection concurrently with the same `answer` and `Request` as HTTP/1.1 (`webhooks.exchanging`),
so kube-apiserver multiplexes all its webhook calls over one connection instead of opening one per
call in flight (each a TLS handshake); `drain()` ends it gracefully (GOAWAY, in-flight streams
finished). Used by `webhooks.serving.AdmissionServer` for each connection that negotiated h2.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from h2.config import H2Configuration
from h2.connection import ConnectionState, H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import H2Error
from h2.settings import SettingCodes, Settings
from hyperframe.exceptions import HyperframeError
from hyperframe.frame import GoAwayFrame

from webhooks.exchanging import KEEP_ALIVE_S, MAX_HEADER_BYTES, READ_TIMEOUT_S, Answer, Request, json_bytes

logger = logging.getLogger(__name__)

MAX_CONCURRENT_STREAMS: Final = 250
"""Streams a client may have open at once (Go's HTTP/2 server's default); past it, Go's client opens
another connection rather than queueing."""
STREAM_WINDOW: Final = 1 << 20
"""Bytes of a request body a client may send on one stream before we acknowledge them (HTTP/2's
default, 64 KiB, would cost a round trip per 64 KiB of a large ConversionReview)."""
CONNECTION_WINDOW: Final = 4 << 20
"""The same for all streams of the connection together."""
READ_BYTES: Final = 64 * 1024
DEFAULT_WINDOW: Final = 65_535
"""Every HTTP/2 connection's flow-control window before WINDOW_UPDATE frames widen it (RFC 9113 6.9.2)."""
JSON_HEADERS: Final = (("content-type", "application/json; charset=utf-8"),)


@dataclass(slots=True)
class _Incoming:
    """A request stream whose body is still arriving: its head, the body so far and the most it may
    grow to; `refused` once it was answered with a 4xx before its end (later data is dropped)."""

    method: str
    path: str
    headers: dict[str, str]
    limit: int
    body: bytearray = field(default_factory=bytearray)
    refused: bool = False


class Multiplexer:
    """One HTTP/2 connection being served (see module). `incoming`: streams whose requests are
    still being read; `answering`: a task per stream being answered (or refused); `waiting`: streams
    whose response waits for the peer to widen a flow-control window; `last_stream` is set once a
    GOAWAY said that no stream above it will be served (a draining server), after which the
    connection ends as soon as nothing is in flight."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: Answer,
                 body_limit: Callable[[str], int], closing: Callable[[], bool]) -> None:
        self.reader, self.writer = reader, writer
        self.answer, self.body_limit, self.closing = answer, body_limit, closing
        self.conn = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
        self.conn.local_settings = Settings(client=False, initial_values={
            SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
            SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_BYTES})
        self.incoming: dict[int, _Incoming] = {}
        self.answering: dict[int, asyncio.Task[None]] = {}
        self.waiting: dict[int, asyncio.Event] = {}
        self.last_stream: int | None = None
        self.finished = asyncio.get_running_loop().create_future()
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "?"

    # ------------------------------------------------------------ reading

    async def serve(self) -> None:
        """Send our SETTINGS, then read frames until the peer closes, stays idle past KEEP_ALIVE_S,
        breaks the protocol (GOAWAY with the error, a log line), or a drain finished (`drain`, or
        `closing()` true after an answer or at the start); then cancel what is still being answered
        and close."""
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(CONNECTION_WINDOW - DEFAULT_WINDOW)
        self._flush()
        if self.closing():  # connected while draining
            self.drain()
        reading = asyncio.create_task(self._read_frames())
        reading.add_done_callback(lambda _: self._finish())
        try:
            await self.finished
        finally:
            reading.cancel()
            for task in list(self.answering.values()):
                task.cancel()
            await asyncio.gather(reading, *self.answering.values(), return_exceptions=True)
            self.writer.close()

    async def _read_frames(self) -> None:
        """Feed what the peer sends to the state machine and act on its events."""
        try:
            while (data := await self._read()):
                if self.finished.done():
                    return  # ended by a drain meanwhile: the state machine takes no more frames
                try:
                    events = self.conn.receive_data(data)
                except (H2Error, HyperframeError) as e:
                    self._end_with_error(e)
                    return
                for event in events:
                    self._on_event(event)
                self._flush()
                if any(isinstance(event, ConnectionTerminated) for event in events):
                    return  # the peer sent GOAWAY: the state machine sends nothing more
        except (ConnectionError, ssl.SSLError, TimeoutError) as e:
            logger.debug("Webhook HTTP/2 connection from %s ended: %s", self.peer, e)

    async def _read(self) -> bytes:
        """The next bytes; empty when the peer closed, or after a GOAWAY for idleness: nothing came
        for KEEP_ALIVE_S and no stream is being answered, or READ_TIMEOUT_S while a request body is
        incomplete."""
        while True:
            timeout = READ_TIMEOUT_S if self.incoming else KEEP_ALIVE_S
            try:
                return await asyncio.wait_for(self.reader.read(READ_BYTES), timeout)
            except TimeoutError:
                if self.answering and not self.incoming:
                    continue  # quiet, but still answering: not idle
            logger.debug("Webhook HTTP/2 connection from %s idle for %.0f s: closed", self.peer, timeout)
            self.conn.close_connection(ErrorCodes.NO_ERROR)
            self._flush()
            return b""

    def _end_with_error(self, e: H2Error | HyperframeError) -> None:
        """A protocol error: say so in the log, tell the peer in a GOAWAY, end."""
        code = getattr(e, "error_code", None) or ErrorCodes.PROTOCOL_ERROR
        name = ErrorCodes(code).name if code in ErrorCodes._value2member_map_ else str(code)
        logger.warning("Webhook HTTP/2 connection from %s ended with GOAWAY %s: %s", self.peer, name,
                       str(e) or type(e).__name__)
        if self.conn.state_machine.state != ConnectionState.CLOSED:  # else h2 queued the GOAWAY itself
            self.conn.close_connection(code, additional_data=str(e).encode("utf-8")[:200])
        self._flush()

    def _on_event(self, event: Event) -> None:
        """Dispatch one event of the state machine."""
        if isinstance(event, RequestReceived):
            self._on_request(event.stream_id or 0, event.headers or [])
        elif isinstance(event, DataReceived):
            self._on_data(event.stream_id or 0, event.data or b"", event.flow_controlled_length or 0)
        elif isinstance(event, StreamEnded):
            self._on_end(event.stream_id or 0)
        elif isinstance(event, StreamReset):
            self._on_reset(event.stream_id or 0)
        elif isinstance(event, WindowUpdated | RemoteSettingsChanged):
            # A stream's window, the connection's (stream 0) or every stream's initial size changed.
            stream_id = event.stream_id if isinstance(event, WindowUpdated) else 0
            for waiting_id, waiting in self.waiting.items():
                if not stream_id or waiting_id == stream_id:
                    waiting.set()

    # ------------------------------------------------------------ streams

    def _on_request(self, stream_id: int, raw: list[tuple[str, str]] | list[tuple[bytes, bytes]]) -> None:
        """A request's head: refused when it came after our GOAWAY, answered 413 at once when its
        Content-Length is past the path's limit, else its body is awaited."""
        if self.last_stream is not None and stream_id > self.last_stream:
            self.conn.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
            return
        pseudo: dict[str, str] = {}
        headers: dict[str, str] = {}
        for name, value in raw:
            name, value = _text(name), _text(value)
            (pseudo if name.startswith(":") else headers)[name] = value
        if ":authority" in pseudo:
            headers.setdefault("host", pseudo[":authority"])
        path = pseudo.get(":path", "/").split("?", 1)[0]
        incoming = self.incoming[stream_id] = _Incoming(pseudo.get(":method", ""), path, headers, self.body_limit(path))
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > incoming.limit:
            self._refuse(stream_id, 413, f"the body must not exceed {incoming.limit} bytes")
        elif headers.get("expect", "").lower() == "100-continue":
            self.conn.send_headers(stream_id, [(":status", "100")])

    def _on_data(self, stream_id: int, data: bytes, flow_controlled: int) -> None:
        """Part of a body: acknowledged at once (the window is ours to keep open: bodies are bounded
        by the limit, not by the window), kept unless it takes the body past its limit (413)."""
        self.conn.acknowledge_received_data(flow_controlled, stream_id)
        incoming = self.incoming.get(stream_id)
        if incoming is None or incoming.refused:
            return
        if len(incoming.body) + len(data) > incoming.limit:
            self._refuse(stream_id, 413, f"the body must not exceed {incoming.limit} bytes")
            return
        incoming.body += data

    def _on_end(self, stream_id: int) -> None:
        """A whole request: answered in a task of its own, so streams are answered concurrently."""
        incoming = self.incoming.pop(stream_id, None)
        if incoming is None or incoming.refused:
            return
        request = Request(incoming.method, incoming.path, incoming.headers, bytes(incoming.body))
        self._start(stream_id, self._answer(stream_id, request))

    def _on_reset(self, stream_id: int) -> None:
        """The peer gave up a stream: stop reading and answering it."""
        self.incoming.pop(stream_id, None)
        task = self.answering.get(stream_id)
        if task is not None:
            task.cancel()

    def _refuse(self, stream_id: int, status: int, message: str) -> None:
        """Answer a stream whose request cannot be read with `status` before its body ended, then ask
        the peer to stop sending it (RST_STREAM NO_ERROR, RFC 9113 8.1); other streams go on."""
        logger.warning("Webhook request refused: %s", message)
        self.incoming[stream_id].refused = True
        self._start(stream_id, self._respond(stream_id, status, {"message": message}, reset=True))

    def _start(self, stream_id: int, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.answering[stream_id] = task
        task.add_done_callback(lambda _: self._answered(stream_id))

    def _answered(self, stream_id: int) -> None:
        """A stream is done: while draining, the first answer sends GOAWAY; once gone away, the
        connection ends when nothing is in flight."""
        self.answering.pop(stream_id, None)
        self.waiting.pop(stream_id, None)
        self.incoming.pop(stream_id, None)
        if self.finished.done():
            return
        if self.last_stream is None and self.closing():
            self._go_away()
        self._end_if_gone_away()

    def _end_if_gone_away(self) -> None:
        """After our GOAWAY, the final GOAWAY and the end once no stream is in flight."""
        if self.last_stream is not None and not self.answering and not self.incoming:
            with contextlib.suppress(H2Error):
                self.conn.close_connection(ErrorCodes.NO_ERROR, last_stream_id=self.last_stream)
            self._flush()
            self._finish()

    def drain(self) -> None:
        """A draining server: GOAWAY now, even on a connection with nothing in flight (the peer opens
        its next connection elsewhere at once), and end the connection once its streams are answered."""
        if self.finished.done():
            return
        if self.last_stream is None:
            self._go_away()
        self._end_if_gone_away()

    def _go_away(self) -> None:
        """Tell the peer no stream after the highest one seen will be served (it opens its next
        elsewhere: another replica), keeping the state machine open so the streams in flight are
        still answered: the GOAWAY frame is written beside it, not through it."""
        self._flush()
        self.last_stream = self.conn.highest_inbound_stream_id
        frame = GoAwayFrame(stream_id=0, last_stream_id=self.last_stream, error_code=ErrorCodes.NO_ERROR)
        self._write(frame.serialize())
        logger.debug("Webhook HTTP/2 connection from %s draining after stream %d", self.peer, self.last_stream)

    # ------------------------------------------------------------ answering

    async def _answer(self, stream_id: int, request: Request) -> None:
        """Answer one request; `answer` failing (a bug: it answers errors as values) is a 500."""
        try:
            status, body = await self.answer(request)
        except Exception:
            logger.exception("Webhook request to %s could not be answered", request.path[:100])
            status, body = 500, {"message": "internal error"}
        await self._respond(stream_id, status, body)

    async def _respond(self, stream_id: int, status: int, body: object, reset: bool = False) -> None:
        """Send a JSON response on a stream, its body within the peer's flow-control windows (waiting
        for WINDOW_UPDATE when they are full); with `reset`, RST_STREAM NO_ERROR after it."""
        data = json_bytes(body)
        try:
            self.conn.send_headers(stream_id, [(":status", str(status)), *JSON_HEADERS,
                                               ("content-length", str(len(data)))])
            sent = 0
            while True:
                size = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size,
                           len(data) - sent)
                if size <= 0 and sent < len(data):
                    await self._window_opened(stream_id)
                    continue
                self.conn.send_data(stream_id, data[sent:sent + size], end_stream=sent + size == len(data))
                sent += size
                self._flush()
                await self.writer.drain()
                if sent == len(data):
                    break
            if reset:
                self.conn.reset_stream(stream_id, ErrorCodes.NO_ERROR)
                self._flush()
        except H2Error as e:  # the peer reset the stream or ended the connection meanwhile
            logger.debug("Webhook HTTP/2 stream %d from %s not answered: %s", stream_id, self.peer, e)
        except (ConnectionError, ssl.SSLError) as e:
            logger.debug("Webhook HTTP/2 connection from %s ended: %s", self.peer, e)

    async def _window_opened(self, stream_id: int) -> None:
        """Until the peer widens the stream's or the connection's window (or changes its settings)."""
        self._flush()
        opened = self.waiting[stream_id] = asyncio.Event()
        await opened.wait()

    # ------------------------------------------------------------ writing

    def _flush(self) -> None:
        self._write(self.conn.data_to_send())

    def _write(self, data: bytes) -> None:
        if data and not self.writer.is_closing():
            self.writer.write(data)

    def _finish(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")

