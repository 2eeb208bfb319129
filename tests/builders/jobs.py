"""Jobs and admissions shared by the job framework's tests: Jobs as their authors wrote them (each
with something of its own in the fields tasq changes), an admission with or without a topology
assignment, and the patch that starts a Job. Used by tests/unit/core/jobs and tests/unit/kube's
job reconciler tests.
"""

from __future__ import annotations

from typing import Any

from controller.api import constants as c
from controller.api.workload import Admission
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
