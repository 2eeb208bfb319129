"""waitForPodsReady end to end on either control plane: `tasq run --local-webhooks --config FILE`
as a process (Kueue's v1beta2 Configuration: a 15 s timeout, blockAdmission, a backoff of 2 s then
4 s, at most 2 requeues), only the real kubectl to drive and observe it. A gang whose pods never
become ready carries `devcluster.tasq.io/not-ready: "true"` (the devcluster's kubelet and the real
cluster's kwok stage both run such a pod with Ready=False), whether a Job or a plain pod group made
it.

The flavor `two-racks` holds racks b1-r1 and b1-r2, 8 GPUs per node, 64 in all:

    b1-r1: [gpu-b1-r1-n1] [n2] [n3] [n4]     b1-r2: [gpu-b1-r2-n1] [n2] [n3] [n4]

Every test polls, from start to end, that nothing is over-committed (`OverCommitWatch`: GPUs bound
per node, GPUs admitted per ClusterQueue).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from tests.e2e.conftest import Kubectl, wait_for
from tests.e2e.test_operator_clusters import RACK, Process, condition, get, leading_tasq, pods_of, workload_of
from tests.e2e.test_preemption import (
    SETUP,
    OverCommitWatch,
    cluster_queue,
    events,
    install_rack_pool,
    is_admitted,
    job,
    local_queue,
    running_pods,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("jobs_removed")]

TIMEOUT_S = 15
"""The PodsReady timeout: long enough for a gang to be admitted, run and be marked ready by the test
on a loaded machine (at 8 s the block-admission test's first gang was evicted before that)."""
CONFIG = f"""
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: tasq-system
waitForPodsReady:
  timeout: {TIMEOUT_S}s
  blockAdmission: true
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 2
    backoffBaseSeconds: 2
    backoffMaxSeconds: 4
"""


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    close = install_rack_pool(request, cluster, kubectl, SETUP)
    yield
    close()


@pytest.fixture(scope="module")
def tasq(installed: None, kubeconfig: Path, kubectl: Kubectl,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """One `tasq run --local-webhooks --config` for the module, leading, its webhooks registered."""
    workdir = tmp_path_factory.mktemp("tasq")
    (workdir / "config.yaml").write_text(CONFIG)
    with leading_tasq(kubeconfig, kubectl, workdir, ("--config", str(workdir / "config.yaml"))) as proc:
        yield proc


def stuck_job(name: str, namespace: str, queue: str, pods: int) -> str:
    """A gang of `pods` x 8 GPUs whose pods run but never become ready."""
    manifest = json.loads(job(name, namespace, queue, pods, 8, "e2e-low"))
    manifest["spec"]["template"]["metadata"]["annotations"] = {c.ANNOTATION_DEVCLUSTER_NOT_READY: "true"}
    return json.dumps(manifest)


def stuck_pod_group(name: str, namespace: str, queue: str, pods: int) -> str:
    """A plain pod group (Kueue's group labels) of `pods` x 8 GPUs, in one rack, whose pods run but
    never become ready: the Job's pod template, one pod per member."""
    template = json.loads(job(name, namespace, queue, pods, 8, "e2e-low"))["spec"]["template"]
    return "\n---\n".join(json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-{i}", "namespace": namespace,
                     "labels": {c.LABEL_QUEUE_NAME: queue, c.LABEL_POD_GROUP_NAME: name},
                     "annotations": {c.ANNOTATION_DEVCLUSTER_NOT_READY: "true",
                                     c.ANNOTATION_POD_GROUP_TOTAL_COUNT: str(pods),
                                     c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK}},
        "spec": template["spec"]}) for i in range(pods))


def gpus_admitted(kubectl: Kubectl, cq: str) -> int:
    status = get(kubectl, "clusterqueue", cq).get("status") or {}
    return sum(int(r.get("total", "0")) for f in status.get("flavorsUsage") or [] for r in f["resources"]
               if r["name"] == "nvidia.com/gpu")


def test_a_gang_never_ready_is_evicted_requeued_with_backoff_then_deactivated_and_the_waiting_gang_runs(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    # 32 GPUs of quota. "stuck" (4 x 8 GPUs) is admitted, its pods never ready; "waiting" (4 x 8,
    # runs 3 s) waits for quota. After 15 s stuck is evicted (PodsReadyTimeout, requeue 1 after 2 s),
    # its GPUs freed: waiting is admitted and runs. stuck comes back, times out again (requeue 2,
    # 4 s), and at its third timeout, past backoffLimitCount 2, it is deactivated.
    kubectl("apply", "-f", "-", stdin=cluster_queue("ready-q", 32, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "ready-q"))
    watch = OverCommitWatch(kubectl, namespace, {"ready-q": 32})
    try:
        kubectl("create", "-f", "-", stdin=stuck_job("stuck", namespace, "lq", 4))
        first = watch.until(lambda: (wl := workload_of(kubectl, namespace, "stuck")) and is_admitted(wl) and wl,
                            60, "stuck admitted")
        admitted_at = time.monotonic()
        kubectl("create", "-f", "-", stdin=job("waiting", namespace, "lq", 4, 8, "e2e-low", run_seconds=3))
        stuck_pods = watch.until(
            lambda: (p := pods_of(kubectl, namespace, "stuck")) and len(p) == 4 and all(
                (pod.get("status") or {}).get("phase") == "Running" for pod in p) and p, 60, "stuck's pods running")
        assert all(condition(p, "Ready")["status"] == "False" for p in stuck_pods)  # type: ignore[index]
        pods_ready = watch.until(lambda: condition(workload_of(kubectl, namespace, "stuck"), "PodsReady"), 30,
                                 "stuck's PodsReady condition")
        assert (pods_ready["status"], pods_ready["reason"]) == ("False", "WaitForStart"), pods_ready

        def evicted_once() -> dict[str, Any] | None:
            wl = workload_of(kubectl, namespace, "stuck")
            ev = condition(wl, "Evicted")
            return wl if ev and ev["status"] == "True" and ev["reason"] == "PodsReadyTimeout" else None

        evicted = watch.until(evicted_once, 60, "stuck evicted by the PodsReady timeout")
        assert time.monotonic() - admitted_at >= TIMEOUT_S - 1.5  # whole-second timestamps
        ev = condition(evicted, "Evicted")
        assert ev is not None and ev["message"] == f"Exceeded the PodsReady timeout {namespace}/{first['metadata']['name']}"
        assert evicted["status"]["requeueState"]["count"] == 1
        # its GPUs go back and the waiting gang gets them
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "waiting")), 90, "waiting admitted")
        assert not [p for p in pods_of(kubectl, namespace, "stuck")
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        assert get(kubectl, "job", "stuck", "-n", namespace)["spec"]["suspend"] is True
        assert [e["involvedObject"]["name"] for e in events(kubectl, namespace,
                                                            c.EVENT_REASON_EVICTED_PODS_READY_TIMEOUT)] \
            == [first["metadata"]["name"]]
        # stuck comes back after waiting ran, and times out a second time
        watch.until(lambda: (wl := workload_of(kubectl, namespace, "stuck")) and
                    (wl["status"].get("requeueState") or {}).get("count") == 2, 120, "stuck's second timeout")
        requeued = condition(workload_of(kubectl, namespace, "stuck"), "Requeued")
        assert requeued is not None, "no Requeued condition"

        def deactivated() -> dict[str, Any] | None:
            wl = workload_of(kubectl, namespace, "stuck")
            ev = condition(wl, "Evicted")
            return wl if wl and ev and ev["status"] == "True" and ev["reason"] == "Deactivated" else None

        final = watch.until(deactivated, 120, "stuck deactivated past its requeue limit")
        assert final["spec"]["active"] is False
        assert condition(final, "Evicted")["message"] == (  # type: ignore[index]
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries")
        assert "admission" not in final["status"] and "requeueState" not in final["status"]
        watch.until(lambda: gpus_admitted(kubectl, "ready-q") == 0, 30, "no GPU admitted any more")
        finished = condition(workload_of(kubectl, namespace, "waiting"), "Finished")
        assert finished is not None and finished["status"] == "True"
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert watch.checks > 10 and not watch.problems


def mark_pods_ready(kubectl: Kubectl, pod: dict[str, Any]) -> None:
    """Ready=True on a running pod's status, as a readiness probe passing at last."""
    conditions = [cd for cd in pod["status"].get("conditions") or [] if cd["type"] not in ("Ready", "ContainersReady")]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions += [{"type": t, "status": "True", "lastTransitionTime": now} for t in ("Ready", "ContainersReady")]
    statuses = [{**cs, "ready": True} for cs in pod["status"].get("containerStatuses") or []]
    kubectl("patch", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"], "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"conditions": conditions, "containerStatuses": statuses}}))


def test_with_block_admission_the_second_gang_waits_until_the_first_is_ready(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    # 64 GPUs of quota, room for both gangs (2 x 8 GPUs each). "first" is admitted and its pods run
    # unready: "second" is not admitted though it fits, until first's pods turn ready.
    kubectl("apply", "-f", "-", stdin=cluster_queue("block-q", 64, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "block-q"))
    watch = OverCommitWatch(kubectl, namespace, {"block-q": 64})
    try:
        kubectl("create", "-f", "-", stdin=stuck_job("first", namespace, "lq", 2))
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "first")), 60, "first admitted")
        kubectl("create", "-f", "-", stdin=job("second", namespace, "lq", 2, 8, "e2e-low"))
        pods = watch.until(functools.partial(running_pods, kubectl, namespace, "first", 2), 30, "first's pods running")
        hold_until = time.monotonic() + 2
        while time.monotonic() < hold_until:  # several admission cycles
            watch.check()
            assert not is_admitted(workload_of(kubectl, namespace, "second")), "second admitted while first is not ready"
            time.sleep(0.3)
        for pod in pods:
            mark_pods_ready(kubectl, pod)
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "second")), 30,
                    "second admitted once first is ready")
        first = workload_of(kubectl, namespace, "first")
        ready = condition(first, "PodsReady")
        assert ready is not None and (ready["status"], ready["reason"]) == ("True", "Started"), ready
        assert condition(first, "Evicted") is None  # ready in time: never evicted
        watch.until(functools.partial(running_pods, kubectl, namespace, "second", 2), 60, "second running")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert watch.checks > 5 and not watch.problems


def group_workload(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any] | None:
    proc = kubectl("get", "workload", name, "-n", namespace, "-o", "json", check=False)
    return dict(json.loads(proc.stdout)) if proc.returncode == 0 else None


def test_a_pod_group_never_ready_is_evicted_by_the_timeout_and_its_pods_deleted(
        tasq: Process, cluster: str, kubectl: Kubectl, namespace: str) -> None:
    # 32 GPUs of quota. The plain pod group "stuck-group" (2 pods x 8 GPUs, one rack) is admitted and
    # its pods are ungated and run, never ready. After 8 s its Workload is evicted (PodsReadyTimeout,
    # with its Event): pods cannot be suspended, so tasq deletes them (and lets Kueue's finalizer go)
    # and the quota comes back.
    kubectl("apply", "-f", "-", stdin=cluster_queue("group-ready-q", 32, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "group-ready-q"))
    if cluster == "real":  # the ServiceAccount admission plugin refuses pods until the controller made it
        wait_for(lambda: kubectl("get", "serviceaccount", "default", "-n", namespace, check=False).returncode == 0,
                 30, "the default ServiceAccount")
    watch = OverCommitWatch(kubectl, namespace, {"group-ready-q": 32})
    try:
        kubectl("create", "-f", "-", stdin=stuck_pod_group("stuck-group", namespace, "lq", 2))
        first = watch.until(lambda: (wl := group_workload(kubectl, namespace, "stuck-group")) and is_admitted(wl) and wl,
                            60, "the group's Workload admitted")
        admitted_at = time.monotonic()
        pods = watch.until(lambda: (p := [pod for pod in get(kubectl, "pods", "-n", namespace)["items"]
                                          if pod["metadata"]["name"].startswith("stuck-group-")
                                          and (pod.get("status") or {}).get("phase") == "Running"])
                           and len(p) == 2 and p, 60, "the group's pods running")
        assert all(condition(p, "Ready")["status"] == "False" for p in pods)  # type: ignore[index]
        assert all(not p["spec"].get("schedulingGates") for p in pods)  # ungated by tasq

        # the eviction deletes the pods, the Workload's owners, so the Workload soon goes with them:
        # its Event stays
        evicted = watch.until(lambda: events(kubectl, namespace, c.EVENT_REASON_EVICTED_PODS_READY_TIMEOUT), 60,
                              "the group evicted by the PodsReady timeout")
        assert time.monotonic() - admitted_at >= TIMEOUT_S - 1.5  # whole-second timestamps
        assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in evicted] == [
            ("Workload", "stuck-group", f"Exceeded the PodsReady timeout {namespace}/{first['metadata']['name']}")]
        watch.until(lambda: not [p for p in get(kubectl, "pods", "-n", namespace)["items"]
                                 if p["metadata"]["name"].startswith("stuck-group-")], 60, "the group's pods deleted")
        watch.until(lambda: gpus_admitted(kubectl, "group-ready-q") == 0, 30, "the group's GPUs released")
        wl = group_workload(kubectl, namespace, "stuck-group")
        assert wl is None or not is_admitted(wl), wl  # gone with its pods, or at least not admitted
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    finally:
        kubectl("delete", "pods", "-n", namespace, "-l", f"{c.LABEL_POD_GROUP_NAME}=stuck-group", "--wait=false")
    assert watch.checks > 5 and not watch.problems
