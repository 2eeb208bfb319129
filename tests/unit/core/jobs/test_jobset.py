"""The JobSet adapter's transforms: pod sets per replicatedJob (count, topology request with the ranking
labels), Kueue's Workload name, the patch that starts an admitted JobSet (each replicatedJob's template
gets its own pod set's info, the list sent whole), the restore of the recorded templates, and the
reads of the JobSet status the reconciler decides by."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.views import OwnerRef
from controller.api.workload import Admission, PodSet
from controller.core.jobs.framework import pod_set_infos
from controller.core.jobs.jobset import JOBSET, merged, workload_name_for_jobset
from devcluster.server.patching import merge_patch  # RFC 7386, as the API server applies it

H100 = {"nodeLabels": {"gpu": "h100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}


def rjob(name: str, replicas: int | None, parallelism: int, completions: int | None = None,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": {"role": name}}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"parallelism": parallelism, "template": {
        "metadata": meta, "spec": {"nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "x"}]}}}
    if completions is not None:
        spec["completions"] = completions
    out: dict[str, Any] = {"name": name, "template": {"spec": spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def jobset(*rjobs: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                         "labels": {c.LABEL_QUEUE_NAME: "lq"}},
            "spec": {"suspend": True, "replicatedJobs": list(rjobs)}}


RACK = {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "cloud.provider.com/topology-rack"}


@pytest.mark.parametrize(("replicas", "parallelism", "completions", "count"), [
    (None, 4, None, 4),  # replicas defaults to 1
    (3, 4, None, 12),
    (3, 4, 2, 6),  # a Job runs min(parallelism, completions) pods at once (Kueue's count)
    (2, 2, 8, 4),
    (0, 4, 4, 0),
], ids=["one_replica_by_default", "replicas_times_parallelism", "completions_below_parallelism",
        "completions_above_parallelism", "no_replicas"])
def test_a_pod_set_per_replicated_job_counts_replicas_times_pods_per_job(
        replicas: int | None, parallelism: int, completions: int | None, count: int) -> None:
    [pod_set] = JOBSET.pod_sets(jobset(rjob("workers", replicas, parallelism, completions)))
    assert (pod_set["name"], pod_set["count"]) == ("workers", count)
    assert pod_set["template"]["metadata"]["labels"] == {"role": "workers"}


def test_a_topology_annotation_gives_a_request_that_ranks_pods_by_job_then_completion_index() -> None:
    leader, workers = JOBSET.pod_sets(jobset(rjob("leader", 1, 1), rjob("workers", 3, 4, annotations=RACK)))
    assert "topologyRequest" not in leader
    assert workers["topologyRequest"] == {
        "required": "cloud.provider.com/topology-rack", "podIndexLabel": c.LABEL_JOB_COMPLETION_INDEX,
        "subGroupIndexLabel": c.LABEL_JOBSET_JOB_INDEX, "subGroupCount": 3}


def test_pod_set_groups_and_slices_come_from_each_template() -> None:
    group = {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "cloud.provider.com/topology-block",
             c.ANNOTATION_PODSET_GROUP_NAME: "together"}
    sliced = {**RACK, c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: "kubernetes.io/hostname",
              c.ANNOTATION_PODSET_SLICE_SIZE: "2"}
    leader, workers, sliced_set = JOBSET.pod_sets(jobset(rjob("leader", 1, 1, annotations=group),
                                                         rjob("workers", 2, 2, annotations=group),
                                                         rjob("sliced", 1, 4, annotations=sliced)))
    assert leader["topologyRequest"]["podSetGroupName"] == workers["topologyRequest"]["podSetGroupName"] == "together"
    assert (sliced_set["topologyRequest"]["podSetSliceRequiredTopology"],
            sliced_set["topologyRequest"]["podSetSliceSize"]) == ("kubernetes.io/hostname", 2)


def test_the_workload_is_named_after_the_jobset_with_its_kind() -> None:
    name = JOBSET.workload_name(jobset())
    assert name == workload_name_for_jobset("train")
    assert name.startswith("jobset-train-") and len(name) == len("jobset-train-") + 5
    assert name != workload_name_for_jobset("train2")


def admission_for(*names: str, topology: bool = True) -> Admission:
    psas = []
    for name in names:
        psa: dict[str, Any] = {"name": name, "count": 2, "flavors": {"cpu": "h100"}, "resourceUsage": {"cpu": "2"}}
        if topology:
            psa["topologyAssignment"] = {"slices": [{"nodeLabels": {"rack": f"r-{name}"}, "count": 2}]}
        psas.append(psa)
    return Admission.model_validate({"clusterQueue": "cq", "podSetAssignments": psas})


def started(obj: dict[str, Any]) -> dict[str, Any]:
    infos = pod_set_infos("jobset-train-abcde", admission_for("leader", "workers"), {"h100": H100})
    result: dict[str, Any] = merge_patch(obj, JOBSET.run_patch(obj, infos))
    return result


def test_starting_writes_each_pod_sets_info_into_its_own_template_and_unsuspends() -> None:
    obj = jobset(rjob("leader", 1, 1), rjob("workers", 1, 1))
    patch = JOBSET.run_patch(obj, pod_set_infos("jobset-train-abcde", admission_for("leader", "workers"),
                                                {"h100": H100}))
    assert patch["metadata"] == {"resourceVersion": "7"}
    after = merge_patch(obj, patch)
    assert after["spec"]["suspend"] is False
    for rj in after["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"zone": "a", "gpu": "h100"}
        assert template["spec"]["tolerations"] == H100["tolerations"]
        assert template["spec"]["schedulingGates"] == [{"name": c.SCHEDULING_GATE_TOPOLOGY}]
        assert template["metadata"]["annotations"] == {c.ANNOTATION_TOPOLOGY_WORKLOAD: "jobset-train-abcde",
                                                       c.ANNOTATION_TOPOLOGY_PODSET: rj["name"]}
        assert template["metadata"]["labels"] == {"role": rj["name"], c.LABEL_TAS: c.LABEL_TAS_VALUE}
        assert template["spec"]["containers"] == [{"name": "c", "image": "x"}]  # the rest as written
    assert [rj["name"] for rj in after["spec"]["replicatedJobs"]] == ["leader", "workers"]


def test_restoring_puts_back_each_recorded_template_and_nothing_when_they_match() -> None:
    authored = jobset(rjob("leader", 1, 1), rjob("workers", 2, 2, annotations=RACK))
    recorded = [PodSet.model_validate(ps) for ps in JOBSET.pod_sets(authored)]
    running = started(authored)
    running["spec"]["suspend"] = True

    patch = JOBSET.restore_patch(running, recorded)
    assert patch is not None
    restored = merge_patch(running, patch)
    assert [rj["template"] for rj in restored["spec"]["replicatedJobs"]] == \
        [rj["template"] for rj in authored["spec"]["replicatedJobs"]]
    assert JOBSET.restore_patch(restored, recorded) is None


def test_suspend_patch_is_conditional_on_the_version() -> None:
    assert JOBSET.suspend_patch(jobset()) == {"metadata": {"resourceVersion": "7"}, "spec": {"suspend": True}}


def with_status(status: dict[str, Any], *rjobs: dict[str, Any]) -> dict[str, Any]:
    obj = jobset(*(rjobs or (rjob("leader", 1, 1), rjob("workers", 2, 2))))
    obj["status"] = status
    return obj


def counts(name: str, **values: int) -> dict[str, Any]:
    return {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **values}


@pytest.mark.parametrize(("status", "finished"), [
    ({"conditions": [{"type": "Completed", "status": "True", "message": "jobset completed successfully"}]},
     (True, "jobset completed successfully")),
    ({"conditions": [{"type": "Failed", "status": "True", "message": "jobset failed due to one or more job failures"}]},
     (False, "jobset failed due to one or more job failures")),
    ({"conditions": [{"type": "Suspended", "status": "True"}]}, None),
    ({}, None),
], ids=["completed", "failed", "suspended", "no_status"])
def test_finished_reads_the_terminal_condition_and_its_message(status: dict[str, Any],
                                                              finished: tuple[bool, str] | None) -> None:
    result = JOBSET.finished(with_status(status))
    assert (None if result is None else (result.succeeded, result.message)) == finished


def test_pods_left_counts_jobs_with_active_pods_and_pods_ready_needs_every_job_ready() -> None:
    running = with_status({"replicatedJobsStatus": [counts("workers", ready=1, active=2), counts("leader", active=1)]})
    assert JOBSET.pods_left(running) == 3
    assert JOBSET.pods_ready(running) is False
    ready = with_status({"replicatedJobsStatus": [counts("workers", ready=1, succeeded=1, active=1),
                                                  counts("leader", ready=1, active=1)]})
    assert JOBSET.pods_ready(ready) is True
    stopped = with_status({"replicatedJobsStatus": [counts("workers", suspended=2), counts("leader", suspended=1)],
                           "conditions": [{"type": "Suspended", "status": "True"}]})
    assert JOBSET.pods_left(stopped) == 0
    assert JOBSET.suspension_acknowledged(stopped) is True
    assert JOBSET.suspension_acknowledged(running) is False
    assert JOBSET.clear_start_patch(running) is None


def test_priority_comes_from_the_first_template_that_names_one() -> None:
    obj = jobset(rjob("leader", 1, 1), rjob("workers", 1, 1))
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["priorityClassName"] = "high"
    assert JOBSET.priority_class_name(obj) == "high"
    assert JOBSET.priority_class_name(jobset(rjob("leader", 1, 1))) is None


@pytest.mark.parametrize(("target", "patch", "result"), [
    ({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}}, {"a": 1, "b": {"d": 3}}),
    ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
    ({}, {"a": None}, {}),
], ids=["nested_delete_and_add", "list_replaced", "delete_missing"])
def test_merged_applies_a_merge_patch_as_the_api_server_does(target: dict[str, Any], patch: dict[str, Any],
                                                             result: dict[str, Any]) -> None:
    before = copy.deepcopy(target)
    assert merged(target, patch) == result == merge_patch(target, patch)
    assert target == before


def test_a_pod_belongs_to_the_jobset_its_label_names_and_a_workload_to_its_owner_of_kind_jobset() -> None:
    job_owner = OwnerRef("batch/v1", "Job", "train-workers-0", "j1", True)
    assert JOBSET.pod_owner_key("ns", {c.LABEL_JOBSET_NAME: "train"}, (job_owner,)) == "ns/train"
    assert JOBSET.pod_owner_key("ns", {}, (job_owner,)) is None
    jobset_owner = OwnerRef("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "u1", True)
    assert JOBSET.workload_owner_key("ns", (jobset_owner,)) == "ns/train"
    assert JOBSET.workload_owner_key("ns", (job_owner,)) is None
    assert JOBSET.owns(jobset(), (jobset_owner,)) is True
    assert JOBSET.owns(jobset(), (OwnerRef("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "old-uid", True),)) is False
