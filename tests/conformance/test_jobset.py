"""JobSet as tasq's JobSet integration relies on it, the same on devcluster's simulated JobSet controller
and (with `--cluster=real`) the real one (sigs.k8s.io/jobset v0.10.1): a suspended JobSet's child Jobs
are named `<jobset>-<replicatedJob>-<index>`, labelled with the jobset.sigs.k8s.io keys (on the Job and
its pod template, so on the pods) and suspended, so no pod exists; scheduling directives written into
a replicatedJob's pod template while suspended reach the pods on resume; suspending a running JobSet
removes its pods; the status counts each replicatedJob's Jobs and says when the JobSet completed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client

from devcluster.simulated.jobsets import jobset_crd
from tests.client_models import present
from tests.conformance.conftest import eventually
from tests.e2e.conftest import Kubectl

pytestmark = pytest.mark.jobset

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
GATE = "kueue.x-k8s.io/topology"


@pytest.fixture(scope="module", autouse=True)
def jobset_served(cluster: str, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The JobSet CRD Established: on devcluster created from `jobset_crd()`, on the real control plane
    installed by `up --jobset` from the module."""
    if cluster == "dev":
        path = tmp_path_factory.mktemp("jobset") / "crd.yaml"
        path.write_text(yaml.safe_dump(jobset_crd()))
        kubectl("apply", "-f", str(path))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.{GROUP}")


def jobset(name: str, *, suspend: bool = True, run_seconds: int | None = None) -> dict[str, Any]:
    """A leader (one Job of one pod, replicas left to the default) and workers (two Jobs of two pods)."""
    annotations = {} if run_seconds is None else {"devcluster.tasq.io/run-seconds": str(run_seconds)}

    def rjob(rname: str, pods: int) -> dict[str, Any]:
        return {"name": rname, "template": {"spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"labels": {"role": rname}, "annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}
    workers = rjob("workers", 2)
    workers["replicas"] = 2
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"suspend": suspend, "replicatedJobs": [rjob("leader", 1), workers]}}


def live_pods(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    pods: list[client.V1Pod] = core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME}={name}").items
    return [p for p in pods if present(p.metadata).deletion_timestamp is None]


def read(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    assert isinstance(body, dict)
    return body


def read_when(custom: client.CustomObjectsApi, namespace: str, name: str,
              predicate: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    """The JobSet once `predicate(body)` holds."""
    def probe() -> dict[str, Any] | None:
        body = read(custom, namespace, name)
        return body if predicate(body) else None
    return eventually(probe, what, timeout)


def counts(body: dict[str, Any]) -> dict[str, dict[str, int]]:
    """replicatedJobsStatus by name (the real controller lists them in no fixed order)."""
    return {s["name"]: {k: v for k, v in s.items() if k != "name"}
            for s in (body.get("status") or {}).get("replicatedJobsStatus") or []}


def condition(body: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"]), str(cond["reason"])
    return None


def test_a_suspended_jobset_makes_suspended_labelled_jobs_and_no_pods(
        custom: client.CustomObjectsApi, batch: client.BatchV1Api, core: client.CoreV1Api, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, jobset("train"))
    body = read_when(custom, namespace, "train", lambda b: counts(b).get("workers", {}).get("suspended") == 2,
                     "the status counts two suspended worker Jobs")
    assert counts(body)["leader"]["suspended"] == 1
    assert condition(body, "Suspended") == ("True", "SuspendedJobs")
    rjobs = body["spec"]["replicatedJobs"]
    assert (rjobs[0]["replicas"], rjobs[0]["groupName"]) == (1, "default")  # the CRD's defaults

    jobs = {str(present(j.metadata).name): j for j in batch.list_namespaced_job(namespace).items}
    assert sorted(jobs) == ["train-leader-0", "train-workers-0", "train-workers-1"]
    worker = jobs["train-workers-1"]
    for labels in (present(present(worker.metadata).labels),
                   present(present(present(worker.spec).template.metadata).labels)):
        assert (labels[JOBSET_NAME], labels[RJOB_NAME], labels[JOB_INDEX], labels[GLOBAL_INDEX]) == (
            "train", "workers", "1", "2")
    assert present(worker.spec).suspend is True
    assert present(worker.spec).completion_mode == "Indexed"
    owner = present(present(worker.metadata).owner_references)[0]
    assert (owner.kind, owner.name, owner.controller) == ("JobSet", "train", True)
    assert live_pods(core, namespace, "train") == []


def test_directives_written_while_suspended_reach_the_pods_on_resume(
        custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, jobset("place"))
    eventually(lambda: counts(read(custom, namespace, "place")).get("workers", {}).get("suspended") == 2,
               "the worker Jobs exist, suspended")
    body = read(custom, namespace, "place")
    for rjob in body["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]
        pod["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/topology-podset"] = rjob["name"]
        pod["spec"]["nodeSelector"] = {"cloud.provider.com/topology-block": "b2"}
        pod["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
    body["spec"]["suspend"] = False
    custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "place", body)

    pods = eventually(lambda: len(p := live_pods(core, namespace, "place")) == 5 and p, "5 pods are created")
    assert isinstance(pods, list)
    for pod in pods:
        meta, spec = present(pod.metadata), present(pod.spec)
        assert spec.node_selector == {"cloud.provider.com/topology-block": "b2"}
        assert [g.name for g in spec.scheduling_gates or []] == [GATE]
        assert any(t.key == "gpu" for t in spec.tolerations or [])
        assert meta.annotations["kueue.x-k8s.io/topology-podset"] == meta.labels[RJOB_NAME]
        assert meta.labels["role"] == meta.labels[RJOB_NAME]
        assert COMPLETION_INDEX in meta.labels and JOB_INDEX in meta.labels
    assert sorted((present(p.metadata).labels[RJOB_NAME], present(p.metadata).labels[JOB_INDEX],
                   present(p.metadata).labels[COMPLETION_INDEX]) for p in pods) == [
        ("leader", "0", "0"), ("workers", "0", "0"), ("workers", "0", "1"), ("workers", "1", "0"),
        ("workers", "1", "1")]
    eventually(lambda: condition(read(custom, namespace, "place"), "Suspended") == ("False", "ResumeJobs"),
               "the Suspended condition turns False")


def test_suspending_a_running_jobset_removes_its_pods(
        custom: client.CustomObjectsApi, batch: client.BatchV1Api, core: client.CoreV1Api, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, jobset("pause", suspend=False))
    eventually(lambda: len(live_pods(core, namespace, "pause")) == 5, "5 pods are created")
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pause", {"spec": {"suspend": True}})
    eventually(lambda: live_pods(core, namespace, "pause") == [], "the pods are gone")
    assert all(present(j.spec).suspend for j in batch.list_namespaced_job(namespace).items)
    eventually(lambda: condition(read(custom, namespace, "pause"), "Suspended") == ("True", "SuspendedJobs"),
               "the Suspended condition turns True")


def test_a_jobset_whose_jobs_all_complete_is_completed(
        custom: client.CustomObjectsApi, namespace: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                           jobset("done", suspend=False, run_seconds=1))
    body = read_when(custom, namespace, "done", lambda b: condition(b, "Completed"), "the JobSet is Completed",
                     timeout=90)
    assert condition(body, "Completed") == ("True", "AllJobsCompleted")
    assert body["status"]["terminalState"] == "Completed"
    assert {name: c["succeeded"] for name, c in counts(body).items()} == {"leader": 1, "workers": 2}

