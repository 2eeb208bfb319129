"""JobSets through kubectl on either control plane (the real JobSet controller v0.10.1 on
`--cluster=real`, devcluster's simulated one otherwise) with `tasq run --local-webhooks`: Kueue's JobSet
TAS example (required rack) and a leader + workers pod-set group in one block are admitted and every
pod runs in its domain; a JobSet waiting for quota has suspended Jobs and no pods.

Nodes: the TAS guide's kind workers, 7 one-CPU pod slots each (beside the GPU sample nodes no flavor
here selects):

    b1: r1 [kind-worker  kind-worker2]   r2 [kind-worker3 kind-worker4]
    b2: r1 [kind-worker5 kind-worker6]   r2 [kind-worker7 kind-worker8]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from devcluster.simulated.jobsets import jobset_crd
from devcluster.simulated.nodes import parse_shape, topology_nodes
from tests.builders.kueue_examples import EXAMPLES, kind_workers
from tests.e2e.conftest import Kubectl, install_operator_cluster, wait_for
from tests.e2e.test_kueue_examples import admitted, bound_pods, pod_states, workload_of
from tests.e2e.test_operator_clusters import Process, condition, get

pytestmark = [pytest.mark.e2e, pytest.mark.jobset]

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
NAMESPACE = "default"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
SETUP = """apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: tas-cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: small-cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: tas-flavor
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 4Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: small-queue}
spec: {clusterQueue: small-cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: preempting-cluster-queue}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: tas-flavor
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 4Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: preempting-queue}
spec: {clusterQueue: preempting-cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"""
"""Besides the TAS guide's queues: the LocalQueue Kueue's JobSet examples name, a ClusterQueue of 4
CPUs for the quota test, and one of 4 CPUs that preempts by priority, with two priority classes."""


def leader_and_workers(name: str, queue: str = "user-queue", workers: int = 2, per_worker: int = 3,
                       group: bool = True) -> dict[str, Any]:
    """A leader (one pod) and `workers` Jobs of `per_worker` one-CPU pods; with `group`, both
    replicatedJobs are one pod-set group required in one block."""
    notes = {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK, c.ANNOTATION_PODSET_GROUP_NAME: "leader-workers"} \
        if group else {}

    def rjob(rname: str, replicas: int, pods: int) -> dict[str, Any]:
        return {"name": rname, "replicas": replicas, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {
                "metadata": {"annotations": notes},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", "600"],
                    "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {c.LABEL_QUEUE_NAME: queue}},
            "spec": {"replicatedJobs": [rjob("leader", 1, 1), rjob("workers", workers, per_worker)]}}


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """JobSet's CRD (on devcluster the simulated controller's; the real control plane's `up --jobset`
    installed JobSet's own), tasq's CRDs, the kind workers, the TAS guide's queues and SETUP."""
    if cluster == "dev":
        crd = tmp_path_factory.mktemp("jobset") / "crd.yaml"
        crd.write_text(yaml.safe_dump(jobset_crd()))
        kubectl("apply", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/jobsets.jobset.x-k8s.io")
    nodes = kind_workers() + ([] if cluster == "real" else topology_nodes(parse_shape("2x4x4x8"), "gpu-"))
    setup = (EXAMPLES / "tas" / "sample-queues.yaml").read_text() + "\n---\n" + SETUP
    close = install_operator_cluster(request, cluster, kubectl, nodes, setup)
    if cluster == "real":
        wait_for(lambda: kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
                 30, "the default ServiceAccount")
    yield
    close()


@pytest.fixture
def clean(kubectl: Kubectl) -> Iterator[None]:
    """Each test's JobSets deleted afterwards, their Jobs and pods with them, so the next test has
    every worker free."""
    yield
    kubectl("delete", "jobsets", "--all", "-n", NAMESPACE, "--wait=true", "--cascade=foreground", timeout=120)
    wait_for(lambda: not get(kubectl, "pods", "-n", NAMESPACE)["items"], 90, "the JobSets' pods gone")


def create(kubectl: Kubectl, obj: dict[str, Any] | Path) -> str:
    """`kubectl create` of a JobSet (a file or an object): its name; tasq's webhook suspended it."""
    source = ["-f", str(obj)] if isinstance(obj, Path) else ["-f", "-"]
    created = json.loads(kubectl("create", *source, "-o", "json",
                                 stdin=None if isinstance(obj, Path) else json.dumps(obj)).stdout)
    assert created["spec"]["suspend"] is True, "the JobSet webhook did not suspend the JobSet"
    return str(created["metadata"]["name"])


def domains(kubectl: Kubectl, pods: list[dict[str, Any]], level: str) -> set[tuple[str, ...]]:
    """The blocks (level BLOCK) or (block, rack) pairs (level RACK) the pods run in."""
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}
    keys = (BLOCK,) if level == BLOCK else (BLOCK, RACK)
    return {tuple(labels[p["spec"]["nodeName"]][k] for k in keys) for p in pods}


def test_kueues_required_rack_example_runs_its_pods_in_one_rack(tasq: Process, kubectl: Kubectl, clean: None) -> None:
    name = create(kubectl, EXAMPLES / "jobs" / "sample-jobset-tas-required.yaml")
    try:
        wl = wait_for(lambda: admitted(kubectl, name, "JobSet"), 90, "the JobSet's Workload admitted")
        pods = wait_for(lambda: bound_pods(kubectl, name, 4, JOBSET_NAME), 90, "the JobSet's 4 pods running",
                        logs=lambda: pod_states(kubectl))
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert wl["metadata"]["name"].startswith("jobset-jobset-tas-required-")
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert (psa["name"], psa["count"]) == ("workers", 4)
    assert len(domains(kubectl, pods, RACK)) == 1
    for pod in pods:  # released by the ungater onto the node it chose, inside the rack
        assert not pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
        assert pod["spec"]["nodeSelector"][c.LABEL_HOSTNAME] == pod["spec"]["nodeName"]
        assert pod["metadata"]["annotations"][c.ANNOTATION_TOPOLOGY_PODSET] == "workers"


def test_a_leader_and_workers_group_runs_in_one_block(tasq: Process, kubectl: Kubectl, clean: None) -> None:
    # 1 leader + 2 Jobs x 3 workers = 7 pods, one pod-set group required in one block: the leader's pod
    # set alone would fit anywhere, the group keeps it in the workers' block.
    name = create(kubectl, leader_and_workers("group"))
    try:
        wl = wait_for(lambda: admitted(kubectl, name, "JobSet"), 90, "the JobSet's Workload admitted")
        pods = wait_for(lambda: bound_pods(kubectl, name, 7, JOBSET_NAME), 90, "the JobSet's 7 pods running",
                        logs=lambda: pod_states(kubectl))
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert sorted((p["name"], p["count"]) for p in wl["status"]["admission"]["podSetAssignments"]) == [
        ("leader", 1), ("workers", 6)]
    assert len(domains(kubectl, pods, BLOCK)) == 1, pod_states(kubectl)


def test_a_jobset_waiting_for_quota_has_no_pods(tasq: Process, kubectl: Kubectl, clean: None) -> None:
    # small-cluster-queue has 4 CPUs: the first JobSet (1 + 1 x 3 pods) takes them, the second waits
    first = create(kubectl, leader_and_workers("first", "small-queue", workers=1, group=False))
    try:
        wait_for(lambda: bound_pods(kubectl, first, 4, JOBSET_NAME), 90, "the first JobSet's 4 pods running",
                 logs=lambda: pod_states(kubectl))
        second = create(kubectl, leader_and_workers("second", "small-queue", workers=1, group=False))
        waiting = wait_for(lambda: (cond := condition(workload_of(kubectl, second, "JobSet"), "QuotaReserved"))
                           and cond["status"] == "False" and cond, 60, "the second JobSet waiting")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert "small-cluster-queue" in waiting["message"] or "quota" in waiting["message"].lower(), waiting
    assert get(kubectl, "jobset", second, "-n", NAMESPACE)["spec"]["suspend"] is True
    jobs = wait_for(lambda: len(j := get(kubectl, "jobs", "-n", NAMESPACE, "-l", f"{JOBSET_NAME}={second}")["items"])
                    == 2 and j, 60, "the second JobSet's 2 Jobs created")
    assert all(job["spec"]["suspend"] is True for job in jobs)
    assert get(kubectl, "pods", "-n", NAMESPACE, "-l", f"{JOBSET_NAME}={second}")["items"] == []


def test_each_jobs_pods_fill_one_slice_in_rank_order(tasq: Process, kubectl: Kubectl, clean: None) -> None:
    # 2 Jobs x 4 workers in one block, in slices of 4 pods per node (a node holds 7): the ungater
    # ranks a pod by its Job's index, then its completion index (Kueue's order for a JobSet), so each
    # Job's 4 pods take one slice, on one node. Ranked by completion index alone, the two Jobs' pods
    # would share ranks 0-3 and be released in creation order across the slices.
    body = leader_and_workers("ranked", workers=2, per_worker=4, group=False)
    del body["spec"]["replicatedJobs"][0]  # the workers only
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"] = {
        c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: BLOCK,
        c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: c.LABEL_HOSTNAME, c.ANNOTATION_PODSET_SLICE_SIZE: "4"}
    name = create(kubectl, body)
    try:
        wait_for(lambda: admitted(kubectl, name, "JobSet"), 90, "the JobSet's Workload admitted")
        pods = wait_for(lambda: bound_pods(kubectl, name, 8, JOBSET_NAME), 90, "the JobSet's 8 pods running",
                        logs=lambda: pod_states(kubectl))
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    nodes_of_job: dict[str, set[str]] = {}
    for pod in pods:
        nodes_of_job.setdefault(pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"], set()).add(
            pod["spec"]["nodeName"])
    assert sorted(len(nodes) for nodes in nodes_of_job.values()) == [1, 1], nodes_of_job
    assert len(set().union(*nodes_of_job.values())) == 2, nodes_of_job
    assert len(domains(kubectl, pods, BLOCK)) == 1


def test_a_preempted_jobset_stops_waits_and_runs_again(tasq: Process, kubectl: Kubectl, clean: None) -> None:
    # preempting-cluster-queue has 4 CPUs: a high-priority JobSet evicts the running low-priority one,
    # which is suspended (its pods gone, its templates restored) and requeued; it runs again once the
    # high one is deleted. Eviction and requeueing are the framework's, unchanged for a JobSet.
    low_body = leader_and_workers("low", "preempting-queue", workers=1, group=False)
    low_body["metadata"]["labels"][c.LABEL_PRIORITY_CLASS] = "low"
    low = create(kubectl, low_body)
    try:
        wait_for(lambda: bound_pods(kubectl, low, 4, JOBSET_NAME), 90, "the low JobSet's 4 pods running",
                 logs=lambda: pod_states(kubectl))
        high_body = leader_and_workers("high", "preempting-queue", workers=1, group=False)
        high_body["metadata"]["labels"][c.LABEL_PRIORITY_CLASS] = "high"
        high = create(kubectl, high_body)
        wait_for(lambda: bound_pods(kubectl, high, 4, JOBSET_NAME), 120, "the high JobSet's 4 pods running",
                 logs=lambda: pod_states(kubectl))
        evicted = wait_for(lambda: (wl := workload_of(kubectl, low, "JobSet")) and condition(wl, "Evicted") and wl, 30,
                           "the low JobSet's Workload evicted")
        wait_for(lambda: not get(kubectl, "pods", "-n", NAMESPACE, "-l", f"{JOBSET_NAME}={low}")["items"], 60,
                 "the low JobSet's pods gone")
        assert get(kubectl, "jobset", low, "-n", NAMESPACE)["spec"]["suspend"] is True
        assert (condition(evicted, "Evicted") or {}).get("reason") == "Preempted"
        kubectl("delete", "jobset", high, "-n", NAMESPACE, "--wait=true", "--cascade=foreground", timeout=120)
        wait_for(lambda: bound_pods(kubectl, low, 4, JOBSET_NAME), 120, "the low JobSet's 4 pods running again",
                 logs=lambda: pod_states(kubectl))
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert admitted(kubectl, low, "JobSet") is not None
