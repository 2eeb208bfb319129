"""The devcluster's kubelets (all nodes in one object): run bound pods for a set time on the API clock.

Pods bound to a Ready node are admitted (Failed `OutOf<resource>` past allocatable), run, then Succeed
after the `devcluster.tasq.io/run-seconds` annotation or Fail on request (`devcluster.tasq.io/not-ready`
keeps a running pod unready, as a readiness probe that never passes). On a NotReady node pods
do not start, turn unready, and are evicted when their NoExecute toleration runs out (the taint
manager). `devcluster.simulated.components` drives `sync()`; time is `api.now()`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from devcluster import constants as c
from devcluster.constants import NO_EXECUTE
from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.server.builtins import CONDITION_POD_SCHEDULED
from devcluster.server.clock import timestamp
from devcluster.server.errors import ApiError
from devcluster.server.quantities import Resources, add_into
from devcluster.server.store import DELETED, StorageKey, StoredEvent, Subscriber, object_key
from devcluster.simulated.controllers import NODES_KEY, PODS_KEY, StoreFollower, counts_on_node, pod_phase
from devcluster.simulated.nodes import not_ready_taint_key, ready_condition, ready_status
from devcluster.simulated.readings import NodeView, PodView, Taint, Toleration

EVICTION_SECONDS = 300.0  # the tolerationSeconds the DefaultTolerationSeconds admission plugin adds
REASON_NODE_NOT_READY = "NodeNotReady"
CONDITION_DISRUPTION_TARGET = "DisruptionTarget"
REASON_DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"
MESSAGE_DELETION_BY_TAINT_MANAGER = "Taint manager: deleting due to NoExecute taint"
# The kubelet's admission checks resources in this order, then extended resources by name.
_ADMISSION_ORDER = (c.RESOURCE_PODS, c.RESOURCE_CPU, c.RESOURCE_MEMORY, "ephemeral-storage")

PodKey = tuple[str, str]


def run_seconds(pod: Mapping[str, Any]) -> float | None:
    """The pod's run time from its annotation; None (run until deleted) when absent or unreadable."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS)
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return None if value is None or value < 0 else value


def eviction_delay(pod: Mapping[str, Any], taint: Taint, default: float) -> float | None:
    """Seconds the pod stays on a node with this NoExecute taint; None: forever.

    As the taint manager: the least tolerationSeconds of the pod's tolerations of the taint (none
    with seconds: forever); a pod without one gets `default`, the toleration admission adds."""
    tolerations = [t for t in (pod.get("spec") or {}).get("tolerations") or []
                   if Toleration.from_dict(t).tolerates(taint)]
    if not tolerations:
        return default
    seconds = [float(t["tolerationSeconds"]) for t in tolerations if t.get("tolerationSeconds") is not None]
    return max(0.0, min(seconds)) if seconds else None


def admission_failure(requests: Mapping[str, int], used: Mapping[str, int],
                      allocatable: Mapping[str, int]) -> tuple[str, str] | None:
    """The kubelet's rejection (reason, message) of a pod whose requests exceed what is left, else None.

    The first short resource in the kubelet's order decides; amounts in its units (cpu in millicores,
    the rest whole units, from our milli-units)."""
    names = [*[n for n in _ADMISSION_ORDER if n in requests], *sorted(set(requests) - set(_ADMISSION_ORDER))]
    for name in names:
        want, have, cap = requests[name], used.get(name, 0), allocatable.get(name, 0)
        if want > 0 and want + have > cap:
            want, have, cap = (_kubelet_units(name, v) for v in (want, have, cap))
            return (f"OutOf{name}", f"Pod was rejected: Node didn't have enough resource: {name}, "
                                    f"requested: {want}, used: {have}, capacity: {cap}")
    return None


def _kubelet_units(name: str, milli: int) -> int:
    """Our milli-units in the kubelet's: millicores for cpu, whole units (rounded up) otherwise."""
    return milli if name == c.RESOURCE_CPU else -(-milli // 1000)


def disruption_conditions(pod: Mapping[str, Any], reason: str, message: str, now: datetime) -> list[dict[str, Any]]:
    """The pod's conditions with DisruptionTarget=True (reason, message) in place of any earlier one: what
    the taint manager and the pod GC write before they delete a pod."""
    conditions = [cd for cd in (pod.get("status") or {}).get("conditions") or []
                  if cd.get("type") != CONDITION_DISRUPTION_TARGET]
    conditions.append({"type": CONDITION_DISRUPTION_TARGET, "status": "True", "reason": reason, "message": message,
                       "lastTransitionTime": timestamp(now)})
    return conditions


def not_ready_requested(pod: Mapping[str, Any]) -> bool:
    """The pod runs but never passes readiness (`devcluster.tasq.io/not-ready: "true"`)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(c.ANNOTATION_DEVCLUSTER_NOT_READY, "")).lower() == "true"


def fail_requested(pod: Mapping[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(c.ANNOTATION_DEVCLUSTER_FAIL, "")).lower() == "true"


class Kubelet(StoreFollower):
    """Follows bound pods and node readiness; `sync()` makes the due transitions and returns the writes."""

    def __init__(self, api: ApiServer, eviction_seconds: float = EVICTION_SECONDS) -> None:
        super().__init__(api)
        self.eviction_seconds = eviction_seconds
        self._bound: dict[PodKey, dict[str, Any]] = {}
        self._on_node_pods: dict[str, set[PodKey]] = {}  # node -> its live pods (NotReady handling)
        self._to_start: set[PodKey] = set()
        self._to_fail: set[PodKey] = set()
        self._deadlines: list[tuple[datetime, PodKey, str]] = []  # (when, pod, uid) heap
        self._node_status: dict[str, str] = {}  # node -> its Ready condition's status
        self._allocatable: dict[str, Resources] = {}
        self._host_ips: dict[str, str] = {}  # node -> its InternalIP, the hostIP of its pods
        self._used: dict[str, Resources] = {}  # node -> requests of the pods admitted and not terminated
        self._admitted: dict[PodKey, tuple[str, Resources]] = {}
        self._not_ready_since: dict[str, datetime] = {}
        self._ip_counter = 0

    # ---------------------------------------------------------------- state from events

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        return ((NODES_KEY, self._on_node), (PODS_KEY, self._on_pod))

    def _on_node(self, event: StoredEvent) -> None:
        """Track each node's Ready status; the pods waiting on a node that turns Ready can start."""
        name = str(event.object["metadata"]["name"])
        if event.type == DELETED:
            self._node_status.pop(name, None)
            self._allocatable.pop(name, None)
            self._host_ips.pop(name, None)
            self._not_ready_since.pop(name, None)
            return
        self._allocatable[name] = NodeView.from_dict(event.object).allocatable
        addresses = (event.object.get("status") or {}).get("addresses") or []
        self._host_ips[name] = next((str(a["address"]) for a in addresses
                                     if a.get("type") == "InternalIP" and a.get("address")), _host_ip(name))
        status = ready_status(event.object)
        was_ready = self._node_status.get(name) == "True"
        self._node_status[name] = status
        if status != "True":
            self._not_ready_since.setdefault(name, self.api.now())
            return
        self._not_ready_since.pop(name, None)
        if not was_ready:
            self._to_start.update(key for key in self._on_node_pods.get(name, ())
                                  if pod_phase(self._bound.get(key)) == "Pending")

    def _on_pod(self, event: StoredEvent) -> None:
        key = object_key(event.object)
        pod = None if event.type == DELETED else event.object
        if not counts_on_node(pod):
            gone = self._bound.pop(key, None)
            if gone is not None:
                self._on_node_pods.get(str(gone["spec"]["nodeName"]), set()).discard(key)
            self._to_start.discard(key)
            self._to_fail.discard(key)
            self._release(key)
            return
        assert pod is not None
        self._bound[key] = pod
        self._on_node_pods.setdefault(str(pod["spec"]["nodeName"]), set()).add(key)
        if pod_phase(pod) == "Pending":
            self._to_start.add(key)
        elif key not in self._admitted:
            self._admit(key, pod)  # already running when this kubelet started: it holds its requests
        if fail_requested(pod):
            self._to_fail.add(key)

    def _admit(self, key: PodKey, pod: Mapping[str, Any], requests: Resources | None = None) -> None:
        node = str(pod["spec"]["nodeName"])
        requests = PodView.from_dict(pod).requests if requests is None else requests
        self._admitted[key] = (node, requests)
        add_into(self._used.setdefault(node, {}), requests)

    def _release(self, key: PodKey) -> None:
        admitted = self._admitted.pop(key, None)
        if admitted is not None:
            add_into(self._used.setdefault(admitted[0], {}), admitted[1], times=-1)

    @property
    def has_work(self) -> bool:
        return bool(self._to_start or self._to_fail)

    def next_deadline(self, after: datetime) -> datetime | None:
        """The first timed transition (completion or eviction) due after `after`, for simulated time."""
        if self._deadlines and self._deadlines[0][0] > after:
            times = [self._deadlines[0][0]]  # the heap's head (the usual case: due ones were popped)
        else:
            times = [when for when, _k, _u in self._deadlines if when > after]
        for node, since in self._not_ready_since.items():
            for key in self._on_node_pods.get(node, ()):
                due = self._eviction_due(self._bound[key], node, since)
                if due is not None and due > after:
                    times.append(due)
        return min(times) if times else None

    def _eviction_due(self, pod: Mapping[str, Any], node: str, since: datetime) -> datetime | None:
        """When the taint manager evicts this pod from its NotReady node; None: never."""
        taint = Taint(not_ready_taint_key(self._node_status.get(node, "Unknown")), "", NO_EXECUTE)
        delay = eviction_delay(pod, taint, self.eviction_seconds)
        return None if delay is None else since + timedelta(seconds=delay)

    # ---------------------------------------------------------------- the cycle

    async def sync(self) -> int:
        """Start bound pods, fail requested ones, finish due ones, mark/evict pods of NotReady nodes."""
        now = self.api.now()
        writes = 0
        for key in sorted(self._to_start):
            writes += await self._start_pod(key, now)
        for key in sorted(self._to_fail):
            writes += await self._finish(key, now, failed=True)
        retry: list[tuple[datetime, PodKey, str]] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            entry = heapq.heappop(self._deadlines)
            pod = self._bound.get(entry[1])
            if pod is not None and pod["metadata"].get("uid") == entry[2]:
                if self._node_status.get(str(pod["spec"]["nodeName"])) != "True":
                    retry.append(entry)  # its kubelet is not posting: reported once the node is back
                    continue
                done = await self._finish(entry[1], now, failed=False)
                writes += done
                if not done and entry[1] in self._bound:
                    retry.append(entry)
        for entry in retry:
            heapq.heappush(self._deadlines, entry)
        writes += await self._node_health(now)
        return writes

    async def _start_pod(self, key: PodKey, now: datetime) -> int:
        """Pending -> Running with Ready conditions, IPs and running container states; arms the timer."""
        self._to_start.discard(key)
        pod = self._bound.get(key)
        if pod is None:
            return 0
        node = str(pod["spec"]["nodeName"])
        if self._node_status.get(node) != "True":
            return 0  # no kubelet runs it: Pending until the node exists and is Ready (`_on_node`)
        if key not in self._admitted:
            requests = PodView.from_dict(pod).requests
            rejected = admission_failure(requests, self._used.get(node, {}), self._allocatable.get(node, {}))
            if rejected is not None:
                return await self._reject(key, pod, *rejected)
            self._admit(key, pod, requests)
        started = timestamp(now)
        ready = not not_ready_requested(pod)
        self._ip_counter += 1
        ip = f"10.244.{(self._ip_counter // 250) % 250}.{self._ip_counter % 250 + 2}"
        status = {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": self._host_ips[node],
            "startTime": started, "qosClass": "BestEffort",
            "conditions": _conditions(pod, started, ready=ready),
            "containerStatuses": [_container_status(ctr, {"running": {"startedAt": started}}, ready=ready)
                                  for ctr in pod["spec"].get("containers") or []],
        }
        if pod["spec"].get("initContainers"):
            # init containers ran to completion before the main ones started (no time passes for them)
            done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started}}
            status["initContainerStatuses"] = [_container_status(ctr, done, ready=True)
                                               for ctr in pod["spec"]["initContainers"]]
        if not await self._write_status(pod, status):
            self._to_start.add(key)  # refused (an injected fault): try again next sync (still admitted)
            return 0
        seconds = run_seconds(pod)
        if seconds is not None:
            heapq.heappush(self._deadlines, (now + timedelta(seconds=seconds), key, str(pod["metadata"]["uid"])))
        return 1

    async def _reject(self, key: PodKey, pod: Mapping[str, Any], reason: str, message: str) -> int:
        """Failed at admission, as the kubelet rejects a pod its node cannot hold; no container ran."""
        if await self._write_status(pod, {"phase": "Failed", "reason": reason, "message": message}):
            return 1
        self._to_start.add(key)  # refused (an injected fault): try again next sync
        return 0

    async def _finish(self, key: PodKey, now: datetime, failed: bool) -> int:
        """Running -> Succeeded (exit 0) or Failed (exit 1); containers terminated, Ready False."""
        self._to_fail.discard(key)
        pod = self._bound.get(key)
        if pod is None:
            return 0
        status = pod.get("status") or {}
        started = str(status.get("startTime") or timestamp(now))
        finished = timestamp(now)
        exit_code, reason = (1, "Error") if failed else (0, "Completed")
        terminated = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started,
                                     "finishedAt": finished}}
        new_status = {
            "phase": "Failed" if failed else "Succeeded",
            "conditions": _conditions(pod, started, ready=False, reason="PodFailed" if failed else "PodCompleted"),
            "containerStatuses": [_container_status(ctr, terminated, ready=False)
                                  for ctr in pod["spec"].get("containers") or []],
        }
        if "startTime" not in status:
            new_status["startTime"] = started
        if await self._write_status(pod, new_status):
            return 1
        if failed:
            self._to_fail.add(key)  # refused (an injected fault): try again next sync
        return 0

    async def _node_health(self, now: datetime) -> int:
        """Pods of NotReady nodes: Ready=False at once, deleted when their toleration runs out."""
        if not self._not_ready_since:
            return 0
        writes = 0
        for node, since in sorted(self._not_ready_since.items()):
            for key in sorted(self._on_node_pods.get(node, ())):
                pod = self._bound.get(key)  # gone meanwhile when another client deleted it
                if pod is not None:
                    writes += await self._pod_on_not_ready_node(pod, self._eviction_due(pod, node, since), now)
        return writes

    async def _pod_on_not_ready_node(self, pod: Mapping[str, Any], due: datetime | None, now: datetime) -> int:
        """Evicted once the toleration ran out, else marked Ready=False (once)."""
        if due is not None and now >= due:
            return await self._evict(pod, now)
        if ready_status(pod) == "False" or pod_phase(pod) != "Running":
            return 0
        started = str((pod.get("status") or {}).get("startTime") or timestamp(now))
        conditions = _conditions(pod, started, ready=False, reason=REASON_NODE_NOT_READY)
        return 1 if await self._write_status(pod, {"conditions": conditions}) else 0

    async def _evict(self, pod: Mapping[str, Any], now: datetime) -> int:
        """As the taint manager once the toleration ran out: a DisruptionTarget condition, then delete."""
        meta = pod["metadata"]
        conditions = disruption_conditions(pod, REASON_DELETION_BY_TAINT_MANAGER, MESSAGE_DELETION_BY_TAINT_MANAGER,
                                           now)
        if not await self._write_status(pod, {"conditions": conditions}):
            return 0
        try:
            await self.api.delete(self.api.resource("v1", "pods"), meta["namespace"], meta["name"], copy=False)
        except ApiError:
            return 0
        return 1

    async def _write_status(self, pod: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        """Merge-patch the pod's status subresource; False when the API refused the write."""
        meta = pod["metadata"]
        try:
            await self.api.patch(self.api.resource("v1", "pods"), meta["namespace"], meta["name"], PATCH_MERGE,
                                 {"status": dict(status)}, subresource="status", copy=False)
        except ApiError:
            return False  # deleted meanwhile, or an injected fault: the next event or sync retries
        return True

    # ---------------------------------------------------------------- requests from tests

    def fail(self, namespace: str, name: str) -> bool:
        """Make a bound pod fail at the next sync; False when no such live pod is bound."""
        key = (namespace, name)
        if key not in self._bound:
            return False
        self._to_fail.add(key)
        return True

    async def set_node_ready(self, name: str, ready: bool) -> None:
        """Flip a node's Ready condition as its kubelet (or the node lifecycle controller) would."""
        r = self.api.resource("v1", "nodes")
        node = await self.api.get(r, "", name)
        conditions = [cd for cd in (node.get("status") or {}).get("conditions") or [] if cd.get("type") != "Ready"]
        cond: dict[str, Any] = {**ready_condition(ready), "lastTransitionTime": timestamp(self.api.now())}
        if not ready:
            cond["status"] = "Unknown"
            cond["reason"] = "NodeStatusUnknown"
            cond["message"] = "Kubelet stopped posting node status."
        await self.api.patch(r, "", name, PATCH_MERGE, {"status": {"conditions": [*conditions, cond]}},
                             subresource="status", copy=False)


def _host_ip(node: str) -> str:
    n = sum(node.encode()) % 250
    return f"192.168.{len(node) % 250}.{n + 2}"


def _conditions(pod: Mapping[str, Any], at: str, ready: bool, reason: str = "") -> list[dict[str, Any]]:
    """PodScheduled (kept from binding), Initialized, ContainersReady and Ready, as the kubelet reports."""
    scheduled = next((cd for cd in (pod.get("status") or {}).get("conditions") or []
                      if cd.get("type") == CONDITION_POD_SCHEDULED),
                     {"type": CONDITION_POD_SCHEDULED, "status": "True", "lastTransitionTime": at})
    flag = "True" if ready else "False"
    out: list[dict[str, Any]] = [dict(scheduled), {"type": "Initialized", "status": "True", "lastTransitionTime": at}]
    for kind in ("ContainersReady", "Ready"):
        cond: dict[str, Any] = {"type": kind, "status": flag, "lastTransitionTime": at}
        if reason:
            cond["reason"] = reason
        out.append(cond)
    return out


def _container_status(ctr: Mapping[str, Any], state: Mapping[str, Any], ready: bool) -> dict[str, Any]:
    name = str(ctr.get("name", ""))
    return {"name": name, "image": str(ctr.get("image", "")), "imageID": f"devcluster://{ctr.get('image', '')}",
            "containerID": f"devcluster://{name}", "ready": ready, "started": "running" in state,
            "restartCount": 0, "state": dict(state)}
