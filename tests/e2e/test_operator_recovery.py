"""The operator across restarts and API faults, on the devcluster, checked through kubectl.

Same nodes and queue as test_operator (8 hosts of 8 GPUs, two hosts per rack; 48 GPUs of quota).
Here every test runs its own operator(s), so one can be stopped and another started.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import DevCluster
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator import (
    RACK,
    RunningOperator,
    condition,
    get,
    job,
    local_queue,
    seeded,
    wait_for,
    workload_of,
)

pytestmark = pytest.mark.e2e
__all__ = ["seeded"]  # the fixture, shared with test_operator


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
    return {sl["nodeLabels"]["kubernetes.io/hostname"]: sl["count"] for sl in psa["topologyAssignment"]["slices"]}


def admitted_events(kubectl: Kubectl, namespace: str, workload: str) -> int:
    return sum(1 for e in get(kubectl, "events", "-n", namespace)["items"]
               if e["reason"] == "Admitted" and e["involvedObject"]["name"] == workload)


def gpu_usage(kubectl: Kubectl, namespace: str) -> str:
    lq = get(kubectl, "localqueue", "lq", "-n", namespace)
    for flavor in lq.get("status", {}).get("flavorUsage") or []:
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
