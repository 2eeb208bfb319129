"""The batch/v1 Job adapter's transforms: the Workload's pod sets, the patch that starts an admitted
Job, the missing-PriorityClass check, restoring the template the Workload recorded, and the reads
the reconciler decides by (finished, pods left, stopped, pods ready)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from controller.api.workload import Admission, Workload
from controller.core.jobs.batch_job import BATCH_JOB, workload_from_job
from controller.core.jobs.framework import missing_priority_class
from devcluster.server.patching import merge_patch as merge  # RFC 7386, as the API server applies it
from tests.builders.jobs import AUTHORED_KINDS, H100, admission, authored, pod_template_patch
from tests.builders.kueue import make_job


def pod_template_restore_patch(job: dict[str, Any], workload: Workload) -> dict[str, Any] | None:
    return BATCH_JOB.restore_patch(job, workload.spec.pod_sets)


def without_empty(obj: Any) -> Any:
    """`obj` without empty maps (the API server treats an empty template metadata as none)."""
    if isinstance(obj, dict):
        return {k: without_empty(v) for k, v in obj.items() if v != {}}
    return obj


def test_a_topology_admission_adds_flavor_rules_annotations_and_the_tas_label_and_unsuspends() -> None:
    job = make_job("train").obj()
    job["metadata"]["resourceVersion"] = "41"
    job["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    patch = pod_template_patch(job, "job-train-abcde", Admission.model_validate(admission(topology=True)), {"h100": H100})
    assert patch["metadata"] == {"resourceVersion": "41"}
    assert patch["spec"]["suspend"] is False
    template = patch["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"zone": "a", "gpu": "h100"}
    assert template["spec"]["tolerations"] == H100["tolerations"]
    assert template["metadata"] == {
        "annotations": {c.ANNOTATION_TOPOLOGY_WORKLOAD: "job-train-abcde", c.ANNOTATION_TOPOLOGY_PODSET: "main"},
        "labels": {c.LABEL_TAS: c.LABEL_TAS_VALUE}}
    assert template["spec"]["schedulingGates"] == [{"name": c.SCHEDULING_GATE_TOPOLOGY}]


@pytest.mark.parametrize(("authored_gates", "started_gates"), [
    ([{"name": "example.com/quota"}], [{"name": "example.com/quota"}, {"name": c.SCHEDULING_GATE_TOPOLOGY}]),
    ([{"name": c.SCHEDULING_GATE_TOPOLOGY}], None),  # already there (a Workload recorded it): not twice
])
def test_the_topology_gate_joins_the_authors_gates_once(
        authored_gates: list[dict[str, str]], started_gates: list[dict[str, str]] | None) -> None:
    job = make_job("gated").obj()
    job["spec"]["template"]["spec"]["schedulingGates"] = authored_gates
    patch = pod_template_patch(job, "w", Admission.model_validate(admission(topology=True)), {"h100": H100})
    assert patch["spec"]["template"]["spec"].get("schedulingGates") == started_gates


def test_an_admission_without_topology_leaves_pods_ungated_and_unlabelled() -> None:
    patch = pod_template_patch(make_job("plain").obj(), "job-plain-abcde", Admission.model_validate(admission(topology=False)), {"h100": H100})
    assert "metadata" not in patch["spec"]["template"]
    assert "schedulingGates" not in patch["spec"]["template"]["spec"]
    assert patch["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "h100"}


def test_a_toleration_the_template_already_has_is_not_repeated() -> None:
    job = make_job("t").obj()
    job["spec"]["template"]["spec"]["tolerations"] = list(H100["tolerations"])
    patch = pod_template_patch(job, "w", Admission.model_validate(admission(topology=False)), {"h100": H100})
    assert patch["spec"]["template"]["spec"]["tolerations"] == H100["tolerations"]


@pytest.mark.parametrize(("label", "class_name", "known", "missing"), [
    (None, "high", {"high": {}}, None),
    (None, "high", {}, (c.EVENT_REASON_ERR_WORKLOAD_COMPOSE, 'priorityclasses.scheduling.k8s.io "high" not found')),
    (None, None, {}, None),
    ("urgent", None, {}, (c.EVENT_REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND,
                          'WorkloadPriorityClass "urgent" not found')),
    ("batch", "gone", {}, None),
], ids=["a PriorityClass that exists", "a PriorityClass that does not", "no class at all",
        "a WorkloadPriorityClass that does not exist", "the label wins: the template's class is not looked at"])
def test_a_priority_class_is_missing_only_when_named_and_absent(
        label: str | None, class_name: str | None, known: dict[str, Any], missing: tuple[str, str] | None) -> None:
    job = make_job("p").priority(class_name=class_name) if class_name else make_job("p")
    if label is not None:
        job.label(c.LABEL_PRIORITY_CLASS, label)
    assert missing_priority_class(BATCH_JOB, job.obj(), known, {"batch": object()}) == missing


# -- restoring the template ------------------------------------------------------------------------

@pytest.mark.parametrize("kind", AUTHORED_KINDS)
@pytest.mark.parametrize("topology", [True, False], ids=["topology", "no-topology"])
def test_restoring_after_a_start_gives_back_exactly_the_authors_template(kind: str, topology: bool) -> None:
    job = authored(kind)
    workload = Workload.from_dict(workload_from_job(job))
    started = merge(job, pod_template_patch(job, "job-train-x", Admission.model_validate(admission(topology=topology)), {"h100": H100}))
    assert started["spec"]["template"] != job["spec"]["template"]  # the start changed something
    restored = merge(started, pod_template_restore_patch(started, workload))
    assert without_empty(restored["spec"]["template"]) == without_empty(job["spec"]["template"])
    assert pod_template_restore_patch(restored, workload) is None  # nothing left to do


def test_the_restore_patch_carries_the_jobs_resource_version_and_nulls_only_what_tasq_added() -> None:
    job = authored("own selector and toleration")
    workload = Workload.from_dict(workload_from_job(job))
    started = merge(job, pod_template_patch(job, "job-train-x", Admission.model_validate(admission(topology=True)), {"h100": H100}))
    started["metadata"]["resourceVersion"] = "12"
    patch = pod_template_restore_patch(started, workload)
    assert patch == {"metadata": {"resourceVersion": "12"}, "spec": {"template": {
        "spec": {"nodeSelector": {"gpu": None}, "tolerations": [{"key": "spot", "operator": "Exists"}],
                 "schedulingGates": None},
        "metadata": {"labels": {c.LABEL_TAS: None},
                     "annotations": {c.ANNOTATION_TOPOLOGY_WORKLOAD: None, c.ANNOTATION_TOPOLOGY_PODSET: None}}}}}
