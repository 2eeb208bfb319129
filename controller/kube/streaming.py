"""tasq's own list+watch streams, one per watched resource, feeding the operator's EventRouter.

`WatchStream.run(since)` watches its resource from `since` (the priming list's resourceVersion) with
bookmarks, applies each event through `controller.kube.watching.apply_event`, and watches again from
the last version it saw when a watch ends; when the API says that version is gone (410) it lists
the resource again (paginated), applying what changed and deleting what vanished meanwhile; after
any other failure it waits a doubling backoff (reset by the next watch that delivers) and retries.
A refusal only an administrator can fix (403, or 404 for a required kind) is logged once at
WARNING with the fix and held in `problem` (what /readyz reports) until a request succeeds again.
`ApiWatchSource` sends the requests over the operator's KubeApi; tests give a fake source and sleep.
Built by controller.kube.operating, which replaced kopf's watches with these.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import aiohttp
from kubernetes.aio.client.exceptions import ApiException

from controller.kube.api import TRANSPORT_ERRORS, ApiError, KubeApi, api_error, path, refused
from controller.kube.routing import EventRouter

log = logging.getLogger(__name__)
_CLIENT_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, ApiException)

PAGE_SIZE = 5000
"""Objects per list page: one page in memory at a time, few enough requests at 50,000 nodes. Pages
of 500 (client-go's informers') took 1.6-2x as long to list 10,000 nodes from the devcluster, which
sorts the whole resource for every page."""
WATCH_TIMEOUT_S = 300
"""How long one watch request lasts (the server's timeoutSeconds) before the stream watches again
from its last resourceVersion, as client-go's reflectors do (5-10 minutes). Each new watch is a
request: with 10 s, the streams alone sent about 1.5 requests a second to an idle API server."""
QUIET_READ_S = 90
"""How long the stream waits for the next bytes before it gives up and watches again: a stream that
went quiet (a proxy, an API server gone without closing it) is replaced within this. Idle watches
still get a BOOKMARK about once a minute from kube-apiserver (every 5 s from the devcluster)."""
CONNECT_S = 10
"""How long opening a watch may take before it counts as failed (and is tried again after a backoff)."""
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
"""The wait after a failed list or watch doubles from BACKOFF_FIRST_S up to this."""
OPTIONAL_RETRY_S = 30.0
"""How often the list of an optional integration's resource is tried while its CRD is missing."""
STATUS_GONE = 410
"""A watch's ERROR event code when its resourceVersion was compacted away: list again."""

Sleep = Callable[[float], Awaitable[None]]
Problem = Callable[[tuple[str, str], ApiError], "str | None"]


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list: its objects (with apiVersion and kind), the list's resourceVersion, and
    the token of the next page ("" on the last)."""

    items: list[dict[str, Any]]
    resource_version: str
    next_token: str


class WatchSource(Protocol):
    """The two requests a stream sends; ApiError (status 0 when no answer came) on failure."""

    async def list_page(self, resource: tuple[str, str], token: str) -> ListPage: ...

    def watch(self, resource: tuple[str, str], since: str) -> AsyncGenerator[dict[str, Any], None]: ...


class ApiWatchSource:
    """WatchSource over a KubeApi: lists through `KubeApi.request` (counted in its calls), watches as
    one streamed GET each over the same client's connections (not counted: they last seconds)."""

    def __init__(self, api: KubeApi, page_size: int = PAGE_SIZE) -> None:
        self.api = api
        self.page_size = page_size

    async def list_page(self, resource: tuple[str, str], token: str) -> ListPage:
        query = {"limit": str(self.page_size), **({"continue": token} if token else {})}
        answer = await self.api.request("GET", path(*resource), query=query)
        kind = str(answer.get("kind", "")).removesuffix("List")
        version = str(answer.get("apiVersion", resource[0]))
        meta = answer.get("metadata") or {}
        return ListPage([{"apiVersion": version, "kind": kind, **item} for item in answer.get("items") or []],
                        str(meta.get("resourceVersion") or ""), str(meta.get("continue") or ""))

    async def watch(self, resource: tuple[str, str], since: str) -> AsyncGenerator[dict[str, Any], None]:
        query = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_TIMEOUT_S),
                 **({"resourceVersion": since} if since else {})}
        url = f"{path(*resource)}?{urlencode(query)}"
        client = self.api.api_client
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_S, sock_read=QUIET_READ_S)
        try:
            method, full, headers, _, _ = await client.param_serialize(
                "GET", url, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
            answer = await client.call_api(method, full, headers, _request_timeout=timeout)
        except _CLIENT_ERRORS as e:
            raise api_error(e, f"GET {url}") from e
        response: aiohttp.ClientResponse = answer.response
        try:
            if not 200 <= response.status < 300:
                raise refused(response.status, (await response.read()).decode("utf-8", "replace"))
            async for line in _lines(response.content):
                yield json.loads(line)
        except TRANSPORT_ERRORS as e:
            raise api_error(e, f"GET {url}") from e
        except ValueError as e:
            raise ApiError(0, f"GET {url}: a watch event is not JSON: {e}") from e
        finally:
            response.release()


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The stream's newline-separated events, whatever their size (aiohttp's own line reader
    refuses lines over 128 KiB; a large Workload or Job can be more)."""
    pending = b""
    async for chunk in content.iter_any():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


class Relist(Exception):
    """The watch's resourceVersion is gone (410): list again."""


class WatchStream:
    """One resource's list+watch stream; see the module docstring. `optional`: the kind of an
    integration whose CRD may be missing (a 404 is normal, said once at INFO, and retried)."""

    def __init__(self, kind: str, resource: tuple[str, str], source: WatchSource, router: EventRouter, *,
                 apply: Callable[[EventRouter, str, str | None, Mapping[str, Any]], None],
                 problem_of: Problem, optional: bool = False, sleep: Sleep = asyncio.sleep) -> None:
        self.kind, self.resource, self.source, self.router = kind, resource, source, router
        self.apply, self.problem_of, self.optional, self.sleep = apply, problem_of, optional, sleep
        self.problem: str | None = None
        """What keeps this stream from listing or watching, for /readyz (None while it works)."""
        self.version = ""
        """The last resourceVersion seen (an event's, a bookmark's or a list's)."""
        self.events = 0
        """Events applied (bookmarks not counted)."""
        self.relists = 0
        self._failing: str | None = None

    async def run(self, since: str | None) -> None:
        """Watch from `since` (list first when None) until cancelled."""
        delay = BACKOFF_FIRST_S
        listed = since is not None
        self.version = since or ""
        while True:
            try:
                if not listed:
                    await self.relist()
                    listed = True
                if await self.watch_once():
                    delay = BACKOFF_FIRST_S
            except Relist:
                listed = False
                continue
            except ApiError as e:
                if e.status == STATUS_GONE:  # refused outright rather than as a watch's ERROR event
                    listed = False
                    continue
                self._failed(e, delay)
                await self.sleep(OPTIONAL_RETRY_S if self.optional and e.not_found else delay)
                delay = min(delay * 2, BACKOFF_MAX_S)

    async def relist(self) -> None:
        """List every object again: each applied (the cache skips versions it has), each object the
        cache holds that the list lacks deleted, the watch to go on from the list's version."""
        seen: set[str] = set()
        token, version = "", ""
        while True:
            page = await self.source.list_page(self.resource, token)
            version = page.resource_version or version
            for obj in page.items:
                meta = obj.get("metadata") or {}
                namespace, name = meta.get("namespace"), str(meta.get("name", ""))
                seen.add(f"{namespace}/{name}" if namespace else name)
                self.apply(self.router, self.kind, "ADDED", obj)
            token = page.next_token
            if not token:
                break
        for key in self.router.cache.keys_of(self.kind) - seen:
            namespace, _, name = key.rpartition("/")
            # No UID here: the list's version is what keeps an older answer from bringing it back.
            metadata = {"name": name, "resourceVersion": version, **({"namespace": namespace} if namespace else {})}
            self.apply(self.router, self.kind, "DELETED", {"metadata": metadata})
        self.relists += 1
        self.version = version
        self._recovered()

    async def watch_once(self) -> bool:
        """One watch request from `version`, its events applied; whether it delivered anything
        (an event or a bookmark), which resets the backoff. Raises Relist on 410."""
        delivered = False
        # Closed as soon as this ends (a 410, an error, cancellation): its connection goes back at once.
        async with contextlib.aclosing(self.source.watch(self.resource, self.version)) as events:
            async for event in events:
                delivered = self._take(event, delivered)
        return delivered

    def _take(self, event: Mapping[str, Any], delivered: bool) -> bool:
        """Apply one watch event (a bookmark only moves the version); whether anything has been
        delivered so far. Raises Relist on a 410 ERROR event, ApiError on another."""
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, Mapping):
            return delivered
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == STATUS_GONE:
                raise Relist()
            raise ApiError(code, str(obj.get("message") or obj))
        if not delivered:
            self._recovered()
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind != "BOOKMARK":
            self.apply(self.router, self.kind, str(kind) if kind else None, obj)
            self.events += 1
        if version:
            self.version = version
        return True

    def _failed(self, e: ApiError, delay: float) -> None:
        """Say what went wrong: once at WARNING while the same failure repeats; a refusal only an
        administrator can fix (or a missing optional CRD, at INFO) is also kept for /readyz."""
        blocking = self.problem_of(self.resource, e)
        said = blocking or str(e)
        if said == self._failing:
            log.debug("watching %s: still %s; again in %.1f s", self.resource[1], said, delay)
            return
        self._failing = said
        if blocking is not None and self.optional and e.not_found:
            log.info("%s is not served (its CRD is not installed): none managed until it appears", self.resource[1])
            return
        if blocking is not None:
            self.problem = blocking
            log.warning("tasq cannot watch %s, so it does not report ready: %s", self.resource[1], blocking)
            return
        log.warning("watching %s failed (%s): trying again with a backoff (from %.1f s)", self.resource[1], e, delay)

    def _recovered(self) -> None:
        if self._failing is not None:
            log.info("watching %s again", self.resource[1])
        self._failing = None
        self.problem = None
