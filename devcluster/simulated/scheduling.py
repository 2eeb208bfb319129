"""The devcluster's scheduler: binds ungated pending pods to nodes, one pod at a time, as kube-scheduler would.

Filters follow the default profile's order (NodeUnschedulable, TaintToleration, NodeAffinity,
NodeResourcesFit incl. `pods`); among feasible nodes it takes the first by name (bin packing, so
placements are deterministic). Driven by `devcluster.simulated.components` through `sync()`; it follows the
store's pod and node events to keep per-node free capacity incremental.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devcluster import constants as c
from devcluster.constants import NO_SCHEDULE, TAINT_UNSCHEDULABLE, TERMINAL_PHASES
from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.server.builtins import (
    CONDITION_POD_SCHEDULED,
    DEFAULT_SCHEDULER,
    MESSAGE_GATED,
    REASON_SCHEDULING_GATED,
)
from devcluster.server.clock import timestamp
from devcluster.server.errors import ApiError
from devcluster.server.quantities import Resources, add_into, exceeded, fits, subtract
from devcluster.server.store import DELETED, StorageKey, StoredEvent, Subscriber, object_key
from devcluster.simulated.controllers import NODES_KEY, PODS_KEY, StoreFollower, counts_on_node, pod_phase
from devcluster.simulated.nodes import not_ready_taint_key, ready_status
from devcluster.simulated.readings import (
    NodeView,
    PodView,
    Taint,
    Toleration,
    node_matches_pod,
    untolerated_taint,
)
from devcluster.simulated.recording import NORMAL, WARNING, EventRecorder

REASON_UNSCHEDULABLE = "Unschedulable"

PodKey = tuple[str, str]
# What makes two pods see the same feasible nodes: nodeSelector, required affinity, tolerations.
Signature = tuple[tuple[tuple[str, str], ...], tuple[Any, ...], tuple[Toleration, ...]]


@dataclass(slots=True)
class NodeState:
    """One node: its view, the taints the scheduler sees (incl. not-ready) and its free capacity."""

    view: NodeView
    taints: tuple[Taint, ...]
    free: Resources


@dataclass(slots=True)
class _Cycle:
    """Per-cycle caches: feasible node names per signature, a first-fit cursor and the failure message
    per (signature, requests). Valid only within one cycle, while free capacity only shrinks."""

    feasible: dict[Signature, list[str]] = field(default_factory=dict)
    cursor: dict[tuple[Signature, tuple[tuple[str, int], ...]], int] = field(default_factory=dict)
    failed: dict[tuple[Signature, tuple[tuple[str, int], ...]], str] = field(default_factory=dict)


def signature(pod: PodView) -> Signature:
    return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations)


def awaits_scheduling(pod: Mapping[str, Any] | None) -> bool:
    """An unbound, live, non-terminal pod for the default scheduler."""
    if pod is None:
        return False
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    return (not spec.get("nodeName") and not meta.get("deletionTimestamp") and pod_phase(pod) not in TERMINAL_PHASES
            and spec.get("schedulerName", DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER)


class Scheduler(StoreFollower):
    """Pending pods in queue order (priority desc, creation time, name) placed on the first feasible node."""

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.nodes: dict[str, NodeState] = {}
        self._used: dict[str, Resources] = {}
        self._label_index: dict[tuple[str, str], set[str]] = {}
        self._pending: dict[PodKey, dict[str, Any]] = {}
        self._active: set[PodKey] = set()
        self._retry_all = False  # a cluster event happened: every pending pod is retried next cycle
        self.events = EventRecorder(api, DEFAULT_SCHEDULER)
        self.binds = 0

    # ---------------------------------------------------------------- state from events

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        return ((NODES_KEY, self._on_node), (PODS_KEY, self._on_pod))

    @property
    def has_work(self) -> bool:
        return bool(self._active) or (self._retry_all and bool(self._pending))

    def _on_node(self, event: StoredEvent) -> None:
        name = str(event.object["metadata"]["name"])
        if event.old is not None:
            self._unindex(name)
        if event.type == DELETED:
            self.nodes.pop(name, None)
        else:
            self._set_node(event.object)
        self._requeue_all()

    def _set_node(self, obj: Mapping[str, Any]) -> None:
        view = NodeView.from_dict(obj)
        taints = view.taints
        status = ready_status(obj)
        if status != "True":
            # The node lifecycle controller taints NotReady nodes; the scheduler filters on that taint.
            taints = (*taints, Taint(not_ready_taint_key(status), "", NO_SCHEDULE))
        free = subtract(view.allocatable, self._used.get(view.name, {}))
        self.nodes[view.name] = NodeState(view, taints, free)
        for pair in view.labels.items():
            self._label_index.setdefault(pair, set()).add(view.name)

    def _unindex(self, name: str) -> None:
        state = self.nodes.get(name)
        if state is None:
            return
        for pair in state.view.labels.items():
            names = self._label_index.get(pair)
            if names is not None:
                names.discard(name)
                if not names:
                    del self._label_index[pair]

    def _on_pod(self, event: StoredEvent) -> None:
        """Account capacity (old out, new in) and keep the pending set; changed pods become active."""
        new = None if event.type == DELETED else event.object
        old = event.old
        key = object_key(event.object)
        held_before, held_now = counts_on_node(old), counts_on_node(new)
        if held_before and held_now and old is not None and new is not None and old["spec"] == new["spec"]:
            pass  # a status change of a pod that keeps its place (the kubelet's writes): nothing moves
        else:
            if held_before:
                assert old is not None
                self._account(old, -1)
                self._requeue_all()
            if held_now:
                assert new is not None
                self._account(new, +1)
        if awaits_scheduling(new):
            assert new is not None
            self._pending[key] = new
            if old is None or old.get("spec") != new.get("spec") or not awaits_scheduling(old):
                self._active.add(key)
        else:
            self._pending.pop(key, None)
            self._active.discard(key)

    def _account(self, pod: Mapping[str, Any], sign: int) -> None:
        node = str(pod["spec"]["nodeName"])
        requests = PodView.from_dict(pod).requests
        add_into(self._used.setdefault(node, {}), requests, times=sign)
        state = self.nodes.get(node)
        if state is not None:
            add_into(state.free, requests, times=-sign)

    def _requeue_all(self) -> None:
        """A cluster event may make unschedulable pods schedulable: retry them all (kube-scheduler's move),
        marked here and applied once at the next cycle (events come thousands at a time)."""
        self._retry_all = True

    # ---------------------------------------------------------------- the cycle

    async def sync(self) -> int:
        """Try every active pending pod once in queue order; returns how many writes were made."""
        if self._retry_all:
            self._active.update(self._pending)
            self._retry_all = False
        queue = sorted((self._pending[k] for k in self._active if k in self._pending), key=_queue_order)
        self._active.clear()
        cycle = _Cycle()
        writes = 0
        for obj in queue:
            key = object_key(obj)
            current = self._pending.get(key)
            if current is None or current is not obj:
                continue  # bound, deleted or changed meanwhile (then it is active again)
            pod = PodView.from_dict(obj)
            if pod.invalid:
                # only a pod stored before validation could carry this; it waits, the others go on
                writes += await self._set_condition(obj, REASON_UNSCHEDULABLE, pod.invalid)
                continue
            if pod.scheduling_gates:
                writes += await self._set_condition(obj, REASON_SCHEDULING_GATED, MESSAGE_GATED)
                continue
            node = self._place(pod, cycle)
            if node is not None:
                writes += await self._bind(obj, pod, node)
            else:
                message = self._failure(pod, cycle)
                writes += await self._set_condition(obj, REASON_UNSCHEDULABLE, message)
        return writes

    def _place(self, pod: PodView, cycle: _Cycle) -> str | None:
        """The first feasible node (by name) with room, resuming where the same kind of pod stopped."""
        sig = signature(pod)
        group = (sig, tuple(sorted(pod.requests.items())))
        if group in cycle.failed:
            return None
        names = cycle.feasible.get(sig)
        if names is None:
            names = cycle.feasible[sig] = self._feasible(pod)
        start = cycle.cursor.get(group, 0)
        for i in range(start, len(names)):
            state = self.nodes.get(names[i])
            if state is not None and fits(pod.requests, state.free):
                cycle.cursor[group] = i
                return names[i]
        cycle.cursor[group] = len(names)
        return None

    def _feasible(self, pod: PodView) -> list[str]:
        """Names of nodes passing the static filters, narrowed first through the label index."""
        candidates: set[str] | None = None
        for pair in pod.node_selector.items():
            names = self._label_index.get(pair, set())
            candidates = set(names) if candidates is None else candidates & names
        pool = self.nodes.keys() if candidates is None else candidates
        return sorted(n for n in pool if _static_reason(self.nodes[n], pod) is None)

    def _failure(self, pod: PodView, cycle: _Cycle) -> str:
        """kube-scheduler's FitError text, computed once per kind of pod per cycle."""
        group = (signature(pod), tuple(sorted(pod.requests.items())))
        message = cycle.failed.get(group)
        if message is None:
            message = cycle.failed[group] = unschedulable_message(self.nodes.values(), pod)
        return message

    # ---------------------------------------------------------------- writes

    async def _bind(self, obj: Mapping[str, Any], pod: PodView, node: str) -> int:
        try:
            await self.api.bind(pod.namespace, pod.name, {"target": {"name": node}})
        except ApiError:
            self._active.add((pod.namespace, pod.name))  # a conflict or injected fault: retry next cycle
            return 0
        self.binds += 1
        await self.events.record(obj, NORMAL, "Scheduled", f"Successfully assigned {pod.key} to {node}")
        return 1

    async def _set_condition(self, obj: Mapping[str, Any], reason: str, message: str) -> int:
        """PodScheduled=False with reason/message, written only when it changes."""
        conditions = list((obj.get("status") or {}).get("conditions") or [])
        for cond in conditions:
            if (cond.get("type") == CONDITION_POD_SCHEDULED and cond.get("reason") == reason
                    and cond.get("message") == message and cond.get("status") == "False"):
                return 0
        wanted = {"type": CONDITION_POD_SCHEDULED, "status": "False", "reason": reason, "message": message,
                  "lastProbeTime": None, "lastTransitionTime": timestamp(self.api.now())}
        conditions = [cd for cd in conditions if cd.get("type") != CONDITION_POD_SCHEDULED] + [wanted]
        meta = obj["metadata"]
        try:
            await self.api.patch(self.api.resource("v1", "pods"), meta["namespace"], meta["name"], PATCH_MERGE,
                                 {"status": {"conditions": conditions}}, subresource="status", copy=False)
        except ApiError:
            return 0
        if reason == REASON_UNSCHEDULABLE:
            await self.events.record(obj, WARNING, "FailedScheduling", message)
        return 1


def _queue_order(pod: Mapping[str, Any]) -> tuple[int, str, str, str]:
    meta = pod["metadata"]
    priority = int((pod.get("spec") or {}).get("priority") or 0)
    return (-priority, str(meta.get("creationTimestamp") or ""), str(meta.get("namespace", "")), str(meta["name"]))


def _static_reason(node: NodeState, pod: PodView) -> str | None:
    """The first static filter the node fails for the pod (default-profile order), or None."""
    if node.view.unschedulable and not any(
            t.tolerates(Taint(TAINT_UNSCHEDULABLE, "", NO_SCHEDULE)) for t in pod.tolerations):
        return "node(s) were unschedulable"
    taint = untolerated_taint(node.taints, pod.tolerations)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    if not node_matches_pod(node.view.name, node.view.labels, pod.node_selector, pod.affinity_terms):
        return "node(s) didn't match Pod's node affinity/selector"
    return None


def unschedulable_message(nodes: Any, pod: PodView) -> str:
    """`0/32 nodes are available: 24 node(s) didn't match ..., 8 Insufficient nvidia.com/gpu.` (sorted as
    kube-scheduler sorts its reason histogram: as strings)."""
    histogram: dict[str, int] = {}
    total = 0
    for node in nodes:
        total += 1
        reason = _static_reason(node, pod)
        reasons = [reason] if reason is not None else [
            "Too many pods" if name == c.RESOURCE_PODS else f"Insufficient {name}"
            for name in exceeded(pod.requests, node.free)]
        for r in reasons:
            histogram[r] = histogram.get(r, 0) + 1
    if total == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."
