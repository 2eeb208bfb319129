"""Writes the `kueue.x-k8s.io/resource-in-use` finalizer of ResourceFlavors and ClusterQueues.

`write_finalizers` takes the changes `controller.core.admission.resource_in_use` decides from the
cache and merge-patches each object's finalizers at the resourceVersion they were decided on (a 409
or 404 means a newer version or the deletion is on its way as an event, which decides again). Called
by the admission loop (controller.kube.admitting) after each cycle, leader only.
"""

from __future__ import annotations

import logging

from controller.api import constants as c
from controller.cache.cluster import ClusterCache
from controller.core.admission.resource_in_use import finalizer_changes
from controller.kube.api import CLUSTER_QUEUES, RESOURCE_FLAVORS, ApiError, KubeApi
from controller.kube.requeuing import log_failure
from controller.kube.routing import Applied

log = logging.getLogger(__name__)

RETRY_S = 1.0
"""When a failed finalizer write is tried again: with the loop's next cycle, about this soon."""


def queues_holding_quota(cache: ClusterCache) -> set[str]:
    """ClusterQueues with a Workload that holds quota in them: reserved by this process, or an
    admission recorded in its status and not finished (restored after a restart)."""
    out: set[str] = set()
    for entry in cache.workloads.values():
        if entry.fit is not None:
            out.add(entry.fit.cluster_queue)
        elif entry.admission is not None and not entry.finished:
            out.add(entry.admission.cluster_queue)
    return out


async def write_finalizers(api: KubeApi, cache: ClusterCache, applied: Applied) -> bool:
    """Every finalizer change due now, each as one merge patch; False when one failed otherwise
    than by a newer version (logged; the next cycle decides again)."""
    ok = True
    for change in finalizer_changes(cache.flavors, cache.cluster_queues, queues_holding_quota(cache)):
        patch = {"metadata": {"finalizers": list(change.finalizers), "resourceVersion": change.resource_version}}
        try:
            if change.kind == c.KIND_RESOURCE_FLAVOR:
                written = await api.merge_patch(RESOURCE_FLAVORS, None, change.name, patch)
            else:
                written = await api.merge_patch(CLUSTER_QUEUES, None, change.name, patch)
        except ApiError as e:
            if e.conflict or e.not_found:
                continue
            ok = False
            log_failure(log, f"{change.kind} {change.name}: finalizer {c.FINALIZER_RESOURCE_IN_USE}", e, RETRY_S)
            continue
        except Exception as e:  # no answer, or a bug: the loop must go on
            ok = False
            log_failure(log, f"{change.kind} {change.name}: finalizer {c.FINALIZER_RESOURCE_IN_USE}", e, RETRY_S)
            continue
        if not change.add:
            log.info("%s %s is no longer in use: finalizer %s removed, its deletion completes", change.kind,
                     change.name, c.FINALIZER_RESOURCE_IN_USE)
        # With its last finalizer gone the object is deleted and the answer is its final state: the
        # cache learns of the deletion from the watch, and taking the answer could put it back after
        # that event (a ghost ClusterQueue would hold its flavors for ever).
        if change.add or change.finalizers:
            applied(change.kind, written)
    return ok
