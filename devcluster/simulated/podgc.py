"""The pod garbage collector's orphan sweep: pods bound to a node that no longer exists are failed and deleted.

As kube-controller-manager's PodGC: a node missing for the quarantine (40 s, so a node that is only
being re-registered keeps its pods) has its pods marked DisruptionTarget (`DeletionByPodGC`), the
non-terminated ones Failed, then deleted. Driven by `devcluster.simulated.components` through `sync()`;
`next_deadline()` lets simulated time stop when a quarantine ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from devcluster.constants import TERMINAL_PHASES
from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.server.errors import ApiError
from devcluster.server.store import DELETED, StorageKey, StoredEvent, Subscriber, object_key
from devcluster.simulated.controllers import NODES_KEY, PODS_KEY, StoreFollower, pod_phase
from devcluster.simulated.kubelet import disruption_conditions

QUARANTINE = timedelta(seconds=40)
REASON_DELETION_BY_POD_GC = "DeletionByPodGC"
MESSAGE_NODE_GONE = "PodGC: node no longer exists"

PodKey = tuple[str, str]


class PodGC(StoreFollower):
    """Follows nodes and bound pods; `sync()` fails and deletes the pods of nodes missing past the quarantine."""

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self._nodes: set[str] = set()
        self._pods_on: dict[str, dict[PodKey, dict[str, Any]]] = {}  # node name -> its bound pods
        self._missing_since: dict[str, datetime] = {}  # nodes that pods name but that do not exist

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        return ((NODES_KEY, self._on_node), (PODS_KEY, self._on_pod))

    def _on_node(self, event: StoredEvent) -> None:
        name = str(event.object["metadata"]["name"])
        if event.type == DELETED:
            self._nodes.discard(name)
            if self._pods_on.get(name):
                self._missing_since.setdefault(name, self.api.now())
        else:
            self._nodes.add(name)
            self._missing_since.pop(name, None)  # back in time: its pods stay

    def _on_pod(self, event: StoredEvent) -> None:
        key = object_key(event.object)
        if event.old is not None and event.old["spec"].get("nodeName"):
            self._pods_on.get(str(event.old["spec"]["nodeName"]), {}).pop(key, None)
        node = str(event.object["spec"].get("nodeName") or "")
        if event.type == DELETED or not node:
            return
        self._pods_on.setdefault(node, {})[key] = event.object
        if node not in self._nodes:
            self._missing_since.setdefault(node, self.api.now())

    def next_deadline(self, after: datetime) -> datetime | None:
        """When the first quarantine after `after` ends (simulated time stops there)."""
        ends = [since + QUARANTINE for since in self._missing_since.values() if since + QUARANTINE > after]
        return min(ends, default=None)

    async def sync(self) -> int:
        """Fail and delete the pods of every node missing for the quarantine; the number of writes."""
        now = self.api.now()
        writes = 0
        for node, since in sorted(self._missing_since.items()):
            if now - since < QUARANTINE:
                continue
            for pod in [p for _, p in sorted(self._pods_on.get(node, {}).items())]:
                writes += await self._collect(pod, now)
            if not self._pods_on.get(node):
                del self._missing_since[node]  # else a refused write is retried at the next sync
        return writes

    async def _collect(self, pod: dict[str, Any], now: datetime) -> int:
        """DisruptionTarget (and Failed unless terminated), then delete; refusals are left to the next event."""
        pods = self.api.resource("v1", "pods")
        meta = pod["metadata"]
        patch: dict[str, Any] = {"conditions": disruption_conditions(pod, REASON_DELETION_BY_POD_GC, MESSAGE_NODE_GONE,
                                                                      now)}
        if pod_phase(pod) not in TERMINAL_PHASES:
            patch["phase"] = "Failed"
        try:
            await self.api.patch(pods, meta["namespace"], meta["name"], PATCH_MERGE, {"status": patch},
                                 subresource="status", copy=False)
            await self.api.delete(pods, meta["namespace"], meta["name"], copy=False)
        except ApiError:
            return 0  # deleted meanwhile or an injected fault
        return 2
