"""Leader election on a coordination.k8s.io/v1 Lease: only the holder admits, reconciles Jobs and ungates.

`tasq run` starts one `LeaderElector` per process; the admission loop, the Job reconciler and the
TopologyUngater wait on its `leading` event. The holder renews every retry period with the Lease's resourceVersion (a 409
is a lost race); a holder that cannot renew within the renew deadline stops leading; a clean shutdown
clears holderIdentity so a successor takes over at its next retry instead of after the lease duration.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import aiohttp
from kubernetes.aio.client import (
    ApiClient,
    ApiException,
    CoordinationV1Api,
    V1Lease,
    V1LeaseSpec,
    V1ObjectMeta,
)

from controller.api import constants as c

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

    def __init__(self, api_client: ApiClient, namespace: str, name: str, identity: str,
                 lease_duration_s: float = 15, renew_deadline_s: float = 10, retry_period_s: float = 2,
                 on_started: Callback | None = None, on_stopped: Callback | None = None,
                 clock: Callable[[], datetime] = _utc_now,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if not retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(f"leader election needs retry period ({retry_period_s}s) < renew deadline "
                             f"({renew_deadline_s}s) < lease duration ({lease_duration_s}s)")
        self.api = CoordinationV1Api(api_client)
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
            lease = await asyncio.wait_for(self.api.read_namespaced_lease(self.name, self.namespace),
                                           self.renew_deadline_s)
            spec = lease.spec or V1LeaseSpec()
            if (spec.holder_identity or "") != self.identity:
                return False
            body = self._body(_resource_version(lease), None, self.clock(), acquire=spec.acquire_time,
                              transitions=spec.lease_transitions or 0, duration_s=1)
            await asyncio.wait_for(self.api.replace_namespaced_lease(self.name, self.namespace, body),
                                   self.renew_deadline_s)
            return True
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as e:
            log.warning("could not release Lease %s/%s: %s", self.namespace, self.name, _short(e))
            return False

    def _past_renew_deadline(self, now: datetime) -> bool:
        return self._renewed_at is None or (now - self._renewed_at).total_seconds() > self.renew_deadline_s

    async def _acquire_or_renew(self, now: datetime) -> _Attempt:
        """Create the Lease if missing; take it if free or expired; renew it if ours (with its resourceVersion)."""
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return await self._create(now)
            log.info("reading Lease %s/%s failed: %s", self.namespace, self.name, _short(e))
            return _Attempt.FAILED
        except (aiohttp.ClientError, OSError) as e:
            log.info("reading Lease %s/%s failed: %s", self.namespace, self.name, _short(e))
            return _Attempt.FAILED
        spec = lease.spec or V1LeaseSpec()
        holder = spec.holder_identity or ""
        if holder and holder != self.identity and not self._expired(spec.renew_time, spec.lease_duration_seconds, now):
            return _Attempt.TAKEN
        ours = holder == self.identity
        transitions = (spec.lease_transitions or 0) + (0 if ours else 1)
        body = self._body(_resource_version(lease), self.identity, now,
                          acquire=spec.acquire_time if ours else now, transitions=transitions)
        try:
            await self.api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as e:
            if e.status == 409 and not ours:
                return _Attempt.TAKEN
            log.info("writing Lease %s/%s failed: %s", self.namespace, self.name, _short(e))
            return _Attempt.FAILED
        except (aiohttp.ClientError, OSError) as e:
            log.info("writing Lease %s/%s failed: %s", self.namespace, self.name, _short(e))
            return _Attempt.FAILED
        return _Attempt.HELD

    async def _create(self, now: datetime) -> _Attempt:
        try:
            await self.api.create_namespaced_lease(self.namespace, self._body(None, self.identity, now, now, 0))
        except ApiException as e:
            return _Attempt.TAKEN if e.status == 409 else _Attempt.FAILED
        except (aiohttp.ClientError, OSError):
            return _Attempt.FAILED
        return _Attempt.HELD

    def _expired(self, renew_time: datetime | None, duration_s: int | None, now: datetime) -> bool:
        """A Lease is free once renewTime + leaseDurationSeconds has passed (or it was never renewed)."""
        if renew_time is None:
            return True
        duration = duration_s if duration_s is not None else self.lease_duration_s
        return (now - renew_time).total_seconds() >= duration

    def _body(self, resource_version: str | None, holder: str | None, now: datetime,
              acquire: datetime | None, transitions: int, duration_s: int | None = None) -> V1Lease:
        """The whole Lease to write; `resource_version` makes the write conditional (409 when stale)."""
        return V1Lease(
            api_version=c.LEASE_API_VERSION, kind=c.KIND_LEASE,
            metadata=V1ObjectMeta(name=self.name, namespace=self.namespace, resource_version=resource_version),
            spec=V1LeaseSpec(holder_identity=holder, renew_time=now, acquire_time=acquire,
                             lease_duration_seconds=duration_s or max(1, round(self.lease_duration_s)),
                             lease_transitions=transitions))

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


def _resource_version(lease: V1Lease) -> str | None:
    return lease.metadata.resource_version if lease.metadata else None


def _short(e: BaseException) -> str:
    status = getattr(e, "status", None)
    reason = getattr(e, "reason", None)
    return f"{status} {reason}" if status is not None else f"{type(e).__name__}: {e}"
