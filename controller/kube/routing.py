"""The one route from a changed object to the loops it concerns, for watch events and our own writes.

`WAKES` says, for each watched kind, which loops a change of that kind wakes, as kube-scheduler's
plugins register the cluster events that concern them. `EventRouter.applied(kind, obj)` puts an
object into the cache (a watch event, or what the API answered one of our writes with) and, when
the cache did not already hold that version, wakes those loops; an object the cache refuses as
malformed wakes nobody and is reported (logged at WARNING, naming each field path); `deleted` does
the same for a deletion. A Workload or integrated Job new to the cache is also told to `arrived`
(controller.kube.arrivals), so what only explains waits out a burst of them. A pod change wakes the admission loop only when it changes what the pod
takes from its node (`pod_usage`): admission reads pods through that alone, and most pod events
(created gated, ungated, Running, Ready) leave it as it was. The watch handlers (controller.kube.watching) and every loop that writes use it; the
Operator (controller.kube.operating) builds it. docs/architecture.md says the same in words.
"""

from __future__ import annotations

import collections
import enum
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from controller.api import constants as c
from controller.api.meta import object_key
from controller.api.views import PodView
from controller.cache.cluster import KIND_NAMESPACE, KIND_NODE, KIND_POD, KIND_PRIORITY_CLASS, ClusterCache
from controller.core.jobs.integrations import INTEGRATIONS

log = logging.getLogger(__name__)

class Loop(enum.Enum):
    """The operator's loops that a change can wake."""

    ADMISSION = "admission loop"
    """Runs an admission cycle, then refreshes the ClusterQueue and LocalQueue statuses."""
    JOBS = "Job reconciler"
    """Reconciles the integrated object (a Job, a JobSet) or pod group: the one changed, or the one
    owning the changed Workload or pod."""
    UNGATER = "TopologyUngater"
    """Looks at the Workload's pods: the Workload changed, or the Workload owning the changed pod."""
    NODE_FAILURES = "node-failure handler"
    """Looks at the Workload's assigned hosts: the Workload changed, or a Node its assignment names."""


WAKES: Mapping[str, frozenset[Loop]] = MappingProxyType({
    # Admission reads quotas (and the tree of cohorts), flavors, topologies, namespaces' labels and
    # node capacity.
    c.KIND_CLUSTER_QUEUE: frozenset({Loop.ADMISSION}),
    c.KIND_COHORT: frozenset({Loop.ADMISSION}),
    c.KIND_LOCAL_QUEUE: frozenset({Loop.ADMISSION}),
    c.KIND_RESOURCE_FLAVOR: frozenset({Loop.ADMISSION}),
    c.KIND_TOPOLOGY: frozenset({Loop.ADMISSION}),
    KIND_NAMESPACE: frozenset({Loop.ADMISSION}),
    # A Node is capacity (admission) and, not Ready, deleted or tainted, a failed host of the
    # Workloads placed on it (the node-failure handler).
    KIND_NODE: frozenset({Loop.ADMISSION, Loop.NODE_FAILURES}),
    # A pod takes node capacity (admission) and may wait for its gate to go (the ungater); a Job's
    # pods must be gone before it gets a Workload or is started (the reconciler, for such Jobs only).
    KIND_POD: frozenset({Loop.ADMISSION, Loop.JOBS, Loop.UNGATER}),
    # A Workload is what admission decides about, what its Job follows and what its pods are placed by.
    c.KIND_WORKLOAD: frozenset({Loop.ADMISSION, Loop.JOBS, Loop.UNGATER, Loop.NODE_FAILURES}),
    # An integrated kind's object (a Job) is the reconciler's alone: admission reads its Workload, never it.
    **{job.gvk.kind: frozenset({Loop.JOBS}) for job in INTEGRATIONS},
    # Read only when the reconciler creates a Workload from a Job (its priority): nothing to wake. A
    # Job waiting for a missing class is reconciled again by its next change (Kueue's behaviour).
    KIND_PRIORITY_CLASS: frozenset(),
    c.KIND_WORKLOAD_PRIORITY_CLASS: frozenset(),
})
"""Kind -> the loops a change of it wakes. A kind missing here is not watched."""

PodUsage = tuple[str, str, str, tuple[tuple[str, int], ...], str | None]
"""What a pod takes from its node, as the cache's Usage counts it: (uid, namespace/name, node,
requests, its Workload by the topology-workload annotation)."""


def pod_usage(view: PodView | None) -> PodUsage | None:
    """What `view` takes from its node as the cache's Usage counts it (`add_bound_pod`: a pod bound
    to a node and not terminated, converting its Workload's reservation); None when it takes
    nothing (not bound, terminated, or not held). Two versions of a pod with equal values leave
    the Usage, and so every admission decision, as they were."""
    if view is None or not view.node_name or view.terminal:
        return None
    return (view.uid, view.key, view.node_name, tuple(sorted(view.requests.items())),
            view.annotations.get(c.ANNOTATION_TOPOLOGY_WORKLOAD))


Waker = Callable[[str, Mapping[str, Any]], None]
"""Wakes one loop for a changed object: (kind, object)."""

Applied = Callable[[str, Mapping[str, Any]], bool]
"""`EventRouter.applied` as the loops see it: (kind, object the API answered a write with) -> True
when it was news to the cache. A loop built without a router is given the cache's `upsert`."""


class EventRouter:
    """See the module docstring. `wakers` has one Waker per Loop."""

    def __init__(self, cache: ClusterCache, wakers: Mapping[Loop, Waker],
                 arrived: Callable[[], None] | None = None) -> None:
        missing = [loop.value for loop in Loop if loop not in wakers]
        if missing:
            raise ValueError(f"EventRouter: no waker for {', '.join(missing)}")
        self.cache = cache
        self.wakers = dict(wakers)
        self.arrived = arrived
        """Called when a Workload or an integrated Job enters the cache (controller.kube.arrivals)."""
        self.watched: collections.Counter[tuple[str, str]] = collections.Counter()
        """Watch events so far by (kind, outcome): counted by the watch handlers
        (controller.kube.watching), logged when the operator stops."""

    def applied(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """`obj` as the API has it (a watch event, or the answer to our own write) into the cache,
        waking the loops `WAKES` lists for `kind`; False, waking nobody, when the cache already
        held this version or a newer one (the watch echoing a write we applied, a stale answer) or
        refused it as malformed (then why is logged: see `refused`). A pod whose `pod_usage` did not
        change wakes the others but not the admission loop."""
        before = pod_usage(self.cache.pods.get(object_key(obj))) if kind == KIND_POD else None
        arrived = self.arrived if kind in ARRIVING and not self.cache.holds(kind, object_key(obj)) else None
        if self.cache.upsert(kind, obj):
            if arrived is not None:
                arrived()
            same_usage = kind == KIND_POD and pod_usage(self.cache.pods.get(object_key(obj))) == before
            self.wake(kind, obj, _NOT_ADMISSION if same_usage else _EVERY_LOOP)
            return True
        if self.refused(kind, obj):
            log.warning("%s", self.cache.malformed[(kind, object_key(obj))].message)
        return False

    def refused(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """Whether the cache refused this very version of `obj` as malformed (keeping the previous
        one), as opposed to skipping a version it already held."""
        refusal = self.cache.malformed.get((kind, object_key(obj)))
        return refusal is not None and refusal.version == str((obj.get("metadata") or {}).get("resourceVersion") or "")

    def deleted(self, kind: str, obj: Mapping[str, Any]) -> None:
        """`obj` is gone: out of the cache, and the loops `WAKES` lists for `kind` woken (for a pod
        that took nothing from its node, all but the admission loop)."""
        took = kind == KIND_POD and pod_usage(self.cache.pods.get(object_key(obj))) is not None
        self.cache.delete(kind, obj)
        self.wake(kind, obj, _NOT_ADMISSION if kind == KIND_POD and not took else _EVERY_LOOP)

    def wake(self, kind: str, obj: Mapping[str, Any], among: frozenset[Loop] | None = None) -> None:
        """Wake the loops a change of `obj` (of `kind`) concerns (only those also in `among`, when
        given), without touching the cache."""
        concerned = WAKES[kind] if among is None else WAKES[kind] & among
        for loop in Loop:  # in the enum's order, so a test sees the same order every time
            if loop in concerned:
                self.wakers[loop](kind, obj)


ARRIVING: frozenset[str] = frozenset((c.KIND_WORKLOAD, *(job.gvk.kind for job in INTEGRATIONS)))
"""Kinds whose new objects are arrivals (controller.kube.arrivals): what a user creates in a burst."""
_EVERY_LOOP: frozenset[Loop] = frozenset(Loop)
_NOT_ADMISSION: frozenset[Loop] = frozenset(Loop) - {Loop.ADMISSION}
