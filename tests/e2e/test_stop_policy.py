"""Queue stop policies end to end on either control plane: `tasq run --local-webhooks` as a process,
only the real kubectl (and `tasq explain`) to drive and observe it. Runs unchanged on the devcluster
and `--cluster=real`.

A LocalQueue on Hold admits nothing and each of its Workloads says why; back to None, they are
admitted. HoldAndDrain on a LocalQueue or a ClusterQueue evicts its running Job through the graceful
eviction (Job suspended, pods gone, only then the quota released), holds it, and lets it run again
once the queue runs. The flavor `two-racks` holds racks b1-r1 and b1-r2, 8 GPUs per node, 64 in all:

    b1-r1: [gpu-b1-r1-n1] [n2] [n3] [n4]     b1-r2: [gpu-b1-r2-n1] [n2] [n3] [n4]

Every test polls, from start to end, that nothing is over-committed (`OverCommitWatch`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator_clusters import Process, condition, get, pods_of, workload_of
from tests.e2e.test_preemption import (
    SETUP,
    OverCommitWatch,
    cluster_queue,
    events,
    install_rack_pool,
    is_admitted,
    job,
    running_pods,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("jobs_removed")]

TASQ = Path(sys.executable).parent / "tasq"


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    close = install_rack_pool(request, cluster, kubectl, SETUP)
    yield
    close()


def local_queue(namespace: str, cq: str, stop_policy: str | None = None) -> str:
    """LocalQueue `lq` of `namespace` (v1beta2) feeding `cq`, with `stop_policy` when given."""
    spec: dict[str, Any] = {"clusterQueue": cq}
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": "lq", "namespace": namespace}, "spec": spec})


def set_stop_policy(kubectl: Kubectl, kind: str, name: str, namespace: str | None, policy: str | None) -> None:
    """`kubectl patch` the queue's spec.stopPolicy (None removes the field)."""
    where = ["-n", namespace] if namespace else []
    kubectl("patch", kind.lower(), name, *where, "--type=merge", "-p", json.dumps({"spec": {"stopPolicy": policy}}))


def active(obj: dict[str, Any]) -> tuple[str, str] | None:
    cond = condition(obj, c.CONDITION_ACTIVE)
    return (cond["status"], cond["reason"]) if cond else None


def reason_of(wl: dict[str, Any] | None, type_: str) -> tuple[str, str, str]:
    """(status, reason, message) of the Workload's condition; empty strings when it has none."""
    cond = condition(wl, type_)
    return (cond["status"], cond["reason"], cond["message"]) if cond else ("", "", "")


def explained(kubeconfig: Path, namespace: str, workload: str) -> str:
    """What `tasq explain workload` prints for it."""
    proc = subprocess.run([str(TASQ), "explain", "workload", workload, "-n", namespace, "--kubeconfig",
                           str(kubeconfig)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_held_local_queue_admits_nothing_and_says_why_then_admits_once_released(
        tasq: Process, kubectl: Kubectl, kubeconfig: Path, namespace: str) -> None:
    cq = f"held-{namespace}"
    kubectl("apply", "-f", "-", stdin=cluster_queue(cq, 64, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, cq, "Hold"))
    watch = OverCommitWatch(kubectl, namespace, {cq: 64})
    try:
        kubectl("create", "-f", "-", stdin=job("waiting", namespace, "lq", 2, 8, "e2e-low", require_rack=False))
        stopped = f'LocalQueue "lq" in namespace "{namespace}" is stopped (stopPolicy Hold)'
        wl = watch.until(lambda: (w := workload_of(kubectl, namespace, "waiting"))
                         and reason_of(w, c.CONDITION_QUOTA_RESERVED) == ("False", c.REASON_INADMISSIBLE, stopped)
                         and w, 60, "the held Workload saying why it waits")
        assert stopped in explained(kubeconfig, namespace, wl["metadata"]["name"])
        lq = watch.until(lambda: (q := get(kubectl, "localqueue", "lq", "-n", namespace))
                         and active(q) == ("False", c.REASON_STOPPED) and q, 30, "the LocalQueue inactive (Stopped)")
        assert (condition(lq, c.CONDITION_ACTIVE) or {}).get("message") == "Cannot admit new Workloads: stopPolicy is Hold"
        assert get(kubectl, "job", "waiting", "-n", namespace)["spec"]["suspend"] is True
        assert pods_of(kubectl, namespace, "waiting") == []
        assert active(get(kubectl, "clusterqueue", cq)) == ("True", c.REASON_READY)  # only the LocalQueue holds
        set_stop_policy(kubectl, c.KIND_LOCAL_QUEUE, "lq", namespace, None)
        watch.until(lambda: running_pods(kubectl, namespace, "waiting", 2), 90, "the Job running once released")
        assert is_admitted(workload_of(kubectl, namespace, "waiting"))
        watch.until(lambda: active(get(kubectl, "localqueue", "lq", "-n", namespace)) == ("True", c.REASON_READY),
                    30, "the LocalQueue active again")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert not watch.problems


@pytest.mark.parametrize(("kind", "evicted_reason", "event", "requeued_reason"), [
    pytest.param(c.KIND_LOCAL_QUEUE, c.REASON_LOCAL_QUEUE_STOPPED, c.EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED,
                 c.REASON_LOCAL_QUEUE_RESTARTED, id="local-queue"),
    pytest.param(c.KIND_CLUSTER_QUEUE, c.REASON_CLUSTER_QUEUE_STOPPED, c.EVENT_REASON_EVICTED_CLUSTER_QUEUE_STOPPED,
                 c.REASON_CLUSTER_QUEUE_RESTARTED, id="cluster-queue"),
])
def test_hold_and_drain_evicts_the_running_job_gracefully_holds_it_and_lets_it_run_again(
        tasq: Process, kubectl: Kubectl, namespace: str, kind: str, evicted_reason: str, event: str,
        requeued_reason: str) -> None:
    cq = f"drained-{namespace}"
    kubectl("apply", "-f", "-", stdin=cluster_queue(cq, 64, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, cq))
    watch = OverCommitWatch(kubectl, namespace, {cq: 64})
    name, queue_namespace = ("lq", namespace) if kind == c.KIND_LOCAL_QUEUE else (cq, None)
    try:
        kubectl("create", "-f", "-", stdin=job("train", namespace, "lq", 2, 8, "e2e-low", require_rack=False))
        watch.until(lambda: running_pods(kubectl, namespace, "train", 2), 90, "train running")
        set_stop_policy(kubectl, kind, name, queue_namespace, c.STOP_POLICY_HOLD_AND_DRAIN)

        def released() -> dict[str, Any] | None:
            # the Workload first, then the pods: a pod read after the release was read can only be younger
            wl = workload_of(kubectl, namespace, "train")
            reserved = condition(wl, c.CONDITION_QUOTA_RESERVED)
            if reserved is None or reserved["status"] != "False":
                return None
            left = [p["metadata"]["name"] for p in pods_of(kubectl, namespace, "train")]
            assert not left, f"the quota released while the pods {left} still exist"
            return wl

        wl = watch.until(released, 90, "train evicted, its pods gone, then its quota released")
        evicted = reason_of(wl, c.CONDITION_EVICTED)
        assert evicted[:2] == ("True", evicted_reason), evicted
        assert "is stopped (stopPolicy HoldAndDrain)" in evicted[2]
        assert reason_of(wl, c.CONDITION_REQUEUED)[:2] == ("False", evicted_reason)
        assert "admission" not in (wl.get("status") or {})
        assert get(kubectl, "job", "train", "-n", namespace)["spec"]["suspend"] is True
        assert [e["involvedObject"]["name"] for e in events(kubectl, namespace, event)] == [wl["metadata"]["name"]]
        held = watch.until(lambda: (w := workload_of(kubectl, namespace, "train"))
                           and reason_of(w, c.CONDITION_QUOTA_RESERVED)[1] == c.REASON_INADMISSIBLE
                           and w, 30, "train held by its stopped queue, saying so")
        assert "is stopped" in reason_of(held, c.CONDITION_QUOTA_RESERVED)[2]
        watch.until(lambda: (get(kubectl, "clusterqueue", cq).get("status") or {}).get("admittedWorkloads") == 0,
                    30, "the ClusterQueue's status counting nothing admitted")
        assert pods_of(kubectl, namespace, "train") == []  # held: no pod comes back
        set_stop_policy(kubectl, kind, name, queue_namespace, None)
        watch.until(lambda: running_pods(kubectl, namespace, "train", 2), 90, "train running again")
        wl = watch.until(lambda: (w := workload_of(kubectl, namespace, "train"))
                         and reason_of(w, c.CONDITION_REQUEUED)[:2] == ("True", requeued_reason) and w,
                         30, f"train Requeued ({requeued_reason})")
        assert is_admitted(wl)
        assert reason_of(wl, c.CONDITION_EVICTED)[0] == "False"
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert watch.checks >= 2 and not watch.problems


def test_hold_alone_leaves_the_running_job_running(tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    cq = f"kept-{namespace}"
    kubectl("apply", "-f", "-", stdin=cluster_queue(cq, 64, {}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, cq))
    watch = OverCommitWatch(kubectl, namespace, {cq: 64})
    try:
        kubectl("create", "-f", "-", stdin=job("train", namespace, "lq", 1, 8, "e2e-low", require_rack=False))
        pods = watch.until(lambda: running_pods(kubectl, namespace, "train", 1), 90, "train running")
        set_stop_policy(kubectl, c.KIND_LOCAL_QUEUE, "lq", namespace, c.STOP_POLICY_HOLD)
        set_stop_policy(kubectl, c.KIND_CLUSTER_QUEUE, cq, None, c.STOP_POLICY_HOLD)
        kubectl("create", "-f", "-", stdin=job("late", namespace, "lq", 1, 8, "e2e-low", require_rack=False))
        watch.until(lambda: reason_of(workload_of(kubectl, namespace, "late"), c.CONDITION_QUOTA_RESERVED)[:2]
                    == ("False", c.REASON_INADMISSIBLE), 60, "late held")
        watch.until(lambda: active(get(kubectl, "localqueue", "lq", "-n", namespace)) == ("False", c.REASON_STOPPED),
                    30, "the LocalQueue inactive (Stopped)")
        wl = workload_of(kubectl, namespace, "train")
        assert is_admitted(wl) and condition(wl, c.CONDITION_EVICTED) is None
        still = running_pods(kubectl, namespace, "train", 1)
        assert still and [p["metadata"]["uid"] for p in still] == [p["metadata"]["uid"] for p in pods]  # untouched
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert not watch.problems
