"""The devcluster's JobSet controller (jobset.x-k8s.io/v1alpha2) and the JobSet CRD it serves.

`plan_jobset` (pure) decides the child Jobs to create, to suspend or to resume (merging in the
replicatedJob template's scheduling fields, as the real controller does for Kueue) and the status;
`JobSetController` applies plans in `sync()` (driven by `devcluster.simulated.components`).
Rules follow sigs.k8s.io/jobset v0.10.1; differences in devcluster/README.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from devcluster.server.apiserver import ApiServer
from devcluster.server.clock import timestamp
from devcluster.server.errors import ApiError
from devcluster.server.patching import clone
from devcluster.server.store import DELETED, StorageKey, StoredEvent, Subscriber
from devcluster.simulated.controllers import StoreFollower
from devcluster.simulated.jobs import COND_COMPLETE, COND_FAILED, INDEXED, JOBS_KEY

GROUP: Final = "jobset.x-k8s.io"
VERSION: Final = "v1alpha2"
API_VERSION: Final = f"{GROUP}/{VERSION}"
JOBSETS_KEY: StorageKey = (GROUP, "jobsets")

# Labels and annotations the real controller puts on each child Job and its pod template.
LABEL_JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOBSET_UID: Final = "jobset.sigs.k8s.io/jobset-uid"
LABEL_REPLICATED_JOB_NAME: Final = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_REPLICATED_JOB_REPLICAS: Final = "jobset.sigs.k8s.io/replicatedjob-replicas"
LABEL_GLOBAL_REPLICAS: Final = "jobset.sigs.k8s.io/global-replicas"
LABEL_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
LABEL_JOB_KEY: Final = "jobset.sigs.k8s.io/job-key"
LABEL_JOB_GLOBAL_INDEX: Final = "jobset.sigs.k8s.io/job-global-index"
LABEL_GROUP_NAME: Final = "jobset.sigs.k8s.io/group-name"
LABEL_GROUP_REPLICAS: Final = "jobset.sigs.k8s.io/group-replicas"
LABEL_JOB_GROUP_INDEX: Final = "jobset.sigs.k8s.io/job-group-index"
LABEL_RESTART_ATTEMPT: Final = "jobset.sigs.k8s.io/restart-attempt"
ANNOTATION_EXCLUSIVE_TOPOLOGY: Final = "alpha.jobset.sigs.k8s.io/exclusive-topology"

COND_COMPLETED: Final = "Completed"
COND_JOBSET_FAILED: Final = "Failed"
COND_SUSPENDED: Final = "Suspended"
REASON_ALL_JOBS_COMPLETED: Final = "AllJobsCompleted"
MESSAGE_ALL_JOBS_COMPLETED: Final = "jobset completed successfully"
REASON_FAILED_JOBS: Final = "FailedJobs"
MESSAGE_FAILED_JOBS: Final = "jobset failed due to one or more job failures"
REASON_SUSPENDED: Final = "SuspendedJobs"
MESSAGE_SUSPENDED: Final = "jobset is suspended"
REASON_RESUMED: Final = "ResumeJobs"
MESSAGE_RESUMED: Final = "jobset is resumed"


def jobset_crd() -> dict[str, Any]:
    """The JobSet CRD as devcluster serves it: the fields its controller and tasq read, with the real
    CRD's defaults (replicas 1, groupName "default"); everything else is kept as written."""
    keep = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    replicated_job = {"type": "object", "required": ["name", "template"], "x-kubernetes-preserve-unknown-fields": True,
                      "properties": {"name": {"type": "string"},
                                     "groupName": {"type": "string", "default": "default"},
                                     "replicas": {"type": "integer", "format": "int32", "default": 1, "minimum": 0},
                                     "template": keep}}
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"suspend": {"type": "boolean"},
                           "replicatedJobs": {"type": "array", "items": replicated_job}}}
    schema = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                               "metadata": {"type": "object"}, "spec": spec, "status": keep}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"jobsets.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"kind": "JobSet", "listKind": "JobSetList", "plural": "jobsets", "singular": "jobset"},
                     "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": schema}}]}}


def child_job_name(jobset: str, replicated_job: str, index: int) -> str:
    """`<jobset>-<replicatedJob>-<index>`, the real controller's name for a child Job."""
    return f"{jobset}-{replicated_job}-{index}"


@dataclass
class JobSetPlan:
    """The outcome of one sync: Jobs to create, Jobs to write back (suspended or resumed), the status."""

    create: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or [])


def _replicas(rjob: Mapping[str, Any]) -> int:
    return int(rjob.get("replicas", 1))


def _job_labels(jobset: Mapping[str, Any], rjob: Mapping[str, Any], index: int) -> dict[str, str]:
    """The jobset.sigs.k8s.io/* keys of one child Job (also its annotations and its pods')."""
    meta, rjobs = jobset["metadata"], _replicated_jobs(jobset)
    name = child_job_name(str(meta["name"]), str(rjob["name"]), index)
    group = str(rjob.get("groupName", "default"))
    before = sum(_replicas(r) for r in rjobs[:rjobs.index(rjob)])
    group_before = sum(_replicas(r) for r in rjobs[:rjobs.index(rjob)] if r.get("groupName", "default") == group)
    return {
        LABEL_JOBSET_NAME: str(meta["name"]), LABEL_JOBSET_UID: str(meta.get("uid")),
        LABEL_REPLICATED_JOB_NAME: str(rjob["name"]),
        LABEL_RESTART_ATTEMPT: str((jobset.get("status") or {}).get("restarts", 0)),
        LABEL_REPLICATED_JOB_REPLICAS: str(_replicas(rjob)),
        LABEL_GLOBAL_REPLICAS: str(sum(_replicas(r) for r in rjobs)),
        LABEL_JOB_INDEX: str(index),
        LABEL_JOB_KEY: hashlib.sha1(f"{meta.get('namespace', '')}/{name}".encode()).hexdigest(),
        LABEL_JOB_GLOBAL_INDEX: str(before + index),
        LABEL_GROUP_NAME: group,
        LABEL_GROUP_REPLICAS: str(sum(_replicas(r) for r in rjobs if r.get("groupName", "default") == group)),
        LABEL_JOB_GROUP_INDEX: str(group_before + index),
    }


def _label_and_annotate(meta: dict[str, Any], keys: Mapping[str, str], exclusive: str | None) -> None:
    meta["labels"] = {**(meta.get("labels") or {}), **keys}
    meta["annotations"] = {**(meta.get("annotations") or {}), **keys}
    if exclusive is not None:
        meta["annotations"][ANNOTATION_EXCLUSIVE_TOPOLOGY] = exclusive


def job_for(jobset: Mapping[str, Any], rjob: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One child Job: the replicatedJob's template with JobSet's defaults (Indexed, OnFailure), the
    jobset.sigs.k8s.io/* labels and annotations on the Job and its pod template, the subdomain, the
    JobSet's suspend and a controller reference to the JobSet."""
    meta = jobset["metadata"]
    spec = jobset.get("spec") or {}
    template = clone(dict(rjob.get("template") or {}))
    job_meta = dict(template.get("metadata") or {})
    job_spec = dict(template.get("spec") or {})
    job_spec.setdefault("completionMode", INDEXED)
    pod_template = job_spec.setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    pod_spec = pod_template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "OnFailure")
    network = spec.get("network") or {}
    if network.get("enableDNSHostnames", True):
        pod_spec["subdomain"] = network.get("subdomain") or str(meta["name"])
    exclusive = (meta.get("annotations") or {}).get(ANNOTATION_EXCLUSIVE_TOPOLOGY)
    exclusive = (job_meta.get("annotations") or {}).get(ANNOTATION_EXCLUSIVE_TOPOLOGY, exclusive)
    keys = _job_labels(jobset, rjob, index)
    _label_and_annotate(job_meta, keys, exclusive)
    _label_and_annotate(pod_meta, keys, exclusive)
    job_spec["suspend"] = bool(spec.get("suspend"))
    job_meta.update({
        "name": child_job_name(str(meta["name"]), str(rjob["name"]), index),
        "namespace": meta.get("namespace", ""),
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": "JobSet", "name": meta["name"],
                             "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}]})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": job_spec}


def _merged_list(ours: list[Any], theirs: Iterable[Any]) -> list[Any]:
    return ours + [item for item in theirs if item not in ours]


def resumed(job: Mapping[str, Any], rjob: Mapping[str, Any]) -> dict[str, Any]:
    """The Job unsuspended, its pod template merged with the replicatedJob's (labels, annotations,
    nodeSelector: the replicatedJob's values win; tolerations and scheduling gates: added when missing)."""
    out = clone(dict(job))
    pod = out["spec"]["template"]
    source = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
    smeta, sspec = source.get("metadata") or {}, source.get("spec") or {}
    meta, spec = pod.setdefault("metadata", {}), pod.setdefault("spec", {})
    for key in ("labels", "annotations"):
        if smeta.get(key):
            meta[key] = {**(meta.get(key) or {}), **smeta[key]}
    if sspec.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **sspec["nodeSelector"]}
    for key in ("tolerations", "schedulingGates"):
        if sspec.get(key):
            spec[key] = _merged_list(list(spec.get(key) or []), sspec[key])
    out["spec"]["suspend"] = False
    return out


def _true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(cd.get("type") == kind and cd.get("status") == "True"
               for cd in (obj.get("status") or {}).get("conditions") or [])


def _job_finished(job: Mapping[str, Any]) -> str | None:
    for kind in (COND_COMPLETE, COND_FAILED):
        if _true(job, kind):
            return kind
    return None


def plan_jobset(jobset: Mapping[str, Any], jobs: Mapping[str, Mapping[str, Any]], now: datetime) -> JobSetPlan:
    """Phase 1 (pure): missing Jobs, then suspend propagation, then the status. A finished JobSet only
    keeps its status counts current."""
    plan = JobSetPlan(status=clone(dict(jobset.get("status") or {})))
    finished = _true(jobset, COND_COMPLETED) or _true(jobset, COND_JOBSET_FAILED)
    suspend = bool((jobset.get("spec") or {}).get("suspend"))
    for rjob in _replicated_jobs(jobset):
        for index in range(_replicas(rjob)):
            job = jobs.get(child_job_name(str(jobset["metadata"]["name"]), str(rjob["name"]), index))
            if job is None:
                if not finished:
                    plan.create.append(job_for(jobset, rjob, index))
            elif not finished and _job_finished(job) is None:
                if suspend and not (job.get("spec") or {}).get("suspend"):
                    plan.update.append({**clone(dict(job)), "spec": {**clone(dict(job["spec"])), "suspend": True}})
                elif not suspend and (job.get("spec") or {}).get("suspend"):
                    plan.update.append(resumed(job, rjob))
    _fill_status(plan.status, jobset, jobs, suspend, finished, timestamp(now))
    return plan


def _fill_status(status: dict[str, Any], jobset: Mapping[str, Any], jobs: Mapping[str, Mapping[str, Any]],
                 suspend: bool, finished: bool, stamp: str) -> None:
    """replicatedJobsStatus (one entry per replicatedJob, in spec order), restarts, and the conditions:
    Completed when every Job completed, Failed when one failed, Suspended following spec.suspend."""
    entries: list[dict[str, Any]] = []
    total, succeeded, failed = 0, 0, 0
    for rjob in _replicated_jobs(jobset):
        counts: dict[str, Any] = {"name": str(rjob["name"]), "ready": 0, "succeeded": 0, "failed": 0, "active": 0,
                                  "suspended": 0}
        for index in range(_replicas(rjob)):
            total += 1
            job = jobs.get(child_job_name(str(jobset["metadata"]["name"]), str(rjob["name"]), index))
            if job is None:
                continue
            _count_job(counts, job)
        succeeded += int(counts["succeeded"])
        failed += int(counts["failed"])
        entries.append(counts)
    status["replicatedJobsStatus"] = entries
    status.setdefault("restarts", 0)
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    if not finished and failed:
        _set_condition(conditions, COND_JOBSET_FAILED, REASON_FAILED_JOBS, MESSAGE_FAILED_JOBS, stamp, "True")
        status["terminalState"] = COND_JOBSET_FAILED
    elif not finished and total and succeeded == total:
        _set_condition(conditions, COND_COMPLETED, REASON_ALL_JOBS_COMPLETED, MESSAGE_ALL_JOBS_COMPLETED, stamp, "True")
        status["terminalState"] = COND_COMPLETED
    elif not finished and suspend:
        _set_condition(conditions, COND_SUSPENDED, REASON_SUSPENDED, MESSAGE_SUSPENDED, stamp, "True")
    elif not finished and any(cd.get("type") == COND_SUSPENDED for cd in conditions):
        _set_condition(conditions, COND_SUSPENDED, REASON_RESUMED, MESSAGE_RESUMED, stamp, "False")
    if not conditions:
        del status["conditions"]


def _count_job(counts: dict[str, Any], job: Mapping[str, Any]) -> None:
    """One Job into its replicatedJob's counts, as the real controller counts them: finished Jobs by
    outcome; an unfinished one is ready when its ready and succeeded pods cover its pod count."""
    outcome = _job_finished(job)
    if outcome == COND_COMPLETE:
        counts["succeeded"] += 1
        return
    if outcome == COND_FAILED:
        counts["failed"] += 1
        return
    spec, status = job.get("spec") or {}, job.get("status") or {}
    pods = int(spec.get("parallelism", 1))
    if spec.get("completions") is not None:
        pods = min(pods, int(spec["completions"]))
    if int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods:
        counts["ready"] += 1
    if int(status.get("active") or 0) > 0:
        counts["active"] += 1
    if spec.get("suspend"):
        counts["suspended"] += 1


def _set_condition(conditions: list[dict[str, Any]], kind: str, reason: str, message: str, stamp: str,
                   value: str) -> None:
    """A metav1.Condition set in place; lastTransitionTime moves only when the status does."""
    for cond in conditions:
        if cond.get("type") == kind:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = stamp
            cond.update({"status": value, "reason": reason, "message": message})
            return
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": stamp})


def _jobset_owner(job: Mapping[str, Any]) -> str | None:
    for ref in (job.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "JobSet" and str(ref.get("apiVersion", "")).startswith(GROUP):
            return str(ref.get("uid"))
    return None


class JobSetController(StoreFollower):
    """Follows JobSets and the Jobs they control; `sync()` reconciles the JobSets that changed."""

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self._jobsets: dict[str, dict[str, Any]] = {}  # uid -> JobSet
        self._jobs: dict[str, dict[str, dict[str, Any]]] = {}  # JobSet uid -> Job name -> Job
        self._dirty: set[str] = set()

    def follows(self) -> Sequence[tuple[StorageKey, Subscriber]]:
        return ((JOBSETS_KEY, self._on_jobset), (JOBS_KEY, self._on_job))

    @property
    def has_work(self) -> bool:
        return bool(self._dirty)

    def _on_jobset(self, event: StoredEvent) -> None:
        uid = str(event.object["metadata"].get("uid"))
        if event.type == DELETED:
            self._jobsets.pop(uid, None)
            self._dirty.discard(uid)
            return
        self._jobsets[uid] = event.object
        if event.old is None or event.old.get("spec") != event.object.get("spec"):
            self._dirty.add(uid)

    def _on_job(self, event: StoredEvent) -> None:
        owner = _jobset_owner(event.object)
        if owner is None:
            return
        jobs = self._jobs.setdefault(owner, {})
        name = str(event.object["metadata"]["name"])
        if event.type == DELETED:
            jobs.pop(name, None)
        else:
            jobs[name] = event.object
        if owner in self._jobsets:
            self._dirty.add(owner)

    async def sync(self) -> int:
        """Reconcile every changed JobSet; how many writes were made."""
        writes = 0
        for uid in sorted(self._dirty):
            self._dirty.discard(uid)
            jobset = self._jobsets.get(uid)
            if jobset is None or jobset["metadata"].get("deletionTimestamp"):
                continue
            writes += await self._reconcile(jobset)
        return writes

    async def _reconcile(self, jobset: dict[str, Any]) -> int:
        """Phase 2: create, then suspend/resume, then the status; re-queued on any failure."""
        uid, namespace = str(jobset["metadata"]["uid"]), str(jobset["metadata"].get("namespace", ""))
        plan = plan_jobset(jobset, self._jobs.get(uid, {}), self.api.now())
        jobs_r = self.api.resource("batch/v1", "jobs")
        writes = 0
        try:
            for job in plan.create:
                await self.api.create(jobs_r, namespace, job, copy=False)
                writes += 1
            for job in plan.update:
                await self.api.update(jobs_r, namespace, str(job["metadata"]["name"]), job, copy=False)
                writes += 1
            if plan.status != (jobset.get("status") or {}):
                current = self._jobsets.get(uid, jobset)
                await self.api.update(self.api.resource(API_VERSION, "jobsets"), namespace,
                                      str(jobset["metadata"]["name"]), {**current, "status": plan.status},
                                      subresource="status", copy=False)
                writes += 1
        except ApiError as e:
            if e.code != 404:
                self._dirty.add(uid)  # a conflict or injected fault: try again next sync
        return writes
