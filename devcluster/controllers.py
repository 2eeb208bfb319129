"""`StoreFollower`: the start/close plumbing the simulated components share.

The Job controller, the scheduler and the kubelet each keep incremental state from synchronous store
events: on `start()` they see every current object as ADDED, then every committed write; `close()`
stops the events. Subclasses name the resources they follow and their handlers in `follows()`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Self

from devcluster.apiserver import ApiServer
from devcluster.store import ADDED, StorageKey, StoredEvent, Subscriber


class StoreFollower:
    """Replays the current objects of the followed resources, then subscribes to their writes."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._unsubscribe: list[Callable[[], None]] = []

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        """(storage key, handler) pairs, in the order the current objects are replayed."""
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
