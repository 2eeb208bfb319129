"""The operator across API server restarts, on either control plane: kube-apiserver restarted in the
middle of a burst of 200 Jobs, and again while gangs' pods are being ungated. Every Job completes, and
a poller checks the invariants throughout: quota, node capacity, one admission per Workload, no pod
outside its assignment.

Same nodes and queue as test_operator (8 hosts of 8 GPUs, two per rack, two racks per block; 48 GPUs
of quota). Every Job's pods carry tasq's scheduling gate (standing in for the Pod webhook), so each
pod is placed by the ungater into its Workload's topology assignment.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from controller.api import constants as c
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator import RACK, RunningOperator, condition, installed, job, local_queue, wait_for
from tests.e2e.test_operator_recovery import hosts

pytestmark = pytest.mark.e2e
__all__ = ["installed"]  # the fixture, shared with test_operator

QUOTA_GPUS = 48
NODE_GPUS = 8
GPU = "nvidia.com/gpu"


@pytest.fixture
def operator(installed: None, kubeconfig: Path) -> Iterator[RunningOperator]:
    running = RunningOperator(kubeconfig).start()
    yield running
    running.stop()


class InvariantPoller:
    """Reads the namespace's Workloads and pods every `interval` seconds in a thread and records each
    broken invariant (reads that fail while the API server is down are skipped)."""

    def __init__(self, kubeconfig: Path, namespace: str, interval: float = 0.5) -> None:
        self.namespace, self.interval = namespace, interval
        self.api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.violations: list[str] = []
        self.polls = 0
        self.failed_reads = 0
        self._admissions: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> InvariantPoller:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.api_client.close()

    def _run(self) -> None:
        group, version = c.API_VERSION.split("/")
        while not self._stop.wait(self.interval):
            try:
                answer: Any = self.custom.list_namespaced_custom_object(group, version, self.namespace, c.PLURAL_WORKLOADS,
                                                                   _request_timeout=5)
                raw: Any = self.core.list_namespaced_pod(self.namespace, _preload_content=False, _request_timeout=5)
                pods: list[dict[str, Any]] = json.loads(raw.data)["items"]
            except Exception:  # the API server is restarting
                self.failed_reads += 1
                continue
            workloads: list[dict[str, Any]] = answer["items"]
            self.polls += 1
            self.check(workloads, pods)

    def check(self, workloads: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        admitted: dict[str, dict[str, int]] = {}
        quota = 0
        for wl in workloads:
            admission = (wl.get("status") or {}).get("admission")
            done = (cond := condition(wl, "Finished")) is not None and cond["status"] == "True"
            if admission is None:
                continue
            name, uid = wl["metadata"]["name"], wl["metadata"]["uid"]
            before = self._admissions.setdefault(uid, json.dumps(admission, sort_keys=True))
            if before != json.dumps(admission, sort_keys=True):
                self.violations.append(f"workload {name} admitted twice: {before} then {admission}")
            admitted[name] = hosts(wl)
            if not done:
                quota += sum(int(psa.get("resourceUsage", {}).get(GPU, "0")) for psa in admission["podSetAssignments"])
        if quota > QUOTA_GPUS:
            self.violations.append(f"{quota} GPUs admitted, quota {QUOTA_GPUS}")
        per_node: Counter[str] = Counter()
        per_slice: Counter[tuple[str, str]] = Counter()
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if not node or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            requests = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
            per_node[node] += int(requests.get(GPU, "0"))
            workload = (pod["metadata"].get("annotations") or {}).get(c.ANNOTATION_TOPOLOGY_WORKLOAD)
            if workload is None or workload not in admitted or node not in admitted[workload]:
                self.violations.append(f"pod {pod['metadata']['name']} runs on {node}, outside the assignment of "
                                       f"{workload}: {admitted.get(workload or '')}")
            else:
                per_slice[(workload, node)] += 1
                if per_slice[(workload, node)] > admitted[workload][node]:
                    self.violations.append(f"more pods of {workload} on {node} than its assignment's "
                                           f"{admitted[workload][node]}")
        for node, gpus in per_node.items():
            if gpus > NODE_GPUS:
                self.violations.append(f"node {node} runs pods of {gpus} GPUs, it has {NODE_GPUS}")


def jobs_yaml(namespace: str, count: int, pods: int, gpus: int, run_seconds: float,
              annotations: dict[str, str] | None = None) -> str:
    return "\n".join(job(f"j{i:03d}", namespace, pods, gpus, run_seconds=run_seconds, gated=True,
                         annotations=annotations) for i in range(count))


def job_states(kubectl: Kubectl, namespace: str) -> dict[str, str]:
    """Job name -> complete, failed, running or suspended."""
    out = {}
    for item in json.loads(kubectl("get", "jobs", "-n", namespace, "-o", "json").stdout)["items"]:
        conds = {cd["type"] for cd in item.get("status", {}).get("conditions") or [] if cd["status"] == "True"}
        out[item["metadata"]["name"]] = ("complete" if "Complete" in conds else "failed" if "Failed" in conds
                                         else "suspended" if item["spec"].get("suspend") else "running")
    return out


def admitted_count(kubectl: Kubectl, namespace: str) -> int:
    items = json.loads(kubectl("get", "workloads", "-n", namespace, "-o", "json").stdout)["items"]
    return sum(1 for wl in items if (wl.get("status") or {}).get("admission"))


def settle(kubectl: Kubectl, namespace: str, jobs: int, timeout: float) -> None:
    """Every Job complete; on a timeout, the states of those that are not (a suspended one admitted
    would be a write lost)."""
    states: dict[str, str] = {}

    def done() -> bool:
        states.clear()
        states.update(job_states(kubectl, namespace))
        return len(states) == jobs and all(s == "complete" for s in states.values())
    wait_for(done, timeout, "every Job complete",
             logs=lambda: f"{Counter(states.values())}; not complete: "
                          f"{sorted(n for n, s in states.items() if s != 'complete')[:20]}")


def test_kube_apiserver_restarted_during_a_burst_of_200_jobs(
        kubectl: Kubectl, kubeconfig: Path, namespace: str, operator: RunningOperator,
        restart_apiserver: Callable[..., float]) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    with InvariantPoller(kubeconfig, namespace) as poller:
        kubectl("create", "-f", "-", stdin=jobs_yaml(namespace, 200, 1, 2, run_seconds=1), timeout=120)
        wait_for(lambda: admitted_count(kubectl, namespace) >= 10, 60, "the burst under way")

        restart_apiserver("kube-apiserver")

        settle(kubectl, namespace, 200, 150)
        time.sleep(2 * poller.interval)  # one more look at the end state
    assert poller.violations == []
    assert poller.polls > 10


def test_kube_apiserver_killed_while_gangs_are_ungated(
        kubectl: Kubectl, kubeconfig: Path, namespace: str, operator: RunningOperator,
        restart_apiserver: Callable[..., float]) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    with InvariantPoller(kubeconfig, namespace) as poller:
        # 8 gangs of 4 pods x 2 GPUs, each in one rack: 4 fit at once (64 of the 48 + 16 ... quota 48)
        kubectl("create", "-f", "-", stdin=jobs_yaml(namespace, 8, 4, 2, run_seconds=2,
                                                      annotations={"kueue.x-k8s.io/require-topology": RACK}))

        def ungating_under_way() -> bool:
            pods = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
            gated = [p for p in pods if any(g["name"] == c.SCHEDULING_GATE_TOPOLOGY
                                            for g in p["spec"].get("schedulingGates") or [])]
            return len(pods) > len(gated) > 0
        wait_for(ungating_under_way, 60, "some pods ungated, others still gated")

        restart_apiserver("kube-apiserver", kill=True)

        settle(kubectl, namespace, 8, 120)
        time.sleep(2 * poller.interval)
    assert poller.violations == []
    assert poller.polls > 5


def _workload(name: str, gpus: int, slices: dict[str, int], *, finished: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Finished", "status": "True"}] if finished else []
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "status": {"conditions": conditions, "admission": {
        "clusterQueue": "team", "podSetAssignments": [{"name": "main", "resourceUsage": {GPU: str(gpus)},
                                                      "topologyAssignment": {"slices": [
                                                          {"nodeLabels": {c.LABEL_HOSTNAME: host}, "count": n}
                                                          for host, n in slices.items()]}}]}}}


def _pod(name: str, workload: str, node: str, gpus: int = 2, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {c.ANNOTATION_TOPOLOGY_WORKLOAD: workload}},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {GPU: str(gpus)}}}]},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("workloads", "pods", "broken"), [
    ([_workload("a", 8, {"n1": 4})], [_pod("a-0", "a", "n1")], ""),
    ([_workload(f"w{i}", 8, {"n1": 4}) for i in range(7)], [], "56 GPUs admitted, quota 48"),
    ([_workload(f"w{i}", 8, {"n1": 4}, finished=i > 0) for i in range(7)], [], ""),
    ([_workload("a", 8, {"n1": 4})], [_pod("a-0", "a", "n2")], "pod a-0 runs on n2, outside the assignment"),
    ([_workload("a", 4, {"n1": 1})], [_pod("a-0", "a", "n1"), _pod("a-1", "a", "n1")], "more pods of a on n1"),
    ([_workload("a", 10, {"n1": 5})], [_pod(f"a-{i}", "a", "n1") for i in range(5)], "node n1 runs pods of 10 GPUs"),
    ([_workload("a", 10, {"n1": 5})], [_pod(f"a-{i}", "a", "n1", phase="Succeeded") for i in range(5)], ""),
], ids=["within-everything", "over-quota", "finished-ones-hold-nothing", "pod-outside-its-slices",
        "more-pods-than-its-slice", "node-over-capacity", "terminated-pods-hold-nothing"])
def test_the_poller_reports_each_broken_invariant(
        workloads: list[dict[str, Any]], pods: list[dict[str, Any]], broken: str) -> None:
    poller = InvariantPoller.__new__(InvariantPoller)  # its checks only, no thread or client
    poller.violations, poller._admissions = [], {}

    poller.check(workloads, pods)

    assert [broken in v for v in poller.violations] == ([True] if broken else [])


def test_the_poller_reports_a_workload_admitted_twice() -> None:
    poller = InvariantPoller.__new__(InvariantPoller)  # its checks only, no thread or client
    poller.violations, poller._admissions = [], {}

    poller.check([_workload("a", 8, {"n1": 4})], [])
    poller.check([_workload("a", 8, {"n2": 4})], [])

    assert len(poller.violations) == 1 and poller.violations[0].startswith("workload a admitted twice")
