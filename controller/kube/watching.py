"""Watches that feed the cache: the watched resources, a priming list, one stream per resource.

`prime` lists every watched resource once at start (page by page, each page applied as it comes; so
the first admission cycle sees the whole cluster, admitted Workloads included; each page's objects
are frozen out of the garbage collector's full passes, controller.kube.collecting) and returns each
list's resourceVersion; a resource it may not list (403) or that is not served (404: a CRD not
installed) is logged at WARNING with the fix and listed again until it works. `watch_streams` then
makes one `WatchStream` (controller.kube.streaming) per resource, each watching on from its priming
version. Both go through the operator's `EventRouter`
(controller.kube.routing, `apply_event`): the cache takes each object, and the loops its kind
concerns are woken. Nothing is written on the watched objects.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from collections.abc import Callable, Mapping
from typing import Any

from controller.api import constants as c
from controller.api.meta import object_key
from controller.cache.cluster import KIND_NAMESPACE, KIND_NODE, KIND_POD, KIND_PRIORITY_CLASS
from controller.core.jobs.integrations import INTEGRATIONS
from controller.kube import collecting
from controller.kube.api import ApiError, retrying
from controller.kube.routing import EventRouter
from controller.kube.streaming import Sleep, WatchSource, WatchStream

log = logging.getLogger(__name__)

# Kind -> (group, version, plural), in the order `prime` lists them: configuration first, then
# nodes and pods, then Workloads (restored against them), then the integrated kinds (Jobs).
RESOURCES: dict[str, tuple[str, str, str]] = {
    KIND_NAMESPACE: ("", "v1", "namespaces"),
    KIND_PRIORITY_CLASS: ("scheduling.k8s.io", "v1", "priorityclasses"),
    c.KIND_TOPOLOGY: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_TOPOLOGIES),
    c.KIND_RESOURCE_FLAVOR: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_RESOURCE_FLAVORS),
    c.KIND_WORKLOAD_PRIORITY_CLASS: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_WORKLOAD_PRIORITY_CLASSES),
    c.KIND_COHORT: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_COHORTS),
    c.KIND_CLUSTER_QUEUE: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_CLUSTER_QUEUES),
    c.KIND_LOCAL_QUEUE: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_LOCAL_QUEUES),
    KIND_NODE: ("", "v1", "nodes"),
    KIND_POD: ("", "v1", "pods"),
    c.KIND_WORKLOAD: (c.GROUP, c.VERSION_V1BETA2, c.PLURAL_WORKLOADS),
    **{job.gvk.kind: (job.gvk.group, job.gvk.version, job.gvk.plural) for job in INTEGRATIONS},
}

OPTIONAL_KINDS: frozenset[str] = frozenset(job.gvk.kind for job in INTEGRATIONS if job.gvk.group not in ("", "batch"))
"""Integrated kinds served by a CRD of their own project (JobSet): a cluster without the CRD is
normal, so priming skips them (their stream lists them once the CRD appears) instead of waiting."""

Take = Callable[[list[dict[str, Any]], bool], None]
"""What `list_pages` hands each page to: its objects, and whether it is the list's first page."""

PRIME_ATTEMPTS = 10
"""Tries per resource when priming (doubling from 0.05 s: about 50 s in all) before giving up."""
BLOCKED_RETRY_S = 2.0
"""How often a resource that could not be listed (403, 404) is listed again while priming waits."""


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


async def prime(router: EventRouter, source: WatchSource, blocked: dict[str, str] | None = None,
                ) -> dict[str, str | None]:
    """List every watched resource into the cache (each object routed as a change, page by page: one
    decoded page in memory at a time); kind -> the list's resourceVersion to watch from (None: an
    optional kind not served, its stream lists it). While a list is refused for a reason only an
    administrator can remove, `blocked` holds it under the resource's plural (what /readyz says),
    until the list succeeds."""
    blocked = {} if blocked is None else blocked
    cache = router.cache
    listed = 0
    versions: dict[str, str | None] = {}
    for kind, (group, version, plural) in RESOURCES.items():
        resource = (_api_version(group, version), plural)
        seen: set[str] = set()

        def take(objects: list[dict[str, Any]], first: bool, kind: str = kind, seen: set[str] = seen) -> None:
            nonlocal listed
            if first:  # a list (re)starts: only what this attempt lists counts as seen
                seen.clear()
            for obj in objects:
                seen.add(object_key(obj))
                if router.applied(kind, {**obj, "kind": kind}):
                    listed += 1
            # Each page's objects live as long as the process: out of the full passes' walk at once.
            collecting.freeze_young()

        if kind in OPTIONAL_KINDS:
            versions[kind] = await _list_if_served(source, resource, blocked, take)
        else:
            versions[kind] = await _list_once_allowed(source, resource, blocked, take)
        # A list retried after a failed page may have applied objects its successful attempt lacks.
        for key in cache.keys_of(kind) - seen:
            namespace, _, name = key.rpartition("/")
            router.deleted(kind, {"kind": kind, "metadata": {"name": name, **({"namespace": namespace}
                                                                             if namespace else {})}})
    cache.primed = cache.stale_events + listed
    # What was just primed (every node's view, the topology trees built from them) lives as long as
    # the process: moved out of the collector's reach, so its full passes stop walking it. At
    # 10,000 nodes each such pass took 0.3-0.6 s, several times in a burst of admissions. The
    # decoded pages are freed by now: their pages go back to the system.
    gc.freeze()
    collecting.release_free_memory()
    return versions


async def list_pages(source: WatchSource, resource: tuple[str, str],
                     take: Take) -> str:
    """Every object of `resource`, page after page, each page handed to `take` as it arrives (with
    whether it is the first); the list's resourceVersion."""
    token, version = "", ""
    while True:
        page = await source.list_page(resource, token)
        take(page.items, not token)
        version = page.resource_version or version
        token = page.next_token
        del page
        if not token:
            return version


async def _list_once_allowed(source: WatchSource, resource: tuple[str, str], blocked: dict[str, str],
                             take: Take) -> str:
    """Every object of `resource`; while the API refuses the list for a reason only its
    administrator can remove (see `blocking_problem`), say so once, keep it in `blocked` and try
    again."""
    reported: str | None = None
    while True:
        try:
            # A real apiserver answers 429 "storage is (re)initializing" for a while after a CRD appears.
            answer = await retrying(functools.partial(list_pages, source, resource, take), attempts=PRIME_ATTEMPTS)
        except ApiError as e:
            problem = blocking_problem(resource, e)
            if problem is None:
                raise
            if problem != reported:
                log.warning("tasq cannot start, so it does not report ready: %s", problem)
                reported = problem
            blocked[resource[1]] = problem
            await asyncio.sleep(BLOCKED_RETRY_S)
            continue
        blocked.pop(resource[1], None)
        if reported is not None:
            log.warning("%s: listed now; tasq goes on starting", _plural(resource))
        return answer


async def _list_if_served(source: WatchSource, resource: tuple[str, str], blocked: dict[str, str],
                          take: Take) -> str | None:
    """Every object of an optional integrated kind's resource; None, said once at the default level,
    when the API server does not serve it (its project's CRD is not installed)."""
    try:
        return await retrying(functools.partial(list_pages, source, resource, take), attempts=PRIME_ATTEMPTS)
    except ApiError as e:
        if not e.not_found:
            return await _list_once_allowed(source, resource, blocked, take)
    log.info("%s is not served (its CRD is not installed): none managed until it appears", _plural(resource))
    return None


def blocking_problem(resource: tuple[str, str], e: ApiError) -> str | None:
    """What a refused list of `resource` means and how to fix it, for a 404 (not served: tasq's CRDs
    not installed) or a 403 (RBAC); None for any other error."""
    api_version = resource[0]
    if e.not_found and api_version.startswith(f"{c.GROUP}/"):
        return (f"the API server does not serve {_plural(resource)}: tasq's CRDs are not installed; install "
                f"them with `kubectl apply --server-side -k config/crd` (or `-f crds/`)")
    if e.not_found:
        return f"the API server does not serve {_plural(resource)} ({api_version}): {e.message}"
    if e.forbidden:
        return (f"forbidden to list {_plural(resource)} ({e.message}); grant tasq's ClusterRole "
                f"(config/rbac/role.yaml) to its identity")
    return None


def _plural(resource: tuple[str, str]) -> str:
    """`plural.group` as kubectl names a resource (`plural` alone for the core group)."""
    api_version, plural = resource
    group = api_version.rpartition("/")[0]
    return f"{plural}.{group}" if group else plural


WATCHED_NEWS = "new"
"""A watch event carrying a version the cache did not hold."""
WATCHED_ECHO = "already cached"
"""A watch event that changed nothing in the cache: a version it already held (the echo of one of
tasq's own writes, whose answer it took, or an object a relist saw again), a Node whose view did not
change (a status beat), or an object refused as malformed."""
WATCHED_DELETED = "deleted"


def apply_event(router: EventRouter, kind: str, event_type: str | None, obj: Mapping[str, Any]) -> None:
    """One watch event into the cache through the router (a relisted object comes as ADDED)."""
    obj = {**obj, "kind": kind}
    if event_type == "DELETED":
        router.deleted(kind, obj)
        router.watched[(kind, WATCHED_DELETED)] += 1
    else:
        router.watched[(kind, WATCHED_NEWS if router.applied(kind, obj) else WATCHED_ECHO)] += 1


def watch_streams(router: EventRouter, source: WatchSource, *, sleep: Sleep = asyncio.sleep) -> list[WatchStream]:
    """One stream per watched resource (`WatchStream.run` with the version `prime` returned for it)."""
    return [WatchStream(kind, (_api_version(group, version), plural), source, router, apply=apply_event,
                        problem_of=blocking_problem, optional=kind in OPTIONAL_KINDS, sleep=sleep)
            for kind, (group, version, plural) in RESOURCES.items()]
