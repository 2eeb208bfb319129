"""The simulated JobSet controller: child Jobs named, labelled and suspended as the real controller makes
them (`job_for`), the resume merge of the replicatedJob template (`resumed`), and a JobSet's life on an
in-process API server with the other simulated components (created suspended, resumed, completed)."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.server.apiserver import PATCH_MERGE, ApiServer
from devcluster.simulated.components import Components, ManualClock
from devcluster.simulated.jobsets import (
    LABEL_GROUP_REPLICAS,
    LABEL_JOB_GLOBAL_INDEX,
    LABEL_JOB_GROUP_INDEX,
    LABEL_JOB_INDEX,
    LABEL_JOB_KEY,
    LABEL_JOBSET_NAME,
    LABEL_REPLICATED_JOB_NAME,
    job_for,
    jobset_crd,
    resumed,
)


def make_jobset(name: str, *rjobs: tuple[str, int, int], suspend: bool = True, group: str = "default") -> dict[str, Any]:
    """A JobSet as stored: one replicatedJob per (name, replicas, parallelism), each completing once per pod."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"suspend": suspend, "replicatedJobs": [
            {"name": rjob, "groupName": group, "replicas": replicas, "template": {"spec": {
                "parallelism": parallelism, "completions": parallelism,
                "template": {"metadata": {"labels": {"app": rjob}},
                             "spec": {"containers": [{"name": "c", "image": "x"}]}}}}}
            for rjob, replicas, parallelism in rjobs]},
    }


def test_each_child_job_carries_the_jobset_keys_on_itself_and_its_pod_template() -> None:
    jobset = make_jobset("train", ("leader", 1, 1), ("workers", 2, 4))
    job = job_for(jobset, jobset["spec"]["replicatedJobs"][1], 1)

    assert job["metadata"]["name"] == "train-workers-1"
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    for meta in (job["metadata"]["labels"], job["metadata"]["annotations"], pod_labels):
        assert meta[LABEL_JOBSET_NAME] == "train"
        assert meta[LABEL_REPLICATED_JOB_NAME] == "workers"
        assert meta[LABEL_JOB_INDEX] == "1"
        assert meta[LABEL_JOB_GLOBAL_INDEX] == "2"  # after the leader's one Job
        assert meta[LABEL_JOB_GROUP_INDEX] == "2"
        assert meta[LABEL_GROUP_REPLICAS] == "3"
    assert len(job["metadata"]["labels"][LABEL_JOB_KEY]) == 40
    assert pod_labels["app"] == "workers"  # the template's own labels pass through
    assert job["spec"]["suspend"] is True
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["template"]["spec"]["subdomain"] == "train"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_resuming_merges_what_was_written_into_the_replicated_job_template() -> None:
    jobset = make_jobset("train", ("workers", 1, 2))
    job = job_for(jobset, jobset["spec"]["replicatedJobs"][0], 0)
    job["spec"]["template"]["spec"]["tolerations"] = [{"key": "a", "operator": "Exists"}]
    rjob = jobset["spec"]["replicatedJobs"][0]
    pod = rjob["template"]["spec"]["template"]
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/workload": "w"}
    pod["spec"].update({"nodeSelector": {"rack": "r1"},
                        "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
                        "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]})

    out = resumed(job, rjob)

    spec = out["spec"]["template"]["spec"]
    assert out["spec"]["suspend"] is False
    assert spec["nodeSelector"] == {"rack": "r1"}
    assert spec["tolerations"] == [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    assert spec["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    annotations = out["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/workload"] == "w"
    assert annotations[LABEL_JOBSET_NAME] == "train"  # the controller's own keys stay


async def _cluster() -> tuple[ApiServer, Components, ManualClock]:
    clock = ManualClock()
    api = ApiServer(now=clock)
    await api.create(api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions"), "", jobset_crd())
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"},
                       "capacity": {"cpu": "64", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    await api.create(api.resource("v1", "nodes"), "", node)
    return api, Components(api).start(), clock


async def _jobs(api: ApiServer) -> dict[str, dict[str, Any]]:
    items = (await api.list_objects(api.resource("batch/v1", "jobs"), "default"))["items"]
    return {j["metadata"]["name"]: j for j in items}


async def _pods(api: ApiServer) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await api.list_objects(api.resource("v1", "pods"), "default"))["items"]
    return items


@pytest.mark.parametrize("replicas", [1, 3])
async def test_a_suspended_jobset_has_its_jobs_suspended_and_no_pods_then_runs_to_completion(replicas: int) -> None:
    api, components, clock = await _cluster()
    jobsets = api.resource("jobset.x-k8s.io/v1alpha2", "jobsets")
    body = make_jobset("train", ("leader", 1, 1), ("workers", replicas, 2))
    body["metadata"] = {"name": "train"}
    for pod_template in (r["template"]["spec"]["template"] for r in body["spec"]["replicatedJobs"]):
        pod_template["metadata"]["annotations"] = {"devcluster.tasq.io/run-seconds": "5"}
    await api.create(jobsets, "default", body)
    await components.settle()

    jobs = await _jobs(api)
    assert sorted(jobs) == sorted(["train-leader-0", *(f"train-workers-{i}" for i in range(replicas))])
    assert all(j["spec"]["suspend"] for j in jobs.values())
    assert await _pods(api) == []
    status = (await api.get(jobsets, "default", "train"))["status"]
    assert [(s["name"], s["suspended"]) for s in status["replicatedJobsStatus"]] == [("leader", 1),
                                                                                      ("workers", replicas)]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Suspended", "True", "SuspendedJobs")]

    await api.patch(jobsets, "default", "train", PATCH_MERGE, {"spec": {"suspend": False}})
    await components.settle()
    assert len(await _pods(api)) == 1 + 2 * replicas
    status = (await api.get(jobsets, "default", "train"))["status"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Suspended", "False", "ResumeJobs")]

    await components.advance(clock, 6)
    status = (await api.get(jobsets, "default", "train"))["status"]
    assert status["terminalState"] == "Completed"
    assert [(s["name"], s["succeeded"]) for s in status["replicatedJobsStatus"]] == [("leader", 1),
                                                                                      ("workers", replicas)]
    components.close()


async def test_suspending_a_running_jobset_suspends_its_jobs_and_their_pods_go() -> None:
    api, components, _clock = await _cluster()
    jobsets = api.resource("jobset.x-k8s.io/v1alpha2", "jobsets")
    body = make_jobset("train", ("workers", 2, 2), suspend=False)
    body["metadata"] = {"name": "train"}
    await api.create(jobsets, "default", body)
    await components.settle()
    assert len(await _pods(api)) == 4

    await api.patch(jobsets, "default", "train", PATCH_MERGE, {"spec": {"suspend": True}})
    await components.settle()
    assert all(j["spec"]["suspend"] for j in (await _jobs(api)).values())
    assert [p for p in await _pods(api) if not p["metadata"].get("deletionTimestamp")] == []
    components.close()


async def test_a_failed_job_fails_the_jobset() -> None:
    api, components, clock = await _cluster()
    jobsets = api.resource("jobset.x-k8s.io/v1alpha2", "jobsets")
    body = make_jobset("train", ("workers", 2, 1), suspend=False)
    body["metadata"] = {"name": "train"}
    template = body["spec"]["replicatedJobs"][0]["template"]["spec"]
    template["backoffLimit"] = 0
    template["template"]["spec"]["restartPolicy"] = "Never"
    template["template"]["metadata"]["annotations"] = {"devcluster.tasq.io/fail": "true"}
    await api.create(jobsets, "default", body)
    await components.advance(clock, 1)

    status = (await api.get(jobsets, "default", "train"))["status"]
    assert status["terminalState"] == "Failed"
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "FailedJobs")
    components.close()
