"""The batch/v1 Job adapter: how the generic reconciler reads, stops, starts and restores a Job.

Kueue's Job integration: one pod set `main` of count = parallelism whose template is the Job's,
minCount = `job-min-parallelism` (a partially admitted Job runs with the admitted parallelism and
gets its own back when stopped), topology from the KEP Job annotations or Kueue's pod-template ones, Workload name
`job-<name>-<hash5>`; finished on the Complete or Failed condition; pods left counted by the Job
controller's active and terminating counters. Pure; `BATCH_JOB` is listed by
controller.core.jobs.integrations and driven by controller.kube.job_reconciling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controller.api import constants as c
from controller.api.booleans import parse_boolean
from controller.api.views import JobView, OwnerRef, PodTemplateView
from controller.api.workload import DEFAULT_POD_SET_NAME, PodSet
from controller.core.admission.workloads import topology_request_from_annotations, topology_request_to_dict
from controller.core.jobs.framework import (
    Finished,
    GroupVersionKind,
    PodSetRunInfo,
    SingleObjectJob,
    WebhookAction,
    WebhookRule,
    template_restore_patch,
    template_run_patch,
    workload_manifest,
    workload_name_for_owner,
)

JOB_GVK: Final = GroupVersionKind("batch", "v1", c.KIND_JOB, "jobs")


def _template(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (job.get("spec") or {}).get("template") or {}


def _version(job: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a patch conditional on the Job's version (a 409 when it changed meanwhile)."""
    return {"resourceVersion": (job.get("metadata") or {}).get("resourceVersion")}


def workload_name_for_job(job_name: str) -> str:
    """Kueue's `job-<name>-<hash5>`."""
    return workload_name_for_owner(job_name, JOB_GVK.kind, JOB_GVK.group)


def min_parallelism(job: Mapping[str, Any]) -> int | None:
    """The Job's `kueue.x-k8s.io/job-min-parallelism` (its pod set's minCount); None when absent or
    not an integer (the Job webhook refuses such a value first)."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(c.ANNOTATION_JOB_MIN_PARALLELISM)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def parallelism_patch(job: Mapping[str, Any], count: int | None) -> dict[str, Any]:
    """Kueue's partial admission of a Job: with `job-min-parallelism` set, the Job runs with
    parallelism = `count` (the admitted count when it starts, the count its Workload recorded when it
    is restored) and, with `job-completions-equal-parallelism: "true"` (Indexed Jobs), completions
    the same; else completions stay (the Job runs fewer pods at a time toward the same total). The
    spec fields that change; empty when none does or the Job has no minimum."""
    if count is None or min_parallelism(job) is None:
        return {}
    spec = job.get("spec") or {}
    notes = (job.get("metadata") or {}).get("annotations") or {}
    out: dict[str, Any] = {}
    if spec.get("parallelism", 1) != count:
        out["parallelism"] = count
    if parse_boolean(notes.get(c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM)) and spec.get("completions") != count:
        out["completions"] = count
    return out


class BatchJob(SingleObjectJob):
    """The batch/v1 Job as a `GenericJob` (see the module docstring)."""

    gvk: GroupVersionKind = JOB_GVK
    webhooks: tuple[WebhookRule, ...] = (
        WebhookRule(c.WEBHOOK_MUTATE_JOB, WebhookAction.SUSPEND, ("CREATE",)),
        WebhookRule(c.WEBHOOK_VALIDATE_JOB, WebhookAction.VALIDATE_RUNNING_JOB))

    def pod_owner_key(self, namespace: str, labels: Mapping[str, str], owners: Sequence[OwnerRef]) -> str | None:
        """The Job the pod's controller reference names."""
        for owner in owners:
            if owner.controller and owner.kind == JOB_GVK.kind and owner.api_version.startswith("batch/"):
                return f"{namespace}/{owner.name}"
        return None

    def priority_class_name(self, obj: Mapping[str, Any]) -> str | None:
        name = (_template(obj).get("spec") or {}).get("priorityClassName")
        return str(name) if name else None

    def pod_priority(self, obj: Mapping[str, Any]) -> int | None:
        return PodTemplateView.from_dict(_template(obj)).priority

    def pod_sets(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Kueue gives a Job's single pod set the API's default name (`main`); the KEP Job
        annotations win over the template's for its topology request."""
        view = JobView.from_dict(obj)
        pod_set: dict[str, Any] = {"name": DEFAULT_POD_SET_NAME, "count": view.parallelism, "template": view.template}
        min_count = min_parallelism(obj)
        if min_count is not None:  # Kueue's partial admission; the Job webhook checked 0 < it < the pod count
            pod_set["minCount"] = min_count
        topology = topology_request_from_annotations(
            view.annotations, PodTemplateView.from_dict(view.template).annotations)
        if topology is not None:
            pod_set["topologyRequest"] = topology_request_to_dict(topology)
        return [pod_set]

    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        return bool((obj.get("spec") or {}).get("suspend", False))

    def suspend_patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {"metadata": _version(obj), "spec": {"suspend": True}}

    def run_patch(self, obj: Mapping[str, Any], infos: Sequence[PodSetRunInfo]) -> dict[str, Any]:
        """The Job's one template gets every info (a Job has one pod set); `suspend` becomes false; a
        partially admitted Job runs with its admitted count (`parallelism_patch`)."""
        return {"metadata": _version(obj),
                "spec": {"suspend": False, "template": template_run_patch(_template(obj), infos),
                         **parallelism_patch(obj, infos[0].count if infos else None)}}

    def restore_patch(self, obj: Mapping[str, Any], recorded: Sequence[PodSet]) -> dict[str, Any] | None:
        """The recorded template, and the recorded count as the parallelism of a Job that may be
        partially admitted. The API server accepts it only on a suspended Job whose pods are gone."""
        template = template_restore_patch(_template(obj), recorded[0].template) if recorded else None
        counts = parallelism_patch(obj, recorded[0].count if recorded else None)
        if template is None and not counts:
            return None
        return {"metadata": _version(obj), "spec": {**({"template": template} if template else {}), **counts}}

    def clear_start_patch(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The Job controller does not clear `status.startTime` on suspension; before Kubernetes 1.35
        a template with one cannot change."""
        if not (obj.get("status") or {}).get("startTime"):
            return None
        return {"metadata": _version(obj), "status": {"startTime": None}}

    def finished(self, obj: Mapping[str, Any]) -> Finished | None:
        condition = JobView.from_dict(obj).finished
        if condition is None:
            return None
        succeeded = condition == c.CONDITION_JOB_COMPLETE
        return Finished(succeeded, "Job finished successfully" if succeeded else "Job failed")

    def pods_left(self, obj: Mapping[str, Any]) -> int:
        """Active pods and, since Kubernetes 1.34 (JobPodReplacementPolicy), terminating ones, which
        may still run on their node."""
        status = obj.get("status") or {}
        return int(status.get("active") or 0) + int(status.get("terminating") or 0)

    def pods_active(self, obj: Mapping[str, Any]) -> int:
        return int((obj.get("status") or {}).get("active") or 0)

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        """Ready pods and succeeded ones (which were ready) reach the pods it runs at once: its
        parallelism, or its completions when fewer (Kueue's count)."""
        status, view = obj.get("status") or {}, JobView.from_dict(obj)
        wanted = min(view.parallelism, view.completions) if view.completions is not None else view.parallelism
        return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= wanted

    def suspension_acknowledged(self, obj: Mapping[str, Any]) -> bool:
        """The Job controller set the Suspended condition (after deleting the pods it counted)."""
        return any(isinstance(cond, Mapping) and cond.get("type") == c.CONDITION_JOB_SUSPENDED
                   and cond.get("status") == "True" for cond in (obj.get("status") or {}).get("conditions") or [])


BATCH_JOB: Final = BatchJob()


def workload_from_job(job: Mapping[str, Any], priority_classes: Mapping[str, int] | None = None,
                      default_priority: int = 0,
                      workload_priority_classes: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The Workload manifest the reconciler creates for a batch/v1 Job (`workload_manifest`)."""
    return workload_manifest(BATCH_JOB, job, priority_classes, default_priority, workload_priority_classes)
