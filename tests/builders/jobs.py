"""Jobs and admissions shared by the job framework's tests: Jobs as their authors wrote them (each
with something of its own in the fields tasq changes), an admission with or without a topology
assignment, the patch that starts a Job, and a test-only integrated kind (`Trainer`) unlike a Job
in every field. Used by tests/unit/core/jobs, tests/unit/kube's job reconciler tests and the
simulation's tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller.api import constants as c
from controller.api.meta import object_key
from controller.api.views import OwnerRef
from controller.api.workload import Admission, PodSet
from controller.core.jobs import framework as fw
from controller.core.jobs.batch_job import BATCH_JOB
from controller.core.jobs.framework import pod_set_infos
from tests.builders.kueue import make_job

H100 = {"nodeLabels": {"gpu": "h100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}

AUTHORED_KINDS = ["own selector and toleration", "selector key the flavor overrides", "labels and annotations only",
                  "bare"]


def admission(*, topology: bool) -> dict[str, Any]:
    """Pod set `main`, 2 pods on flavor h100; with a topology assignment both in rack r1."""
    psa: dict[str, Any] = {"name": "main", "count": 2, "flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"},
                           "resourceUsage": {"nvidia.com/gpu": "16"}}
    if topology:
        psa["topologyAssignment"] = {"slices": [{"nodeLabels": {"rack": "r1"}, "count": 2}]}
    return {"clusterQueue": "cq", "podSetAssignments": [psa]}


def authored(kind: str) -> dict[str, Any]:
    """Job ns/train as its author wrote it; `kind` is one of AUTHORED_KINDS."""
    job = make_job("train").queue("lq").template_annotate(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, "5").obj()
    job["metadata"].update(namespace="ns", uid="u1", resourceVersion="10")
    job["spec"]["template"].setdefault("metadata", {})["labels"] = {c.LABEL_JOB_NAME: "train"}
    spec = job["spec"]["template"]["spec"]
    if kind == "own selector and toleration":
        spec["nodeSelector"] = {"zone": "a"}
        spec["tolerations"] = [{"key": "spot", "operator": "Exists"}]
    elif kind == "selector key the flavor overrides":
        spec["nodeSelector"] = {"gpu": "a100"}
    elif kind == "bare":
        del job["spec"]["template"]["metadata"]
    return job


def pod_template_patch(job: dict[str, Any], workload_name: str, admission: Admission,
                       flavors: dict[str, Any]) -> dict[str, Any]:
    """The patch that starts the Job under this admission, as the reconciler builds it."""
    return BATCH_JOB.run_patch(job, pod_set_infos(workload_name, admission, flavors))


TRAINER_GVK = fw.GroupVersionKind("example.com", "v1", "Trainer", "trainers")
class Trainer:
    """A test-only kind unlike a Job in every field the reconciler acts through: `spec.paused`
    instead of suspend, `spec.workers` pods of `spec.podTemplate`, `status.running` pods counted,
    `status.outcome` when it ends; its pods carry the label `trainer: <name>` and no owner reference."""

    gvk = TRAINER_GVK
    webhooks: tuple[fw.WebhookRule, ...] = ()  # the reconciler and simulation tests send it through none

    def owner_key(self, obj: Mapping[str, Any]) -> str | None:
        return object_key(obj)

    def pod_owner_key(self, namespace: str, labels: Mapping[str, str], owners: Sequence[OwnerRef]) -> str | None:
        return f"{namespace}/{labels['trainer']}" if "trainer" in labels else None

    def workload_owner_key(self, namespace: str, owners: Sequence[OwnerRef]) -> str | None:
        return next((f"{namespace}/{o.name}" for o in owners if o.kind == TRAINER_GVK.kind), None)

    def owns(self, obj: Mapping[str, Any], owners: Sequence[OwnerRef]) -> bool:
        return any(o.kind == TRAINER_GVK.kind and o.uid == obj["metadata"]["uid"] for o in owners)

    def workload_name(self, obj: Mapping[str, Any]) -> str:
        return fw.workload_name_for_owner(obj["metadata"]["name"], TRAINER_GVK.kind, TRAINER_GVK.group)

    def queue_name(self, obj: Mapping[str, Any]) -> str | None:
        return fw.queue_name_of(obj)

    def priority_class_name(self, obj: Mapping[str, Any]) -> str | None:
        return None

    def pod_priority(self, obj: Mapping[str, Any]) -> int | None:
        return None

    def pod_sets(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [{"name": "workers", "count": obj["spec"]["workers"], "template": obj["spec"]["podTemplate"]}]

    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        return bool(obj["spec"].get("paused"))

    def suspend_patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {"spec": {"paused": True}}

    def run_patch(self, obj: Mapping[str, Any], infos: Sequence[fw.PodSetRunInfo]) -> dict[str, Any]:
        return {"spec": {"paused": False, "podTemplate": fw.template_run_patch(obj["spec"]["podTemplate"], infos)}}

    def restore_patch(self, obj: Mapping[str, Any], recorded: Sequence[PodSet]) -> dict[str, Any] | None:
        template = fw.template_restore_patch(obj["spec"]["podTemplate"], recorded[0].template)
        return None if template is None else {"spec": {"podTemplate": template}}

    def clear_start_patch(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        return None

    def finished(self, obj: Mapping[str, Any]) -> fw.Finished | None:
        outcome = (obj.get("status") or {}).get("outcome")
        return None if outcome is None else fw.Finished(outcome == "done", f"Trainer {outcome}")

    def pods_left(self, obj: Mapping[str, Any]) -> int:
        return int((obj.get("status") or {}).get("running") or 0)

    def pods_active(self, obj: Mapping[str, Any]) -> int:
        return self.pods_left(obj)

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        return self.pods_left(obj) >= int(obj["spec"]["workers"])

    def suspension_acknowledged(self, obj: Mapping[str, Any]) -> bool:
        return True


TRAINER = Trainer()


def trainer(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": TRAINER_GVK.api_version, "kind": TRAINER_GVK.kind,
            "metadata": {"name": "bert", "namespace": "ns", "uid": "t1", "labels": {c.LABEL_QUEUE_NAME: "lq"}},
            "spec": {"paused": True, "workers": 3, "podTemplate": {"spec": {"containers": [{"name": "w"}]}}, **spec}}
