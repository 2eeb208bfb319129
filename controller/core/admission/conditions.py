"""Workload conditions as Kueue writes them: QuotaReserved, Admitted, Finished and Evicted.

Applies admission decisions to a Workload model (`status.admission` plus conditions) with `now`
passed in, so the same decision always yields the same status. Called by `tasq simulate`, the
admission loop and the Job reconciler.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from controller.api import constants as c
from controller.api.workload import Admission, Workload, WorkloadStatus

ADMITTED_MESSAGE = "The workload is admitted"


def quota_reserved_message(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def mark_admitted(wl: Workload, admission: dict[str, Any], now: datetime) -> bool:
    """Record the admission and set QuotaReserved=True, Admitted=True, and an Evicted=True back to
    False; True when anything changed."""
    if wl.status is None:
        wl.status = WorkloadStatus()
    new = Admission.model_validate(admission)
    changed = wl.status.admission != new
    wl.status.admission = new
    changed |= wl.set_condition(c.CONDITION_QUOTA_RESERVED, "True", c.REASON_QUOTA_RESERVED,
                                quota_reserved_message(new.cluster_queue), now)
    changed |= wl.set_condition(c.CONDITION_ADMITTED, "True", c.REASON_ADMITTED, ADMITTED_MESSAGE, now)
    evicted = wl.condition(c.CONDITION_EVICTED)
    if evicted is not None and evicted.status == "True":  # an earlier eviction is over (Kueue's wording)
        changed |= wl.set_condition(c.CONDITION_EVICTED, "False", c.REASON_QUOTA_RESERVED,
                                    f"Previously: {evicted.message}", now)
    return changed


def mark_pending(wl: Workload, reason: str, message: str, now: datetime) -> bool:
    """QuotaReserved=False with the reason and message saying why the workload waits."""
    return wl.set_condition(c.CONDITION_QUOTA_RESERVED, "False", reason, message, now)


def mark_finished(wl: Workload, succeeded: bool, message: str, now: datetime) -> bool:
    """Finished=True, reason Succeeded or Failed (Kueue's); the admission stays for the record."""
    reason = c.REASON_SUCCEEDED if succeeded else c.REASON_FAILED
    return wl.set_condition(c.CONDITION_FINISHED, "True", reason, message, now)


def mark_deactivated(workload: Workload, now: datetime) -> bool:
    """Kueue's eviction of a deactivated Workload, once its Job is stopped: Evicted=True (reason
    Deactivated), QuotaReserved=False, Admitted=False (reason NoReservation) and no admission. True
    when anything changed; the caller writes `status.admission` as null so a merge patch drops it."""
    message = "The workload is deactivated"
    changed = workload.set_condition(c.CONDITION_EVICTED, "True", c.REASON_DEACTIVATED, message, now)
    changed |= workload.set_condition(c.CONDITION_QUOTA_RESERVED, "False", c.REASON_PENDING, message, now)
    if workload.condition(c.CONDITION_ADMITTED) is not None:
        changed |= workload.set_condition(c.CONDITION_ADMITTED, "False", c.REASON_NO_RESERVATION,
                                          "The workload has no reservation", now)
    if workload.status is not None and workload.status.admission is not None:
        workload.status.admission = None
        changed = True
    return changed
