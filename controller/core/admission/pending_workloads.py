"""Pending workloads with their positions, as Kueue's visibility API (`visibility.kueue.x-k8s.io`) lists them.

`pending_positions` orders each ClusterQueue's pending workloads with the admission queue itself
(`ClusterQueueQueue.pending`, priority descending then creation time) and numbers them per
ClusterQueue and per LocalQueue from 0; `summary` pages them with Kueue's `limit`/`offset` into a
PendingWorkloadsSummary. Pure. Called by the operator's visibility handlers (controller.kube.visibility)
and `tasq list workloads` (controller.commands.plugin), so both show the same positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from controller.api import constants as c
from controller.api.workload import Workload
from controller.core.admission.queueing import ClusterQueueQueue
from controller.core.admission.workloads import WorkloadInfo, workload_info

VISIBILITY_GROUP: Final = "visibility.kueue.x-k8s.io"
VISIBILITY_VERSION: Final = "v1beta1"
VISIBILITY_API_VERSION: Final = f"{VISIBILITY_GROUP}/{VISIBILITY_VERSION}"
SUMMARY_KIND: Final = "PendingWorkloadsSummary"
DEFAULT_LIMIT: Final = 1000
"""Kueue's default `limit` of a pendingworkloads request."""


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    """One pending workload and where it stands: 0 is the next one its queue will try."""

    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    priority: int
    created: float
    position_in_cluster_queue: int
    position_in_local_queue: int

    def to_dict(self) -> dict[str, Any]:
        """Kueue's PendingWorkload fields."""
        return {
            "metadata": {"name": self.name, "namespace": self.namespace,
                         "creationTimestamp": rfc3339(self.created)},
            "priority": self.priority,
            "localQueueName": self.local_queue,
            "positionInClusterQueue": self.position_in_cluster_queue,
            "positionInLocalQueue": self.position_in_local_queue,
        }


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as the API server writes a timestamp (whole seconds, UTC, `Z`)."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def waits_for_quota(workload: Workload) -> bool:
    """Whether a Workload is one a queue holds: active, not finished, holding no quota (Kueue lists
    the inadmissible ones too)."""
    return workload.active and not workload.is_finished and workload.reserved_admission is None


def queued_objects(objects: Iterable[Mapping[str, Any]]) -> list[tuple[WorkloadInfo, str]]:
    """The waiting Workloads among a cluster's objects (as read, with `kind`), each with the
    ClusterQueue its LocalQueue points at; priorities resolved through the PriorityClasses as the
    operator's cache does. A Workload whose LocalQueue or ClusterQueue is missing, or whose LocalQueue
    is stopped (Kueue takes a stopped one out of its queues), is in no queue.

    Equal priority and creation second: the operator breaks the tie by arrival, which only it saw;
    here (seq 0) the name decides, as it does for what the operator found when it started."""
    objects = list(objects)
    of_kind: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        of_kind.setdefault(str(obj.get("kind")), []).append(obj)
    classes = {o["metadata"]["name"]: int(o.get("value", 0)) for o in of_kind.get(c.KIND_PRIORITY_CLASS, [])}
    cluster_queues = {o["metadata"]["name"] for o in of_kind.get(c.KIND_CLUSTER_QUEUE, [])}
    local_queues = {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}": (o.get("spec") or {}).get(
        "clusterQueue") for o in of_kind.get(c.KIND_LOCAL_QUEUE, [])
        if (o.get("spec") or {}).get("stopPolicy") in (None, c.STOP_POLICY_NONE)}
    out = []
    for obj in of_kind.get(c.KIND_WORKLOAD, []):
        workload = Workload.from_dict(dict(obj))
        if not waits_for_quota(workload):
            continue
        info = workload_info(workload, priority_classes=classes)
        cluster_queue = local_queues.get(f"{info.namespace}/{info.queue_name}")
        if cluster_queue in cluster_queues:
            out.append((info, str(cluster_queue)))
    return out


def pending_positions(queued: Iterable[tuple[WorkloadInfo, str]]) -> list[PendingWorkload]:
    """Every (workload, its ClusterQueue) numbered in its queue's admission order; rows come by
    ClusterQueue name, then position."""
    queues: dict[str, ClusterQueueQueue] = {}
    infos: dict[str, WorkloadInfo] = {}
    for info, cluster_queue in queued:
        infos[info.key] = info
        queues.setdefault(cluster_queue, ClusterQueueQueue()).push(info.key, info.order_key())
    rows = []
    for cluster_queue in sorted(queues):
        in_local_queue: dict[tuple[str, str], int] = {}
        for position, key in enumerate(queues[cluster_queue].pending()):
            info = infos[key]
            local = (info.namespace, info.queue_name)
            in_local_queue[local] = in_local_queue.get(local, -1) + 1
            rows.append(PendingWorkload(info.namespace, info.name, info.queue_name, cluster_queue, info.priority,
                                        info.created, position, in_local_queue[local]))
    return rows


def of_cluster_queue(rows: Iterable[PendingWorkload], cluster_queue: str) -> list[PendingWorkload]:
    return [row for row in rows if row.cluster_queue == cluster_queue]


def of_local_queue(rows: Iterable[PendingWorkload], namespace: str, local_queue: str) -> list[PendingWorkload]:
    return [row for row in rows if row.namespace == namespace and row.local_queue == local_queue]


@dataclass(frozen=True, slots=True)
class Paging:
    limit: int = DEFAULT_LIMIT
    offset: int = 0


def paging(query: dict[str, str]) -> Paging | str:
    """`limit` and `offset` of a request's query (Kueue's defaults when absent), or a message naming
    the parameter and what is allowed."""
    values = {"limit": DEFAULT_LIMIT, "offset": 0}
    for name in values:
        text = query.get(name)
        if text is None:
            continue
        try:
            value = int(text)
        except ValueError:
            return f"{name}: {text!r} is not an integer"
        if value < 0:
            return f"{name}: {value} is negative; a count of 0 or more is allowed"
        values[name] = value
    return Paging(values["limit"], values["offset"])


def summary(rows: list[PendingWorkload], page: Paging) -> dict[str, Any]:
    """The PendingWorkloadsSummary of `page` of `rows` (already in queue order)."""
    return {"kind": SUMMARY_KIND, "apiVersion": VISIBILITY_API_VERSION, "metadata": {"creationTimestamp": None},
            "items": [row.to_dict() for row in rows[page.offset:page.offset + page.limit]]}
