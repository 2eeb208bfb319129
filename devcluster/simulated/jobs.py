"""The devcluster's Job controller (batch/v1): pods per parallelism/completions, indexes, suspend, backoff.

`plan_job` is the pure part: from a Job and its pods it decides which pods to create (with which
completion index) and delete, and the status to write. `JobController` follows the store's Job and
pod events, keeps which terminated pods were counted, and applies plans in `sync()` (driven by
`devcluster.simulated.components`). Rules follow pkg/controller/job (Kubernetes 1.31); see devcluster/README.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from devcluster import constants as c
from devcluster.constants import TERMINAL_PHASES
from devcluster.server.apiserver import ApiServer
from devcluster.server.builtins import LABEL_LEGACY_CONTROLLER_UID, LABEL_LEGACY_JOB_NAME
from devcluster.server.clock import parse_time, timestamp
from devcluster.server.errors import ApiError
from devcluster.server.patching import clone
from devcluster.server.store import DELETED, StorageKey, StoredEvent, Subscriber, object_key
from devcluster.simulated.controllers import PODS_KEY, StoreFollower, pod_phase
from devcluster.simulated.recording import NORMAL, WARNING, EventRecorder

JOBS_KEY = ("batch", "jobs")
INDEXED = "Indexed"
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"

COND_COMPLETE = c.CONDITION_JOB_COMPLETE
COND_FAILED = c.CONDITION_JOB_FAILED
COND_SUSPENDED = "Suspended"
COND_SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
COND_FAILURE_TARGET = "FailureTarget"
REASON_COMPLETIONS_REACHED = "CompletionsReached"
REASON_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_JOB_SUSPENDED = "JobSuspended"
REASON_JOB_RESUMED = "JobResumed"
MESSAGE_COMPLETIONS = "Reached expected number of succeeded pods"
MESSAGE_BACKOFF = "Job has reached the specified backoff limit"
MESSAGE_DEADLINE = "Job was active longer than specified deadline"
# Replacements for failed pods wait 10 s, doubled per failure since the last success, at most 10 min
# (pkg/controller/job: DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff).
POD_FAILURE_BACKOFF_SECONDS = 10.0
MAX_POD_FAILURE_BACKOFF_SECONDS = 600.0

PodKey = tuple[str, str]


@dataclass
class JobRecord:
    """What the controller remembers about one Job: the uids of terminated pods already counted, and
    its pod-failure backoff (failures since the last success, when the latest was seen)."""

    succeeded: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    succeeded_indexes: set[int] = field(default_factory=set)
    base_succeeded: int = 0  # counts found in status when first seen (a restarted controller)
    base_failed: int = 0
    failures_since_success: int = 0
    last_failure: datetime | None = None

    def count_failure(self, uid: str, now: datetime) -> None:
        if uid not in self.failed:
            self.failed.add(uid)
            self.failures_since_success += 1
            self.last_failure = now

    def backoff_until(self) -> datetime | None:
        """When a replacement pod may be created again; None when no failure holds it back."""
        if not self.failures_since_success or self.last_failure is None:
            return None
        delay = min(POD_FAILURE_BACKOFF_SECONDS * 2 ** (self.failures_since_success - 1),
                    MAX_POD_FAILURE_BACKOFF_SECONDS)
        return self.last_failure + timedelta(seconds=delay)


@dataclass(frozen=True, slots=True)
class PodToCreate:
    index: int | None


@dataclass
class JobPlan:
    """The outcome of one sync: pods to create and delete, the status to write, and when to look at
    the Job again though nothing changes (a backoff ends, the active deadline passes)."""

    create: list[PodToCreate] = field(default_factory=list)
    delete: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    wake_at: datetime | None = None

    def wake_no_later_than(self, moment: datetime) -> None:
        self.wake_at = moment if self.wake_at is None else min(self.wake_at, moment)


def pod_index(pod: Mapping[str, Any]) -> int | None:
    """The completion index from the pod's label; None when absent or not a number."""
    raw = ((pod.get("metadata") or {}).get("labels") or {}).get(c.LABEL_JOB_COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def compress_indexes(indexes: Iterable[int]) -> str:
    """`0-2,4,6-7`: Kubernetes' completedIndexes format."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _condition(conditions: list[dict[str, Any]], kind: str, status: str, reason: str, message: str,
               now: str) -> None:
    """Set a condition in place; lastTransitionTime changes only when the status does."""
    for cond in conditions:
        if cond.get("type") == kind:
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now
            cond.update({"status": status, "reason": reason, "message": message, "lastProbeTime": now})
            return
    conditions.append({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastProbeTime": now, "lastTransitionTime": now})


def _is_true(conditions: Iterable[Mapping[str, Any]], kind: str) -> bool:
    return any(cd.get("type") == kind and cd.get("status") == "True" for cd in conditions)


def plan_job(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], record: JobRecord,
             now: datetime) -> JobPlan:
    """Phase 1 (pure): count pods, then suspend / fail / complete / scale, and derive the status."""
    spec = job.get("spec") or {}
    status = clone(dict(job.get("status") or {}))
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    pods = list(pods)
    active = [p for p in pods if pod_phase(p) not in TERMINAL_PHASES and not p["metadata"].get("deletionTimestamp")]
    _count_terminated(pods, record, now)
    plan = JobPlan(status=status)
    finished = _is_true(conditions, COND_COMPLETE) or _is_true(conditions, COND_FAILED)
    if finished:
        plan.delete = [dict(p) for p in active]
    elif spec.get("suspend"):
        _plan_suspended(plan, active, conditions, now)
    else:
        _plan_running(plan, spec, active, record, conditions, now)
    _fill_counts(plan, spec, active, record)
    return plan


def _count_terminated(pods: list[Mapping[str, Any]], record: JobRecord, now: datetime) -> None:
    """Record newly Succeeded pods (a success ends the failure backoff) and then newly Failed ones."""
    for pod in pods:
        uid = str(pod["metadata"].get("uid"))
        if pod_phase(pod) == "Succeeded" and uid not in record.succeeded:
            record.succeeded.add(uid)
            record.failures_since_success = 0
            index = pod_index(pod)
            if index is not None:
                record.succeeded_indexes.add(index)
    for pod in pods:
        if pod_phase(pod) == "Failed":
            record.count_failure(str(pod["metadata"].get("uid")), now)


def _plan_suspended(plan: JobPlan, active: list[Mapping[str, Any]], conditions: list[dict[str, Any]],
                    now: datetime) -> None:
    """Suspended: no pods (active ones are deleted, not counted as failed), condition Suspended=True.
    Entering suspension clears startTime (Kubernetes 1.36+, MutableSchedulingDirectivesForSuspendedJobs)."""
    plan.delete = [dict(p) for p in active]
    if not _is_true(conditions, COND_SUSPENDED):
        plan.status.pop("startTime", None)
    _condition(conditions, COND_SUSPENDED, "True", REASON_JOB_SUSPENDED, "Job suspended", timestamp(now))


def _plan_running(plan: JobPlan, spec: Mapping[str, Any], active: list[Mapping[str, Any]], record: JobRecord,
                  conditions: list[dict[str, Any]], now: datetime) -> None:
    """Unsuspended: start time, then backoff limit, active deadline, completion (each may end the Job),
    then pods to create/delete for parallelism, creations held back while a failure backoff runs."""
    status, stamp = plan.status, timestamp(now)
    if _is_true(conditions, COND_SUSPENDED):
        # Resuming restarts the activeDeadlineSeconds clock: Kubernetes resets startTime.
        _condition(conditions, COND_SUSPENDED, "False", REASON_JOB_RESUMED, "Job resumed", stamp)
        status["startTime"] = stamp
    status.setdefault("startTime", stamp)
    failed = record.base_failed + len(record.failed)
    if failed > int(spec.get("backoffLimit", 6)):
        _fail(plan, active, record, conditions, REASON_BACKOFF_LIMIT_EXCEEDED, MESSAGE_BACKOFF, stamp)
        return
    deadline = _active_deadline(spec, status)
    if deadline is not None and now >= deadline:
        _fail(plan, active, record, conditions, REASON_DEADLINE_EXCEEDED, MESSAGE_DEADLINE, stamp)
        return
    if _completed(spec, active, record):
        for kind in (COND_SUCCESS_CRITERIA_MET, COND_COMPLETE):
            _condition(conditions, kind, "True", REASON_COMPLETIONS_REACHED, MESSAGE_COMPLETIONS, stamp)
        status["completionTime"] = stamp
        plan.delete = [dict(p) for p in active]
        return
    if deadline is not None:
        plan.wake_no_later_than(deadline)
    if spec.get("completionMode") == INDEXED:
        _scale_indexed(plan, spec, active, record)
    else:
        _scale_non_indexed(plan, spec, active, record)
    backoff = record.backoff_until()
    if plan.create and backoff is not None and now < backoff:
        plan.create = []  # as the Job controller: replacements wait out the failure backoff
        plan.wake_no_later_than(backoff)


def _fail(plan: JobPlan, active: list[Mapping[str, Any]], record: JobRecord, conditions: list[dict[str, Any]],
          reason: str, message: str, stamp: str) -> None:
    """FailureTarget and Failed with the reason; the active pods are deleted and, as in the Job
    controller (a finished Job's unterminated pods are failures), counted as failed."""
    for kind in (COND_FAILURE_TARGET, COND_FAILED):
        _condition(conditions, kind, "True", reason, message, stamp)
    plan.delete = [dict(p) for p in active]
    record.failed.update(str(p["metadata"].get("uid")) for p in active)


def _active_deadline(spec: Mapping[str, Any], status: Mapping[str, Any]) -> datetime | None:
    """startTime + activeDeadlineSeconds (the clock restarts with startTime on resume); None: no deadline."""
    seconds, start = spec.get("activeDeadlineSeconds"), parse_time(status.get("startTime"))
    if not isinstance(seconds, int) or start is None:
        return None
    return start + timedelta(seconds=seconds)


def _completed(spec: Mapping[str, Any], active: list[Mapping[str, Any]], record: JobRecord) -> bool:
    """Whether the counted successes meet the completion rule of the Job's mode."""
    completions = spec.get("completions")
    succeeded = record.base_succeeded + len(record.succeeded)
    if spec.get("completionMode") == INDEXED:
        return completions is not None and len(record.succeeded_indexes) >= int(completions)
    if completions is None:
        return succeeded > 0 and not active  # work-queue Job: one success, then the rest drain
    return succeeded >= int(completions)


def _scale_non_indexed(plan: JobPlan, spec: Mapping[str, Any], active: list[Mapping[str, Any]],
                       record: JobRecord) -> None:
    """Active pods toward min(parallelism, remaining completions): the missing ones to create, extras to delete."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    succeeded = record.base_succeeded + len(record.succeeded)
    if completions is None:
        wanted = parallelism if succeeded == 0 else len(active)
    else:
        wanted = min(parallelism, int(completions) - succeeded)
    wanted = max(wanted, 0)
    if len(active) < wanted:
        plan.create = [PodToCreate(None) for _ in range(wanted - len(active))]
    elif len(active) > wanted:
        # Delete the least progressed first: unbound, then not running, then the newest.
        ranked = sorted(active, key=lambda p: (bool((p.get("spec") or {}).get("nodeName")),
                                               pod_phase(p) == "Running",
                                               str(p["metadata"].get("creationTimestamp", ""))))
        plan.delete = [dict(p) for p in ranked[:len(active) - wanted]]


def _scale_indexed(plan: JobPlan, spec: Mapping[str, Any], active: list[Mapping[str, Any]],
                   record: JobRecord) -> None:
    """One active pod per pending index (lowest first) up to parallelism; duplicates and extras deleted."""
    parallelism = int(spec.get("parallelism", 1))
    completions = int(spec.get("completions") or 0)
    seen: set[int] = set()
    keep: list[Mapping[str, Any]] = []
    for pod in sorted(active, key=lambda p: (pod_index(p) or 0, str(p["metadata"].get("creationTimestamp", "")))):
        index = pod_index(pod)
        if index is None or index >= completions or index in seen or index in record.succeeded_indexes:
            plan.delete.append(dict(pod))
        else:
            seen.add(index)
            keep.append(pod)
    if len(keep) > parallelism:
        extra = sorted(keep, key=lambda p: -(pod_index(p) or 0))[:len(keep) - parallelism]
        plan.delete += [dict(p) for p in extra]
        return
    missing = [i for i in range(completions) if i not in seen and i not in record.succeeded_indexes]
    plan.create = [PodToCreate(i) for i in missing[:parallelism - len(keep)]]


def _fill_counts(plan: JobPlan, spec: Mapping[str, Any], active: list[Mapping[str, Any]], record: JobRecord) -> None:
    """status.active/ready/succeeded/failed (+completedIndexes), after the planned deletions."""
    deleted = {str(p["metadata"].get("uid")) for p in plan.delete}
    remaining = [p for p in active if str(p["metadata"].get("uid")) not in deleted]
    status = plan.status
    status["active"] = len(remaining)
    status["ready"] = sum(1 for p in remaining if any(
        cd.get("type") == "Ready" and cd.get("status") == "True" for cd in (p.get("status") or {}).get("conditions") or []))
    status["succeeded"] = record.base_succeeded + len(record.succeeded)
    status["failed"] = record.base_failed + len(record.failed)
    if spec.get("completionMode") == INDEXED:
        status["completedIndexes"] = compress_indexes(record.succeeded_indexes)
    for key in ("active", "succeeded", "failed"):
        if not status[key]:
            del status[key]  # Kubernetes omits zero counters (omitempty)
    if not status["conditions"]:
        del status["conditions"]


def pod_for(job: Mapping[str, Any], index: int | None) -> dict[str, Any]:
    """A pod from the Job's template: names, labels, annotations, hostname, env and owner reference."""
    meta = job["metadata"]
    name = str(meta["name"])
    template = clone(dict((job.get("spec") or {}).get("template") or {}))
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.setdefault(c.LABEL_JOB_NAME, name)
    labels.setdefault(c.LABEL_CONTROLLER_UID, str(meta.get("uid")))
    labels.setdefault(LABEL_LEGACY_JOB_NAME, name)
    labels.setdefault(LABEL_LEGACY_CONTROLLER_UID, str(meta.get("uid")))
    annotations = dict(tmeta.get("annotations") or {})
    spec = dict(template.get("spec") or {})
    generate = f"{name}-"
    if index is not None:
        labels[c.LABEL_JOB_COMPLETION_INDEX] = str(index)
        annotations[c.LABEL_JOB_COMPLETION_INDEX] = str(index)
        spec["hostname"] = f"{name}-{index}"
        generate = f"{name}-{index}-"
        env = {"name": ENV_COMPLETION_INDEX, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.labels['{c.LABEL_JOB_COMPLETION_INDEX}']"}}}
        for ctr in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            # As the Job controller: init containers too, and a variable the user set is left alone.
            if not any(e.get("name") == ENV_COMPLETION_INDEX for e in ctr.get("env") or []):
                ctr["env"] = [*(ctr.get("env") or []), env]
    pod_meta: dict[str, Any] = {"generateName": generate, "namespace": meta.get("namespace", ""), "labels": labels,
                                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                     "uid": str(meta.get("uid")), "controller": True,
                                                     "blockOwnerDeletion": True}]}
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def _adopt_counted(record: JobRecord, pods: Iterable[Mapping[str, Any]]) -> None:
    """A controller starting on existing Jobs: the terminated pods still present are taken as already in
    the status counters (which it trusts), so they are not counted twice."""
    for pod in pods:
        uid, phase = str(pod["metadata"].get("uid")), pod_phase(pod)
        if phase == "Succeeded":
            record.succeeded.add(uid)
            index = pod_index(pod)
            if index is not None:
                record.succeeded_indexes.add(index)
        elif phase == "Failed":
            record.failed.add(uid)
    record.base_succeeded = max(0, record.base_succeeded - len(record.succeeded))
    record.base_failed = max(0, record.base_failed - len(record.failed))


def _controller_uid(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return str(ref.get("uid"))
    return None


class JobController(StoreFollower):
    """Follows Jobs and their pods through store events; `sync()` reconciles the Jobs that changed."""

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self._jobs: dict[str, dict[str, Any]] = {}  # uid -> Job
        self._pods: dict[str, dict[PodKey, dict[str, Any]]] = {}  # job uid -> its pods
        self._records: dict[str, JobRecord] = {}
        self._dirty: set[str] = set()
        self._wakes: dict[str, datetime] = {}  # uid -> when to reconcile it again though nothing changed
        self._deleting: set[str] = set()  # uids of pods this controller deleted (not failures)
        self.events = EventRecorder(api, "job-controller")

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        return ((JOBS_KEY, self._on_job), (PODS_KEY, self._on_pod))

    def _replayed(self) -> None:
        """A restarted controller: the terminated pods it finds are already in the Jobs' counters."""
        for uid, record in self._records.items():
            _adopt_counted(record, self._pods.get(uid, {}).values())

    @property
    def has_work(self) -> bool:
        return bool(self._dirty)

    def _on_job(self, event: StoredEvent) -> None:
        uid = str(event.object["metadata"].get("uid"))
        if event.type == DELETED:
            self._jobs.pop(uid, None)
            self._records.pop(uid, None)
            self._pods.pop(uid, None)  # orphaned or collected pods are no longer this Job's concern
            self._dirty.discard(uid)
            self._wakes.pop(uid, None)
            return
        self._jobs[uid] = event.object
        if uid not in self._records:
            status = event.object.get("status") or {}
            self._records[uid] = JobRecord(base_succeeded=int(status.get("succeeded") or 0),
                                           base_failed=int(status.get("failed") or 0))
        if event.old is None or event.old.get("spec") != event.object.get("spec") or (
                event.old["metadata"].get("deletionTimestamp") != event.object["metadata"].get("deletionTimestamp")):
            self._dirty.add(uid)

    def _on_pod(self, event: StoredEvent) -> None:
        """Index pods by their controlling Job; a live pod removed by someone else counts as failed, a
        terminated one by its phase (once)."""
        uid = _controller_uid(event.object)
        if uid is None:
            return
        key = object_key(event.object)
        pods = self._pods.setdefault(uid, {})
        if event.type == DELETED:
            pods.pop(key, None)
            if not pods and uid not in self._jobs:
                del self._pods[uid]  # the last pod of a deleted Job
            pod_uid = str(event.object["metadata"].get("uid"))
            record = self._records.get(uid)
            old = event.old or event.object
            if record is not None and pod_uid not in self._deleting:
                if pod_phase(old) in TERMINAL_PHASES:
                    # terminated, then deleted (e.g. by the pod GC) before a reconcile counted it: count it
                    # now, as the job-tracking finalizer guarantees in Kubernetes
                    _count_terminated([old], record, self.api.now())
                else:
                    record.count_failure(pod_uid, self.api.now())
            self._deleting.discard(pod_uid)
        else:
            pods[key] = event.object
        if uid in self._jobs:
            self._dirty.add(uid)

    def next_deadline(self, after: datetime) -> datetime | None:
        """The first time after `after` a Job must be looked at again (backoff end, active deadline)."""
        times = [at for at in self._wakes.values() if at > after]
        return min(times) if times else None

    async def sync(self) -> int:
        """Reconcile every changed Job and every Job whose wake time has come; how many writes were made."""
        now = self.api.now()
        for uid, at in list(self._wakes.items()):
            if at <= now:
                del self._wakes[uid]
                self._dirty.add(uid)
        writes = 0
        for uid in sorted(self._dirty):
            self._dirty.discard(uid)
            job = self._jobs.get(uid)
            if job is None or job["metadata"].get("deletionTimestamp"):
                continue
            writes += await self._reconcile(job)
        return writes

    async def _reconcile(self, job: dict[str, Any]) -> int:
        """Phase 2: apply the plan (deletes, creates, then the status), re-queueing on any failure."""
        uid = str(job["metadata"]["uid"])
        record = self._records.setdefault(uid, JobRecord())
        plan = plan_job(job, list(self._pods.get(uid, {}).values()), record, self.api.now())
        if plan.wake_at is not None:
            self._wakes[uid] = plan.wake_at
        else:
            self._wakes.pop(uid, None)
        pods_r = self.api.resource("v1", "pods")
        writes = 0
        try:
            for pod in plan.delete:
                self._deleting.add(str(pod["metadata"].get("uid")))
                await self.api.delete(pods_r, pod["metadata"]["namespace"], pod["metadata"]["name"], copy=False)
                await self.events.record(job, NORMAL, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")
                writes += 1
            for item in plan.create:
                created = await self.api.create(pods_r, str(job["metadata"]["namespace"]), pod_for(job, item.index),
                                                copy=False)
                await self.events.record(job, NORMAL, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
                writes += 1
            if plan.status != (job.get("status") or {}):
                current = self._jobs.get(uid, job)
                body = {**current, "status": plan.status}
                await self.api.update(self.api.resource("batch/v1", "jobs"), str(job["metadata"]["namespace"]),
                                      str(job["metadata"]["name"]), body, subresource="status", copy=False)
                writes += 1
                await self._record_transitions(job, plan.status)
        except ApiError as e:
            if e.code != 404:
                self._dirty.add(uid)  # a conflict or injected fault: try again next sync
        return writes

    async def _record_transitions(self, job: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Events for the conditions this status write turned on (as the Job controller reports them)."""
        before = {(cd.get("type"), cd.get("status")) for cd in (job.get("status") or {}).get("conditions") or []}
        for cond in status.get("conditions") or []:
            key = (cond.get("type"), cond.get("status"))
            event = _CONDITION_EVENTS.get((str(key[0]), str(key[1])))
            if key == (COND_FAILED, "True"):  # the event tells why, as the condition does
                event = (WARNING, str(cond.get("reason", "")), str(cond.get("message", "")))
            if event is not None and key not in before:
                await self.events.record(job, *event)


_CONDITION_EVENTS = {
    (COND_COMPLETE, "True"): (NORMAL, "Completed", "Job completed"),
    (COND_SUSPENDED, "True"): (NORMAL, "Suspended", "Job suspended"),
    (COND_SUSPENDED, "False"): (NORMAL, "Resumed", "Job resumed"),
}
