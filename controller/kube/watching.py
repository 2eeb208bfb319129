"""Watches that feed the cache: the watched resources, a priming list, kopf event handlers.

`prime` lists every watched resource once at start (so the first admission cycle sees the whole
cluster, admitted Workloads included; the primed state is then frozen out of the garbage
collector's full passes); a resource it may not list (403) or that is not served (404: a CRD not
installed) is logged at WARNING with the fix and listed again until it works; `register_watches`
adds one `@kopf.on.event` handler per resource to a kopf registry. Both go through the operator's
`EventRouter` (controller.kube.routing): the cache takes each object, and the loops its kind
concerns are woken.
Event handlers write nothing on the objects (no kopf annotations or finalizers), and kopf is told
to keep no diff base (`NoDiffBaseStorage`).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from controller.api import constants as c
from controller.cache.cluster import KIND_NAMESPACE, KIND_NODE, KIND_POD, KIND_PRIORITY_CLASS
from controller.core.jobs.integrations import INTEGRATIONS
from controller.kube.api import ApiError, KubeApi, retrying
from controller.kube.routing import EventRouter

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
normal, so priming skips them (kopf watches them once the CRD appears) instead of waiting."""

PRIME_ATTEMPTS = 10
"""Tries per resource when priming (doubling from 0.05 s: about 50 s in all) before giving up."""
BLOCKED_RETRY_S = 2.0
"""How often a resource that could not be listed (403, 404) is listed again while priming waits."""


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


async def prime(router: EventRouter, api: KubeApi) -> None:
    """List every watched resource into the cache (each object routed as a change)."""
    cache = router.cache
    listed = 0
    for kind, (group, version, plural) in RESOURCES.items():
        resource = (_api_version(group, version), plural)
        objects = await (_list_if_served(api, resource) if kind in OPTIONAL_KINDS else _list_once_allowed(api, resource))
        for obj in objects:
            if router.applied(kind, {**obj, "kind": kind}):
                listed += 1
    # A refused (malformed) object is refused again when kopf replays it: not counted as primed.
    cache.primed = cache.stale_events + listed
    # What was just primed (every node's view, the topology trees built from them) lives as long as
    # the process: moved out of the collector's reach, so its full passes stop walking it. At
    # 10,000 nodes each such pass took 0.3-0.6 s, several times in a burst of admissions.
    gc.freeze()


async def _list_once_allowed(api: KubeApi, resource: tuple[str, str]) -> list[dict[str, Any]]:
    """Every object of `resource`; while the API refuses the list for a reason only its
    administrator can remove (see `blocking_problem`), say so once and try again."""
    reported: str | None = None
    while True:
        try:
            # A real apiserver answers 429 "storage is (re)initializing" for a while after a CRD appears.
            objects = await retrying(functools.partial(api.list, resource), attempts=PRIME_ATTEMPTS)
        except ApiError as e:
            problem = blocking_problem(resource, e)
            if problem is None:
                raise
            if problem != reported:
                log.warning("tasq cannot start, so it does not report ready: %s", problem)
                reported = problem
            await asyncio.sleep(BLOCKED_RETRY_S)
            continue
        if reported is not None:
            log.warning("%s: listed now; tasq goes on starting", _plural(resource))
        return objects


async def _list_if_served(api: KubeApi, resource: tuple[str, str]) -> list[dict[str, Any]]:
    """Every object of an optional integrated kind's resource; none, said once at the default level,
    when the API server does not serve it (its project's CRD is not installed)."""
    try:
        return await retrying(functools.partial(api.list, resource), attempts=PRIME_ATTEMPTS)
    except ApiError as e:
        if not e.not_found:
            return await _list_once_allowed(api, resource)
    log.info("%s is not served (its CRD is not installed): none managed until it appears", _plural(resource))
    return []


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


def apply_event(router: EventRouter, kind: str, event_type: str | None, obj: Mapping[str, Any]) -> None:
    """One watch event into the cache through the router (kopf's initial listing has no type: an ADDED)."""
    obj = {**obj, "kind": kind}
    cache = router.cache
    if event_type == "DELETED":
        router.deleted(kind, obj)
    elif not router.applied(kind, obj) and not router.refused(kind, obj) and cache.stale_events == cache.primed:
        # kopf has replayed its own initial listing (each object one the cache had): the state kopf
        # keeps per object lives as long as they do, frozen like the primed cache.
        gc.freeze()


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """kopf's diff-base storage for an operator with event handlers only: no essence kept.

    kopf builds every event's "essence" (a deep copy of the object without system fields, cleared
    of its progress annotations) to diff it for change handlers, even when there are none: at
    10,000 nodes and 1,000 arriving Jobs that was about a third of kopf's per-event time. tasq
    registers only `on.event` handlers (plus webhooks), which never read it, so the essence is an
    empty one, nothing is read from or stored on the objects. A create/update/resume/field handler
    added to the same registry would need kopf's default storage back.
    """

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        del body, extra_fields
        return {}

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        del body
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        del body, patch, essence


_OPTIONAL_GROUPS = frozenset(RESOURCES[kind][0] for kind in OPTIONAL_KINDS)
_KOPF_UNRESOLVED = "Unresolved resources cannot be served"


class _OptionalKindsUnresolved(logging.Filter):
    """Drops kopf's warning when only optional integrated kinds lack their CRD: priming already said
    so at INFO (`_list_if_served`), and most clusters have no JobSet, so it is no problem to warn of."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(_KOPF_UNRESOLVED):
            return True
        groups = set(re.findall(r"group='([^']*)'", message))
        return not groups or not groups <= _OPTIONAL_GROUPS


def register_watches(registry: kopf.OperatorRegistry, router: EventRouter) -> None:
    """One kopf event handler per watched resource, all feeding `router`; kopf keeps no diff base."""
    observation = logging.getLogger("kopf._core.reactor.observation")
    if not any(isinstance(f, _OptionalKindsUnresolved) for f in observation.filters):
        observation.addFilter(_OptionalKindsUnresolved())
    @kopf.on.startup(registry=registry)
    def keep_no_diff_base(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.diffbase_storage = NoDiffBaseStorage()

    for kind, (group, version, plural) in RESOURCES.items():
        async def handler(event: kopf.RawEvent, kind: str = kind, **_: Any) -> None:
            obj = event.get("object")
            if isinstance(obj, Mapping):
                apply_event(router, kind, event.get("type"), obj)

        kopf.on.event(group, version, plural, registry=registry, id=f"watch-{plural}")(handler)
