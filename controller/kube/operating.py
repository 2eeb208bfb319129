"""The operator process: cache, watch streams, admission loop, job reconciler, ungater and
node-failure handler, beside one kopf operator.

`Operator(api_client, OperatorOptions(...))` wires them, every change routed to the loops it
concerns by one `EventRouter`; `run(stop)` primes the cache from the API, starts the loops (which
act only while `leading` is set) and one watch stream per watched resource (controller.kube.streaming),
and runs kopf (`run_kopf`: standalone, no posting of kopf's own Events) until `stop` is set. With
`admission`, the admission webhooks are served beside it on every replica, leader or not
(`serve_operator`; their queued-pod check reads this cache). Used by `serve_tasq` (`tasq run`,
`tasq dev`, `tasq demo`), the e2e tests and bench/operator.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import kopf
from kubernetes.aio import client

from controller.api import constants as c
from controller.api.configuration import TIMESTAMP_EVICTION, Configuration
from controller.api.features import FeatureGates
from controller.api.meta import object_key
from controller.api.views import owner_refs
from controller.cache.cluster import KIND_NODE, KIND_POD, ClusterCache, OwnerKey
from controller.core.topology.node_failures import NODE_FAILURE_DELAY
from controller.kube import collecting
from controller.kube.admitting import AdmissionLoop
from controller.kube.api import KubeApi
from controller.kube.arrivals import Arrivals
from controller.kube.embedding import connection_info, run_kopf
from controller.kube.events import EventRecorder
from controller.kube.evicting import Evictor
from controller.kube.job_reconciling import JobReconciler
from controller.kube.leading import LeaderElector
from controller.kube.metrics import BuildInfo, Endpoints, Metrics, serving_endpoints
from controller.kube.node_failing import NodeFailureHandler
from controller.kube.routing import EventRouter, Loop
from controller.kube.streaming import ApiWatchSource, WatchStream
from controller.kube.ungating import TopologyUngater
from controller.kube.visibility import cache_routes
from controller.kube.watching import prime, watch_streams
from controller.kube.webhooking import ReviewMemories, WebhookServer

log = logging.getLogger(__name__)

WEBHOOK_DRAIN_S = 1.0
"""How long a stopping replica keeps answering webhooks (each answer closing its connection)."""
EVENTS_FLUSH_S = 2.0
"""How long a stopping operator waits for the Events still being posted (some waited for a lull of
arrivals: controller.kube.arrivals)."""

SettingsHook = Callable[[kopf.OperatorSettings], None]


@dataclass(frozen=True)
class OperatorOptions:
    """How `serve_operator` (and `serve_tasq` above it) runs the operator. `elector`: a
    LeaderElector (always leading without one); `endpoints`: where /metrics and the probes are
    served (nothing by default); `build`: the version and commit the metrics report; `features`:
    Kueue's placement feature gates; `configuration`: Kueue's Configuration file as parsed
    (`tasq run --config`; waitForPodsReady off without one); `started` is called
    with the Operator once it is built (tests and `tasq dev` keep a handle on it)."""

    elector: LeaderElector | None = None
    endpoints: Endpoints = field(default_factory=Endpoints)
    build: BuildInfo | None = None
    """kueue_build_info's labels (`tasq run` passes the version and commit)."""
    features: FeatureGates = field(default_factory=FeatureGates)
    configuration: Configuration = field(default_factory=Configuration)
    started: Callable[[Operator], None] | None = None
    node_failure_delay: timedelta = NODE_FAILURE_DELAY
    """How long a not-Ready node of an admitted Workload waits before it is replaced (Kueue's 30 s)."""
    campaign_after: asyncio.Event | None = None
    """Lead (or campaign for the Lease) only once this is set: with local webhooks, once the CRDs'
    conversion points at this replica, so no write of an object still stored in an older version goes
    through a CRD that cannot convert it yet."""


class Operator:
    """See the module docstring. `leading` gates every write (set for ever without an elector).
    `router` is the one route of every change, watched or written by a loop, to the loops it concerns."""

    def __init__(self, api_client: client.ApiClient, options: OperatorOptions | None = None, *,
                 admission: WebhookServer | None = None) -> None:
        options = options if options is not None else OperatorOptions()
        self.api_client = api_client
        self.api = KubeApi(api_client)
        pods_ready = options.configuration.wait_for_pods_ready
        self.cache = ClusterCache(features=options.features, order_by_eviction=pods_ready is None
                                  or pods_ready.requeuing_strategy.timestamp == TIMESTAMP_EVICTION)
        self.arrivals = Arrivals()
        """New Workloads and Jobs: what only explains (pending statuses, Events) waits for their lull."""
        self.recorder = EventRecorder(self.api, arrivals=self.arrivals)
        self.metrics = Metrics(options.build)
        self.router = EventRouter(self.cache, {Loop.ADMISSION: self._wake_admission, Loop.JOBS: self._wake_jobs,
                                               Loop.UNGATER: self._wake_ungater,
                                               Loop.NODE_FAILURES: self._wake_node_failures},
                                  arrived=self.arrivals.arrived)
        self.evictor = Evictor(self.cache, self.api, self.recorder, self.router.applied, self.metrics)
        self.admission = AdmissionLoop(self.cache, self.api, self.recorder, metrics=self.metrics,
                                       applied=self.router.applied, evictor=self.evictor, pods_ready=pods_ready,
                                       arrivals=self.arrivals)
        self.jobs = JobReconciler(self.cache, self.api, self.recorder, applied=self.router.applied,
                                  evictor=self.evictor, pods_ready=pods_ready)
        self.node_failures = NodeFailureHandler(self.cache, self.api, self.recorder, self.router.applied,
                                                self.metrics, delay=options.node_failure_delay)
        if options.elector is not None:
            self.leading = options.elector.leading
        else:
            self.leading = asyncio.Event()
            if options.campaign_after is None:
                self.leading.set()
        if options.elector is not None:
            self.metrics.leading(self.leading.is_set)
        if admission is not None:
            admission.observe = self.metrics.webhook_answered
            self.metrics.certificate_watched("webhook", admission.tls.cert)
        self.ungater = TopologyUngater(self.api, self.cache.ungating_input, self.metrics,
                                       leader=self.leading)
        self.registry = kopf.OperatorRegistry()
        self.settings_hooks: list[SettingsHook] = []
        self.ready = asyncio.Event()
        self.admission_server = admission
        self.watch_source = ApiWatchSource(self.api)
        self.streams: list[WatchStream] = watch_streams(self.router, self.watch_source)
        self.priming_problems: dict[str, str] = {}
        """What refuses a priming list (resource plural -> the problem with its fix), until it succeeds."""
        self._register_login_and_settings()

    def _wake_admission(self, kind: str, obj: Mapping[str, Any]) -> None:
        del kind, obj
        self.admission.notify()

    def _wake_jobs(self, kind: str, obj: Mapping[str, Any]) -> None:
        """The changed integrated object (a Job), the one owning the changed Workload, or the one
        owning the changed pod while it waits for its pods to go (suspended, or with no Workload
        yet): its last pod's deletion may come after its status stopped counting it. A running
        object's pods wake nobody. A member of a composable kind (a plain pod tasq manages), or a
        Workload such members own, wakes its group (keyed by its Workload) instead."""
        for composable in self.jobs.composables.values():
            if kind == composable.gvk.kind and (group := composable.member_key(obj)) is not None:
                self.jobs.notify(group, composable.gvk.kind)
                return
            if kind == c.KIND_WORKLOAD and composable.owns_workload(owner_refs(obj)):
                self.jobs.notify(object_key(obj), composable.gvk.kind)
                return
        owner: OwnerKey | None
        if kind == KIND_POD:
            meta = obj.get("metadata") or {}
            owner = self.cache.owner_of_pod(str(meta.get("namespace", "")), meta.get("labels") or {}, owner_refs(obj))
            if owner is None:
                return
            job = self.cache.owners[owner[0]].get(owner[1])
            if job is None or not (self.jobs.adapters[owner[0]].is_suspended(job)
                                   or owner not in self.cache.workload_of):
                return
        elif kind == c.KIND_WORKLOAD:
            owner = self.cache.owner_of_workload_body(obj)
        else:
            owner = (kind, object_key(obj))
        if owner is not None:
            self.jobs.notify(owner[1], owner[0])

    def _wake_ungater(self, kind: str, obj: Mapping[str, Any]) -> None:
        """The changed Workload, or the Workload owning the changed pod."""
        if kind == KIND_POD:
            owner = self.cache.workload_of_pod(obj)
            if owner is not None:
                self.ungater.notify(*owner)
        else:
            meta = obj.get("metadata") or {}
            self.ungater.notify(str(meta.get("namespace", "")), str(meta.get("name", "")))

    def _wake_node_failures(self, kind: str, obj: Mapping[str, Any]) -> None:
        """The changed Workload, or every Workload placed on the changed Node."""
        if kind == KIND_NODE:
            self.node_failures.node_changed(obj)
        else:
            self.node_failures.workload_changed(obj)

    def _register_login_and_settings(self) -> None:
        @kopf.on.login(registry=self.registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(self.api_client)

        @kopf.on.startup(registry=self.registry)
        def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
            settings.posting.enabled = False
            for hook in self.settings_hooks:
                hook(settings)

    def watch_problems(self) -> list[str]:
        """What keeps priming or a watch stream from listing or watching its resource (403, a missing
        CRD)."""
        return [*self.priming_problems.values(),
                *(stream.problem for stream in self.streams if stream.problem is not None)]

    async def _prime_or_stop(self, stop: asyncio.Event) -> dict[str, str | None] | None:
        """Prime the cache: each resource's list version; None when `stop` came first (priming waits
        while a CRD is missing)."""
        priming = asyncio.create_task(prime(self.router, self.watch_source, self.priming_problems), name="tasq-prime")
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({priming, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not priming.done():
                priming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await priming
        if priming.cancelled():
            return None
        return priming.result()  # or its error, if it failed

    async def _drain_then_stop(self, stop: asyncio.Event, kopf_stop: asyncio.Event) -> None:
        """Stop kopf once `stop` is set; a replica serving webhooks first answers for WEBHOOK_DRAIN_S
        more, closing each connection it answers on, so the API server's kept-alive connections move
        to another replica rather than break mid-request during a rollout."""
        try:
            await stop.wait()
            self.arrivals.release()  # what waited for a lull is written while the rest stops
            if self.admission_server is not None:
                self.admission_server.draining = True
                await asyncio.sleep(WEBHOOK_DRAIN_S)
        finally:
            kopf_stop.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Prime, start the loops and kopf, and return once `stop` is set (everything stopped)."""
        collecting.install()
        versions = await self._prime_or_stop(stop)
        if versions is None:
            return
        tasks = [*(asyncio.create_task(stream.run(versions[stream.kind]), name=f"tasq-watch-{stream.resource[1]}")
                   for stream in self.streams),
                 asyncio.create_task(self.admission.run(self.leading), name="tasq-admission"),
                 asyncio.create_task(self.jobs.run(self.leading), name="tasq-jobs"),
                 asyncio.create_task(self.ungater.run(), name="tasq-ungater"),
                 asyncio.create_task(self.node_failures.run(self.leading), name="tasq-node-failures")]
        for kind, objects in self.cache.owners.items():
            for key in list(objects):
                self.jobs.notify(key, kind)
        for key in list(self.cache.group_pods):
            self.jobs.notify(key, KIND_POD)
        for key in list(self.cache.workloads):
            namespace, name = key.split("/", 1)
            self.ungater.notify(namespace, name)
            self.node_failures.notify(key)
        kopf_ready = asyncio.Event()
        kopf_stop = asyncio.Event()
        draining = asyncio.create_task(self._drain_then_stop(stop, kopf_stop), name="tasq-drain")
        kopf_task = asyncio.create_task(run_kopf(self.registry, kopf_stop, ready=kopf_ready,
                                                 memories=ReviewMemories(), signalled=stop), name="tasq-kopf")
        ready_wait = asyncio.create_task(kopf_ready.wait())
        await asyncio.wait({kopf_task, ready_wait}, return_when=asyncio.FIRST_COMPLETED)
        if kopf_ready.is_set():
            self.ready.set()
            log.info("ready: cache primed (%d nodes, %d Workloads), watching%s", len(self.cache.nodes),
                     len(self.cache.workloads), "" if self.leading.is_set() else "; standing by until it leads")
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({kopf_task, stopping}, return_when=asyncio.FIRST_COMPLETED)
            await kopf_task
        finally:
            stopping.cancel()  # kopf may end first (a crash): no waiter left behind
            ready_wait.cancel()
            draining.cancel()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.arrivals.release()
            if unsent := await self.recorder.flushed(EVENTS_FLUSH_S):
                log.warning("stopping with %d Event(s) not posted after %.0f s", unsent, EVENTS_FLUSH_S)
            log.info("watch events since start, by kind: %s", ", ".join(
                f"{kind} {outcome} {n}" for (kind, outcome), n in sorted(self.router.watched.items())) or "none")


async def _elect_until(elector: LeaderElector, stop: asyncio.Event) -> None:
    """Run `elector` until `stop` is set, then at once stop leading and release the Lease: the
    successor takes over while this process is still shutting kopf down."""
    electing = asyncio.create_task(elector.run())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({electing, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        electing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await electing


async def _campaign_when_allowed(operator: Operator, elector: LeaderElector | None, allowed: asyncio.Event | None,
                                 stop: asyncio.Event) -> None:
    """Once `allowed` is set (at once without it), run `elector` until `stop`, or, without an
    elector, lead from then on."""
    if allowed is not None:
        waiting = asyncio.create_task(allowed.wait())
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            stopping.cancel()
        if stop.is_set():
            return
        if elector is None:
            log.info("the CRDs' conversion points at this replica: leading")
    if elector is None:
        operator.leading.set()
        return
    await _elect_until(elector, stop)


def not_ready(operator: Operator, elector: LeaderElector | None) -> list[str]:
    """What /readyz reports: why this replica cannot act, one reason per line (none when it can):
    the cache is not primed yet, a watch stream cannot list or watch, the webhooks (if served) are
    down, or the replica neither leads nor stands by (reads a Lease held by another live replica)."""
    reasons: list[str] = []
    if not operator.ready.is_set():
        reasons.append("the cache is not primed yet (the first list of the watched resources has not completed)")
    reasons.extend(operator.watch_problems())
    webhooks = operator.admission_server
    if webhooks is not None and webhooks.failure is not None:
        reasons.append(f"admission webhooks are not served: {webhooks.failure}")
    if elector is not None and (why := elector.not_acting) is not None:
        reasons.append(why)
    return reasons


async def serve_operator(api_client: client.ApiClient, stop: asyncio.Event, options: OperatorOptions, *,
                         admission: WebhookServer | None = None) -> None:
    """The whole operator until `stop`: leader election (`options.elector`; resigned as soon as
    `stop` is set), metrics and probes as `options.endpoints` say, then `Operator.run`. With
    `admission`, the admission webhooks are served beside it (until `Operator.run` returns, which
    drains them first), the queued-pod check reading the operator's cache."""
    operator = Operator(api_client, options, admission=admission)
    if options.started is not None:
        options.started(operator)
    elector = options.elector
    async with serving_endpoints(options.endpoints, operator.api, functools.partial(not_ready, operator, elector),
                                 operator.metrics, functools.partial(cache_routes, cache=operator.cache)):
        electing = asyncio.create_task(_campaign_when_allowed(operator, elector, options.campaign_after, stop),
                                       name="tasq-leader-election")
        webhooks = None if admission is None else asyncio.create_task(
            admission.serve_reviews(operator.cache.group_members), name="tasq-webhooks")
        try:
            await _run_beside(operator.run(stop), webhooks)
        finally:
            if not stop.is_set():  # once set, it resigns by itself: a cancel would cut its release short
                electing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await electing


async def _run_beside(main: Coroutine[Any, Any, None], webhooks: asyncio.Task[None] | None) -> None:
    """Run `main`; the webhook server beside it is stopped once it returns, and its failure (on the
    operator's loop: a server that cannot listen) stops `main` and is raised."""
    running = asyncio.create_task(main, name="tasq-operator")
    try:
        await asyncio.wait({running} if webhooks is None else {running, webhooks}, return_when=asyncio.FIRST_COMPLETED)
        if webhooks is not None and webhooks.done():
            running.cancel()
            webhooks.result()
        await running
    finally:
        for task in (running, webhooks):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
