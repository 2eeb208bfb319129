"""waitForPodsReady as Kueue does it: the PodsReady condition, the timeout, the requeue backoff.

Pure decisions on a Workload model with `now` passed in: its PodsReady condition from how many pods
are ready, when an admitted Workload that is not ready runs out of time (`readiness_deadline`), its
eviction with reason PodsReadyTimeout and `status.requeueState` (`mark_pods_ready_timeout`), the end
of its backoff (`mark_requeued`), and whether it holds up every other admission under
`blockAdmission`. Called by the Job reconciler (PodsReady), the admission loop (timeouts, backoff,
blocking) and `tasq explain`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from controller.api import constants as c
from controller.api.configuration import WaitForPodsReady
from controller.api.meta import format_time
from controller.api.workload import RequeueState, Workload, WorkloadStatus
from controller.core.admission.conditions import is_evicted, mark_evicted
from controller.core.admission.workloads import parse_timestamp

NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"
BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"
REACTIVATED_MESSAGE = "The workload was reactivated"
LIMIT_EXCEEDED_MESSAGE = "exceeding the maximum number of re-queuing retries"


def timeout_message(key: str) -> str:
    """Kueue's Evicted message of a PodsReady timeout (`key` is namespace/name)."""
    return f"Exceeded the PodsReady timeout {key}"


def mark_pods_ready(workload: Workload, ready: bool, now: datetime) -> bool:
    """PodsReady as Kueue's Job reconciler sets it. Not admitted: False/WaitForStart. Ready:
    True/Started, or True/Recovered after a WaitForRecovery. Not ready: False/WaitForStart until it
    was once ready, then False/WaitForRecovery. True when it changed."""
    before = workload.condition(c.CONDITION_PODS_READY)
    if not workload.is_admitted:
        return workload.set_condition(c.CONDITION_PODS_READY, "False", c.REASON_WAIT_FOR_START, NOT_READY_MESSAGE, now)
    if ready:
        recovered = before is not None and before.reason in (c.REASON_WAIT_FOR_RECOVERY, c.REASON_RECOVERED)
        return workload.set_condition(c.CONDITION_PODS_READY, "True",
                                      c.REASON_RECOVERED if recovered else c.REASON_STARTED, READY_MESSAGE, now)
    if before is not None and (before.status == "True" or before.reason == c.REASON_WAIT_FOR_RECOVERY):
        return workload.set_condition(c.CONDITION_PODS_READY, "False", c.REASON_WAIT_FOR_RECOVERY,
                                      RECOVERY_MESSAGE, now)
    return workload.set_condition(c.CONDITION_PODS_READY, "False", c.REASON_WAIT_FOR_START, NOT_READY_MESSAGE, now)


@dataclass(frozen=True, slots=True)
class ReadinessDeadline:
    """When an admitted, not-ready Workload is evicted: `cause` WaitForStart (counted from its
    admission, `timeout`) or WaitForRecovery (from losing readiness, `recoveryTimeout`); `at` in
    seconds since the epoch."""

    cause: str
    at: float


def readiness_deadline(workload: Workload, settings: WaitForPodsReady) -> ReadinessDeadline | None:
    """Kueue's rule: only an admitted, active, unfinished Workload not already evicted whose
    PodsReady is not True has one; None otherwise (or while recovering with no recoveryTimeout)."""
    if not workload.is_admitted or workload.is_finished or not workload.active or is_evicted(workload):
        return None
    pods_ready = workload.condition(c.CONDITION_PODS_READY)
    if pods_ready is not None and pods_ready.status == "True":
        return None
    if pods_ready is not None and pods_ready.reason == c.REASON_WAIT_FOR_RECOVERY:
        if settings.recovery_timeout_s is None:
            return None
        since = parse_timestamp(pods_ready.last_transition_time, 0.0)
        return ReadinessDeadline(c.REASON_WAIT_FOR_RECOVERY, since + settings.recovery_timeout_s)
    admitted = workload.condition(c.CONDITION_ADMITTED)
    since = parse_timestamp(admitted.last_transition_time if admitted is not None else None, 0.0)
    return ReadinessDeadline(c.REASON_WAIT_FOR_START, since + settings.timeout_s)


def backoff_seconds(count: int, base_s: int, max_s: int) -> float:
    """Kueue's requeue delay before the `count`-th requeue: base * 2^(count-1), at most max. Kueue
    adds a random jitter of at most 0.01% of the delay; tasq leaves it out, so the same eviction
    always gives the same requeueAt (the difference is under 0.4 s at the 3600 s cap)."""
    if count < 1:
        return 0.0
    return float(min(base_s * 2 ** min(count - 1, 62), max_s))


def requeue_count(workload: Workload) -> int:
    state = workload.status.requeue_state if workload.status is not None else None
    return state.count or 0 if state is not None else 0


def requeue_at(workload: Workload) -> float | None:
    """`status.requeueState.requeueAt` in seconds since the epoch, if set."""
    state = workload.status.requeue_state if workload.status is not None else None
    if state is None or state.requeue_at is None:
        return None
    return parse_timestamp(state.requeue_at, 0.0)


def requeuing_exhausted(workload: Workload, settings: WaitForPodsReady) -> bool:
    """One more requeue would pass `backoffLimitCount`: the Workload is deactivated instead."""
    limit = settings.requeuing_strategy.backoff_limit_count
    return limit is not None and requeue_count(workload) + 1 > limit


def mark_pods_ready_timeout(workload: Workload, key: str, settings: WaitForPodsReady, now: datetime) -> bool:
    """The timeout's eviction, in one status change: Evicted=True reason PodsReadyTimeout (Kueue's
    message) and `requeueState` counted up, `requeueAt` = now + `backoff_seconds` (never moved
    earlier than one already set). The admission stays until its Job is stopped
    (controller.kube.evicting). True when it changed; False for one already evicted."""
    if not mark_evicted(workload, c.REASON_PODS_READY_TIMEOUT, timeout_message(key), now):
        return False
    status = workload.status if workload.status is not None else WorkloadStatus()
    count = requeue_count(workload) + 1
    strategy = settings.requeuing_strategy
    wait = backoff_seconds(count, strategy.backoff_base_seconds, strategy.backoff_max_seconds)
    at = now.astimezone(UTC) + timedelta(seconds=wait)
    earlier = requeue_at(workload)
    kept = status.requeue_state.requeue_at if status.requeue_state is not None else None
    text = kept if kept is not None and earlier is not None and earlier >= at.timestamp() else format_time(at)
    status.requeue_state = RequeueState(count=count, requeue_at=text)
    workload.status = status
    return True


def mark_deactivation_target(workload: Workload, now: datetime) -> bool:
    """Kueue's DeactivationTarget=True reason RequeuingLimitExceeded: the Workload's requeues are
    used up; the caller then sets `spec.active: false` and the deactivation evicts it."""
    return workload.set_condition(c.CONDITION_DEACTIVATION_TARGET, "True", c.REASON_REQUEUING_LIMIT_EXCEEDED,
                                  LIMIT_EXCEEDED_MESSAGE, now)


def in_backoff(workload: Workload, now: float) -> bool:
    """Not to be admitted yet: its `requeueAt` is in the future."""
    at = requeue_at(workload)
    return at is not None and at > now


def requeue_due(workload: Workload, now: float) -> str | None:
    """The Requeued reason a waiting Workload is due at `now`, without changing it: BackoffFinished
    once the backoff after a PodsReady timeout has passed, Reactivated once a deactivated one is
    active again; None when neither (or Requeued is already True)."""
    evicted = workload.condition(c.CONDITION_EVICTED)
    if (evicted is None or evicted.status != "True" or workload.reserved_admission is not None
            or workload.is_finished or not workload.active or workload.condition_true(c.CONDITION_REQUEUED)):
        return None
    if evicted.reason == c.REASON_DEACTIVATED:
        return c.REASON_REACTIVATED
    if evicted.reason == c.REASON_PODS_READY_TIMEOUT and not in_backoff(workload, now):
        return c.REASON_BACKOFF_FINISHED
    return None


def mark_requeued(workload: Workload, now: datetime) -> bool:
    """A waiting Workload may be admitted again (`requeue_due`), as Kueue records it: Requeued=True
    reason BackoffFinished with `requeueAt` cleared (the count stays), or reason Reactivated. True
    when it changed."""
    reason = requeue_due(workload, now.timestamp())
    if reason == c.REASON_REACTIVATED:
        return workload.set_condition(c.CONDITION_REQUEUED, "True", c.REASON_REACTIVATED, REACTIVATED_MESSAGE, now)
    if reason is None:
        return False
    changed = workload.set_condition(c.CONDITION_REQUEUED, "True", c.REASON_BACKOFF_FINISHED,
                                     BACKOFF_FINISHED_MESSAGE, now)
    state = workload.status.requeue_state if workload.status is not None else None
    if state is not None and state.requeue_at is not None:
        state.requeue_at = None
        changed = True
    return changed


def holds_admission(workload: Workload) -> bool:
    """Under `blockAdmission`: admitted, unfinished, not being evicted and PodsReady not yet True,
    so no other Workload is admitted meanwhile (across ClusterQueues, as Kueue)."""
    return (workload.is_admitted and not workload.is_finished and workload.active and not is_evicted(workload)
            and not workload.condition_true(c.CONDITION_PODS_READY))


def pods_ready_summary(workload: Workload, now: float) -> list[str]:
    """What `tasq explain workload` says of waitForPodsReady: the PodsReady condition, the requeues
    so far and when the backoff ends (seconds from `now`); nothing for a Workload it never touched."""
    lines = []
    cond = workload.condition(c.CONDITION_PODS_READY)
    if cond is not None:
        lines.append(f"PodsReady={cond.status} ({cond.reason}) since {cond.last_transition_time}: {cond.message}")
    count = requeue_count(workload)
    at = requeue_at(workload)
    if count or at is not None:
        text = f"requeued {count} time(s) after a PodsReady timeout"
        state = workload.status.requeue_state if workload.status is not None else None
        if at is not None and state is not None and at > now:
            text += f"; in backoff until {state.requeue_at} ({at - now:.0f}s from now): not admitted before"
        elif at is not None and state is not None:
            text += f"; its backoff ended at {state.requeue_at}"
        lines.append(text)
    if not workload.active:
        target = workload.condition(c.CONDITION_DEACTIVATION_TARGET)
        evicted = workload.condition(c.CONDITION_EVICTED)
        why = evicted.message if evicted is not None and evicted.reason == c.REASON_DEACTIVATED else (
            target.message if target is not None else "spec.active is false")
        lines.append(f"deactivated: {why}; set spec.active to true to queue it again")
    return lines
