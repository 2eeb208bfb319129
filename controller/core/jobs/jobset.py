"""The JobSet adapter (jobset.x-k8s.io/v1alpha2): Kueue's JobSet integration as pure transforms.

One Workload per JobSet (`jobset-<name>-<hash5>`), one pod set per replicatedJob (replicas x pods per
Job, topology from its pod template, ranked by Job index then completion index); suspended through
`spec.suspend`, started and restored through the replicatedJobs' pod templates, which JobSet's
controller carries into its child Jobs. `JOBSET` is listed by controller.core.jobs.integrations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controller.api import constants as c
from controller.api.views import OwnerRef
from controller.api.workload import PodSet
from controller.core.admission.workloads import topology_request_from_annotations, topology_request_to_dict
from controller.core.jobs.framework import (
    Finished,
    GroupVersionKind,
    PodSetRunInfo,
    WebhookAction,
    WebhookRule,
    queue_name_of,
    template_restore_patch,
    template_run_patch,
    workload_name_for_owner,
)

JOBSET_GVK: Final = GroupVersionKind(c.JOBSET_GROUP, c.JOBSET_VERSION, c.KIND_JOBSET, c.PLURAL_JOBSETS)


def _replicated_jobs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rjobs = (obj.get("spec") or {}).get("replicatedJobs") or []
    return [r for r in rjobs if isinstance(r, Mapping)]


def _job_spec(rjob: Mapping[str, Any]) -> Mapping[str, Any]:
    return (rjob.get("template") or {}).get("spec") or {}


def _pod_template(rjob: Mapping[str, Any]) -> Mapping[str, Any]:
    return _job_spec(rjob).get("template") or {}


def replicas(rjob: Mapping[str, Any]) -> int:
    """The replicatedJob's Jobs (the CRD defaults it to 1)."""
    return int(rjob.get("replicas", 1))


def pods_per_job(rjob: Mapping[str, Any]) -> int:
    """The pods one Job of the replicatedJob runs at once: its parallelism (default 1), or its
    completions when fewer (Kueue's count)."""
    spec = _job_spec(rjob)
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def _version(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a patch conditional on the JobSet's version (a 409 when it changed meanwhile)."""
    return {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}


def merged(target: Any, patch: Any) -> Any:
    """`target` with the RFC 7386 merge patch `patch` applied (a copy): replicatedJobs is a list, which
    a merge patch replaces whole, so the adapter sends each template already patched."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def _with_templates(obj: Mapping[str, Any], templates: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The replicatedJobs list with the pod template of each named one replaced."""
    out = []
    for rjob in _replicated_jobs(obj):
        rjob = dict(rjob)
        if rjob.get("name") in templates:
            template = dict(rjob.get("template") or {})
            template["spec"] = {**(template.get("spec") or {}), "template": templates[str(rjob["name"])]}
            rjob["template"] = template
        out.append(rjob)
    return out


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _statuses(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in (obj.get("status") or {}).get("replicatedJobsStatus") or [] if isinstance(s, Mapping)]


def workload_name_for_jobset(name: str) -> str:
    """Kueue's `jobset-<name>-<hash5>`."""
    return workload_name_for_owner(name, JOBSET_GVK.kind, JOBSET_GVK.group)


class JobSet:
    """The JobSet as a `GenericJob` (see the module docstring)."""

    gvk: GroupVersionKind = JOBSET_GVK
    webhooks: tuple[WebhookRule, ...] = (
        WebhookRule(c.WEBHOOK_MUTATE_JOBSET, WebhookAction.SUSPEND, ("CREATE",)),
        WebhookRule(c.WEBHOOK_VALIDATE_JOBSET, WebhookAction.VALIDATE))

    def owner_key(self, obj: Mapping[str, Any]) -> str | None:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def pod_owner_key(self, namespace: str, labels: Mapping[str, str], owners: Sequence[OwnerRef]) -> str | None:
        """The JobSet its controller labelled the pod with (the pod's controller is a child Job)."""
        name = labels.get(c.LABEL_JOBSET_NAME)
        return f"{namespace}/{name}" if name else None

    def workload_owner_key(self, namespace: str, owners: Sequence[OwnerRef]) -> str | None:
        for owner in owners:
            if owner.kind == JOBSET_GVK.kind and owner.api_version == JOBSET_GVK.api_version:
                return f"{namespace}/{owner.name}"
        return None

    def owns(self, obj: Mapping[str, Any], owners: Sequence[OwnerRef]) -> bool:
        uid = (obj.get("metadata") or {}).get("uid")
        return any(owner.kind == JOBSET_GVK.kind and owner.uid == uid for owner in owners)

    def workload_name(self, obj: Mapping[str, Any]) -> str:
        return workload_name_for_jobset(str((obj.get("metadata") or {}).get("name", "")))

    def queue_name(self, obj: Mapping[str, Any]) -> str | None:
        return queue_name_of(obj)

    def priority_class_name(self, obj: Mapping[str, Any]) -> str | None:
        """The first replicatedJob template that names one (Kueue's reading)."""
        for rjob in _replicated_jobs(obj):
            name = (_pod_template(rjob).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return None

    def pod_priority(self, obj: Mapping[str, Any]) -> int | None:
        for rjob in _replicated_jobs(obj):
            priority = (_pod_template(rjob).get("spec") or {}).get("priority")
            if isinstance(priority, int):
                return priority
        return None

    def pod_sets(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One per replicatedJob. A topology request also names the labels that rank its pods: the
        completion index within a Job, the Job's index within the replicatedJob, and how many Jobs."""
        out = []
        for rjob in _replicated_jobs(obj):
            template = _pod_template(rjob)
            pod_set: dict[str, Any] = {"name": str(rjob.get("name", "")), "count": replicas(rjob) * pods_per_job(rjob),
                                       "template": dict(template)}
            annotations = (template.get("metadata") or {}).get("annotations") or {}
            topology = topology_request_from_annotations({}, {str(k): str(v) for k, v in annotations.items()})
            if topology is not None:
                pod_set["topologyRequest"] = {
                    **topology_request_to_dict(topology), "podIndexLabel": c.LABEL_JOB_COMPLETION_INDEX,
                    "subGroupIndexLabel": c.LABEL_JOBSET_JOB_INDEX, "subGroupCount": replicas(rjob)}
            out.append(pod_set)
        return out

    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        return bool((obj.get("spec") or {}).get("suspend", False))

    def suspend_patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {"metadata": _version(obj), "spec": {"suspend": True}}

    def run_patch(self, obj: Mapping[str, Any], infos: Sequence[PodSetRunInfo]) -> dict[str, Any]:
        """Each replicatedJob's pod template gets the info of its pod set (same name); the whole list
        is sent, `suspend` becomes false."""
        by_name: dict[str, list[PodSetRunInfo]] = {}
        for info in infos:
            by_name.setdefault(info.name, []).append(info)
        templates = {str(r["name"]): merged(_pod_template(r), template_run_patch(_pod_template(r), by_name[str(r["name"])]))
                     for r in _replicated_jobs(obj) if str(r.get("name")) in by_name}
        return {"metadata": _version(obj), "spec": {"suspend": False, "replicatedJobs": _with_templates(obj, templates)}}

    def restore_patch(self, obj: Mapping[str, Any], recorded: Sequence[PodSet]) -> dict[str, Any] | None:
        """Each replicatedJob's template back to its pod set's as the Workload recorded it."""
        by_name = {ps.name: ps.template for ps in recorded}
        templates = {}
        for rjob in _replicated_jobs(obj):
            name = str(rjob.get("name"))
            patch = template_restore_patch(_pod_template(rjob), by_name[name]) if name in by_name else None
            if patch is not None:
                templates[name] = merged(_pod_template(rjob), patch)
        if not templates:
            return None
        return {"metadata": _version(obj), "spec": {"replicatedJobs": _with_templates(obj, templates)}}

    def clear_start_patch(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """A JobSet has no start time of its own; its controller clears its Jobs' when it resumes them."""
        return None

    def finished(self, obj: Mapping[str, Any]) -> Finished | None:
        for kind, succeeded in ((c.CONDITION_JOBSET_COMPLETED, True), (c.CONDITION_JOBSET_FAILED, False)):
            cond = _condition(obj, kind)
            if cond is not None:
                default = "JobSet finished successfully" if succeeded else "JobSet failed"
                return Finished(succeeded, str(cond.get("message") or default))
        return None

    def pods_left(self, obj: Mapping[str, Any]) -> int:
        """The JobSet's status counts Jobs, not pods: its Jobs with active pods (zero exactly when no
        Job of it has any)."""
        return sum(int(s.get("active") or 0) for s in _statuses(obj))

    def pods_active(self, obj: Mapping[str, Any]) -> int:
        return self.pods_left(obj)

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        """Every replicatedJob's Jobs are ready or succeeded (Kueue's reading of the JobSet status)."""
        counted = {str(s.get("name")): int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in _statuses(obj)}
        return all(counted.get(str(r.get("name")), 0) >= replicas(r) for r in _replicated_jobs(obj))

    def suspension_acknowledged(self, obj: Mapping[str, Any]) -> bool:
        """The JobSet controller set its Suspended condition (after suspending its Jobs)."""
        return _condition(obj, c.CONDITION_JOB_SUSPENDED) is not None


JOBSET: Final = JobSet()
