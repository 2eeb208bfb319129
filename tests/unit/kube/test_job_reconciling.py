"""The Job patch that starts an admitted Job, and the missing-PriorityClass check (pure parts)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from controller.kube.job_reconciling import missing_priority_class, pod_template_patch
from tests.builders.kueue import make_job

H100 = {"nodeLabels": {"gpu": "h100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}


def admission(*, topology: bool) -> dict[str, Any]:
    psa: dict[str, Any] = {"name": "main", "count": 2, "flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"},
                           "resourceUsage": {"nvidia.com/gpu": "16"}}
    if topology:
        psa["topologyAssignment"] = {"slices": [{"nodeLabels": {"rack": "r1"}, "count": 2}]}
    return {"clusterQueue": "cq", "podSetAssignments": [psa]}


def test_a_topology_admission_adds_flavor_rules_annotations_and_the_tas_label_and_unsuspends() -> None:
    job = make_job("train").obj()
    job["metadata"]["resourceVersion"] = "41"
    job["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    patch = pod_template_patch(job, "job-train-abcde", admission(topology=True), {"h100": H100})
    assert patch["metadata"] == {"resourceVersion": "41"}
    assert patch["spec"]["suspend"] is False
    template = patch["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"zone": "a", "gpu": "h100"}
    assert template["spec"]["tolerations"] == H100["tolerations"]
    assert template["metadata"] == {
        "annotations": {c.ANNOTATION_TOPOLOGY_WORKLOAD: "job-train-abcde", c.ANNOTATION_TOPOLOGY_PODSET: "main"},
        "labels": {c.LABEL_TAS: c.LABEL_TAS_VALUE}}


def test_an_admission_without_topology_leaves_pods_ungated_and_unlabelled() -> None:
    patch = pod_template_patch(make_job("plain").obj(), "job-plain-abcde", admission(topology=False), {"h100": H100})
    assert "metadata" not in patch["spec"]["template"]
    assert patch["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "h100"}


def test_a_toleration_the_template_already_has_is_not_repeated() -> None:
    job = make_job("t").obj()
    job["spec"]["template"]["spec"]["tolerations"] = list(H100["tolerations"])
    patch = pod_template_patch(job, "w", admission(topology=False), {"h100": H100})
    assert patch["spec"]["template"]["spec"]["tolerations"] == H100["tolerations"]


@pytest.mark.parametrize(("class_name", "known", "missing"), [
    ("high", {"high": {}}, None),
    ("high", {}, "high"),
    (None, {}, None),
])
def test_a_priority_class_is_missing_only_when_named_and_absent(
        class_name: str | None, known: dict[str, Any], missing: str | None) -> None:
    job = make_job("p").priority(class_name=class_name).obj() if class_name else make_job("p").obj()
    assert missing_priority_class(job, known) == missing
