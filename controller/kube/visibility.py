"""Serving Kueue's visibility API: the pending workloads of a ClusterQueue or a LocalQueue, with positions.

`visibility_routes` adds `GET /apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/NAME/pendingworkloads`
and `.../namespaces/NS/localqueues/NAME/pendingworkloads` to the operator's HTTPS server (the one of
/metrics); each request is authenticated and authorized by the API server (TokenReview, then a
SubjectAccessReview for `get` on the `pendingworkloads` subresource; or, when kube-apiserver's aggregator
calls with its front-proxy client certificate, the user its X-Remote-User headers name) before the pure
controller.core.admission.pending_workloads answers from the cache. `queued_in` says which workloads
wait in which ClusterQueue. Called by controller.kube.metrics.serve_metrics.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from controller.cache.cluster import ClusterCache
from controller.core.admission.pending_workloads import (
    VISIBILITY_GROUP,
    VISIBILITY_VERSION,
    of_cluster_queue,
    of_local_queue,
    paging,
    pending_positions,
    summary,
    waits_for_quota,
)
from controller.core.admission.workloads import WorkloadInfo
from controller.core.request_headers import RemoteUser, RequestHeaderConfig, common_name, remote_user
from controller.kube.authorizing import AccessReviewer

log = logging.getLogger(__name__)

PREFIX = f"/apis/{VISIBILITY_GROUP}/{VISIBILITY_VERSION}"
SUBRESOURCE = "pendingworkloads"

Queued = Callable[[], list[tuple[WorkloadInfo, str]]]
"""The workloads waiting for quota, each with its ClusterQueue."""


def queued_in(cache: ClusterCache) -> list[tuple[WorkloadInfo, str]]:
    """Active, unfinished workloads holding no quota whose LocalQueue runs (no stopPolicy holds it:
    Kueue takes a stopped one out of its queues) and leads to an existing ClusterQueue."""
    out = []
    for entry in cache.workloads.values():
        if entry.fit is not None or not waits_for_quota(entry.obj):
            continue
        local = cache.local_queues.get(f"{entry.info.namespace}/{entry.info.queue_name}")
        if local is not None and not local.stopped and local.spec.cluster_queue in cache.cluster_queues:
            out.append((entry.info, local.spec.cluster_queue))
    return out


def asserted_user(request: web.Request, config: RequestHeaderConfig | None) -> RemoteUser | str | None:
    """The user the request's headers assert when its client certificate was verified against the
    request-header CA (or why it is refused); None without such a certificate, so the headers of a
    request without one are never read."""
    if config is None or request.transport is None:
        return None
    # getpeercert() is empty unless the handshake verified the certificate against the loaded CA.
    cert = request.transport.get_extra_info("peercert")
    if not cert:
        return None
    return remote_user(common_name(cert.get("subject", ())), request.headers.items(), config)


def status(code: int, reason: str, message: str) -> web.Response:
    """A refusal as a Kubernetes Status, as kubectl and client libraries read it."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return web.Response(status=code, text=json.dumps(body), content_type="application/json")


def visibility_routes(app: web.Application, queued: Queued, reviewer: AccessReviewer | None,
                      cluster_queue_exists: Callable[[str], bool],
                      local_queue_exists: Callable[[str, str], bool]) -> None:
    """Add the two pendingworkloads routes to `app`; with no `reviewer` (loopback, insecure) they are open."""

    async def answer(request: web.Request, attributes: dict[str, str], rows: Callable[[], list[Any]],
                     exists: bool, what: str) -> web.Response:
        if reviewer is not None:
            verdict = await reviewer.review_resource(request.headers.get("Authorization"), attributes,
                                                     asserted_user(request, reviewer.request_header))
            if not verdict.allowed:
                log.info("Visibility request from %s refused %d %s: %s", request.remote, verdict.status,
                         verdict.reason, verdict.message)
                return status(verdict.status, "Unauthorized" if verdict.status == 401 else verdict.reason,
                              verdict.message)
        page = paging(dict(request.query))
        if isinstance(page, str):
            return status(400, "BadRequest", page)
        if not exists:
            return status(404, "NotFound", f"{what} not found")
        return web.json_response(summary(rows(), page))

    def attributes(resource: str, name: str, namespace: str = "") -> dict[str, str]:
        out = {"verb": "get", "group": VISIBILITY_GROUP, "version": VISIBILITY_VERSION, "resource": resource,
               "subresource": SUBRESOURCE, "name": name}
        if namespace:
            out["namespace"] = namespace
        return out

    async def cluster_queue(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return await answer(request, attributes("clusterqueues", name),
                            lambda: of_cluster_queue(pending_positions(queued()), name),
                            cluster_queue_exists(name), f'clusterqueues.{VISIBILITY_GROUP} "{name}"')

    async def local_queue(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        return await answer(request, attributes("localqueues", name, namespace),
                            lambda: of_local_queue(pending_positions(queued()), namespace, name),
                            local_queue_exists(namespace, name),
                            f'localqueues.{VISIBILITY_GROUP} "{name}" in namespace "{namespace}"')

    app.router.add_get(f"{PREFIX}/clusterqueues/{{name}}/{SUBRESOURCE}", cluster_queue, allow_head=False)
    app.router.add_get(f"{PREFIX}/namespaces/{{namespace}}/localqueues/{{name}}/{SUBRESOURCE}", local_queue,
                       allow_head=False)


def cache_routes(app: web.Application, reviewer: AccessReviewer | None, *, cache: ClusterCache) -> None:
    """`visibility_routes` answered from the operator's cache."""
    visibility_routes(app, lambda: queued_in(cache), reviewer, lambda name: name in cache.cluster_queues,
                      lambda ns, name: f"{ns}/{name}" in cache.local_queues)
