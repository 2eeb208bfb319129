"""One watch stream: stored events filtered by namespace/selectors, queued for a consumer.

Created by `ApiServer.watch`; the HTTP layer (or an in-process component) drains it. Selector
transitions follow the API server: an object that starts matching arrives as ADDED, one that stops
matching as DELETED. A watch from a compacted revision yields one ERROR event (410 Gone) and ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from devcluster.server.converting import ConversionFailed
from devcluster.server.errors import INTERNAL_ERROR, ApiError, gone
from devcluster.server.store import ADDED, DELETED, MODIFIED, Compacted, StorageKey, Store, StoredEvent

ERROR = "ERROR"
BOOKMARK = "BOOKMARK"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WatchEvent = dict[str, Any]  # {"type": ..., "object": ...}


class Watch:
    """An async iterator of watch events; `close()` detaches it from the store."""

    def __init__(self, present: Callable[[dict[str, Any]], dict[str, Any]],
                 matches: Callable[[dict[str, Any]], bool],
                 convert: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None) -> None:
        self._present = present
        self._matches = matches
        self._convert = convert
        """Custom objects: each event's object served in the watched version as it is taken
        (a conversion webhook may be called); a failure ends the watch with an ERROR event."""
        self._queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue()
        self._unsubscribe: Callable[[], None] | None = None
        self.closed = False
        self.dropped = False  # ended by fault injection: the HTTP layer cuts the connection
        self.last_revision = 0

    # ---------------------------------------------------------------- setup

    def start_with_objects(self, objects: Iterable[dict[str, Any]]) -> None:
        for obj in objects:
            self._put(ADDED, obj)

    def end_initial_events(self, kind: str, api_version: str, revision: int) -> None:
        """The bookmark that closes the initial events of a streaming list (sendInitialEvents=true)."""
        event = self.bookmark(kind, api_version, revision)
        event["object"]["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
        self._queue.put_nowait(event)

    def attach(self, store: Store, key: StorageKey) -> None:
        self.last_revision = store.revision
        self._unsubscribe = store.subscribe(key, self._on_event)

    def start_from_history(self, store: Store, key: StorageKey, revision: int) -> None:
        """Replay retained events after `revision`, then go live (same synchronous step: no gap)."""
        try:
            events = store.events_since(key, revision)
        except Compacted as e:
            error = gone(f"too old resource version: {e.requested} ({e.oldest})")
            self._queue.put_nowait({"type": ERROR, "object": error.status()})
            self._queue.put_nowait(None)
            return
        for event in events:
            self._on_event(event)
        self.attach(store, key)

    # ---------------------------------------------------------------- delivery

    def _put(self, kind: str, obj: dict[str, Any]) -> None:
        self._queue.put_nowait({"type": kind, "object": self._present(obj)})

    def _on_event(self, event: StoredEvent) -> None:
        if self.closed:
            return
        self.last_revision = event.revision
        now = self._matches(event.object)
        before = event.old is not None and self._matches(event.old)
        if event.type == DELETED:
            if before or now:
                self._put(DELETED, event.object)
        elif event.type == ADDED:
            if now:
                self._put(ADDED, event.object)
        elif now and before:
            self._put(MODIFIED, event.object)
        elif now:
            self._put(ADDED, event.object)
        elif before:
            self._put(DELETED, event.object)

    def pending(self) -> int:
        return self._queue.qsize()

    async def next(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or None when the watch ended or `timeout` passed with nothing queued.

        A queued event is taken without waiting, whatever `timeout` is: Python 3.11's
        `asyncio.wait_for` with a timeout of 0 cancels the `get` before it runs, even with events
        queued, and `_stream` asks with 0 once a bookmark is due, so a due bookmark met by a queued
        event stalled the stream until its timeoutSeconds (5 s at kopf's 10 s watches).
        """
        if self.closed and self._queue.empty():
            return None
        if not self._queue.empty():
            event = self._queue.get_nowait()
        else:
            try:
                event = await asyncio.wait_for(self._queue.get(), timeout)
            except TimeoutError:
                return None
        if event is None:
            self.closed = True
        elif self._convert is not None and event["type"] in (ADDED, MODIFIED, DELETED):
            event = await self._converted(event)
        return event

    async def _converted(self, event: WatchEvent) -> WatchEvent:
        assert self._convert is not None
        try:
            return {"type": event["type"], "object": await self._convert(event["object"])}
        except ConversionFailed as e:
            self.close()
            error = ApiError(500, INTERNAL_ERROR, f"Internal error occurred: {e.detail}")
            return {"type": ERROR, "object": error.status()}

    def next_nowait(self) -> WatchEvent | None:
        """The next queued event without waiting; None if none is queued or the watch ended. Not for
        watches of custom objects (their events are converted as `next` takes them)."""
        assert self._convert is None, "a converting watch is drained with next()"
        try:
            event = self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if event is None:
            self.closed = True
        return event

    def bookmark(self, kind: str, api_version: str, revision: int) -> WatchEvent:
        return {"type": BOOKMARK, "object": {"kind": kind, "apiVersion": api_version,
                                             "metadata": {"resourceVersion": str(revision)}}}

    def drop(self) -> None:
        """End the watch as a broken connection would (fault injection, `devcluster.server.faults`)."""
        self.dropped = True
        self.close()

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchEvent:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event
