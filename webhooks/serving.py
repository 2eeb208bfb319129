"""The HTTPS admission server tasq's webhook handlers are answered behind.

`AdmissionServer` serves POST /<handler id> with a review function (`webhooks.reviewing.Reviewer`,
or any function called the same way) over TLS with a certificate and key read from files, and swaps in a new TLS context when the files change (`ReloadingTls`, also used by the
metrics server), so the next handshake uses the new certificate without a restart. A path that names
no webhook gets a 404, a malformed AdmissionReview a 400, and the server keeps serving; every request
is logged with the object it reviews. POST /convert answers CRD ConversionReviews with a converter
(`controller.api.conversion.convert` unless another is given; `webhooks.converting`). While
`draining` (a stopping replica) every answer closes its connection (HTTP/2: GOAWAY, then the streams
in flight are finished). TLS offers ALPN h2 and http/1.1: a connection that picks h2 (kube-apiserver's
does) is served by `webhooks.multiplexing`, others speak HTTP/1.1 with `webhooks.exchanging` (the
standard library's asyncio and ssl; no web framework). Started by
controller.kube.webhooking and the webhook process; tests run it directly.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from controller.api.conversion import convert
from webhooks.configurations import CONVERSION_PATH, MUTATING_ROUTES, VALIDATING_ROUTES
from webhooks.converting import Converter, answer_conversion
from webhooks.exchanging import MAX_HEADER_BYTES, Request, serve_connection
from webhooks.handlers import DENIAL_CODE, GroupMembers, denial_message
from webhooks.multiplexing import Multiplexer
from webhooks.reviewing import Reviewer, UnroutableReview
from webhooks.validation.errors import ROOT, FieldError, FieldPath

logger = logging.getLogger(__name__)

REVIEW_VERSIONS: Final = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")
MAX_OBJECT_DEPTH: Final = 64  # a Workload's pod template nests about 15 levels; the rules and encoders recurse
IDENTITY_FIELDS: Final = ("name", "generateName", "namespace", "uid")
MAX_REVIEW_BYTES: Final = 8 * 1024 * 1024  # kube-apiserver's own request limit is 3 MiB
MAX_CONVERSION_BYTES: Final = 256 * 1024 * 1024
"""A ConversionReview may carry a whole list (kube-apiserver sends what one list read needs)."""
INLINE_CONVERSIONS: Final = 16
"""Reviews with more objects are converted in a worker thread, so the loop keeps serving meanwhile."""
WEBHOOK_ALPN: Final = ("h2", "http/1.1")
"""The protocols the webhook server offers, preferred first: HTTP/2 lets kube-apiserver send all its
calls over one connection (Go's client opens one per call in flight over HTTP/1.1)."""
ReviewFn = Callable[..., Awaitable[Mapping[str, Any]]]
"""Answers one decoded AdmissionReview: `fn(review, webhook=path, headers=...)`; raises
`UnroutableReview` for a review it cannot route."""
HANDLER_IDS: Final = frozenset(route.handler_id for route in (*MUTATING_ROUTES, *VALIDATING_ROUTES))
"""The paths the webhook configurations call; any other is a 404 (never an allowing answer)."""


def review_problems(review: Any) -> list[str]:
    """What makes a request body not an AdmissionReview the handlers can answer (empty: well-formed)."""
    if not isinstance(review, (dict, Mapping)):
        return ["the body must be a JSON object"]
    problems = []
    if review.get("apiVersion") not in REVIEW_VERSIONS or review.get("kind") != "AdmissionReview":
        problems.append(f"apiVersion/kind must be one of {', '.join(REVIEW_VERSIONS)} / AdmissionReview")
    request = review.get("request")
    if not isinstance(request, (dict, Mapping)):
        return [*problems, "request must be an object"]
    if not isinstance(request.get("uid"), str) or not request.get("uid"):
        problems.append("request.uid must be a non-empty string")
    resource = request.get("resource")
    if not isinstance(resource, (dict, Mapping)) or not all(
            isinstance(resource.get(k), str) for k in ("group", "version", "resource")):
        problems.append("request.resource must have string group, version and resource")
    if request.get("operation") not in OPERATIONS:
        problems.append(f"request.operation must be one of {', '.join(OPERATIONS)}")
    if not isinstance(request.get("userInfo"), (dict, Mapping)):
        problems.append("request.userInfo must be an object")
    new, old = request.get("object"), request.get("oldObject")
    if not isinstance(new, (dict, Mapping)) and not isinstance(old, (dict, Mapping)):
        problems.append("request.object or request.oldObject must be an object")
    for key, value in (("object", new), ("oldObject", old)):
        if value is not None and not isinstance(value, (dict, Mapping)):
            problems.append(f"request.{key} must be an object or null")
        elif isinstance(value, (dict, Mapping)):
            problems.extend(_metadata_problems(f"request.{key}.metadata", value.get("metadata", {})))
    return problems


def _metadata_problems(path: str, metadata: Any) -> list[str]:
    """kube-apiserver always sends a decoded ObjectMeta, whose identity fields are strings: a
    review with others did not come from it and is malformed here."""
    if not isinstance(metadata, (dict, Mapping)):
        return [f"{path} must be an object"]
    return [f"{path}.{field} must be a string" for field in IDENTITY_FIELDS
            if metadata.get(field) is not None and not isinstance(metadata.get(field), str)]


def _depth_exceeds(obj: Any, limit: int) -> bool:
    """Whether any value nests more than `limit` levels deep: a pass over the containers level by
    level (no paths built); a non-empty container at depth `limit` holds values deeper than it."""
    level = [obj] if isinstance(obj, (dict, list)) else []
    depth = 0
    while level:
        if depth == limit:
            return any(level)
        below: list[Any] = []
        for value in level:
            below += [v for v in (value.values() if isinstance(value, dict) else value) if isinstance(v, (dict, list))]
        level = below
        depth += 1
    return False


def too_deep(obj: Any, limit: int = MAX_OBJECT_DEPTH) -> FieldPath | None:
    """The path of the first value nested more than `limit` levels inside `obj`, found without
    recursion (so any depth a JSON document can have is measured), or None."""
    if not _depth_exceeds(obj, limit):
        return None
    stack: list[tuple[Any, FieldPath, int]] = [(obj, ROOT, 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > limit:
            return path
        if isinstance(value, (dict, Mapping)):
            stack.extend((v, path.child(str(k)), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, path.index(i), depth + 1) for i, v in enumerate(value))
    return None


def _denied_as_too_deep(review: Mapping[str, Any]) -> dict[str, Any] | None:
    """A 422 denial for an object nested deeper than the rules walk (kube-apiserver passes such
    values in fields that keep unknown content), naming where; None for an ordinary object."""
    request = review["request"]
    for key in ("object", "oldObject"):
        path = too_deep(request.get(key))
        if path is None:
            continue
        shown = path.text if len(path.text) <= 120 else path.text[:120] + "..."
        kind = request.get("kind") if isinstance(request.get("kind"), (dict, Mapping)) else {}
        error = FieldError(shown, f"Invalid value: must not be nested more than {MAX_OBJECT_DEPTH} levels deep")
        message = denial_message(str(kind.get("kind") or request["resource"]["resource"]),
                                 str(request["resource"]["group"]), str(request.get("name") or ""), [error])
        return {"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": False,
                             "status": {"code": DENIAL_CODE, "message": message}}}
    return None


async def answer(fn: ReviewFn, review: Any, webhook: str | None,
                 headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for one decoded request body: 400 with the problems when it is not an
    AdmissionReview that can be routed, a denial for an object too deep, 500 when the review function
    fails unexpectedly, else its review."""
    problems = review_problems(review)
    if problems:
        return 400, {"message": "; ".join(problems)}
    what = _Described(review)  # built only for a line the log level lets through
    deep = _denied_as_too_deep(review)
    if deep is not None:
        logger.info("Admission %s: denied %s", what, deep["response"]["status"]["message"])
        return 200, deep
    started = time.perf_counter()
    try:
        response = await fn(review, webhook=webhook or None, headers=dict(headers or {}))
    except UnroutableReview as e:  # a review that cannot be routed (e.g. a resource without handlers)
        logger.warning("Admission %s: cannot serve: %s", what, e)
        return 400, {"message": str(e)}
    except Exception:
        logger.exception("Admission %s: the handler failed", what)
        return 500, {"message": "internal error"}
    verdict = response.get("response", {})
    elapsed = (time.perf_counter() - started) * 1000
    if verdict.get("allowed"):  # the common case: only at debug, a line per request would flood the log
        logger.debug("Admission %s: allowed%s (%.1f ms)", what, " patched" if verdict.get("patch") else "", elapsed)
    else:
        status = verdict.get("status") or {}
        logger.info("Admission %s: denied %s: %s (%.1f ms)", what, status.get("code"), status.get("message"),
                    elapsed)
    return 200, dict(response)


class _Described:
    """`describe(review)`, computed when a log line formats it (most answers are not logged)."""

    __slots__ = ("review",)

    def __init__(self, review: Mapping[str, Any]) -> None:
        self.review = review

    def __str__(self) -> str:
        return describe(self.review)


def describe(review: Mapping[str, Any]) -> str:
    """`CREATE Job ns/name uid=...` for the logs (from a well-formed review)."""
    request = review["request"]
    obj = request.get("object") if isinstance(request.get("object"), (dict, Mapping)) else request.get("oldObject")
    metadata = obj.get("metadata") if isinstance(obj, (dict, Mapping)) else None
    metadata = metadata if isinstance(metadata, (dict, Mapping)) else {}
    name = request.get("name") or metadata.get("name") or metadata.get("generateName") or ""
    namespace = request.get("namespace") or metadata.get("namespace") or ""
    kind = request.get("kind", {}).get("kind") if isinstance(request.get("kind"), (dict, Mapping)) else None
    where = f"{namespace}/{name}" if namespace else str(name)
    dry = " dryRun" if request.get("dryRun") else ""
    return f"{request['operation']} {kind or request['resource']['resource']} {where} uid={request['uid']}{dry}"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where the serving certificate and key are, and the CA that goes into caBundle."""

    cert: Path
    key: Path
    ca: Path | None = None

    def fingerprint(self) -> tuple[tuple[int, int, int], ...]:
        """Changes when any file is rewritten or replaced (a Secret volume swaps a symlink to a
        new directory: stat follows it to the new file)."""
        out = []
        for path in (self.cert, self.key, self.ca):
            if path is not None:
                st = path.stat()
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def context(self, client_ca: str | None = None, alpn: tuple[str, ...] = ()) -> ssl.SSLContext:
        """The server context; with `client_ca` (PEM) it asks for an optional client certificate and
        verifies one sent against that CA alone (not the system's CAs: a verified certificate is
        trusted to name its user); `alpn`: the protocols it offers (none: the client's pick is not asked)."""
        if client_ca is None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cadata=client_ca)
        context.load_cert_chain(self.cert, self.key)
        if alpn:
            context.set_alpn_protocols(list(alpn))
        return context

    def ca_bundle(self) -> str:
        """base64 of the CA PEM (the serving certificate itself when no CA file is given)."""
        return base64.b64encode((self.ca or self.cert).read_bytes()).decode("ascii")


class ReloadingTls:
    """A server-side TLS context from `TlsFiles` that follows the files: `front()` is the listening
    socket's context, whose handshakes switch to the newest context `reload_if_changed` loaded."""

    def __init__(self, tls: TlsFiles, what: str = "webhook", client_ca: str | None = None,
                 alpn: tuple[str, ...] = ()) -> None:
        self.tls = tls
        self.what = what
        self.client_ca = client_ca
        self.alpn = alpn
        self.reloads = 0
        self._fingerprint = tls.fingerprint()
        self._current = tls.context(client_ca, alpn)

    def front(self) -> ssl.SSLContext:
        """The listening socket's context: each handshake switches to the newest loaded context."""
        front = self.tls.context(self.client_ca, self.alpn)

        def pick(sock: ssl.SSLObject, _server_name: str | None, _front: ssl.SSLContext) -> None:
            sock.context = self._current
        front.sni_callback = pick
        return front

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed; keep the old context when they cannot be loaded
        (e.g. the certificate is written but the key not yet), retrying on the next check."""
        try:
            fingerprint = self.tls.fingerprint()
            if fingerprint == self._fingerprint:
                return False
            context = self.tls.context(self.client_ca, self.alpn)
        except (OSError, ssl.SSLError) as e:
            logger.warning("Cannot load the %s certificate from %s: %s; serving the previous one",
                           self.what, self.tls.cert, e)
            return False
        self._current, self._fingerprint = context, fingerprint
        self.reloads += 1
        logger.info("Loaded a new %s serving certificate from %s", self.what, self.tls.cert)
        return True


class AdmissionServer:
    """The webhook server over TLS from files, reloading them when they change (see module).
    `handler_ids` are the paths it answers (every configured webhook by default); others get 404."""

    def __init__(self, tls: TlsFiles, *, addr: str = "127.0.0.1", port: int = 0, host: str | None = None,
                 reload_interval: float = 10.0, handler_ids: frozenset[str] = HANDLER_IDS,
                 converter: Converter | None = convert, reuse_port: bool = False) -> None:
        self.tls = tls
        self.reuse_port = reuse_port
        """Listen with SO_REUSEPORT: other servers may listen on the same port (the kernel spreads
        new connections among them)."""
        self.converter = converter
        self.addr = addr
        self.port = port
        self.host = host or addr
        self.reload_interval = reload_interval
        self.handler_ids = handler_ids
        self._reloading = ReloadingTls(tls, alpn=WEBHOOK_ALPN)
        self._listening = asyncio.Event()
        self._draining = False
        self._multiplexed: set[Multiplexer] = set()
        self.failure: str | None = None
        """Why the webhooks are not served (never set here: a server on the operator's loop fails with it)."""
        self.observe: Callable[[str, int, float], None] | None = None
        """Called with (path, HTTP status, seconds) after each answer (the operator's metrics)."""

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def draining(self) -> bool:
        """Set while stopping: every answer closes its connection (HTTP/2: every connection gets
        GOAWAY at once and ends once its streams are answered), so a client keeping one alive opens
        its next elsewhere (another replica) instead of meeting a closed socket."""
        return self._draining

    @draining.setter
    def draining(self, value: bool) -> None:
        self._draining = value
        if value:
            for multiplexer in list(self._multiplexed):
                multiplexer.drain()

    @property
    def reloads(self) -> int:
        return self._reloading.reloads

    def reload_if_changed(self) -> bool:
        """See `ReloadingTls.reload_if_changed`."""
        return self._reloading.reload_if_changed()

    async def wait_listening(self) -> None:
        await self._listening.wait()

    async def serve_reviews(self, group_members: GroupMembers | None) -> None:
        """Serve tasq's handlers (`Reviewer`) on this process's loop until cancelled; `group_members`:
        where a new queued pod's group is found (None: not checked)."""
        await self.serve(Reviewer(group_members))

    async def serve(self, fn: ReviewFn) -> None:
        """Serve `fn` until cancelled (`tasq run`'s webhook process, the operator's loop, tests)."""
        async for _ in self(fn):
            pass

    async def __call__(self, fn: ReviewFn) -> AsyncIterator[dict[str, str]]:
        """Serve `fn`; yields the client config once listening ({"url", "caBundle"}), then re-reads
        the certificate files every `reload_interval` s."""
        async def answer(request: Request) -> tuple[int, Any]:
            started = time.perf_counter()
            if request.method != "POST":
                status, body = 405, {"message": f"only POST is served, not {request.method[:16]}"}
            elif request.path == f"/{CONVERSION_PATH}":
                return await self._convert(request)
            else:
                status, body = await self._serve(fn, request)
            if self.observe is not None:
                self.observe(request.path, status, time.perf_counter() - started)
            return status, body

        def body_limit(path: str) -> int:
            return MAX_CONVERSION_BYTES if path == f"/{CONVERSION_PATH}" else MAX_REVIEW_BYTES

        connections: dict[asyncio.StreamWriter, asyncio.Future[None]] = {}

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections[writer] = done = asyncio.get_running_loop().create_future()
            try:
                ssl_object = writer.get_extra_info("ssl_object")
                if ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2":
                    await self._multiplex(Multiplexer(reader, writer, answer, body_limit, lambda: self.draining))
                else:
                    await serve_connection(reader, writer, answer, body_limit, lambda: self.draining)
            except asyncio.CancelledError:
                # Ends here rather than cancelled: asyncio (3.11) logs a cancelled connection
                # task's CancelledError as an error with a traceback.
                logger.debug("Webhook connection cancelled")
            finally:
                del connections[writer]
                done.set_result(None)

        server = await asyncio.start_server(connected, self.addr, self.port, ssl=self._reloading.front(),
                                            limit=MAX_HEADER_BYTES, reuse_port=self.reuse_port or None)
        try:
            if server.sockets:
                self.port = int(server.sockets[0].getsockname()[1])
            logger.info("Serving admission webhooks at %s", self.url)
            self._listening.set()
            yield {"url": self.url, "caBundle": self.tls.ca_bundle()}
            while True:
                await asyncio.sleep(self.reload_interval)
                self.reload_if_changed()
        finally:
            self._listening.clear()
            server.close()
            ending = list(connections.values())
            for writer in list(connections):  # open keep-alive connections end with the server
                writer.transport.abort()
            if ending:
                await asyncio.wait(ending, timeout=1.0)

    async def _multiplex(self, multiplexer: Multiplexer) -> None:
        """Serve an HTTP/2 connection, told when the server starts draining."""
        self._multiplexed.add(multiplexer)
        try:
            await multiplexer.serve()
        finally:
            self._multiplexed.discard(multiplexer)

    async def _serve(self, fn: ReviewFn, request: Request) -> tuple[int, Any]:
        """One request: 404 for a path that names no webhook (never an allowing answer made up),
        400 when the body is not JSON, else what `answer` says."""
        webhook = request.path[1:]
        if webhook not in self.handler_ids:
            logger.warning("Admission request refused: no webhook at %s", request.path)
            return 404, {"message": f"no webhook at {request.path}"}
        try:
            review = json.loads(request.body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            return _bad_request(f"the body is not JSON this server can read: {e}")
        status, body = await answer(fn, review, webhook, request.headers)
        if status == 400:
            logger.warning("Admission request refused: %s", body["message"])
        return status, body

    async def _convert(self, request: Request) -> tuple[int, Any]:
        """One ConversionReview: 400 when the body is not JSON or names no request to answer, else a
        review whose result says Success or Failure (why, naming object and field); logged either way."""
        started = time.perf_counter()
        try:
            review = json.loads(request.body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            return _bad_request(f"the body is not JSON this server can read: {e}", "Conversion")
        request_body = review.get("request") if isinstance(review, dict) else None
        objects = request_body.get("objects") if isinstance(request_body, dict) else None
        count = len(objects) if isinstance(objects, list) else 0
        if count > INLINE_CONVERSIONS:
            status, body = await asyncio.to_thread(answer_conversion, review, self.converter)
        else:
            status, body = answer_conversion(review, self.converter)
        if status != 200:
            return _bad_request(body["message"], "Conversion")
        result = body["response"]["result"]
        elapsed = (time.perf_counter() - started) * 1000
        what = f"{count} object(s) to {request_body.get('desiredAPIVersion') if request_body else '?'}"
        if result["status"] == "Success":
            logger.info("Conversion of %s: done (%.1f ms)", what, elapsed)
        else:
            logger.warning("Conversion of %s: failed: %s (%.1f ms)", what, result["message"], elapsed)
        return 200, body


def _bad_request(message: str, what: str = "Admission") -> tuple[int, Any]:
    logger.warning("%s request refused: %s", what, message)
    return 400, {"message": message}
