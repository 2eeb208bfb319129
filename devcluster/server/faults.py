"""Fault injection for tests: latency, 409, 500, 403, 410 Gone, dropped watches, dropped connections
and timing-out webhooks.

`Faults(api).install()` hooks the request pipeline (`ApiServer.fault_hooks`, `watch_hooks`), so a
fault hits a request before any state change. A dropped connection is what a restarting
kube-apiserver does to a client: DISCONNECT drops it before the request is applied, DISCONNECT_AFTER
applies the request and drops it before the answer (the client cannot tell which happened); both hit
HTTP requests only (the front marks them with `CONNECTION`), never the in-process API. Rules pick requests by verb, resource (`pods/status`),
namespace and name, for the next N or until cleared; tests add them in-process (`DevCluster.faults`),
`tasq dev` users through `/debug/faults` (see `Faults.serve_http`).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web

from devcluster.server.apiserver import ApiServer, RequestInfo
from devcluster.server.errors import FORBIDDEN as FORBIDDEN_REASON
from devcluster.server.errors import INTERNAL_ERROR, METHOD_NOT_ALLOWED, ApiError, bad_request, conflict, gone
from devcluster.server.watching import Watch

LATENCY = "latency"
CONFLICT = "conflict"
ERROR = "error"
FORBIDDEN = "forbidden"  # the answer of an authorizer that denies the request (devcluster has none)
GONE = "gone"
DROP_WATCH = "drop-watch"
WEBHOOK_TIMEOUT = "webhook-timeout"
DISCONNECT = "disconnect"
DISCONNECT_AFTER = "disconnect-after"
KINDS = (LATENCY, CONFLICT, ERROR, FORBIDDEN, GONE, DROP_WATCH, WEBHOOK_TIMEOUT, DISCONNECT, DISCONNECT_AFTER)
ANY = "*"


@dataclass
class Connection:
    """The HTTP connection of the request being served; `drop_answer` once a DISCONNECT_AFTER rule hit
    it: the front aborts the connection instead of answering."""

    drop_answer: bool = False


CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar("devcluster_connection", default=None)
"""Set by the HTTP front for the request it serves (None for in-process API calls)."""


class Disconnect(Exception):
    """A DISCONNECT rule hit the request: the front aborts its connection without an answer."""


@dataclass
class Fault:
    """One rule: what happens (`kind`) to which requests, how many more times (`count`; None = always)."""

    kind: str
    verb: str = ANY  # create, get, list, update, patch, delete, watch
    resource: str = ANY  # plural, or plural/subresource
    namespace: str = ANY
    name: str = ANY  # an object name, or a webhook name for WEBHOOK_TIMEOUT
    count: int | None = None
    seconds: float = 0.0  # LATENCY: the delay
    message: str = ""
    hits: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: want one of {', '.join(KINDS)}")
        if not all(isinstance(v, str) for v in (self.verb, self.resource, self.namespace, self.name, self.message)):
            raise ValueError("verb, resource, namespace, name and message must be strings")
        if self.count is not None and (not isinstance(self.count, int) or self.count < 1):
            raise ValueError(f"count {self.count!r}: want a positive integer or null")
        if not isinstance(self.seconds, (int, float)) or self.seconds < 0:
            raise ValueError(f"seconds {self.seconds!r}: want a non-negative number")

    @property
    def spent(self) -> bool:
        return self.count is not None and self.hits >= self.count

    def matches(self, info: RequestInfo) -> bool:
        resource = info.resource.plural + (f"/{info.subresource}" if info.subresource else "")
        return (self.verb in (ANY, info.verb) and self.resource in (ANY, resource, info.resource.plural)
                and self.namespace in (ANY, info.namespace) and self.name in (ANY, info.name))


class Faults:
    """The active fault rules of one API server, checked in the order they were added."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.rules: list[Fault] = []
        self._watches: weakref.WeakKeyDictionary[Watch, RequestInfo] = weakref.WeakKeyDictionary()

    def install(self) -> Faults:
        self.api.fault_hooks.append(self.check)
        self.api.watch_hooks.append(self.check_watch)
        return self

    def add(self, fault: Fault) -> Fault:
        self.rules.append(fault)
        return fault

    def inject(self, kind: str, verb: str = ANY, resource: str = ANY, *, name: str = ANY, namespace: str = ANY,
               count: int | None = 1, seconds: float = 0.0, message: str = "") -> Fault:
        """Add a rule; by default it hits the next matching request only."""
        return self.add(Fault(kind, verb, resource, namespace, name, count, seconds, message))

    def clear(self) -> None:
        self.rules.clear()

    def _take(self, info: RequestInfo, kinds: tuple[str, ...]) -> Fault | None:
        """The first live rule of `kinds` matching the request; counts the hit."""
        for rule in self.rules:
            if rule.kind in kinds and not rule.spent and rule.matches(info):
                rule.hits += 1
                return rule
        return None

    # ---------------------------------------------------------------- hooks

    async def check(self, info: RequestInfo) -> ApiError | None:
        """Fault hook: sleep for latency, then fail with the first matching error rule; over HTTP, drop
        the connection now (Disconnect) or after the request is applied (marks `CONNECTION`). Every
        rule that hits a request is taken when it arrives, so a delayed request never takes a rule
        added while it slept."""
        delay = self._take(info, (LATENCY,))
        connection = CONNECTION.get()
        drop = self._take(info, (DISCONNECT, DISCONNECT_AFTER)) if connection is not None else None
        rule = self._take(info, (CONFLICT, ERROR, FORBIDDEN, GONE)) if drop is None or drop.kind != DISCONNECT else None
        if delay is not None:
            await asyncio.sleep(delay.seconds)
        if drop is not None and drop.kind == DISCONNECT:
            raise Disconnect(f"injected fault: {info.verb} {info.resource.plural} {info.name}")
        if drop is not None and connection is not None:
            connection.drop_answer = True
        return None if rule is None else self._error(rule, info)

    def check_watch(self, info: RequestInfo, watch: Watch) -> ApiError | None:
        """Watch hook: refuse (410/500) or drop the new watch; remember it for `drop_watches`."""
        rule = self._take(info, (ERROR, GONE, DROP_WATCH))
        if rule is not None and rule.kind != DROP_WATCH:
            return self._error(rule, info)
        self._watches[watch] = info
        if rule is not None:
            watch.drop()
        return None

    def webhook_times_out(self, webhook: str) -> bool:
        """Whether the chain must treat this call to `webhook` as timed out (consumes a hit)."""
        for rule in self.rules:
            if rule.kind == WEBHOOK_TIMEOUT and not rule.spent and rule.name in (ANY, webhook):
                rule.hits += 1
                return True
        return False

    def drop_watches(self, resource: str = ANY, namespace: str = ANY) -> int:
        """Cut the open watches on `resource` (plural) now, as a broken connection would; how many."""
        dropped = 0
        for watch, info in list(self._watches.items()):
            if watch.closed or resource not in (ANY, info.resource.plural) or namespace not in (ANY, info.namespace):
                continue
            watch.drop()
            dropped += 1
        return dropped

    # ---------------------------------------------------------------- /debug/faults

    async def serve_http(self, request: web.Request) -> web.Response:
        """GET: the rules; POST: add a rule (Fault's fields) or drop watches; DELETE: clear all."""
        if request.method == "DELETE":
            self.clear()
        elif request.method == "POST":
            try:
                body = json.loads(await request.read() or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("want a JSON object")
                if "dropWatches" in body:
                    count = self.drop_watches(str(body["dropWatches"]))
                    return web.json_response({"dropped": count})
                self.add(_fault_from(body))
            except (ValueError, TypeError) as e:
                error = bad_request(f"fault: {e}")
                return web.json_response(error.status(), status=error.code)
        elif request.method != "GET":
            return web.json_response(ApiError(405, METHOD_NOT_ALLOWED, "use GET, POST or DELETE").status(),
                                     status=405)
        return web.json_response({"faults": [asdict(rule) for rule in self.rules]})

    def _error(self, rule: Fault, info: RequestInfo) -> ApiError:
        r = info.resource
        if rule.kind == CONFLICT:
            return conflict(r.plural, r.group, info.name)
        if rule.kind == GONE:
            return gone(rule.message or "too old resource version: injected fault")
        if rule.kind == FORBIDDEN:
            plural = f"{r.plural}.{r.group}" if r.group else r.plural
            return ApiError(403, FORBIDDEN_REASON, rule.message or
                            f'{plural} "{info.name}" is forbidden: User "devcluster" cannot {info.verb} resource '
                            f'"{r.plural}" in API group "{r.group}" in the namespace "{info.namespace}"',
                            kind=r.plural, group=r.group, name=info.name)
        return ApiError(500, INTERNAL_ERROR, f"Internal error occurred: {rule.message or 'injected fault'}")


def _fault_from(body: dict[str, Any]) -> Fault:
    """A rule from JSON: `kind` required; `count` defaults to 1 (`null`: until cleared)."""
    allowed = {"kind", "verb", "resource", "namespace", "name", "count", "seconds", "message"}
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}")
    if "kind" not in body:
        raise ValueError("kind is required")
    fields = {k: body[k] for k in allowed if k in body}
    fields.setdefault("count", 1)
    return Fault(**fields)
