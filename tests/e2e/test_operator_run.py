"""`tasq run` as a real process against the devcluster: webhooks, signals, leader failover.

Same nodes and queues as test_operator (its `seeded` fixture): 8 hosts x 8 GPUs, 48 GPUs of quota.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import DevCluster
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator import condition, get, job, local_queue, seeded, wait_for, workload_of

pytestmark = pytest.mark.e2e
__all__ = ["seeded"]  # the fixture, shared with test_operator

TASQ = Path(sys.executable).parent / "tasq"


class Process:
    def __init__(self, kubeconfig: Path, log: Path, *extra: str) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--metrics-port", "-1",
             "--lease-namespace", "default", "-v", *extra],
            stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(30)

    def output(self) -> str:
        return self.log.read_text()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for proc in started:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait(10)


def lease_holder(kubectl: Kubectl) -> str | None:
    proc = kubectl("get", "lease", "tasq-controller-leader", "-n", "default", "-o", "json", check=False)
    if proc.returncode != 0:
        return None
    holder: Any = json.loads(proc.stdout).get("spec", {}).get("holderIdentity")
    return str(holder) if holder else None


def test_tasq_run_with_local_webhooks_suspends_admits_ungates_into_the_slices_and_stops_cleanly(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str, tmp_path: Path,
        processes: list[Process]) -> None:
    proc = Process(kubeconfig, tmp_path / "tasq.log", "--local-webhooks", "--identity", "solo")
    processes.append(proc)
    wait_for(lambda: kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout.strip(), 60,
             "webhooks registered")
    wait_for(lambda: lease_holder(kubectl) == "solo", 30, "leadership")
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    manifest = json.loads(job("hooked", namespace, 4, 8, run_seconds=2, annotations={
        "kueue.x-k8s.io/require-topology": "example.com/block"}))
    manifest["spec"]["suspend"] = False  # the Job webhook must suspend it
    created = json.loads(kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(manifest)).stdout)
    assert created["spec"]["suspend"] is True
    wl = wait_for(lambda: (w := workload_of(kubectl, namespace, "hooked")) and condition(w, "Admitted") and w,
                  what="admitted")
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    wanted = {sl["nodeLabels"]["kubernetes.io/hostname"]: sl["count"] for sl in psa["topologyAssignment"]["slices"]}
    # The Pod webhook gated each pod; the ungater released each into one slice (its nodeSelector) and
    # the scheduler bound it there: per host, as many pods as the slice says.
    pods = wait_for(lambda: (items := get(kubectl, "pods", "-n", namespace)["items"]) and len(items) == 4 and
                    all(p["spec"].get("nodeName") for p in items) and items, 60, "pods bound")
    placed: dict[str, int] = {}
    for pod in pods:
        assert not pod["spec"].get("schedulingGates")
        assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == pod["spec"]["nodeName"]
        assert pod["metadata"]["labels"]["tasq.io/tas"] == "true"
        placed[pod["spec"]["nodeName"]] = placed.get(pod["spec"]["nodeName"], 0) + 1
    assert placed == wanted
    assert len({host.split("-")[0] for host in placed}) == 1  # one block
    done = wait_for(lambda: condition(workload_of(kubectl, namespace, "hooked"), "Finished"), 60, "finished")
    assert done["reason"] == "Succeeded"
    assert proc.stop() == 0, proc.output()
    assert kubectl("get", "mutatingwebhookconfigurations", "-o", "name").stdout.strip() == ""


def admitted_events_of(kubectl: Kubectl, namespace: str, job_name: str) -> list[dict[str, Any]]:
    """The Admitted Events of a Job's Workload (none while it has no Workload)."""
    workload = workload_of(kubectl, namespace, job_name)
    if workload is None:
        return []
    return [e for e in get(kubectl, "events", "-n", namespace)["items"]
            if e["reason"] == "Admitted" and e["involvedObject"]["name"] == workload["metadata"]["name"]]


def test_when_the_leader_is_killed_the_other_replica_admits_and_nothing_is_admitted_twice(
        seeded: DevCluster, kubeconfig: Path, kubectl: Kubectl, namespace: str, tmp_path: Path,
        processes: list[Process]) -> None:
    first = Process(kubeconfig, tmp_path / "a.log", "--identity", "replica-a")
    processes.append(first)
    wait_for(lambda: lease_holder(kubectl) == "replica-a", 30, "replica-a leads")
    second = Process(kubeconfig, tmp_path / "b.log", "--identity", "replica-b")
    processes.append(second)
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("before", namespace, 2, 8, run_seconds=600))
    wait_for(lambda: condition(workload_of(kubectl, namespace, "before"), "Admitted"), what="admitted by a")
    # Events are posted in the background: let a's land before killing it, so a second one can only
    # come from b admitting "before" again.
    wait_for(lambda: len(admitted_events_of(kubectl, namespace, "before")) == 1, what="a's Admitted Event")
    first.stop(signal.SIGKILL)
    kubectl("apply", "-f", "-", stdin=job("after", namespace, 2, 8, run_seconds=600))
    wait_for(lambda: condition(workload_of(kubectl, namespace, "after"), "Admitted"), 60, "admitted by b")
    assert lease_holder(kubectl) == "replica-b"
    lq = wait_for(lambda: (q := get(kubectl, "localqueue", "lq", "-n", namespace)) and
                  q.get("status", {}).get("admittedWorkloads") == 2 and q, what="queue status by b")
    gpu = [r for f in lq["status"]["flavorUsage"] for r in f["resources"] if r["name"] == "nvidia.com/gpu"]
    assert gpu[0]["total"] == "32"  # two 16-GPU admissions: "before" restored by b, not admitted again
    assert len(admitted_events_of(kubectl, namespace, "before")) == 1
    for name in ("before", "after"):
        kubectl("delete", "job", name, "-n", namespace)
    assert second.stop() == 0, second.output()
