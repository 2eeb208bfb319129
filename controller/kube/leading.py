"""Leader election on a coordination.k8s.io/v1 Lease: only the holder admits, reconciles Jobs and ungates.

`tasq run` starts one `LeaderElector` per process; the admission loop, the Job reconciler and the
TopologyUngater wait on its `leading` event. The holder renews every retry period with the Lease's resourceVersion (a 409
is a lost race), from the Lease as it last wrote it (no read first unless that fails); a holder that cannot renew within the renew deadline stops leading; a clean shutdown
clears holderIdentity so a successor takes over at its next retry instead of after the lease duration.
A standby sleeps only until the holder's lease runs out when that comes before its next retry. A Lease
it may not touch (403) or whose namespace is missing is logged at WARNING with the fix, and `can_act`
(what /readyz reports) stays false until the Lease is readable again.
The Lease is read and written as JSON through the door (`controller.kube.api.KubeApi`).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
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


EXPIRY_MARGIN_S = 0.05
"""How long after a holder's lease runs out a standby tries to take it (renewTime has whole-µs precision)."""


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
                 namespace_fix: str | None = None,
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
        self._held: dict[str, Any] | None = None
        """The Lease as this replica last wrote it (the leader's next renewal starts from it)."""
        self.namespace_fix = namespace_fix or f"create it: kubectl create namespace {namespace}"
        self.blocked: str | None = None
        """Why this replica cannot take part in the election, with the fix; None while it can."""
        self._standing_by = False  # the last round read the Lease held by another live replica
        self._holder_expires_at: datetime | None = None  # when that holder's lease runs out
        self._problem: str | None = None  # the blocking failure of the current round, if any
        self._failing_since: datetime | None = None  # first of the current run of transient failures
        self._last_failure = ""  # what the latest transient failure was
        self._unreachable_said = False  # that run has been logged at WARNING

    @property
    def can_act(self) -> bool:
        """Leading, or a standby that reads a Lease another live replica holds (ready to take it over)."""
        return self.is_leader or (self.blocked is None and self._standing_by)

    @property
    def not_acting(self) -> str | None:
        """Why this replica can neither lead nor stand by (what /readyz says); None when it can."""
        if self.can_act:
            return None
        if self.blocked is not None:
            return self.blocked
        lease = f"the leader Lease {self.namespace}/{self.name} has not been read yet"
        return f"{lease} (last failure: {self._last_failure})" if self._last_failure else lease

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    async def run(self) -> None:
        """Acquire, renew and (on cancellation) release the Lease until cancelled."""
        try:
            while True:
                await self.step()
                await self.sleep(self.next_wait())
        finally:
            if self.is_leader:
                await self._stop_leading()
                await self.release()

    def next_wait(self) -> float:
        """Seconds until the next round: the retry period, or less when the holder's lease runs out sooner."""
        if self.is_leader or self._holder_expires_at is None:
            return self.retry_period_s
        until = (self._holder_expires_at - self.clock()).total_seconds() + EXPIRY_MARGIN_S
        return min(self.retry_period_s, max(until, EXPIRY_MARGIN_S))

    async def step(self) -> None:
        """One round: try to acquire or renew, then start or stop leading as the outcome says."""
        now = self.clock()
        self._problem, self._holder_expires_at = None, None
        try:
            attempt = await asyncio.wait_for(self._acquire_or_renew(now), self.renew_deadline_s)
        except TimeoutError:
            self._last_failure = f"no answer within the renew deadline ({self.renew_deadline_s:g}s)"
            attempt = _Attempt.FAILED
        self._report(attempt, now)
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

    def _report(self, attempt: _Attempt, now: datetime) -> None:
        """Keep `blocked` and the standby state current; log a blocking failure (and its end) once."""
        if attempt is _Attempt.FAILED and self._problem is None:
            self._report_transient(now)
            return  # transient: the state of the last useful round stands
        if self._unreachable_said:
            log.warning("%s gets answers about Lease %s/%s again", self.identity, self.namespace, self.name)
        self._failing_since, self._unreachable_said = None, False
        self._standing_by = attempt is _Attempt.TAKEN
        if self._problem == self.blocked:
            return
        if self._problem is not None:
            log.warning("%s cannot take part in leader election, so it neither admits nor reports ready: %s",
                        self.identity, self._problem)
        else:
            log.warning("%s can read Lease %s/%s again and takes part in leader election",
                        self.identity, self.namespace, self.name)
        self.blocked = self._problem

    def _report_transient(self, now: datetime) -> None:
        """Transient failures (no answer, 5xx) that have lasted the renew deadline are logged once at
        WARNING: an API server out of reach must not leave the replica silently idle."""
        if self._failing_since is None:
            self._failing_since = now
        lasted = (now - self._failing_since).total_seconds()
        if not self._unreachable_said and lasted >= self.renew_deadline_s:
            self._unreachable_said = True
            log.warning("%s has had no usable answer about Lease %s/%s for %.0fs (%s), so it neither takes nor "
                        "keeps the lead; retrying every %gs", self.identity, self.namespace, self.name, lasted,
                        self._last_failure, self.retry_period_s)

    def _failed(self, verb: str, e: ApiError) -> _Attempt:
        """A failed Lease request: FAILED, with a blocking problem and its fix for a 403."""
        if e.forbidden:
            self._problem = (f"forbidden to {verb} Lease {self.namespace}/{self.name} ({e.message}); "
                             f"grant get, create and update on leases in namespace {self.namespace} to tasq's "
                             f"identity (config/rbac/leader_election_role.yaml)")
        log.info("%s Lease %s/%s failed: %s", verb, self.namespace, self.name, e)
        self._last_failure = f"{verb}: {e.message if e.status == 0 else e}"  # 0: no answer, no status
        return _Attempt.FAILED

    def _past_renew_deadline(self, now: datetime) -> bool:
        return self._renewed_at is None or (now - self._renewed_at).total_seconds() > self.renew_deadline_s

    async def _acquire_or_renew(self, now: datetime) -> _Attempt:
        """Create the Lease if missing; take it if free or expired; renew it if ours (with its
        resourceVersion). A leader renews the Lease as it last wrote it, without reading it first
        (one request per round, as client-go's elector does); a conflict, or any failure, falls
        back to reading it."""
        if self.is_leader and self._held is not None:
            held = self._held.get("spec") or {}
            body = self._body(_resource_version(self._held), self.identity, now, acquire=held.get("acquireTime"),
                              transitions=int(held.get("leaseTransitions") or 0))
            self._held = None
            try:
                self._held = await self.api.replace(LEASES, self.namespace, self.name, body)
                return _Attempt.HELD
            except ApiError as e:
                log.debug("renewing Lease %s/%s as last written failed (%s); reading it", self.namespace, self.name, e)
        try:
            lease = await self.api.get(LEASES, self.namespace, self.name)
        except ApiError as e:
            if e.not_found:
                return await self._create(now)
            return self._failed("get", e)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds")
        renewed = _time(spec.get("renewTime"))
        if holder and holder != self.identity and not self._expired(renewed, duration, now):
            self._holder_expires_at = self._expiry(renewed, duration)
            return _Attempt.TAKEN
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        body = self._body(_resource_version(lease), self.identity, now,
                          acquire=spec.get("acquireTime") if ours else _micro_time(now), transitions=transitions)
        try:
            self._held = await self.api.replace(LEASES, self.namespace, self.name, body)
        except ApiError as e:
            if e.conflict and not ours:
                return _Attempt.TAKEN
            return self._failed("update", e)
        return _Attempt.HELD

    async def _create(self, now: datetime) -> _Attempt:
        try:
            self._held = await self.api.create(LEASES, self.namespace,
                                               self._body(None, self.identity, now, _micro_time(now), 0))
        except ApiError as e:
            if e.conflict:
                return _Attempt.TAKEN
            if e.not_found:  # the Lease's namespace: a create answers 404 only for that
                self._problem = f"namespace {self.namespace} of Lease {self.name} does not exist; {self.namespace_fix}"
                log.info("create Lease %s/%s failed: %s", self.namespace, self.name, e)
                return _Attempt.FAILED
            return self._failed("create", e)
        return _Attempt.HELD

    def _expiry(self, renew_time: datetime | None, duration_s: int | None) -> datetime | None:
        """When a Lease runs out: renewTime + leaseDurationSeconds (None: never renewed, free now)."""
        if renew_time is None:
            return None
        return renew_time + timedelta(seconds=duration_s if duration_s is not None else self.lease_duration_s)

    def _expired(self, renew_time: datetime | None, duration_s: int | None, now: datetime) -> bool:
        """A Lease is free once renewTime + leaseDurationSeconds has passed (or it was never renewed)."""
        expiry = self._expiry(renew_time, duration_s)
        return expiry is None or now >= expiry

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
