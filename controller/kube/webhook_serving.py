"""The admission webhooks in a process of their own, off the operator's event loop, supervised.

`WebhookProcess` stands where an `AdmissionServer` would (same `url`, `tls`, `observe`, `draining`,
`wait_listening`): `serve_reviews(group_members)` starts a child (`python -m
controller.kube.webhook_serving`, a fresh interpreter that imports only what serving needs: no kopf,
no client, no numpy, no aiohttp) serving every review with `webhooks.reviewing.Reviewer`, and restarts it, on
the same port, whenever it dies (logged at ERROR; `failure` says why until it listens again, which
/readyz reports). Parent and child talk over a
socket pair: the child reports where it listens and each answer (the operator's webhook metrics),
and asks for the pods of a queued pod's group, which only the operator's cache knows; the parent
passes on draining and the end. Used by controller.kube.process (`tasq run`, `tasq dev`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import logging
import os
import pickle
import signal
import socket
import struct
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from controller.kube.logs import JsonFormatter, configure_logging
from webhooks.handlers import GroupMembers
from webhooks.reviewing import Reviewer
from webhooks.serving import AdmissionServer, TlsFiles

log = logging.getLogger(__name__)

RESTART_MIN_S: Final = 0.5
RESTART_MAX_S: Final = 10.0
STABLE_S: Final = 30.0
"""A child that served this long before dying is restarted after RESTART_MIN_S again."""
STOP_TIMEOUT_S: Final = 5.0
MEMBERS_TIMEOUT_S: Final = 2.0
"""How long a queued pod's review waits for its group from the operator before it is checked alone."""
FLUSH_S: Final = 0.2
"""How often the child sends the answers it observed (one message per batch)."""
_HEADER: Final = struct.Struct("!I")
CHILD_MODULE: Final = "controller.kube.webhook_serving"
"""Run as the child's main module, in an interpreter of its own (not forked, not spawned by
multiprocessing, which would import the parent's main module there too)."""

Observe = Callable[[str, int, float], None]


async def _send(writer: asyncio.StreamWriter, message: tuple[Any, ...]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_HEADER.pack(len(data)) + data)  # buffered by the transport: never blocks the loop
    await writer.drain()


async def _receive(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None at the end of the stream (the other process is gone)."""
    try:
        (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
        message: tuple[Any, ...] = pickle.loads(await reader.readexactly(size))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return message


@dataclass(frozen=True)
class ChildConfig:
    """What the child needs to serve: the TLS files, where to listen, how to log."""

    tls: TlsFiles
    addr: str
    port: int
    reload_interval: float
    log_level: str
    log_format: str
    reuse_port: bool = False

    def to_json(self) -> str:
        """The child's command-line argument."""
        fields = asdict(self)
        fields["tls"] = {name: None if path is None else str(path) for name, path in fields["tls"].items()}
        return json.dumps(fields)

    @staticmethod
    def from_json(text: str) -> ChildConfig:
        fields = json.loads(text)
        tls = fields.pop("tls")
        return ChildConfig(TlsFiles(Path(tls["cert"]), Path(tls["key"]), Path(tls["ca"]) if tls["ca"] else None),
                           **fields)


class WebhookProcess:
    """A supervised child process serving the webhooks (see module)."""

    def __init__(self, tls: TlsFiles, *, addr: str = "127.0.0.1", port: int = 0, host: str | None = None,
                 reload_interval: float = 10.0, reuse_port: bool = False) -> None:
        self.tls = tls
        self.reuse_port = reuse_port
        """The child listens with SO_REUSEPORT (`bench/webhooks.py` runs two children on one port)."""
        self.addr = addr
        self.port = port
        self.host = host or addr
        self.reload_interval = reload_interval
        self.observe: Observe | None = None
        """Called with (path, HTTP status, seconds) for each answer the child reports."""
        self.failure: str | None = "the webhook process has not started"
        """Why the webhooks are not served right now (None while the child listens)."""
        self.restarts = 0
        self.pid: int | None = None
        self._draining = False
        self._writer: asyncio.StreamWriter | None = None
        self._listening = asyncio.Event()

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def draining(self) -> bool:
        return self._draining

    @draining.setter
    def draining(self, value: bool) -> None:
        """Passed on to the child: while set, each answer closes its connection (HTTP/2: GOAWAY)."""
        self._draining = value
        if self._writer is not None and not self._writer.is_closing():
            data = pickle.dumps(("drain", value))
            self._writer.write(_HEADER.pack(len(data)) + data)

    async def wait_listening(self) -> None:
        """Until a child listens for the first time (its port is then known)."""
        await self._listening.wait()

    async def serve_reviews(self, group_members: GroupMembers | None) -> None:
        """Run the child until cancelled, restarting it (with backoff) whenever it ends;
        `group_members` answers its questions about pod groups."""
        backoff = RESTART_MIN_S
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            code = await self._run_child(group_members)
            self.failure = f"the webhook process exited with code {code}"
            if loop.time() - started > STABLE_S:
                backoff = RESTART_MIN_S
            log.error("Admission webhooks are not served: %s; restarting it in %.1f s", self.failure, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_MAX_S)
            self.restarts += 1

    async def _run_child(self, group_members: GroupMembers | None) -> int | None:
        """One child from start to exit: its exit code (cancelled: it is stopped first)."""
        level, fmt = _logging_of_this_process()
        config = ChildConfig(self.tls, self.addr, self.port, self.reload_interval, level, fmt, self.reuse_port)
        ours, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", CHILD_MODULE,
                str(theirs.fileno()), config.to_json(), pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL)
        finally:
            theirs.close()
        self.pid = process.pid
        reader, writer = await asyncio.open_connection(sock=ours)
        self._writer = writer
        if self._draining:
            self.draining = True
        try:
            await self._converse(reader, writer, group_members)
            return await _joined(process, STOP_TIMEOUT_S)
        except asyncio.CancelledError:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await _send(writer, ("stop",))
            await asyncio.shield(_joined(process, STOP_TIMEOUT_S))
            raise
        finally:
            self._writer = None
            writer.close()

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        group_members: GroupMembers | None) -> None:
        """Handle the child's messages until it goes away."""
        while (message := await _receive(reader)) is not None:
            match message:
                case ("listening", int(port)):
                    self.port, self.failure = port, None
                    self._listening.set()
                case ("answered", list(answers)):
                    if self.observe is not None:
                        for path, status, seconds in answers:
                            self.observe(path, status, seconds)
                case ("members", int(ask), list(keys)):
                    await _send(writer, ("members", ask, {key: _members_of(group_members, key) for key in keys}))
                case _:
                    log.warning("Ignoring an unexpected message from the webhook process: %.100r", message)


def _members_of(group_members: GroupMembers | None, key: str) -> list[dict[str, Any]]:
    """The pods of group `key` as the child gets them (none when they cannot be read: the
    reconciler still refuses a group whose pods disagree, with an Event)."""
    if group_members is None:
        return []
    try:
        return [dict(pod) for pod in group_members(key)]
    except Exception:
        log.exception("Cannot read the pods of group %s for the webhook process", key)
        return []


async def _joined(process: asyncio.subprocess.Process, timeout: float) -> int | None:
    """Wait for `process` to exit (killed after `timeout`); its exit code (-N: killed by signal N)."""
    try:
        return await asyncio.wait_for(process.wait(), timeout)
    except TimeoutError:
        log.warning("The webhook process did not stop within %.0f s: killed", timeout)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        return await process.wait()


def _logging_of_this_process() -> tuple[str, str]:
    """(level, format) as `configure_logging` took them here, for the child to log the same way."""
    root = logging.getLogger()
    level = logging.getLevelName(root.getEffectiveLevel()).lower()
    json_lines = any(isinstance(h.formatter, JsonFormatter) for h in root.handlers)
    return (level if level in ("debug", "info", "warning", "error") else "info"), ("json" if json_lines else "text")


# ---------------------------------------------------------------- the child


_groups: contextvars.ContextVar[tuple[dict[str, Sequence[Mapping[str, Any]]], list[str]]] = \
    contextvars.ContextVar("groups")
"""(groups fetched from the operator, groups asked for) of the review being answered."""


class ChildReviewer:
    """The child's review function: `Reviewer`, its group questions sent to the operator. A review
    is answered with the groups fetched so far (an unknown one is empty); if a handler asked for a
    group not fetched yet, the review is answered again once the operator sent it (only the CREATE
    of a queued pod in a group: the handlers are pure, so the first answer is simply dropped)."""

    def __init__(self, ask: Callable[[list[str]], Awaitable[Mapping[str, Sequence[Mapping[str, Any]]]]]) -> None:
        self._ask = ask
        self._reviewer = Reviewer(self._group_members)

    @staticmethod
    def _group_members(key: str) -> Sequence[Mapping[str, Any]]:
        fetched, asked = _groups.get(({}, []))
        if key in fetched:
            return fetched[key]
        asked.append(key)
        return ()

    async def __call__(self, review: Mapping[str, Any], **kwargs: Any) -> Mapping[str, Any]:
        fetched: dict[str, Sequence[Mapping[str, Any]]] = {}
        while True:
            asked: list[str] = []
            token = _groups.set((fetched, asked))
            try:
                answer = await self._reviewer(review, **kwargs)
            finally:
                _groups.reset(token)
            wanted = [key for key in asked if key not in fetched]
            if not wanted:
                return answer
            fetched.update(await self._ask(wanted))


def child_main(config: ChildConfig, sock: socket.socket) -> None:
    """The child's entry point: serve until the parent says stop or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the parent, which stops us
    configure_logging(config.log_level, config.log_format, force=True)
    try:
        asyncio.run(_child(config, sock))
    except Exception as e:  # e.g. the port is taken: said in one line, the parent logs the exit and restarts
        log.error("The webhook process %d cannot serve at %s:%d: %s", os.getpid(), config.addr, config.port, e)
        sys.exit(1)


async def _child(config: ChildConfig, sock: socket.socket) -> None:
    """Serve; report the port, then each answer; answer the parent's messages; end when the parent
    says stop or goes away, or when serving fails (the exit code says so to the parent)."""
    reader, writer = await asyncio.open_connection(sock=sock)
    server = AdmissionServer(config.tls, addr=config.addr, port=config.port, reload_interval=config.reload_interval,
                             reuse_port=config.reuse_port)
    answers: list[tuple[str, int, float]] = []
    server.observe = lambda path, status, seconds: answers.append((path, status, seconds))
    pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
    numbers = itertools.count(1)

    async def ask(keys: list[str]) -> dict[str, Any]:
        number = next(numbers)
        pending[number] = asyncio.get_running_loop().create_future()
        try:
            await _send(writer, ("members", number, keys))
            return await asyncio.wait_for(pending[number], MEMBERS_TIMEOUT_S)
        except (TimeoutError, ConnectionError):
            log.warning("No answer from the operator about pod groups %s: checked without them", ", ".join(keys))
            return {key: () for key in keys}
        finally:
            pending.pop(number, None)

    async def listen_to_parent() -> None:
        await server.wait_listening()
        await _send(writer, ("listening", server.port))
        while (message := await _receive(reader)) is not None and message != ("stop",):
            match message:
                case ("drain", bool(value)):
                    server.draining = value
                case ("members", int(number), dict(found)):
                    if number in pending and not pending[number].done():
                        pending[number].set_result(found)

    serving = asyncio.create_task(server.serve(ChildReviewer(ask)))
    talking = asyncio.create_task(listen_to_parent())
    flushing = asyncio.create_task(_flush_every(writer, answers))
    try:
        await asyncio.wait({serving, talking}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            serving.result()  # why it stopped serving: raised, so the exit code is not 0
    finally:
        for task in (serving, talking, flushing):
            task.cancel()
        await asyncio.gather(serving, talking, flushing, return_exceptions=True)
        if answers:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await _send(writer, ("answered", answers))
        writer.close()
    log.info("Webhook process %d stopped", os.getpid())


async def _flush_every(writer: asyncio.StreamWriter, answers: list[tuple[str, int, float]]) -> None:
    while True:
        await asyncio.sleep(FLUSH_S)
        if answers:
            batch = answers[:]
            answers.clear()
            await _send(writer, ("answered", batch))


if __name__ == "__main__":  # the child: python -m controller.kube.webhook_serving FD CONFIG
    child_main(ChildConfig.from_json(sys.argv[2]), socket.socket(fileno=int(sys.argv[1])))
