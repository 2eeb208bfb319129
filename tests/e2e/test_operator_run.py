"""`tasq run` as a real process on either control plane: webhooks and a clean stop, and a restart
after an admission is written and before ungating (held by a test webhook at the Job's start or at
the pods' ungating).

Same nodes and queues as test_operator (its `installed` fixture): 8 hosts x 8 GPUs, two per rack,
48 GPUs of quota.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from devcluster.webhooking.certificates import CertificateAuthority
from tests.builders.kueue import label_slices, make_job
from tests.builders.webhooks import WebhookServer, deny, make_webhook_config
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator import RACK, condition, get, installed, job, local_queue, wait_for, workload_of

pytestmark = pytest.mark.e2e
__all__ = ["installed"]  # the fixture, shared with test_operator

TASQ = Path(sys.executable).parent / "tasq"


class Process:
    def __init__(self, kubeconfig: Path, log: Path, *extra: str) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--metrics-port", "-1", "--probe-port", "-1",
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
        installed: None, kubeconfig: Path, kubectl: Kubectl, namespace: str, tmp_path: Path,
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
    wanted = {sl["nodeLabels"]["kubernetes.io/hostname"]: sl["count"] for sl in label_slices(psa["topologyAssignment"])}
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


class HeldUpdates:
    """A validating webhook (this test's own HTTPS server) refusing every UPDATE of `resource`
    ("jobs" or "pods") in one namespace: tasq can write an admission but not start the Job, or
    start it but not ungate its pods. `release()` removes it."""

    PROBES = {"jobs": ("batch", make_job("probe").suspended().drop("metadata.namespace").obj()),
              # gated by the test itself: it stays Pending and nothing else updates it
              "pods": ("", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": {
                  "schedulingGates": [{"name": "tasq.test/probe"}],
                  "containers": [{"name": "main", "image": "registry.example.com/app:1"}]}})}

    def __init__(self, kubectl: Kubectl, namespace: str, resource: str) -> None:
        self.kubectl, self.name = kubectl, f"hold-{resource}-{namespace}"
        group, probe = self.PROBES[resource]
        ca = CertificateAuthority()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        server = WebhookServer(ca.issue(["127.0.0.1"]), deny("held by the test", code=403))
        self.server = asyncio.run_coroutine_threadsafe(server.start(), self._loop).result(10)
        config = (make_webhook_config(self.name).webhook("hold.tasq.test", self.server.url, ca.ca_bundle)
                  .rule(resources=[resource], operations=["UPDATE"], groups=[group]).only_namespace(namespace)
                  .failure_policy("Fail").build())
        # the API server takes a moment to load a new configuration: hold until it refuses an update
        # of the probe
        kubectl("create", "-n", namespace, "-f", "-", stdin=json.dumps(probe))
        kubectl("create", "-f", "-", stdin=json.dumps(config))
        wait_for(lambda: kubectl("annotate", resource, "probe", "-n", namespace, "--overwrite", "probe=1",
                                 check=False).returncode != 0, 30, "the hold webhook in force")

    def refused(self) -> set[str]:
        """The objects the webhook refused an update of."""
        return {str(r["request"].get("name")) for r in self.server.reviews} - {"probe"}

    def release(self) -> None:
        self.kubectl("delete", "validatingwebhookconfiguration", self.name, "--ignore-not-found")
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


def admitted_events(kubectl: Kubectl, namespace: str, workload: str) -> int:
    return sum(1 for e in get(kubectl, "events", "-n", namespace)["items"]
               if e["reason"] == c.REASON_ADMITTED and e["involvedObject"]["name"] == workload)


def bound_pods(kubectl: Kubectl, namespace: str, job_name: str, count: int) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = wait_for(
        lambda: (items := get(kubectl, "pods", "-n", namespace, "-l", f"{c.LABEL_JOB_NAME}={job_name}")["items"])
        and len(items) >= count and all(p["spec"].get("nodeName") for p in items) and items, 60,
        f"{job_name}'s {count} pods bound")
    return pods


def placement(wl: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, int]:
    """Host -> pods of the Workload there, after checking each pod was ungated into its slice: the
    gate removed, the slice's host as its nodeSelector and its node."""
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    slices = {sl["nodeLabels"][c.LABEL_HOSTNAME] for sl in label_slices(psa["topologyAssignment"])}
    placed: dict[str, int] = {}
    for pod in pods:
        assert not pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
        assert pod["spec"]["nodeSelector"][c.LABEL_HOSTNAME] == pod["spec"]["nodeName"] in slices
        placed[pod["spec"]["nodeName"]] = placed.get(pod["spec"]["nodeName"], 0) + 1
    return placed


def pods_of(kubectl: Kubectl, namespace: str, job_name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(kubectl, "pods", "-n", namespace, "-l", f"{c.LABEL_JOB_NAME}={job_name}")["items"]
    return items


@pytest.mark.parametrize("held", ["jobs", "pods"], ids=["before-the-job-starts", "with-its-pods-gated"])
def test_a_restart_after_an_admission_and_before_ungating_ungates_each_pod_once_into_its_slice(
        held: str, installed: None, kubeconfig: Path, kubectl: Kubectl, namespace: str, tmp_path: Path,
        processes: list[Process]) -> None:
    """tasq writes x's admission, then a webhook refuses what comes next (starting x, or ungating its
    gated pods) and tasq is stopped there; y arrives meanwhile. The next `tasq run` keeps x's admission
    (no second Admitted), finishes x's start, admits y around it and ungates each pod once into its
    slice; the queue's usage is the sum of the two admissions."""
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    hold = HeldUpdates(kubectl, namespace, held)
    try:
        first = Process(kubeconfig, tmp_path / "first.log", "--identity", "first")
        processes.append(first)
        kubectl("apply", "-f", "-", stdin=job("x", namespace, 2, 8, run_seconds=600, gated=True,
                                              annotations={c.ANNOTATION_REQUIRE_TOPOLOGY: RACK}))
        x = wait_for(lambda: (w := workload_of(kubectl, namespace, "x")) and condition(w, "Admitted") and w, 60,
                     f"x admitted\n{first.output()}")
        if held == "jobs":
            wait_for(lambda: "x" in hold.refused(), 30, "tasq trying to start x")
        else:
            wait_for(lambda: (pods := pods_of(kubectl, namespace, "x")) and len(pods) == 2 and
                     {p["metadata"]["name"] for p in pods} <= hold.refused(), 60, "tasq trying to ungate x's pods")
        wait_for(lambda: admitted_events(kubectl, namespace, x["metadata"]["name"]) == 1, what="x's Admitted Event")
        assert first.stop() == 0, first.output()
        stopped_pods = pods_of(kubectl, namespace, "x")
        assert get(kubectl, "job", "x", "-n", namespace)["spec"]["suspend"] is (held == "jobs")
        assert len(stopped_pods) == (0 if held == "jobs" else 2)
        for pod in stopped_pods:
            assert c.SCHEDULING_GATE_TOPOLOGY in [g["name"] for g in pod["spec"]["schedulingGates"]]
            assert not pod["spec"].get("nodeName")
        kubectl("apply", "-f", "-", stdin=job("y", namespace, 2, 8, run_seconds=600, gated=True,
                                              annotations={c.ANNOTATION_REQUIRE_TOPOLOGY: RACK}))
    finally:
        hold.release()
    second = Process(kubeconfig, tmp_path / "second.log", "--identity", "second")
    processes.append(second)
    y = wait_for(lambda: (w := workload_of(kubectl, namespace, "y")) and condition(w, "Admitted") and w, 60,
                 f"y admitted\n{second.output()}")
    x_pods, y_pods = bound_pods(kubectl, namespace, "x", 2), bound_pods(kubectl, namespace, "y", 2)
    if stopped_pods:  # the very pods that waited gated, not replacements
        assert {p["metadata"]["uid"] for p in x_pods} == {p["metadata"]["uid"] for p in stopped_pods}
    now_x = workload_of(kubectl, namespace, "x")
    assert now_x is not None and now_x["status"]["admission"] == x["status"]["admission"]
    x_hosts, y_hosts = placement(x, x_pods), placement(y, y_pods)
    assert sum(x_hosts.values()) == sum(y_hosts.values()) == 2  # each pod once, none recreated
    assert not set(x_hosts) & set(y_hosts), "y was placed on x's hosts: x's reservation was forgotten"
    assert admitted_events(kubectl, namespace, x["metadata"]["name"]) == 1
    lq = wait_for(lambda: (q := get(kubectl, "localqueue", "lq", "-n", namespace)) and
                  (q.get("status") or {}).get("admittedWorkloads") == 2 and q, what="queue status")
    gpu = [r for f in lq["status"]["flavorsUsage"] for r in f["resources"] if r["name"] == "nvidia.com/gpu"]
    assert gpu[0]["total"] == "32"  # 16 + 16, the sum of the two admissions
    for name in ("x", "y"):
        kubectl("delete", "job", name, "-n", namespace)
    assert second.stop() == 0, second.output()
