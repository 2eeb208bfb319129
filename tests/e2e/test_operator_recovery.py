"""The operator across restarts and API faults, on the devcluster, checked through kubectl.

Same nodes and queue as test_operator (8 hosts of 8 GPUs, two hosts per rack; 48 GPUs of quota).
Here every test runs its own operator(s), so one can be stopped and another started: after an
admission is written, and between the ungate patches of one Workload's pods.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from devcluster.cluster import DevCluster
from devcluster.server.apiserver import RequestInfo
from devcluster.server.errors import INTERNAL_ERROR, ApiError
from tests.builders.kueue import label_slices
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator import (
    BLOCK,
    RACK,
    RunningOperator,
    condition,
    get,
    installed,
    job,
    local_queue,
    seeded,
    wait_for,
    workload_of,
)

pytestmark = pytest.mark.e2e
__all__ = ["installed", "seeded"]  # the fixtures, shared with test_operator


@pytest.fixture
def operators(seeded: DevCluster, kubeconfig: Path) -> Iterator[list[RunningOperator]]:
    started: list[RunningOperator] = []
    yield started
    for running in started:
        running.stop()


def start(operators: list[RunningOperator], kubeconfig: Path) -> RunningOperator:
    running = RunningOperator(kubeconfig).start()
    operators.append(running)
    return running


def admitted(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    wl: dict[str, Any] = wait_for(lambda: (w := workload_of(kubectl, namespace, name)) and
                                  condition(w, "Admitted") and w, 45, f"{name} admitted")
    return wl


def hosts(wl: dict[str, Any]) -> dict[str, int]:
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    return {sl["nodeLabels"]["kubernetes.io/hostname"]: sl["count"] for sl in label_slices(psa["topologyAssignment"])}


def admitted_events(kubectl: Kubectl, namespace: str, workload: str) -> int:
    return sum(1 for e in get(kubectl, "events", "-n", namespace)["items"]
               if e["reason"] == "Admitted" and e["involvedObject"]["name"] == workload)


def gpu_usage(kubectl: Kubectl, namespace: str) -> str:
    lq = get(kubectl, "localqueue", "lq", "-n", namespace)
    for flavor in lq.get("status", {}).get("flavorsUsage") or []:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                return str(resource["total"])
    return "0"


def test_a_restarted_operator_keeps_earlier_admissions_and_admits_around_them(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator]) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    first = start(operators, kubeconfig)
    kubectl("apply", "-f", "-", stdin=job("x", namespace, 2, 8, run_seconds=600,
                                          annotations={"kueue.x-k8s.io/require-topology": RACK}))
    x = admitted(kubectl, namespace, "x")
    first.stop()
    operators.remove(first)
    # While no operator runs: a gang that fits beside x, and one that never fits beside x (40 + 16 > 48).
    kubectl("apply", "-f", "-", stdin=job("y", namespace, 2, 8, run_seconds=600,
                                          annotations={"kueue.x-k8s.io/require-topology": RACK}))
    kubectl("apply", "-f", "-", stdin=job("z", namespace, 5, 8, run_seconds=600))
    start(operators, kubeconfig)
    y = admitted(kubectl, namespace, "y")
    assert not set(hosts(x)) & set(hosts(y)), "y was placed on x's hosts: x's reservation was forgotten"
    z = wait_for(lambda: (c := condition(workload_of(kubectl, namespace, "z"), "QuotaReserved")) and
                 c["status"] == "False" and c, what="z pending")
    assert "nvidia.com/gpu" in z["message"]
    again = workload_of(kubectl, namespace, "x")
    assert again is not None and again["status"]["admission"] == x["status"]["admission"]
    assert admitted_events(kubectl, namespace, x["metadata"]["name"]) == 1
    wait_for(lambda: gpu_usage(kubectl, namespace) == "32", what="usage = the sum of admissions (16 + 16)")
    wait_for(lambda: get(kubectl, "job", "x", "-n", namespace)["spec"]["suspend"] is False, what="x started")
    for name in ("x", "y", "z"):
        kubectl("delete", "job", name, "-n", namespace)
    wait_for(lambda: gpu_usage(kubectl, namespace) == "0", what="usage released")


def test_injected_conflicts_and_server_errors_on_writes_converge_to_one_admission(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator]) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    start(operators, kubeconfig)
    faults = seeded.faults
    for kind in ("conflict", "error"):
        faults.inject(kind, "patch", "workloads/status", namespace=namespace, count=2)
        faults.inject(kind, "patch", "jobs", namespace=namespace, count=2)
    faults.inject("error", "create", "workloads", namespace=namespace, count=1)
    try:
        kubectl("apply", "-f", "-", stdin=job("flaky", namespace, 2, 8, run_seconds=1))
        wl = admitted(kubectl, namespace, "flaky")
        done = wait_for(lambda: condition(workload_of(kubectl, namespace, "flaky"), "Finished"), 60, "finished")
        assert done["reason"] == "Succeeded"
    finally:
        faults.clear()
    assert admitted_events(kubectl, namespace, wl["metadata"]["name"]) == 1
    assert sum(rule.hits for rule in faults.rules) == 0  # cleared; the counts below are from the server's view
    wait_for(lambda: gpu_usage(kubectl, namespace) == "0", what="usage released after the Job finished")


class PodPatchGate:
    """A devcluster fault hook on the pod patches of one namespace (tasq's only pod writes are ungate
    patches): the first `allow` go through, every later one is answered 500 until `open()`.

    `passed` counts the patches let through per pod, across every operator of the test; `holding`
    is set at the first refusal, when the operator is stuck between the ungate patches of a Workload.
    """

    def __init__(self, namespace: str, allow: int) -> None:
        self.namespace, self.allow = namespace, allow
        self.passed: Counter[str] = Counter()
        self.refused = 0
        self.holding = threading.Event()
        self._open = False

    def open(self) -> None:
        self._open = True

    async def __call__(self, info: RequestInfo) -> ApiError | None:
        if (info.verb, info.resource.plural, info.subresource, info.namespace) != ("patch", "pods", "", self.namespace):
            return None
        if self._open or sum(self.passed.values()) < self.allow:
            self.passed[info.name] += 1
            return None
        self.refused += 1
        self.holding.set()
        return ApiError(500, INTERNAL_ERROR, "held by the test: the operator stops between ungate patches")


def gated_job(name: str, namespace: str, pods: int, gpus: int, annotations: dict[str, str]) -> str:
    """`job` whose pods carry tasq's scheduling gate, as the Pod webhook would give them."""
    obj = json.loads(job(name, namespace, pods, gpus, run_seconds=600, annotations=annotations))
    obj["spec"]["template"]["spec"]["schedulingGates"] = [{"name": c.SCHEDULING_GATE_TOPOLOGY}]
    return json.dumps(obj)


def pods_of(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    return list(get(kubectl, "pods", "-n", namespace)["items"])


def is_gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == c.SCHEDULING_GATE_TOPOLOGY for g in pod["spec"].get("schedulingGates") or [])


def index_of(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"][c.LABEL_JOB_COMPLETION_INDEX])


def host_of_slot(wl: dict[str, Any]) -> list[str]:
    """Slot i of the admission (slices in its order, `count` slots each) -> that slice's host."""
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    return [sl["nodeLabels"]["kubernetes.io/hostname"] for sl in label_slices(psa["topologyAssignment"])
            for _ in range(sl["count"])]


def cluster_queue_gpus(kubectl: Kubectl) -> int:
    for flavor in get(kubectl, "clusterqueue", "team").get("status", {}).get("flavorsUsage") or []:
        for resource in flavor["resources"]:
            if resource["name"] == "nvidia.com/gpu":
                return int(resource["total"])
    return 0


def admitted_gpus(kubectl: Kubectl) -> int:
    """The GPUs of every Workload admitted and not finished, in all namespaces, from their admissions."""
    total = 0
    for wl in get(kubectl, "workloads", "-A")["items"]:
        if (cond := condition(wl, "Admitted")) and cond["status"] == "True" and not (
                (done := condition(wl, "Finished")) and done["status"] == "True"):
            total += sum(int(psa.get("resourceUsage", {}).get("nvidia.com/gpu", "0"))
                         for psa in wl["status"]["admission"]["podSetAssignments"])
    return total


#   block b1 (the Job's, 24 of its 32 GPUs: 6 pods of 4 GPUs, at most 2 per host)
#   ├── rack b1-r1: b1-r1-n1, b1-r1-n2
#   └── rack b1-r2: b1-r2-n1, b1-r2-n2
def test_an_operator_stopped_between_ungate_patches_is_followed_by_one_that_ungates_each_pod_once(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str,
        operators: list[RunningOperator]) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    gate = PodPatchGate(namespace, allow=3)
    seeded.api.fault_hooks.append(gate)
    try:
        first = start(operators, kubeconfig)
        kubectl("apply", "-f", "-", stdin=gated_job("w", namespace, 6, 4, {"kueue.x-k8s.io/require-topology": BLOCK}))
        wl = admitted(kubectl, namespace, "w")
        assert gate.holding.wait(45), "the operator never got past the first 3 ungate patches"
        first.stop()
        operators.remove(first)
        # Stopped between patches: 3 pods released, 3 still gated (their patches were refused).
        middle = wait_for(lambda: (ps := pods_of(kubectl, namespace)) and len(ps) == 6 and
                          sum(not is_gated(p) for p in ps) == 3 and ps, what="3 of 6 pods ungated")
        assert sum(gate.passed.values()) == 3 and gate.refused >= 3
        gate.open()

        start(operators, kubeconfig)
        final = wait_for(lambda: (ps := pods_of(kubectl, namespace)) and
                         all(not is_gated(p) and p["spec"].get("nodeName") for p in ps) and ps, 60,
                         "every pod ungated and bound")
    finally:
        seeded.api.fault_hooks.remove(gate)
    assert sorted(gate.passed.values()) == [1] * 6, f"ungate patches per pod: {dict(gate.passed)}"
    assert {p["metadata"]["name"] for p in final} == {p["metadata"]["name"] for p in middle}  # none recreated
    for pod in final:  # Kueue's rank order: pod i in the slice holding slot i, and bound there
        host = pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        assert host == host_of_slot(wl)[index_of(pod)] == pod["spec"]["nodeName"], pod["metadata"]["name"]
    assert Counter(p["spec"]["nodeName"] for p in final) == Counter(hosts(wl))
    assert len({p["spec"]["nodeSelector"][BLOCK] for p in final}) == 1  # one block, as required
    again = workload_of(kubectl, namespace, "w")
    assert again is not None and again["status"]["admission"] == wl["status"]["admission"]
    assert admitted_events(kubectl, namespace, wl["metadata"]["name"]) == 1
    wait_for(lambda: gpu_usage(kubectl, namespace) == "24", what="LocalQueue usage = the admission's 24 GPUs")
    wait_for(lambda: cluster_queue_gpus(kubectl) == admitted_gpus(kubectl) >= 24,
             what="ClusterQueue usage = the sum of admissions")
    kubectl("delete", "job", "w", "-n", namespace)
    wait_for(lambda: gpu_usage(kubectl, namespace) == "0", what="usage released")
