"""The simulated cluster end to end: Jobs run to completion on topology nodes, driven by kubectl.

The devcluster runs on a manual clock; the Job controller, scheduler and kubelet run only when a
test settles them or advances time, so every outcome is deterministic. Nodes (1 block, 2 racks):

    b1 ─┬─ b1-r1 ─┬─ b1-r1-n1 (8 GPUs)
        │         └─ b1-r1-n2 (8 GPUs)
        └─ b1-r2 ─┬─ b1-r2-n1 (8 GPUs)
                  └─ b1-r2-n2 (8 GPUs)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.cluster import DevCluster
from devcluster.simulated.components import Components, ManualClock
from devcluster.simulated.nodes import create_nodes, parse_shape, topology_nodes
from tests.e2e.conftest import Kubectl


class Sim:
    """The cluster's components and clock, driven from the test thread."""

    def __init__(self, cluster: DevCluster, clock: ManualClock) -> None:
        self.cluster = cluster
        self.clock = clock
        self.components = Components(cluster.api, eviction_seconds=300)

    def settle(self) -> int:
        return self.cluster.call(self.components.settle)

    def advance(self, seconds: float) -> int:
        return self.cluster.call(lambda: self.components.advance(self.clock, seconds))


@pytest.fixture(scope="module")
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(scope="module")
def devcluster(clock: ManualClock) -> Iterator[DevCluster]:
    cluster = DevCluster(now=clock, bookmark_interval=0.5).start_in_thread()
    try:
        cluster.call(lambda: create_nodes(cluster.api, topology_nodes(parse_shape("1x2x2x8"))))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def sim(devcluster: DevCluster, clock: ManualClock) -> Iterator[Sim]:
    sim = Sim(devcluster, clock)

    async def start() -> None:
        sim.components.start()
    devcluster.call(start)
    yield sim

    async def close() -> None:
        sim.components.close()
    devcluster.call(close)


def job_yaml(name: str, namespace: str, *, parallelism: int, completions: int, gpus: int = 1,
             run_seconds: int | None = 60, indexed: bool = False, suspend: bool = False,
             backoff_limit: int = 6, extra_annotations: str = "") -> str:
    annotations = [f'devcluster.tasq.io/run-seconds: "{run_seconds}"'] if run_seconds is not None else []
    if extra_annotations:
        annotations.append(extra_annotations)
    mode = "Indexed" if indexed else "NonIndexed"
    return f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  parallelism: {parallelism}
  completions: {completions}
  completionMode: {mode}
  suspend: {str(suspend).lower()}
  backoffLimit: {backoff_limit}
  template:
    metadata:
      annotations: {{{", ".join(annotations)}}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}, limits: {{nvidia.com/gpu: "{gpus}"}}}}
"""


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def pods_of(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(kubectl, "pods", "-n", namespace)["items"]
    return items


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of that type ({} when absent)."""
    found: dict[str, Any] = next(
        (cd for cd in (obj.get("status") or {}).get("conditions") or [] if cd["type"] == kind), {})
    return found


def test_a_job_with_parallelism_8_runs_to_complete(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=job_yaml("train", namespace, parallelism=8, completions=8, gpus=4))
    sim.settle()

    running = pods_of(kubectl, namespace)
    assert [p["status"]["phase"] for p in running] == ["Running"] * 8
    assert all(p["metadata"]["name"].startswith("train-") and len(p["metadata"]["name"]) == len("train-") + 5
               for p in running)
    per_node: dict[str, int] = {}
    for p in running:
        per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
    assert sorted(per_node.values()) == [2, 2, 2, 2]  # 4 GPUs each: two pods fill an 8-GPU node

    sim.advance(60)

    job = get_json(kubectl, "job", "train", "-n", namespace)
    assert job["status"]["succeeded"] == 8
    assert condition(job, "Complete")["status"] == "True"
    assert "active" not in job["status"]
    assert {p["status"]["phase"] for p in pods_of(kubectl, namespace)} == {"Succeeded"}
    described = kubectl("describe", "job", "train", "-n", namespace).stdout
    assert described.count("SuccessfulCreate") == 8 and "Completed" in described


def test_indexed_job_pods_carry_their_indexes(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=job_yaml("ix", namespace, parallelism=3, completions=5, indexed=True))
    sim.settle()

    pods = pods_of(kubectl, namespace)
    indexes = sorted(int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]) for p in pods)
    assert indexes == [0, 1, 2]  # parallelism 3: the lowest indexes first
    for p in pods:
        index = p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        assert p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == index
        assert p["spec"]["hostname"] == f"ix-{index}"
        assert p["metadata"]["name"].startswith(f"ix-{index}-")
        owner = p["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"], owner["blockOwnerDeletion"]) == (
            "Job", "ix", True, True)

    sim.advance(60)
    job = get_json(kubectl, "job", "ix", "-n", namespace)
    assert (job["status"]["completedIndexes"], job["status"]["active"]) == ("0-2", 2)
    sim.advance(60)
    job = get_json(kubectl, "job", "ix", "-n", namespace)
    assert job["status"]["completedIndexes"] == "0-4"
    assert condition(job, "Complete")["status"] == "True"


def test_suspended_job_has_no_pods_and_suspending_deletes_them(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=job_yaml("s", namespace, parallelism=2, completions=2, suspend=True,
                                                run_seconds=None))
    sim.settle()
    assert pods_of(kubectl, namespace) == []
    assert condition(get_json(kubectl, "job", "s", "-n", namespace), "Suspended")["status"] == "True"

    sim.advance(30)
    kubectl("patch", "job", "s", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    sim.settle()
    assert len(pods_of(kubectl, namespace)) == 2
    job = get_json(kubectl, "job", "s", "-n", namespace)
    first_start = job["status"]["startTime"]
    assert condition(job, "Suspended")["reason"] == "JobResumed"

    kubectl("patch", "job", "s", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    sim.settle()
    assert pods_of(kubectl, namespace) == []
    job = get_json(kubectl, "job", "s", "-n", namespace)
    assert "failed" not in job["status"]  # pods deleted for suspension are not failures

    sim.advance(45)
    kubectl("patch", "job", "s", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    sim.settle()
    job = get_json(kubectl, "job", "s", "-n", namespace)
    assert job["status"]["startTime"] > first_start  # resuming resets startTime


def test_template_changes_only_while_suspended(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=job_yaml("t", namespace, parallelism=1, completions=1, suspend=True))
    patch = '{"spec":{"template":{"spec":{"nodeSelector":{"cloud.provider.com/topology-rack":"b1-r2"}}}}}'
    kubectl("patch", "job", "t", "-n", namespace, "--type=merge", "-p", patch)
    kubectl("patch", "job", "t", "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    sim.settle()
    [pod] = pods_of(kubectl, namespace)
    assert pod["spec"]["nodeName"].startswith("b1-r2-")

    again = '{"spec":{"template":{"spec":{"nodeSelector":{"cloud.provider.com/topology-rack":"b1-r1"}}}}}'
    proc = kubectl("patch", "job", "t", "-n", namespace, "--type=merge", "-p", again, check=False)
    assert proc.returncode != 0
    assert "spec.template: Invalid value" in proc.stderr and "field is immutable" in proc.stderr


def test_gated_pod_is_never_bound_until_the_gate_is_removed(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=f"""
apiVersion: v1
kind: Pod
metadata: {{name: gated, namespace: {namespace}}}
spec:
  schedulingGates: [{{name: kueue.x-k8s.io/topology}}]
  containers: [{{name: main, image: busybox}}]
""")
    sim.settle()
    sim.advance(600)
    pod = get_json(kubectl, "pod", "gated", "-n", namespace)
    assert "nodeName" not in pod["spec"]
    cond = condition(pod, "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "SchedulingGated")

    kubectl("patch", "pod", "gated", "-n", namespace, "--type=json",
            "-p", '[{"op":"remove","path":"/spec/schedulingGates"}]')
    sim.settle()
    pod = get_json(kubectl, "pod", "gated", "-n", namespace)
    assert pod["spec"]["nodeName"].startswith("b1-")
    assert pod["status"]["phase"] == "Running"
    assert condition(pod, "Ready")["status"] == "True"


def test_unschedulable_pod_gets_kube_scheduler_message(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=f"""
apiVersion: v1
kind: Pod
metadata: {{name: huge, namespace: {namespace}}}
spec:
  nodeSelector: {{cloud.provider.com/topology-rack: b1-r1}}
  containers: [{{name: main, image: busybox, resources: {{limits: {{nvidia.com/gpu: "9"}}}}}}]
""")
    sim.settle()
    pod = get_json(kubectl, "pod", "huge", "-n", namespace)
    cond = condition(pod, "PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == ("0/4 nodes are available: 2 Insufficient nvidia.com/gpu, "
                               "2 node(s) didn't match Pod's node affinity/selector.")
    described = kubectl("describe", "pod", "huge", "-n", namespace).stdout
    assert "FailedScheduling" in described and "2 Insufficient nvidia.com/gpu" in described


def test_failed_pods_are_replaced_until_the_backoff_limit(kubectl: Kubectl, namespace: str, sim: Sim) -> None:
    kubectl("apply", "-f", "-", stdin=job_yaml("flaky", namespace, parallelism=1, completions=1, backoff_limit=1,
                                                extra_annotations='devcluster.tasq.io/fail: "true"'))
    sim.settle()
    assert [p["status"]["phase"] for p in pods_of(kubectl, namespace)] == ["Failed"]
    sim.advance(9)
    assert len(pods_of(kubectl, namespace)) == 1  # the replacement waits for the 10 s failure backoff
    sim.advance(1)

    job = get_json(kubectl, "job", "flaky", "-n", namespace)
    phases = sorted(p["status"]["phase"] for p in pods_of(kubectl, namespace))
    assert phases == ["Failed", "Failed"]  # the first pod and its one replacement
    assert job["status"]["failed"] == 2
    failed = condition(job, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "BackoffLimitExceeded")
    assert condition(job, "FailureTarget")["status"] == "True"


def test_pods_of_a_not_ready_node_turn_unready_then_are_evicted_and_replaced(
        kubectl: Kubectl, namespace: str, sim: Sim, devcluster: DevCluster) -> None:
    kubectl("apply", "-f", "-", stdin=job_yaml("long", namespace, parallelism=1, completions=1, gpus=8,
                                                run_seconds=None))
    sim.settle()
    [pod] = pods_of(kubectl, namespace)
    node = pod["spec"]["nodeName"]

    devcluster.call(lambda: sim.components.kubelet.set_node_ready(node, False))
    sim.settle()
    [pod] = pods_of(kubectl, namespace)
    assert condition(pod, "Ready")["status"] == "False"

    sim.advance(300 + 10)  # evicted after the 300 s toleration, replaced after the 10 s failure backoff
    [replacement] = pods_of(kubectl, namespace)
    assert replacement["metadata"]["name"] != pod["metadata"]["name"]
    assert replacement["spec"]["nodeName"] != node  # the NotReady node is tainted for the scheduler
    assert get_json(kubectl, "job", "long", "-n", namespace)["status"]["failed"] == 1
    devcluster.call(lambda: sim.components.kubelet.set_node_ready(node, True))
    sim.settle()
