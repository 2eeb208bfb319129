"""Failed-node replacement end to end on either control plane: `tasq run --local-webhooks
--node-failure-delay 3` as a process, only the real kubectl to drive and observe it (a node made not
Ready through its status, or deleted, as a kubelet that stopped or a machine that went away).

The flavor `nodefail-racks` holds racks b2-r1 and b2-r2 only, 8 GPUs per node:

    b2-r1: [gpu-b2-r1-n1] [n2] [n3] [n4]     b2-r2: [gpu-b2-r2-n1] [n2] [n3] [n4]

Every test polls, from start to end, that nothing is over-committed (test_preemption's OverCommitWatch:
the GPUs of the pods bound to a node never exceed its allocatable, the GPUs admitted in the
ClusterQueue never its quota). The nodes each test breaks are restored before it ends.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.workload import Workload
from tests.e2e.conftest import Kubectl
from tests.e2e.test_operator_clusters import (
    GPU,
    RACK,
    TASQ,
    Process,
    condition,
    get,
    leading_tasq,
    pods_of,
    rack_topology,
    workload_of,
)
from tests.e2e.test_preemption import (
    OverCommitWatch,
    events,
    install_rack_pool,
    is_admitted,
    local_queue,
    running_pods,
)

pytestmark = pytest.mark.e2e

POOL = "e2e.tasq.io/nodefail-pool"
RACKS = ("b2-r1", "b2-r2")
QUOTA = 64

SETUP = rack_topology("nodefail-racks", POOL) + f"""---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: nodefail}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [{GPU}]
    flavors: [{{name: nodefail-racks, resources: [{{name: {GPU}, nominalQuota: "{QUOTA}"}}]}}]
"""


def gang(name: str, namespace: str, pods: int, rack: str) -> str:
    """An Indexed Job of `pods` pods of 8 GPUs each (a whole node), in one rack, on `rack`, running
    until deleted."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "nodeSelector": {RACK: rack},
        "containers": [{"name": "main", "image": "registry.example/trainer:1",
                        "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]}
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.LABEL_QUEUE_NAME: "lq"},
                     "annotations": {c.ANNOTATION_REQUIRE_TOPOLOGY: RACK}},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 10,
                 "template": {"spec": spec}}})


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """CRDs, the GPU nodes (`hack/realcluster/up` made them on the real control plane), the topology,
    the flavor over racks b2-r1 and b2-r2 and its ClusterQueue."""
    close = install_rack_pool(request, cluster, kubectl, SETUP, POOL, RACKS)
    yield
    close()


@pytest.fixture(scope="module")
def tasq(installed: None, kubeconfig: Path, kubectl: Kubectl,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """One `tasq run --local-webhooks --node-failure-delay 3` for the module, leading."""
    with leading_tasq(kubeconfig, kubectl, tmp_path_factory.mktemp("tasq"), ("--node-failure-delay", "3")) as proc:
        yield proc


@pytest.fixture(autouse=True)
def queue(jobs_removed: None, kubectl: Kubectl, namespace: str) -> None:
    """The test's LocalQueue "lq" (its Jobs removed after it)."""
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "nodefail"))


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_ready(kubectl: Kubectl, node: str, ready: bool) -> None:
    """The node's Ready condition as its kubelet would post it (a strategic merge by condition type)."""
    status, reason = ("True", "KubeletReady") if ready else ("False", "KubeletNotReady")
    kubectl("patch", "node", node, "--subresource=status", "-p", json.dumps({"status": {"conditions": [
        {"type": "Ready", "status": status, "reason": reason, "message": "e2e: set by the test",
         "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}}))


def hosts_of(wl: dict[str, Any] | None) -> dict[str, int]:
    """Host -> pods of the Workload's (only) pod set assignment, read through tasq's own model."""
    if wl is None:
        return {}
    admission = Workload.from_dict(wl).admission
    ta = admission.pod_set_assignments[0].topology_assignment if admission is not None else None
    return {d.values[-1]: d.count for d in ta.assigned_domains()} if ta is not None else {}


def node_racks(kubectl: Kubectl) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(RACK, "") for n in get(kubectl, "nodes")["items"]}


def pod_of_index(pods: list[dict[str, Any]], index: str) -> dict[str, Any]:
    return next(p for p in pods if p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") == index)


def test_a_not_ready_node_of_a_running_gang_is_replaced_in_its_rack_and_the_other_pod_stays(
        tasq: Process, kubectl: Kubectl, namespace: str, kubeconfig: Path) -> None:
    watch = OverCommitWatch(kubectl, namespace, {"nodefail": QUOTA})
    kubectl("create", "-f", "-", stdin=gang("train", namespace, 2, "b2-r1"))
    pods = watch.until(lambda: running_pods(kubectl, namespace, "train", 2), 60, "train running")
    failed_pod, kept_pod = pod_of_index(pods, "0"), pod_of_index(pods, "1")
    failed = failed_pod["spec"]["nodeName"]
    set_ready(kubectl, failed, False)
    try:
        def replaced() -> dict[str, Any] | None:
            wl = workload_of(kubectl, namespace, "train")
            hosts = hosts_of(wl)
            now_running = running_pods(kubectl, namespace, "train", 2) or []
            on = {p["spec"]["nodeName"] for p in now_running}
            return wl if hosts and failed not in hosts and failed not in on and on == set(hosts) else None

        wl = watch.until(replaced, 90, f"the gang's pod on {failed} re-placed")
        racks = node_racks(kubectl)
        hosts = hosts_of(wl)
        assert {racks[h] for h in hosts} == {"b2-r1"}, hosts  # the required rack kept
        assert kept_pod["spec"]["nodeName"] in hosts
        still = [p for p in pods_of(kubectl, namespace, "train") if p["metadata"]["uid"] == kept_pod["metadata"]["uid"]]
        assert still and still[0]["spec"]["nodeName"] == kept_pod["spec"]["nodeName"]  # never moved
        assert not wl["status"].get("unhealthyNodes")
        assert is_admitted(wl) and condition(wl, "Evicted") is None
        (event,) = [e for e in events(kubectl, namespace, c.EVENT_REASON_NODE_REPLACED)
                    if e["involvedObject"]["name"] == wl["metadata"]["name"]]
        replacement = next(iter(set(hosts) - {kept_pod["spec"]["nodeName"]}))
        assert event["message"].startswith(f"Node {failed} (not Ready since ") and \
            f"replaced by {replacement} (1 pod) for pod set main" in event["message"], event["message"]
        explained = subprocess.run([str(TASQ), "explain", "workload", wl["metadata"]["name"], "-n", namespace,
                                    "--kubeconfig", str(kubeconfig)], capture_output=True, text=True, timeout=60)
        assert explained.returncode == 0, explained.stderr
        assert "replaced at " in explained.stdout and f"Node {failed} " in explained.stdout, explained.stdout
        for _ in range(10):  # a while longer: nothing over-committed, nothing moves back
            watch.check()
        assert not watch.problems, watch.problems
    finally:
        set_ready(kubectl, failed, True)


def test_a_deleted_node_with_no_free_node_in_the_required_rack_requeues_the_gang_with_node_failures(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    watch = OverCommitWatch(kubectl, namespace, {"nodefail": QUOTA})
    kubectl("create", "-f", "-", stdin=gang("full", namespace, 4, "b2-r2"))  # every node of b2-r2
    pods = watch.until(lambda: running_pods(kubectl, namespace, "full", 4), 60, "full running")
    gone = pod_of_index(pods, "0")["spec"]["nodeName"]
    saved = get(kubectl, "node", gone)
    kubectl("delete", "node", gone)
    try:
        def requeued() -> dict[str, Any] | None:
            wl = workload_of(kubectl, namespace, "full")
            cond = condition(wl, "Requeued")
            left = [p for p in pods_of(kubectl, namespace, "full")
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            return wl if cond and cond["status"] == "True" and not left else None

        wl = watch.until(requeued, 120, "the gang evicted, its pods gone and requeued")
        evicted, requeued_cond = condition(wl, "Evicted"), condition(wl, "Requeued")
        assert evicted is not None and evicted["reason"] == c.REASON_NODE_FAILURES, evicted
        assert evicted["message"].startswith(
            f"Workload was evicted as there was no replacement for unhealthy node(s): {gone}"), evicted["message"]
        assert requeued_cond is not None and requeued_cond["reason"] == c.REASON_NODE_FAILURES
        assert not is_admitted(wl) and not (wl.get("status") or {}).get("admission")
        assert get(kubectl, "job", "full", "-n", namespace)["spec"].get("suspend") is True
    finally:
        restore_node(kubectl, saved)
    # The rack whole again: the requeued gang is admitted there and runs.
    watch.until(lambda: running_pods(kubectl, namespace, "full", 4), 120, "full running again after the node came back")


def restore_node(kubectl: Kubectl, saved: dict[str, Any]) -> None:
    """Create the deleted node again as it was (its labels, annotations, taints and status)."""
    meta = saved["metadata"]
    node = {"apiVersion": "v1", "kind": "Node", "spec": {k: v for k, v in saved.get("spec", {}).items()
                                                         if k not in ("podCIDR", "podCIDRs")},
            "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}}
    kubectl("create", "-f", "-", stdin=json.dumps(node))
    status = {k: saved["status"][k] for k in ("capacity", "allocatable", "conditions", "addresses", "nodeInfo")
              if k in saved.get("status", {})}
    status["conditions"] = [dict(cd, lastHeartbeatTime=now(), lastTransitionTime=now()) for cd in status.get("conditions", [])]
    kubectl("patch", "node", meta["name"], "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))
