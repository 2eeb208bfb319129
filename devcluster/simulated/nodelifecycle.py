"""The node lifecycle controller's TaintNodesByCondition part: a cordoned node (spec.unschedulable)
carries the `node.kubernetes.io/unschedulable:NoSchedule` taint, removed again on uncordon.

A `StoreFollower` driven by `devcluster.simulated.components`; it follows node events and patches only
the nodes whose taint disagrees with their spec (not-ready taints stay the scheduler's own reading).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devcluster.constants import NO_SCHEDULE, TAINT_UNSCHEDULABLE
from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.server.errors import ApiError
from devcluster.server.store import DELETED, StorageKey, StoredEvent, Subscriber
from devcluster.simulated.controllers import NODES_KEY, StoreFollower


def _has_taint(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == TAINT_UNSCHEDULABLE for t in (node.get("spec") or {}).get("taints") or ())


def wanted_taints(node: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The node's taints with the unschedulable taint added or removed; None when they already agree."""
    spec = node.get("spec") or {}
    cordoned = bool(spec.get("unschedulable"))
    if cordoned == _has_taint(node):
        return None
    others = [dict(t) for t in spec.get("taints") or () if t.get("key") != TAINT_UNSCHEDULABLE]
    return [*others, {"key": TAINT_UNSCHEDULABLE, "effect": NO_SCHEDULE}] if cordoned else others


class NodeLifecycle(StoreFollower):
    """Nodes whose unschedulable taint disagrees with spec.unschedulable, fixed each round."""

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self._pending: set[str] = set()

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        return ((NODES_KEY, self._on_node),)

    @property
    def has_work(self) -> bool:
        return bool(self._pending)

    def _on_node(self, event: StoredEvent) -> None:
        name = str(event.object["metadata"]["name"])
        if event.type != DELETED and wanted_taints(event.object) is not None:
            self._pending.add(name)
        else:
            self._pending.discard(name)

    async def sync(self) -> int:
        writes = 0
        nodes = self.api.resource("v1", "nodes")
        for name in sorted(self._pending):
            self._pending.discard(name)
            node = self.api.store.get(NODES_KEY, ("", name))
            taints = None if node is None else wanted_taints(node)
            if taints is None:
                continue
            try:
                await self.api.patch(nodes, "", name, PATCH_MERGE, {"spec": {"taints": taints}}, copy=False)
            except ApiError:
                self._pending.add(name)  # a fault or a conflict: retried next round
                continue
            writes += 1
        return writes
