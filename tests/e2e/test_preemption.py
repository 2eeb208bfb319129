"""Preemption end to end on either control plane: `tasq run --local-webhooks` as a process, only the
real kubectl to drive and observe it. Runs unchanged on the devcluster and `--cluster=real`.

The flavor `two-racks` holds the nodes of racks b1-r1 and b1-r2 only, 8 GPUs each (64 in all):

    b1-r1: [gpu-b1-r1-n1] [n2] [n3] [n4]     b1-r2: [gpu-b1-r2-n1] [n2] [n3] [n4]

Priorities are PriorityClasses named in the Jobs' pod templates. Every test polls, from start to end,
that nothing is over-committed: the GPUs of the pods bound to a node never exceed its allocatable
(terminating pods included: they still run), and the GPUs admitted in a ClusterQueue never exceed
its quota plus what it may borrow.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from devcluster.simulated.nodes import parse_shape, topology_nodes
from tests.e2e.conftest import Kubectl, install_operator_cluster
from tests.e2e.test_operator_clusters import (
    GPU,
    RACK,
    Process,
    condition,
    get,
    pods_of,
    rack_topology,
    workload_of,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("jobs_removed")]

POOL = "e2e.tasq.io/preemption-pool"
HOLD = "e2e.tasq.io/hold"
"""A finalizer the test puts on a pod to keep it terminating, then takes off."""
RACKS = ("b1-r1", "b1-r2")

SETUP = rack_topology("two-racks", POOL) + """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-medium}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-high}
value: 1000
"""


def cluster_queue(name: str, gpus: int, preemption: dict[str, Any], cohort: str | None = None,
                  borrowing_limit: int | None = None) -> str:
    """A v1beta2 ClusterQueue (the hub: `cohortName`) of `gpus` GPUs in flavor two-racks."""
    quota: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing_limit is not None:
        quota["borrowingLimit"] = str(borrowing_limit)
    spec: dict[str, Any] = {"namespaceSelector": {}, "preemption": preemption, "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": "two-racks", "resources": [quota]}]}]}
    if cohort is not None:
        spec["cohortName"] = cohort
    return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                       "metadata": {"name": name}, "spec": spec})


def local_queue(namespace: str, name: str, cq: str) -> str:
    return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                       "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}})


def job(name: str, namespace: str, queue: str, pods: int, gpus: int, priority: str, *,
        run_seconds: int | None = None, rack: str | None = None, require_rack: bool = True,
        grace_seconds: int = 2) -> str:
    """An Indexed Job of `pods` pods of `gpus` GPUs each, running `run_seconds` (until deleted without),
    its pods in one rack (`require_rack`), on rack `rack` when given (a nodeSelector), each pod given
    `grace_seconds` to end when deleted."""
    template_meta: dict[str, Any] = {}
    if run_seconds is not None:
        template_meta["annotations"] = {c.ANNOTATION_DEVCLUSTER_RUN_SECONDS: str(run_seconds)}
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": grace_seconds, "priorityClassName": priority,
        "containers": [{"name": "main", "image": "registry.example/trainer:1",
                        "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}
    if rack is not None:
        spec["nodeSelector"] = {RACK: rack}
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.LABEL_QUEUE_NAME: queue},
                     "annotations": {c.ANNOTATION_REQUIRE_TOPOLOGY: RACK} if require_rack else {}},
        "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                 "template": {"metadata": template_meta, "spec": spec}}})


def install_rack_pool(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl, setup: str,
                      pool: str = POOL, racks: Sequence[str] = RACKS) -> Callable[[], None]:
    """The GPU nodes (`hack/realcluster/up` made them on the real control plane), `setup` applied,
    `racks` (b1-r1 and b1-r2) labelled into the flavor's `pool`; returns what undoes the install
    (the labels too)."""
    nodes = [] if cluster == "real" else topology_nodes(parse_shape("2x4x4x8"), "gpu-")
    close = install_operator_cluster(request, cluster, kubectl, nodes, setup)
    selector = f"{RACK} in ({','.join(racks)})"
    kubectl("label", "nodes", "-l", selector, "--overwrite", f"{pool}=gpu")

    def undo() -> None:
        kubectl("label", "nodes", "-l", selector, f"{pool}-")
        close()
    return undo


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """CRDs, the GPU nodes (`hack/realcluster/up` made them on the real control plane), the topology,
    the flavor over racks b1-r1 and b1-r2, the PriorityClasses."""
    close = install_rack_pool(request, cluster, kubectl, SETUP)
    yield
    close()


class OverCommitWatch:
    """Reads the cluster at every `check()` and records each over-commitment seen: a node whose bound,
    unfinished pods (terminating ones too) request more GPUs than it has, or a ClusterQueue whose
    admitted, unfinished Workloads hold more GPUs than `limits` allows it."""

    def __init__(self, kubectl: Kubectl, namespace: str, limits: dict[str, int]) -> None:
        self.kubectl, self.namespace, self.limits = kubectl, namespace, limits
        self.allocatable = {n["metadata"]["name"]: int((n["status"].get("allocatable") or {}).get(GPU, "0"))
                            for n in get(kubectl, "nodes")["items"]}
        self.problems: list[str] = []
        self.checks = 0

    def check(self) -> None:
        self.checks += 1
        used: dict[str, int] = {}
        for pod in get(self.kubectl, "pods", "-n", self.namespace)["items"]:
            node = pod["spec"].get("nodeName")
            if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for ctr in pod["spec"]["containers"]:
                used[node] = used.get(node, 0) + int(((ctr.get("resources") or {}).get("requests") or {}).get(GPU, "0"))
        self.problems += [f"node {n}: {g} GPUs bound, allocatable {self.allocatable.get(n, 0)}"
                          for n, g in used.items() if g > self.allocatable.get(n, 0)]
        admitted: dict[str, int] = {}
        for wl in get(self.kubectl, "workloads", "-n", self.namespace)["items"]:
            reserved, finished = condition(wl, "QuotaReserved"), condition(wl, "Finished")
            if not reserved or reserved["status"] != "True" or (finished and finished["status"] == "True"):
                continue
            admission = wl["status"]["admission"]
            gpus = sum(int(psa["resourceUsage"].get(GPU, "0")) for psa in admission["podSetAssignments"])
            admitted[admission["clusterQueue"]] = admitted.get(admission["clusterQueue"], 0) + gpus
        self.problems += [f"ClusterQueue {cq}: {g} GPUs admitted, limit {self.limits[cq]}"
                          for cq, g in admitted.items() if cq in self.limits and g > self.limits[cq]]

    def until(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """`wait_for`, checking the cluster between polls; fails at once on an over-commitment."""
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            assert not self.problems, self.problems
            value = predicate()
            if value:
                return value
            assert time.monotonic() < deadline, f"{what} not reached in {timeout:.0f}s"
            time.sleep(0.2)


def is_admitted(wl: dict[str, Any] | None) -> bool:
    cond = condition(wl, "Admitted")
    return bool(cond and cond["status"] == "True")


def running_pods(kubectl: Kubectl, namespace: str, job_name: str, count: int) -> list[dict[str, Any]] | None:
    pods = [p for p in pods_of(kubectl, namespace, job_name) if p["spec"].get("nodeName")
            and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return pods if len(pods) == count else None


def racks_of(kubectl: Kubectl, pods: list[dict[str, Any]]) -> set[str]:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}
    return {nodes[p["spec"]["nodeName"]][RACK] for p in pods}


def events(kubectl: Kubectl, namespace: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(kubectl, "events", "-n", namespace, "--field-selector", f"reason={reason}")["items"]
    return items


def test_a_high_priority_gang_preempts_exactly_the_gang_in_the_rack_it_needs_and_the_victim_runs_again(
        tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    # 96 GPUs of quota over 64 GPUs of nodes: capacity, not quota, is short. "victim" (low, 2 x 8 GPUs)
    # runs in b1-r1; "other-1" (low, 2 x 8) and "other-2" (low, 1 x 8, the newest) in b1-r2. "high"
    # (4 x 8 GPUs, one rack) fits no rack: freeing b1-r1 takes one victim, b1-r2 two, so exactly
    # "victim" is preempted, though by age alone "other-2" would go first.
    kubectl("apply", "-f", "-", stdin=cluster_queue("prio", 96, {"withinClusterQueue": "LowerPriority"}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "prio"))
    watch = OverCommitWatch(kubectl, namespace, {"prio": 96})
    try:
        for name, pods, rack in (("victim", 2, "b1-r1"), ("other-1", 2, "b1-r2"), ("other-2", 1, "b1-r2")):
            kubectl("create", "-f", "-", stdin=job(name, namespace, "lq", pods, 8, "e2e-low", rack=rack))
            watch.until(functools.partial(running_pods, kubectl, namespace, name, pods), 60, f"{name} running")
        victim_wl = workload_of(kubectl, namespace, "victim")
        assert victim_wl is not None
        # One victim pod is held by a finalizer once deleted, as a pod still in its grace period (neither
        # test cluster's kubelet makes a deleted pod wait for it): it still runs on its node.
        held = sorted(p["metadata"]["name"] for p in pods_of(kubectl, namespace, "victim"))[0]
        kubectl("patch", "pod", held, "-n", namespace, "--type=merge", "-p",
                json.dumps({"metadata": {"finalizers": [HOLD]}}))
        kubectl("create", "-f", "-", stdin=job("high", namespace, "lq", 4, 8, "e2e-high", run_seconds=6))
        terminating = watch.until(lambda: (p := pods_of(kubectl, namespace, "victim")) and len(p) == 1
                                  and p[0]["metadata"].get("deletionTimestamp") and p[0], 60,
                                  "the victim's Job stopped, one pod terminating")
        assert terminating["metadata"]["name"] == held
        hold_until = time.monotonic() + 4
        while time.monotonic() < hold_until:  # several admission cycles: the rack is still in use
            watch.check()
            assert not watch.problems, watch.problems
            assert not is_admitted(workload_of(kubectl, namespace, "high")), "high admitted beside a terminating pod"
            time.sleep(0.3)
        reserved = condition(workload_of(kubectl, namespace, "victim"), "QuotaReserved")
        assert reserved is not None and reserved["status"] == "True", reserved  # released only once its pods are gone
        kubectl("patch", "pod", held, "-n", namespace, "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))

        def high_admitted() -> dict[str, Any] | None:
            # the Workload first, then the pods: a pod read after an admission was read can only be
            # younger, and the victim's Job is suspended once evicted (no new pod)
            wl = workload_of(kubectl, namespace, "high")
            left = [p["metadata"]["name"] for p in pods_of(kubectl, namespace, "victim")
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            if is_admitted(wl):
                assert not left, f"high admitted while the victim's pods {left} still exist"
                return wl
            return None

        high_wl = watch.until(high_admitted, 90, "high admitted once the victim's pods are gone")
        high_pods = watch.until(lambda: running_pods(kubectl, namespace, "high", 4), 60, "high running")
        assert racks_of(kubectl, high_pods) == {"b1-r1"}
        for other, pods in (("other-1", 2), ("other-2", 1)):  # the gangs in the other rack ran on, untouched
            assert running_pods(kubectl, namespace, other, pods), other
            assert condition(workload_of(kubectl, namespace, other), "Evicted") is None, other
        evicted_wl = workload_of(kubectl, namespace, "victim")
        assert evicted_wl is not None
        evicted, preempted = condition(evicted_wl, "Evicted"), condition(evicted_wl, "Preempted")
        assert evicted is not None and (evicted["status"], evicted["reason"]) == ("True", "Preempted"), evicted
        assert preempted is not None and (preempted["status"], preempted["reason"]) == ("True", "InClusterQueue")
        high_name = high_wl["metadata"]["name"]
        assert f"preemptor: workload {namespace}/{high_name}, job {namespace}/high" in evicted["message"]
        assert get(kubectl, "job", "victim", "-n", namespace)["spec"]["suspend"] is True
        # Kueue's Events: on the victim's Workload and Job, naming the preemptor; on the preemptor
        preempted_events = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]): e["message"]
                            for e in events(kubectl, namespace, c.EVENT_REASON_PREEMPTED)}
        assert set(preempted_events) == {("Workload", victim_wl["metadata"]["name"]), ("Job", "victim")}
        assert all(f"workload {namespace}/{high_name}" in m for m in preempted_events.values())
        assert [e["involvedObject"]["name"] for e in events(kubectl, namespace, c.EVENT_REASON_PREEMPTED_WORKLOAD)] \
            == [high_name]
        # the victim waits in its queue, then runs again once "high" finishes
        again = watch.until(lambda: (wl := workload_of(kubectl, namespace, "victim")) and is_admitted(wl) and wl,
                            120, "the victim admitted again after high finished")
        # its rack was free again only once high's pods ended (its Workload may be marked Finished later)
        assert [(p.get("status") or {}).get("phase") for p in pods_of(kubectl, namespace, "high")] == ["Succeeded"] * 4
        watch.until(lambda: running_pods(kubectl, namespace, "victim", 2), 60, "the victim running again")
        requeued = condition(again, "Evicted")
        assert requeued is not None and requeued["status"] == "False"
        assert requeued["message"].startswith("Previously: Preempted to accommodate a workload")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert watch.checks >= 2 and not watch.problems  # polled through the change (fewer polls when the cluster is quick)


def test_a_queue_reclaims_the_quota_its_cohort_borrowed(tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    # Cohort "lab" over the 64 GPUs: "lender" and "borrower" 32 GPUs of nominal quota each. "borrower"
    # runs 48 GPUs (borrowing 16 of lender's); "lender" then asks 32, its own: it reclaims them by
    # preempting the borrowing gang (reclaimWithinCohort), whatever the priorities.
    kubectl("apply", "-f", "-", stdin=cluster_queue("lender", 32, {"reclaimWithinCohort": "Any"}, "lab"))
    kubectl("apply", "-f", "-", stdin=cluster_queue("borrower", 32, {}, "lab", borrowing_limit=32))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lend", "lender"))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "borrow", "borrower"))
    watch = OverCommitWatch(kubectl, namespace, {"lender": 64, "borrower": 64})
    try:
        kubectl("create", "-f", "-", stdin=job("borrowing", namespace, "borrow", 6, 8, "e2e-high", require_rack=False))
        watch.until(lambda: running_pods(kubectl, namespace, "borrowing", 6), 60, "borrowing running")
        kubectl("create", "-f", "-", stdin=job("owner", namespace, "lend", 4, 8, "e2e-low", run_seconds=5,
                                               require_rack=False))
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "owner")), 90, "owner admitted")
        evicted_wl = workload_of(kubectl, namespace, "borrowing")
        preempted = condition(evicted_wl, "Preempted")
        assert preempted is not None and (preempted["status"], preempted["reason"]) == ("True", "InCohortReclamation")
        assert "due to reclamation within the cohort; preemptor path: /lab/lender; preemptee path: /lab/borrower" \
            in preempted["message"], preempted
        watch.until(lambda: running_pods(kubectl, namespace, "owner", 4), 60, "owner running")
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "borrowing")), 120,
                    "the borrowing gang admitted again once owner finished")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert watch.checks >= 2 and not watch.problems  # polled through the change (fewer polls when the cluster is quick)


def test_a_preemption_that_would_not_make_room_is_not_attempted(tasq: Process, kubectl: Kubectl, namespace: str) -> None:
    # "low" (2 x 8 GPUs) runs in b1-r1; "huge" (high, 5 x 8 = 40 GPUs in one rack) fits no rack of 32
    # even with every workload gone: nothing is evicted, "huge" waits saying why.
    kubectl("apply", "-f", "-", stdin=cluster_queue("futile", 96, {"withinClusterQueue": "LowerPriority"}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "futile"))
    watch = OverCommitWatch(kubectl, namespace, {"futile": 96})
    try:
        kubectl("create", "-f", "-", stdin=job("low", namespace, "lq", 2, 8, "e2e-low", rack="b1-r1"))
        watch.until(lambda: running_pods(kubectl, namespace, "low", 2), 60, "low running")
        kubectl("create", "-f", "-", stdin=job("huge", namespace, "lq", 5, 8, "e2e-high"))
        waiting = watch.until(lambda: (cond := condition(workload_of(kubectl, namespace, "huge"), "QuotaReserved"))
                              and cond["status"] == "False" and cond, 60, "huge waiting")
        settle = time.monotonic() + 5  # several admission cycles
        while time.monotonic() < settle:
            watch.check()
            assert not watch.problems, watch.problems
            low = workload_of(kubectl, namespace, "low")
            assert condition(low, "Evicted") is None and is_admitted(low), low
            time.sleep(0.3)
        assert running_pods(kubectl, namespace, "low", 2)
        assert events(kubectl, namespace, c.EVENT_REASON_PREEMPTED) == []
        assert get(kubectl, "job", "huge", "-n", namespace)["spec"]["suspend"] is True
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert waiting["reason"] == "Pending", waiting


def test_an_eviction_under_way_is_finished_by_a_restarted_operator_without_a_second_preemption(
        tasq: Process, kubectl: Kubectl, kubeconfig: Path, namespace: str, tmp_path: Path) -> None:
    # "blocker" (high, 3 x 8 GPUs) holds b1-r2; "victim" (low, 2 x 8) runs in b1-r1, one of its pods
    # held terminating by a finalizer. "high" (4 x 8, one rack) preempts the victim; while the held pod
    # terminates, tasq is stopped and started again: the new process reads the eviction from the
    # Workload (Evicted=True, admission still set), waits for the pod, releases, admits "high", and
    # never preempts a second time.
    kubectl("apply", "-f", "-", stdin=cluster_queue("restart", 96, {"withinClusterQueue": "LowerPriority"}))
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "lq", "restart"))
    watch = OverCommitWatch(kubectl, namespace, {"restart": 96})
    try:
        for name, pods, rack, priority in (("blocker", 3, "b1-r2", "e2e-high"), ("victim", 2, "b1-r1", "e2e-low")):
            kubectl("create", "-f", "-", stdin=job(name, namespace, "lq", pods, 8, priority, rack=rack))
            watch.until(functools.partial(running_pods, kubectl, namespace, name, pods), 60, f"{name} running")
        held = sorted(p["metadata"]["name"] for p in pods_of(kubectl, namespace, "victim"))[0]
        kubectl("patch", "pod", held, "-n", namespace, "--type=merge", "-p",
                json.dumps({"metadata": {"finalizers": [HOLD]}}))
        kubectl("create", "-f", "-", stdin=job("high", namespace, "lq", 4, 8, "e2e-high", run_seconds=3))
        watch.until(lambda: (p := pods_of(kubectl, namespace, "victim")) and len(p) == 1
                    and p[0]["metadata"].get("deletionTimestamp"), 60, "the victim's Job stopped, one pod terminating")
        before = condition(workload_of(kubectl, namespace, "victim"), "Preempted")
        assert tasq.stop() == 0, tasq.tail()
        restarted = Process(kubeconfig, tmp_path / "restarted.log")
        tasq.proc, tasq.log = restarted.proc, restarted.log  # the module's fixture stops this one
        settle = time.monotonic() + 6  # the new process takes the Lease and runs its cycles
        while time.monotonic() < settle:
            watch.check()
            assert not watch.problems, watch.problems
            assert not is_admitted(workload_of(kubectl, namespace, "high")), "high admitted beside a terminating pod"
            time.sleep(0.3)
        kubectl("patch", "pod", held, "-n", namespace, "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "high")), 90,
                    "high admitted by the restarted operator once the pod is gone")
        assert condition(workload_of(kubectl, namespace, "victim"), "Preempted") == before  # written once
        evictions = [e for e in events(kubectl, namespace, c.EVENT_REASON_EVICTED_PREEMPTED)
                     if e["involvedObject"]["kind"] == "Workload"]
        assert len(evictions) == 1, evictions
        watch.until(lambda: is_admitted(workload_of(kubectl, namespace, "victim")), 120,
                    "the victim admitted again after high finished")
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    assert watch.checks >= 2 and not watch.problems  # polled through the change (fewer polls when the cluster is quick)
