"""Kubernetes Events about Jobs and Workloads (`kubectl describe` shows them).

`EventRecorder.post` creates a core/v1 Event naming the object, reason and message (`emit` does it
in the background); a failure to post, whatever it is, is logged once and never raised (an Event is
a courtesy, the status is the record), so no background task ends with an exception. Called by the admission loop and the job reconciler.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.meta import format_time
from controller.kube.api import EVENTS, TRANSPORT_ERRORS, ApiError, KubeApi

log = logging.getLogger(__name__)


PARALLEL_POSTS = 4
"""Events posted at once by `emit`; the rest wait, so a burst of admissions is not slowed by the
three Events each Job brings (they follow a little later)."""


class EventRecorder:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.posted = 0
        self._sending: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._serial = itertools.count()

    @property
    def unsent(self) -> int:
        """Events emitted and not yet posted (or given up)."""
        return len(self._sending)

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = c.EVENT_TYPE_NORMAL) -> None:
        """`post` in the background, `PARALLEL_POSTS` at a time: a status write or a Job start
        never waits for its Event."""
        task = asyncio.create_task(self._post_in_turn(obj, reason, message, type_))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _post_in_turn(self, obj: Mapping[str, Any], reason: str, message: str, type_: str) -> None:
        if self._slots is None:  # created on the loop that posts
            self._slots = asyncio.Semaphore(PARALLEL_POSTS)
        async with self._slots:
            await self.post(obj, reason, message, type_)

    async def post(self, obj: Mapping[str, Any], reason: str, message: str,
                   type_: str = c.EVENT_TYPE_NORMAL) -> None:
        """One Event about `obj` (an object as read from the API: apiVersion, kind, metadata)."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        now = format_time(datetime.now(UTC))
        event = {
            "apiVersion": "v1", "kind": "Event",
            # Unique per object as Kubernetes' recorders make them (its name, a time in hex); the
            # serial separates two Events of one object in the same nanosecond.
            "metadata": {"name": f"{meta.get('name', '')}.{time.time_ns():x}{next(self._serial) % 4096:03x}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                               "name": meta.get("name", ""), "namespace": namespace, "uid": meta.get("uid", ""),
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message[:1024], "type": type_, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": c.EVENT_COMPONENT},
            "reportingComponent": c.EVENT_COMPONENT,
        }
        try:
            await self.api.create(EVENTS, namespace, event)
            self.posted += 1
        except Exception as e:  # refused, no answer (a dropped connection), or a bug: logged, never raised
            detail = str(e) if isinstance(e, ApiError) else f"{type(e).__name__}: {e}".rstrip(": ")
            log.warning("cannot post event %s on %s %s/%s: %s", reason, obj.get("kind"), namespace,
                        meta.get("name"), detail, exc_info=not isinstance(e, (ApiError, *TRANSPORT_ERRORS)))
