"""The HTTP layer: maps Kubernetes REST paths, verbs, query parameters and media types onto `ApiServer`.

Built as an aiohttp application by `devcluster.cluster.DevCluster`. Handles discovery, CRUD,
subresources, Table output, list pagination and streaming watches (bookmarks, timeoutSeconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from devcluster.front import discovery, openapi, protobuf
from devcluster.front.protobuf import ProtobufError
from devcluster.front.tables import TableMaker
from devcluster.server import applying, logs, reviews
from devcluster.server.apiserver import PATCH_APPLY, ApiServer, ListOptions
from devcluster.server.collecting import POLICY_BACKGROUND, POLICY_ORPHAN
from devcluster.server.errors import (
    CAUSE_FORBIDDEN,
    INTERNAL_ERROR,
    MAX_REQUEST_BODY_BYTES,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    UNSUPPORTED_MEDIA_TYPE,
    ApiError,
    bad_request,
    request_entity_too_large,
)
from devcluster.server.faults import CONNECTION, Connection, Disconnect
from devcluster.server.resources import REVIEW_KINDS, ResourceType
from devcluster.server.watching import BOOKMARK, ERROR, Watch
from devcluster.webhooking import warning

log = logging.getLogger(__name__)

JSON = "application/json"
BOOKMARK_INTERVAL = 5.0  # seconds between BOOKMARK events on an idle watch that allows them
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed resource path: /api(s)/.../[namespaces/<ns>/]<plural>[/<name>[/<subresource>]]."""

    resource: ResourceType
    namespace: str
    name: str
    subresource: str
    watch_path: bool  # the deprecated /watch/ prefix


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_DUMPS(body).encode(), status=status, content_type=JSON)


def _error(error: ApiError) -> web.Response:
    return _json(error.status(), error.code)


def _not_found_path() -> ApiError:
    return ApiError(404, NOT_FOUND, "the server could not find the requested resource")


def _method_not_allowed() -> ApiError:
    return ApiError(405, METHOD_NOT_ALLOWED, "the server does not allow this method on the requested resource")


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


def _manager(request: web.Request) -> str:
    """Who an update's fields are recorded for: its fieldManager, else its User-Agent's product
    (`kubectl` of `kubectl/v1.37.2 ...`), as kube-apiserver names an unnamed manager."""
    return request.query.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0] or "unknown"


class HttpFrontend:
    """aiohttp handlers over one ApiServer; `bookmark_interval` paces idle watch bookmarks."""

    def __init__(self, api: ApiServer, bookmark_interval: float = BOOKMARK_INTERVAL) -> None:
        self.api = api
        self.bookmark_interval = bookmark_interval
        self.address = ""
        self._watches: set[Watch] = set()
        # /debug/<name> endpoints of devcluster-only tools (fault injection), registered by DevCluster.
        self.debug_handlers: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] = {}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_shutdown(self, _app: web.Application) -> None:
        self.close_watches()

    def close_watches(self) -> None:
        for w in list(self._watches):
            w.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        connection = Connection()
        CONNECTION.set(connection)  # this request's own context (aiohttp serves each in a new task)
        with warning.collecting() as warnings:
            try:
                response = await self._answer(request)
            except Disconnect:
                connection.drop_answer = True
                response = web.Response(status=500)
        if connection.drop_answer and request.transport is not None:
            # an injected fault: the connection goes without an answer, as when kube-apiserver stops
            request.transport.abort()
            return response
        if warnings and not response.prepared:  # a watch stream has sent its headers already
            for text in warnings:
                response.headers.add(warning.HEADER, warning.header_value(text))
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except ApiError as e:
            return _error(e)
        except (ConnectionResetError, asyncio.CancelledError, Disconnect):
            raise
        except Exception as e:  # an emulator bug must still answer as the API server would
            log.exception("internal error serving %s %s", request.method, request.path)
            return _error(ApiError(500, INTERNAL_ERROR, f"Internal error occurred: {e}"))

    # ---------------------------------------------------------------- routing

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _json({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]})
        if parts[0] in ("healthz", "livez", "readyz"):
            return web.Response(text="ok")
        if parts[0] == "debug" and len(parts) == 2 and parts[1] in self.debug_handlers:
            return await self.debug_handlers[parts[1]](request)
        if parts == ["version"]:
            return _json(discovery.version())
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi(parts[2:])
        if parts == ["openapi", "v2"]:
            if "protobuf" in request.headers.get("Accept", "").split(",")[0]:  # the first choice wins
                return web.Response(body=openapi.v2_protobuf(), content_type=openapi.V2_PROTOBUF)
            return _json(openapi.v2_document())
        if parts[0] == "openapi":
            raise _not_found_path()
        if parts[0] == "api":
            if len(parts) == 1:
                return _json(discovery.core_versions(self.address or request.host))
            return await self._group_version(request, "", parts[1], parts[2:])
        if parts[0] == "apis":
            if len(parts) == 1:
                return _json(discovery.group_list(self.api.registry))
            if len(parts) == 2:
                doc = discovery.group(self.api.registry, parts[1])
                if doc is None:
                    raise _not_found_path()
                return _json(doc)
            return await self._group_version(request, parts[1], parts[2], parts[3:])
        raise _not_found_path()

    def _openapi(self, rest: list[str]) -> web.Response:
        registry = self.api.registry
        if not rest:
            return _json(openapi.root(registry))
        if rest[0] == "api" and len(rest) == 2:
            group, version = "", rest[1]
        elif rest[0] == "apis" and len(rest) == 3:
            group, version = rest[1], rest[2]
        else:
            raise _not_found_path()
        if version not in registry.versions(group):
            raise _not_found_path()
        return _json(openapi.group_version(registry, group, version))

    async def _group_version(self, request: web.Request, group: str, version: str,
                             rest: list[str]) -> web.StreamResponse:
        if not rest:
            doc = discovery.resource_list(self.api.registry, group, version)
            if doc is None:
                raise _not_found_path()
            return _json(doc)
        target = self._target(group, version, rest)
        return await self._resource(request, target)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        registry = self.api.registry
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            r = registry.get(group, version, rest[2])
            if r is not None and r.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _not_found_path()
        r = registry.get(group, version, rest[0])
        if r is None:
            raise _not_found_path()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return Target(r, namespace, name, sub, watch_path)

    # ---------------------------------------------------------------- verbs

    async def _review(self, r: ResourceType, body: Any) -> dict[str, Any]:
        """A review answered, never stored: a TokenReview looks up the ServiceAccount its token
        names, a SubjectAccessReview reads the stored RBAC objects (see devcluster.server.reviews)."""
        if r.kind == "TokenReview":
            spec = body.get("spec") if isinstance(body, dict) else None
            named = reviews.token_account(str(spec.get("token") or ""), self.api.now()) if isinstance(spec, dict) else None
            account = None
            if named is not None:
                with contextlib.suppress(ApiError):  # a deleted ServiceAccount's tokens stop working
                    account = await self.api.get(self.api.resource("v1", "serviceaccounts"), *named)
            return reviews.token_review(body, account)
        if r.kind == "SubjectAccessReview":
            rbac = {}
            for plural, kind in (("roles", "Role"), ("clusterroles", "ClusterRole"), ("rolebindings", "RoleBinding"),
                                 ("clusterrolebindings", "ClusterRoleBinding")):
                listed = await self.api.list_objects(self.api.resource("rbac.authorization.k8s.io/v1", plural))
                rbac[kind] = [{**item, "kind": kind} for item in listed.get("items") or []]
            return reviews.subject_access_review(body, rbac)
        return reviews.answer_review(r.kind, r.group_version, body)

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        dry_run = q.get("dryRun") == "All"
        strict = q.get("fieldValidation") == "Strict"
        method = request.method
        if method == "GET":
            if t.watch_path or _truthy(q.get("watch")):
                return await self._watch(request, t)
            if not t.name:
                return await self._list(request, t)
            if t.name and t.subresource == "log" and t.resource.storage_key == ("", "pods"):
                pod = await self.api.get(t.resource, t.namespace, t.name, copy=False)
                return web.Response(text=logs.pod_log(pod, q.get("container", "")), content_type="text/plain")
            if t.subresource not in ("", "status") or (t.subresource == "status" and not t.resource.has_status):
                raise _not_found_path()  # kinds without a status subresource (ConfigMaps...) have no /status
            obj = await self.api.get(t.resource, t.namespace, t.name, copy=False)
            return self._object(request, t.resource, obj)
        if method == "POST":
            body = await self._body(request)
            if t.name and t.subresource == "binding" and t.resource.storage_key == ("", "pods"):
                return _json(await self.api.bind(t.namespace, t.name, body), 201)
            if t.name and t.subresource == "eviction" and t.resource.storage_key == ("", "pods"):
                return _json(await self.api.evict(t.namespace, t.name, body), 201)
            if t.name and t.subresource == "token" and t.resource.storage_key == ("", "serviceaccounts"):
                await self.api.get(t.resource, t.namespace, t.name, copy=False)  # 404 for an unknown account
                return _json(reviews.token_request(t.namespace, t.name, body, self.api.now()), 201)
            if t.name:
                raise _method_not_allowed()
            if t.resource.kind in REVIEW_KINDS:
                return _json(await self._review(t.resource, body), 201)
            created = await self.api.create(t.resource, t.namespace, body, dry_run=dry_run, strict=strict,
                                            copy=False, manager=_manager(request))
            return self._object(request, t.resource, created, 201)
        if method == "PUT" and t.name:
            body = await self._body(request)
            updated = await self.api.update(t.resource, t.namespace, t.name, body, subresource=t.subresource,
                                            dry_run=dry_run, strict=strict, copy=False, manager=_manager(request))
            return self._object(request, t.resource, updated)
        if method == "PATCH" and t.name:
            content_type = request.content_type
            patch = await self._body(request)
            force = _truthy(q.get("force"))
            if content_type == PATCH_APPLY:
                applied, by_create = await self.api.apply(
                    t.resource, t.namespace, t.name, patch, manager=q.get("fieldManager", ""), force=force,
                    subresource=t.subresource, dry_run=dry_run, strict=strict, copy=False)
                return self._object(request, t.resource, applied, 201 if by_create else 200)
            if q.get("force") is not None:
                raise applying.patch_options_error("force", CAUSE_FORBIDDEN, "may not be specified for non-apply patch")
            patched = await self.api.patch(t.resource, t.namespace, t.name, content_type, patch,
                                           subresource=t.subresource, dry_run=dry_run, strict=strict,
                                           copy=False, manager=_manager(request))
            return self._object(request, t.resource, patched)
        if method == "DELETE":
            return await self._delete(request, t, dry_run)
        raise _method_not_allowed()

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if len(raw) > MAX_REQUEST_BODY_BYTES:
            raise request_entity_too_large()
        if not raw:
            return {}
        if raw.startswith(protobuf.MAGIC):
            try:
                return protobuf.decode(raw)
            except ProtobufError as e:
                raise ApiError(415, UNSUPPORTED_MEDIA_TYPE, str(e)) from None
        try:
            return json.loads(raw)
        except ValueError:
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError:
                raise bad_request("the body of the request was in an unknown format") from None

    def _wants_table(self, request: web.Request) -> bool:
        accept = request.headers.get("Accept", "")
        return "as=Table" in accept

    def _object(self, request: web.Request, r: ResourceType, obj: dict[str, Any], status: int = 200) -> web.Response:
        if self._wants_table(request):
            maker = TableMaker(r)
            include = request.query.get("includeObject", "Metadata")
            return _json(maker.table([obj], self.api.now(), include,
                                     {"resourceVersion": obj["metadata"].get("resourceVersion", "")}), status)
        return _json(obj, status)

    def _list_options(self, request: web.Request) -> ListOptions:
        q = request.query
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise bad_request(f"invalid limit: {q.get('limit')!r}") from None
        return ListOptions(q.get("labelSelector", ""), q.get("fieldSelector", ""), limit, q.get("continue", ""),
                           q.get("resourceVersion", ""))

    async def _list(self, request: web.Request, t: Target) -> web.Response:
        result = await self.api.list_objects(t.resource, t.namespace or None, self._list_options(request), copy=False)
        if self._wants_table(request):
            include = request.query.get("includeObject", "Metadata")
            return _json(TableMaker(t.resource).table(result["items"], self.api.now(), include, result["metadata"]))
        return _json(result)

    async def _delete(self, request: web.Request, t: Target, dry_run: bool) -> web.Response:
        body = await self._body(request)
        options: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
        policy = request.query.get("propagationPolicy") or options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = POLICY_ORPHAN if options.get("orphanDependents") else POLICY_BACKGROUND
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        if not t.name:
            return await self._delete_collection(request, t, policy, dry_run)
        result = await self.api.delete(t.resource, t.namespace, t.name, propagation=policy,
                                       preconditions=options.get("preconditions"), dry_run=dry_run, copy=False)
        still_there = self.api.store.get(t.resource.storage_key, (t.namespace, t.name)) is not None
        # 200 with the object even when finalizers hold it; kube-apiserver answers 202 only to the old
        # orphanDependents=false option, and keeps that for compatibility
        accepted = still_there and not dry_run and options.get("orphanDependents") is False
        return _json(result, 202 if accepted else 200)

    async def _delete_collection(self, request: web.Request, t: Target, policy: str | None,
                                 dry_run: bool) -> web.Response:
        opts = self._list_options(request)
        listed = await self.api.list_objects(t.resource, t.namespace or None, ListOptions(opts.label_selector,
                                                                                   opts.field_selector), copy=False)
        items = []
        for obj in listed["items"]:
            meta = obj["metadata"]
            try:
                items.append(await self.api.delete(t.resource, meta.get("namespace", ""), meta["name"],
                                                   propagation=policy, dry_run=dry_run, copy=False))
            except ApiError as e:
                if e.code != 404:
                    raise
        return _json({**listed, "items": items})

    # ---------------------------------------------------------------- watch

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        watch = self.api.watch(t.resource, t.namespace or None, resource_version=q.get("resourceVersion", ""),
                               label_selector=q.get("labelSelector", ""), field_selector=q.get("fieldSelector", ""),
                               send_initial_events=_truthy(q.get("sendInitialEvents")))
        self._watches.add(watch)
        try:
            return await self._stream(request, t, watch)
        finally:
            watch.close()
            self._watches.discard(watch)

    async def _stream(self, request: web.Request, t: Target, watch: Watch) -> web.StreamResponse:
        """Write events as JSON lines until timeoutSeconds, the client leaves or the watch ends."""
        q = request.query
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else 1800.0
        deadline = time.monotonic() + timeout
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        table = TableMaker(t.resource) if self._wants_table(request) else None
        include = q.get("includeObject", "Metadata")
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON,
                                                           "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        next_bookmark = time.monotonic() + self.bookmark_interval
        first_table = True
        while True:
            now = time.monotonic()
            if now >= deadline or request.transport is None or request.transport.is_closing():
                break
            wait = min(deadline, next_bookmark if bookmarks else deadline, now + 1.0) - now
            event = await watch.next(timeout=max(wait, 0.0))
            if event is None:
                if watch.closed:
                    break
                if bookmarks and time.monotonic() >= next_bookmark and watch.pending() == 0:
                    event = watch.bookmark(t.resource.kind, t.resource.group_version, self.api.store.revision)
                    next_bookmark = time.monotonic() + self.bookmark_interval
                else:
                    continue
            # Everything already queued goes out in one write: far fewer syscalls under load.
            batch = [event]
            while watch.pending():
                more = await watch.next(timeout=0)
                if more is None:
                    break
                batch.append(more)
            chunk = []
            for item in batch:
                if table is not None and item["type"] not in (ERROR, BOOKMARK):
                    item = {"type": item["type"], "object": table.table(
                        [item["object"]], self.api.now(), include,
                        {"resourceVersion": item["object"]["metadata"].get("resourceVersion", "")},
                        with_columns=first_table)}
                    first_table = False
                chunk.append(_DUMPS(item).encode())
            try:
                await response.write(b"\n".join(chunk) + b"\n")
            except (ConnectionResetError, RuntimeError):
                break
        if watch.dropped and request.transport is not None:
            request.transport.abort()  # an injected fault: no final chunk, the client sees a broken stream
            return response
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response
