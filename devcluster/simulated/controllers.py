"""`StoreFollower`: what the simulated components (Job controller, scheduler, kubelet, pod GC) share.

Each keeps incremental state from synchronous store events: on `start()` it sees every current object
as ADDED, then every committed write, until `close()`. Subclasses name the resources they follow in
`follows()` and do their rounds in `sync()`, driven by `devcluster.simulated.components`; `pod_phase` and
`counts_on_node` are the pod readings they share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self

from devcluster.constants import TERMINAL_PHASES
from devcluster.server.apiserver import ApiServer
from devcluster.server.store import ADDED, StorageKey, StoredEvent, Subscriber

PODS_KEY: StorageKey = ("", "pods")
NODES_KEY: StorageKey = ("", "nodes")


def pod_phase(pod: Mapping[str, Any] | None) -> str:
    """The pod's status.phase; Pending while none was written yet (as `PodView` reads it)."""
    return str(((pod or {}).get("status") or {}).get("phase") or "Pending")


def counts_on_node(pod: Mapping[str, Any] | None) -> bool:
    """A bound pod holds node capacity until it terminates or is removed."""
    return pod is not None and bool((pod.get("spec") or {}).get("nodeName")) and pod_phase(pod) not in TERMINAL_PHASES


class StoreFollower:
    """Replays the current objects of the followed resources, then subscribes to their writes."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._unsubscribe: list[Callable[[], None]] = []

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        """(storage key, handler) pairs, in the order the current objects are replayed."""
        raise NotImplementedError

    @property
    def has_work(self) -> bool:
        """Whether `sync()` has untimed work queued (`Components.settle` stops once none has)."""
        return False

    def next_deadline(self, after: datetime) -> datetime | None:
        """The first timed transition due after `after`, where simulated time stops; None: none."""
        return None

    async def sync(self) -> int:
        """One round: make the writes that are due; how many were made."""
        raise NotImplementedError

    def _replayed(self) -> None:
        """Called once the current objects were replayed, before live events arrive."""

    def start(self) -> Self:
        """Load the current objects (as ADDED events with no old object), then follow the store's writes."""
        followed = self.follows()
        for key, handler in followed:
            for obj in self.api.store.items(key):
                handler(StoredEvent(ADDED, obj, None, 0))
        self._replayed()
        self._unsubscribe = [self.api.store.subscribe(key, handler) for key, handler in followed]
        return self

    def close(self) -> None:
        """Stop following the store (idempotent); the component's state stays as it was."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
