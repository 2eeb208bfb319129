"""The batch/v1 Job adapter's transforms: the Workload's pod sets, the patch that starts an admitted
Job, the missing-PriorityClass check, restoring the template the Workload recorded, and the reads
the reconciler decides by (finished, pods left, stopped, pods ready)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from controller.api.views import OwnerRef
from controller.api.workload import Admission, Workload
from controller.core.jobs.batch_job import BATCH_JOB, workload_from_job, workload_name_for_job
from controller.core.jobs.framework import (
    Finished,
    missing_priority_class,
    pod_set_infos,
    stopped,
    workload_name_for_owner,
)
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


@pytest.mark.parametrize(("notes", "mode", "completions", "want_started"), [
    pytest.param({c.ANNOTATION_JOB_MIN_PARALLELISM: "4"}, "NonIndexed", 8, (6, 8),
                 id="a partially admitted Job runs 6 pods at a time toward its 8 completions"),
    pytest.param({c.ANNOTATION_JOB_MIN_PARALLELISM: "4", c.ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM: "true"},
                 "Indexed", 8, (6, 6), id="with completions-equal-parallelism an Indexed Job runs 6 indexes"),
    pytest.param({}, "NonIndexed", 8, (8, 8), id="without a minimum the parallelism is the author's"),
])
def test_a_partial_admission_sets_the_parallelism_and_stopping_puts_it_back(
        notes: dict[str, str], mode: str, completions: int, want_started: tuple[int, int]) -> None:
    job = make_job("train").parallelism(8).obj()
    job["metadata"]["annotations"] = notes
    job["spec"] |= {"completions": completions, "completionMode": mode}
    workload = Workload.from_dict(workload_from_job(job))
    assert (workload.spec.pod_sets[0].count, workload.spec.pod_sets[0].min_count) == (8, 4 if notes else None)
    reduced = admission(topology=True)
    reduced["podSetAssignments"][0]["count"] = 6
    started = merge(job, pod_template_patch(job, "job-train-x", Admission.model_validate(reduced), {"h100": H100}))
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == want_started
    restored = merge(started, pod_template_restore_patch(started, workload))
    assert (restored["spec"]["parallelism"], restored["spec"]["completions"]) == (8, completions)
    assert without_empty(restored["spec"]["template"]) == without_empty(job["spec"]["template"])
    assert pod_template_restore_patch(restored, workload) is None


# -- the reads the reconciler decides by ---------------------------------------------------------

def job_with(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    job = make_job("r").obj()
    job["spec"].update(spec or {})
    if status is not None:
        job["status"] = status
    return job


SUSPENDED = {"type": c.CONDITION_JOB_SUSPENDED, "status": "True"}


@pytest.mark.parametrize(("conditions", "want"), [
    ([], None),
    ([{"type": c.CONDITION_JOB_COMPLETE, "status": "True"}], Finished(True, "Job finished successfully")),
    ([{"type": c.CONDITION_JOB_FAILED, "status": "True"}], Finished(False, "Job failed")),
    ([{"type": c.CONDITION_JOB_COMPLETE, "status": "False"}], None),
    ([SUSPENDED], None),
], ids=["running", "complete", "failed", "a Complete condition not yet true", "suspended"])
def test_a_job_is_finished_by_its_complete_or_failed_condition(conditions: list[dict[str, str]],
                                                               want: Finished | None) -> None:
    assert BATCH_JOB.finished(job_with(status={"conditions": conditions})) == want


@pytest.mark.parametrize(("spec", "status", "left", "active", "is_stopped", "acknowledged"), [
    ({"suspend": True}, {}, 0, 0, True, False),
    ({"suspend": True}, {"active": 2}, 2, 2, False, False),
    ({"suspend": True}, {"terminating": 1}, 1, 0, False, False),  # still on its node: left, not active
    ({"suspend": True}, {"startTime": "2026-01-01T00:00:00Z", "conditions": [SUSPENDED]}, 0, 0, False, True),
    ({"suspend": False}, {}, 0, 0, False, False),
], ids=["suspended, never ran", "suspended, pods still active", "suspended, a pod terminating",
        "suspended, startTime left", "running"])
def test_a_job_is_stopped_only_suspended_with_no_pod_left_and_no_start_time(
        spec: dict[str, Any], status: dict[str, Any], left: int, active: int, is_stopped: bool,
        acknowledged: bool) -> None:
    job = job_with(spec, status)
    assert (BATCH_JOB.pods_left(job), BATCH_JOB.pods_active(job)) == (left, active)
    assert stopped(BATCH_JOB, job) is is_stopped
    assert BATCH_JOB.suspension_acknowledged(job) is acknowledged
    assert (BATCH_JOB.clear_start_patch(job) is None) is not bool(status.get("startTime"))


@pytest.mark.parametrize(("spec", "status", "ready"), [
    ({"parallelism": 4, "completions": None}, {"ready": 3}, False),
    ({"parallelism": 4, "completions": None}, {"ready": 4}, True),
    ({"parallelism": 4, "completions": 8}, {"ready": 2, "succeeded": 2}, True),
    ({"parallelism": 4, "completions": 2}, {"ready": 2}, True),  # only 2 pods ever run at once
    ({"parallelism": None, "completions": None}, {}, False),  # parallelism defaults to 1
], ids=["one short", "all ready", "succeeded ones count", "completions below parallelism", "nothing ready of the default 1"])
def test_a_job_is_ready_when_its_ready_and_succeeded_pods_reach_what_runs_at_once(
        spec: dict[str, Any], status: dict[str, Any], ready: bool) -> None:
    assert BATCH_JOB.pods_ready(job_with(spec, status)) is ready


def test_the_suspend_patch_is_conditional_on_the_jobs_version() -> None:
    job = job_with()
    job["metadata"]["resourceVersion"] = "7"
    assert BATCH_JOB.suspend_patch(job) == {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}}


# -- identity: Workload names, owners, pods -------------------------------------------------------

def test_workload_names_follow_kueue_for_any_owner_kind() -> None:
    assert workload_name_for_job("train") == workload_name_for_owner("train", "Job", "batch")
    assert workload_name_for_job("train").startswith("job-train-")
    jobset = workload_name_for_owner("train", "JobSet", "jobset.x-k8s.io")
    assert jobset.startswith("jobset-train-") and jobset[-5:] != workload_name_for_job("train")[-5:]
    assert len(workload_name_for_owner("x" * 80, "JobSet", "jobset.x-k8s.io")) == 63


def ref(kind: str = c.KIND_JOB, api_version: str = c.JOB_API_VERSION, controller: bool = True,
        uid: str = "u1") -> OwnerRef:
    return OwnerRef(api_version, kind, "train", uid, controller)


@pytest.mark.parametrize(("owners", "want"), [
    ((ref(),), "ns/train"),
    ((ref(controller=False),), None),
    ((ref(kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2"),), None),
    ((), None),
], ids=["controlled by a Job", "a Job but not its controller", "another kind", "no owner"])
def test_a_pod_belongs_to_the_job_that_controls_it(owners: tuple[OwnerRef, ...], want: str | None) -> None:
    assert BATCH_JOB.pod_owner_key("ns", {}, owners) == want


def test_a_workload_belongs_to_its_job_and_to_that_very_job_only() -> None:
    job = make_job("train", "ns").uid("u1").obj()
    assert BATCH_JOB.workload_owner_key("ns", (ref(controller=False),)) == "ns/train"
    assert BATCH_JOB.workload_owner_key("ns", (ref(kind="JobSet"),)) is None
    assert BATCH_JOB.owns(job, (ref(),))
    assert not BATCH_JOB.owns(job, (ref(uid="u0"),))  # a deleted Job of the same name


# -- pod-set infos of an admission ----------------------------------------------------------------

def test_each_admitted_pod_set_gets_its_own_flavors_counts_and_topology() -> None:
    two = Admission.model_validate({"clusterQueue": "cq", "podSetAssignments": [
        {"name": "leader", "count": 1, "flavors": {"cpu": "cpu-pool"}, "resourceUsage": {"cpu": "1"}},
        {"name": "workers", "count": 6, "flavors": {"nvidia.com/gpu": "h100"}, "resourceUsage": {"nvidia.com/gpu": "48"},
         "topologyAssignment": {"slices": [{"nodeLabels": {"rack": "r1"}, "count": 6}]}}]})
    leader, workers = pod_set_infos("wl", two, {"h100": H100, "cpu-pool": {"nodeLabels": {"pool": "cpu"}}})
    assert (leader.name, leader.count, dict(leader.node_selector), leader.scheduling_gates) == \
        ("leader", 1, {"pool": "cpu"}, ())
    assert (workers.name, workers.count, dict(workers.node_selector)) == ("workers", 6, {"gpu": "h100"})
    assert workers.annotations == {c.ANNOTATION_TOPOLOGY_WORKLOAD: "wl", c.ANNOTATION_TOPOLOGY_PODSET: "workers"}
    assert workers.scheduling_gates == (c.SCHEDULING_GATE_TOPOLOGY,)
