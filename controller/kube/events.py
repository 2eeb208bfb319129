"""Kubernetes Events about Jobs and Workloads (`kubectl describe` shows them).

`EventRecorder.emit` asks controller.core.event_correlation what a repeat deserves (as Kubernetes'
recorder: the same object, type, reason and message again is a count bump, written at most every
30 s, never a new Event; an object's Events past a burst are rate-limited) and then, in the
background (while Workloads and Jobs keep arriving, after the lull: controller.kube.arrivals), `post`s a
new core/v1 Event or patches the count of the one posted; a failure, whatever
it is, is logged once and never raised (an Event is a courtesy, the status is the record), so no
background task ends with an exception. Called by the admission loop, the reconcilers and eviction.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.api.meta import format_time
from controller.core.event_correlation import Bump, Create, EventCorrelator
from controller.kube.api import EVENTS, TRANSPORT_ERRORS, ApiError, KubeApi
from controller.kube.arrivals import Arrivals

log = logging.getLogger(__name__)


PARALLEL_POSTS = 4
"""Events posted at once by `emit`; the rest wait, so a burst of admissions is not slowed by the
three Events each Job brings (they follow a little later)."""


class EventRecorder:
    def __init__(self, api: KubeApi, correlator: EventCorrelator | None = None,
                 clock: Callable[[], float] = time.monotonic, arrivals: Arrivals | None = None) -> None:
        self.api = api
        self.arrivals = arrivals
        """While Workloads and Jobs keep arriving, Events wait for a lull (controller.kube.arrivals)."""
        self.correlator = correlator if correlator is not None else EventCorrelator()
        self.clock = clock
        self.posted = 0
        self.bumped = 0
        """Count bumps written (repeats of a posted Event)."""
        self.dropped = 0
        """Emits that wrote nothing: repeats held for the next bump, or an object's rate spent."""
        self._sending: set[asyncio.Task[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._serial = itertools.count()

    async def flushed(self, timeout: float) -> int:
        """Wait, at most `timeout` seconds, for the Events being posted; how many were left unsent."""
        if self._sending:
            await asyncio.wait(set(self._sending), timeout=timeout)
        return len(self._sending)

    @property
    def unsent(self) -> int:
        """Events emitted and not yet posted (or given up)."""
        return len(self._sending)

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = c.EVENT_TYPE_NORMAL) -> None:
        """Decide now (so repeats are judged in the order they happen), write in the background,
        `PARALLEL_POSTS` at a time: a status write or a Job start never waits for its Event."""
        message = message[:1024]
        decision = self.correlator.decide(_identity(obj), type_, reason, message, self.clock())
        if not isinstance(decision, (Create, Bump)):
            self.dropped += 1
            return
        # A task waiting its turn keeps only what the Event names, not the whole object: in a burst
        # thousands wait, and whole Workloads and Jobs were the operator's largest transient peak.
        task = asyncio.create_task(self._write_in_turn(_reference(obj), reason, message, type_, decision))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _write_in_turn(self, obj: Mapping[str, Any], reason: str, message: str, type_: str,
                             decision: Create | Bump) -> None:
        if self.arrivals is not None:
            await self.arrivals.lull()
        if self._slots is None:  # created on the loop that posts
            self._slots = asyncio.Semaphore(PARALLEL_POSTS)
        async with self._slots:
            if isinstance(decision, Bump) and await self._bump(obj, reason, decision):
                return
            name = await self.post(obj, reason, message, type_)
            if name is None:
                self.correlator.forget(decision.series)
            else:
                self.correlator.named(decision.series, name, self.clock())

    async def _bump(self, obj: Mapping[str, Any], reason: str, bump: Bump) -> bool:
        """Patch the posted Event's count and lastTimestamp; False when it is gone (the API
        server's TTL removed it: the caller posts a new one). A failure is logged, never raised."""
        namespace = _namespace(obj)
        patch = {"count": bump.count, "lastTimestamp": format_time(datetime.now(UTC))}
        try:
            await self.api.merge_patch(EVENTS, namespace, bump.name, patch)
        except ApiError as e:
            if e.not_found:
                self.correlator.forget(bump.series)
                return False
            _log_failure(obj, reason, e)
            return True
        except Exception as e:  # no answer, or a bug: logged, never raised
            _log_failure(obj, reason, e)
            return True
        self.bumped += 1
        return True

    async def post(self, obj: Mapping[str, Any], reason: str, message: str,
                   type_: str = c.EVENT_TYPE_NORMAL) -> str | None:
        """One Event about `obj` (an object as read from the API: apiVersion, kind, metadata);
        its name, None when it could not be posted (logged)."""
        meta = obj.get("metadata") or {}
        namespace = _namespace(obj)
        now = format_time(datetime.now(UTC))
        name = f"{meta.get('name', '')}.{time.time_ns():x}{next(self._serial) % 4096:03x}"
        event = {
            "apiVersion": "v1", "kind": "Event",
            # Unique per object as Kubernetes' recorders make them (its name, a time in hex); the
            # serial separates two Events of one object in the same nanosecond.
            "metadata": {"name": name, "namespace": namespace},
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
        except Exception as e:  # refused, no answer (a dropped connection), or a bug: logged, never raised
            _log_failure(obj, reason, e)
            return None
        self.posted += 1
        return name


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What `post`, `_bump` and their failure logs read of the object an Event is about."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _identity(obj: Mapping[str, Any]) -> str:
    """The object an Event is about: its uid, else kind, namespace and name."""
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or f"{obj.get('kind', '')}/{meta.get('namespace', '')}/{meta.get('name', '')}")


def _log_failure(obj: Mapping[str, Any], reason: str, error: Exception) -> None:
    meta = obj.get("metadata") or {}
    detail = str(error) if isinstance(error, ApiError) else f"{type(error).__name__}: {error}".rstrip(": ")
    log.warning("cannot post event %s on %s %s/%s: %s", reason, obj.get("kind"), _namespace(obj),
                meta.get("name"), detail, exc_info=not isinstance(error, (ApiError, *TRANSPORT_ERRORS)))
