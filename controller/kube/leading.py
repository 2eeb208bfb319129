"""Leader election on a coordination.k8s.io/v1 Lease: only the holder admits and ungates.

`tasq run` starts one `LeaderElector` per process; the admission loop and the TopologyUngater wait
on its `leading` event. The holder renews every retry period with the Lease's resourceVersion (a 409
is a lost race); a holder that cannot renew within the renew deadline stops leading; a clean shutdown
clears holderIdentity so a successor takes over at its next retry instead of after the lease duration.
The Lease is read and written as JSON through the door (`controller.kube.api.KubeApi`).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from controller.api import constants as c
from controller.kube.api import LEASES, ApiError, KubeApi

log = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None] | None]


class _Attempt(enum.Enum):
    """How one acquire-or-renew round ended."""

    HELD = "held"  # the Lease names us, freshly renewed
    TAKEN = "taken"  # another live holder has it (or won the race)
    FAILED = "failed"  # the API did not answer usefully: retry; the renew deadline decides


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Holds (or waits for) one Lease; `leading` is set while this process is the leader.

    `clock` returns the current aware datetime and `sleep` waits: both injectable for tests.
    `on_started` / `on_stopped` run (awaited when they return an awaitable) on each transition.
    """

    def __init__(self, api: KubeApi, namespace: str, name: str, identity: str,
                 lease_duration_s: float = 15, renew_deadline_s: float = 10, retry_period_s: float = 2,
                 on_started: Callback | None = None, on_stopped: Callback | None = None,
                 clock: Callable[[], datetime] = _utc_now,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if not retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(f"leader election needs retry period ({retry_period_s}s) < renew deadline "
                             f"({renew_deadline_s}s) < lease duration ({lease_duration_s}s)")
        self.api = api
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration_s, self.renew_deadline_s = lease_duration_s, renew_deadline_s
        self.retry_period_s = retry_period_s
        self.on_started, self.on_stopped = on_started, on_stopped
        self.clock, self.sleep = clock, sleep
        self.leading = asyncio.Event()
        self._renewed_at: datetime | None = None

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    async def run(self) -> None:
        """Acquire, renew and (on cancellation) release the Lease until cancelled."""
        try:
            while True:
                await self.step()
                await self.sleep(self.retry_period_s)
        finally:
            if self.is_leader:
                await self._stop_leading()
                await self.release()

    async def step(self) -> None:
        """One round: try to acquire or renew, then start or stop leading as the outcome says."""
        now = self.clock()
        try:
            attempt = await asyncio.wait_for(self._acquire_or_renew(now), self.renew_deadline_s)
        except TimeoutError:
            attempt = _Attempt.FAILED
        if attempt is _Attempt.HELD:
            self._renewed_at = now
            if not self.is_leader:
                await self._start_leading()
        elif self.is_leader and (attempt is _Attempt.TAKEN or self._past_renew_deadline(self.clock())):
            await self._stop_leading()

    async def release(self) -> bool:
        """Clear holderIdentity if we hold the Lease, so a successor need not wait for expiry."""
        try:
            lease = await asyncio.wait_for(self.api.get(LEASES, self.namespace, self.name), self.renew_deadline_s)
            spec = lease.get("spec") or {}
            if (spec.get("holderIdentity") or "") != self.identity:
                return False
            body = self._body(_resource_version(lease), None, self.clock(), acquire=spec.get("acquireTime"),
                              transitions=int(spec.get("leaseTransitions") or 0), duration_s=1)
            await asyncio.wait_for(self.api.replace(LEASES, self.namespace, self.name, body), self.renew_deadline_s)
            return True
        except (ApiError, TimeoutError) as e:  # TimeoutError: our renew deadline, not the request's
            log.warning("could not release Lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def _past_renew_deadline(self, now: datetime) -> bool:
        return self._renewed_at is None or (now - self._renewed_at).total_seconds() > self.renew_deadline_s

    async def _acquire_or_renew(self, now: datetime) -> _Attempt:
        """Create the Lease if missing; take it if free or expired; renew it if ours (with its resourceVersion)."""
        try:
            lease = await self.api.get(LEASES, self.namespace, self.name)
        except ApiError as e:
            if e.not_found:
                return await self._create(now)
            log.info("reading Lease %s/%s failed: %s", self.namespace, self.name, e)
            return _Attempt.FAILED
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds")
        if holder and holder != self.identity and not self._expired(_time(spec.get("renewTime")), duration, now):
            return _Attempt.TAKEN
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        body = self._body(_resource_version(lease), self.identity, now,
                          acquire=spec.get("acquireTime") if ours else _micro_time(now), transitions=transitions)
        try:
            await self.api.replace(LEASES, self.namespace, self.name, body)
        except ApiError as e:
            if e.conflict and not ours:
                return _Attempt.TAKEN
            log.info("writing Lease %s/%s failed: %s", self.namespace, self.name, e)
            return _Attempt.FAILED
        return _Attempt.HELD

    async def _create(self, now: datetime) -> _Attempt:
        try:
            await self.api.create(LEASES, self.namespace, self._body(None, self.identity, now, _micro_time(now), 0))
        except ApiError as e:
            if not e.conflict:
                log.info("creating Lease %s/%s failed: %s", self.namespace, self.name, e)
            return _Attempt.TAKEN if e.conflict else _Attempt.FAILED
        return _Attempt.HELD

    def _expired(self, renew_time: datetime | None, duration_s: int | None, now: datetime) -> bool:
        """A Lease is free once renewTime + leaseDurationSeconds has passed (or it was never renewed)."""
        if renew_time is None:
            return True
        duration = duration_s if duration_s is not None else self.lease_duration_s
        return (now - renew_time).total_seconds() >= duration

    def _body(self, resource_version: str | None, holder: str | None, now: datetime,
              acquire: str | None, transitions: int, duration_s: int | None = None) -> dict[str, Any]:
        """The whole Lease to write; `resource_version` makes the write conditional (409 when stale)."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        spec: dict[str, Any] = {"renewTime": _micro_time(now), "acquireTime": acquire,
                                "leaseDurationSeconds": duration_s or max(1, round(self.lease_duration_s)),
                                "leaseTransitions": transitions}
        if holder is not None:
            spec["holderIdentity"] = holder
        return {"apiVersion": c.LEASE_API_VERSION, "kind": c.KIND_LEASE, "metadata": metadata, "spec": spec}

    async def _start_leading(self) -> None:
        log.info("%s is now the leader (Lease %s/%s)", self.identity, self.namespace, self.name)
        self.leading.set()
        await _call(self.on_started)

    async def _stop_leading(self) -> None:
        log.warning("%s stopped leading (Lease %s/%s)", self.identity, self.namespace, self.name)
        self.leading.clear()
        await _call(self.on_stopped)


async def _call(callback: Callback | None) -> None:
    if callback is None:
        return
    result = callback()
    if inspect.isawaitable(result):
        await result


def _resource_version(lease: dict[str, Any]) -> str | None:
    version = (lease.get("metadata") or {}).get("resourceVersion")
    return str(version) if version is not None else None


def _micro_time(when: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 in UTC with microseconds, as kube-apiserver writes it."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time(value: Any) -> datetime | None:
    """A Lease time as written (MicroTime, or any RFC 3339 form); None when absent or unreadable,
    which `_expired` treats as never renewed."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
