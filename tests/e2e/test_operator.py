"""The operator end to end on either control plane, driven and observed by the real kubectl; the
Operator runs in this process (its Pod webhook is tested through `tasq run` in test_operator_run).

Topology of the module's nodes (8 GPUs, 64 CPUs each; flavor `h100` = label gpu=h100):

    b1: r1 [n1 n2]   r2 [n1 n2]
    b2: r1 [n1 n2]   r2 [n1 n2]         8 nodes, 64 GPUs in all

The ClusterQueue `team` has 48 GPUs of quota. Jobs are created suspended, as the Job webhook
would make them; the cluster's Job controller, scheduler and kubelet (kwok on the real control
plane, the simulated ones on the devcluster) run the pods.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from controller.kube.api import connect
from controller.kube.operating import Operator
from devcluster.cluster import DevCluster
from tests.builders.kueue import label_slices, make_job
from tests.builders.operator import GPU, gpu_nodes, make_queue_setup
from tests.builders.operator import local_queue as local_queue_of
from tests.e2e.conftest import Kubectl, install_operator_cluster
from tests.e2e.conftest import wait_for as wait_for  # shared with test_operator_recovery and _run

pytestmark = pytest.mark.e2e

BLOCK, RACK = "example.com/block", "example.com/rack"
NODES = gpu_nodes(BLOCK, RACK, blocks=2, racks=2, hosts=2, labels={"gpu": "h100"})
SETUP = (make_queue_setup("dc", BLOCK, RACK, c.LABEL_HOSTNAME).flavor("h100", {"gpu": "h100"})
         .cluster_queue("team", {"cpu": 1000, GPU: 48}).yaml())


class RunningOperator:
    """An Operator on its own event loop in a thread; `stop()` ends it cleanly."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.operator: Operator | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        api_client = await connect(self.kubeconfig)
        self.operator = Operator(api_client)
        watcher = asyncio.create_task(self._signal_ready())
        try:
            await self.operator.run(self._stop)
        finally:
            watcher.cancel()
            await api_client.close()  # type: ignore[no-untyped-call]

    async def _signal_ready(self) -> None:
        assert self.operator is not None
        await self.operator.ready.wait()
        self._ready.set()

    def start(self) -> RunningOperator:
        self._thread.start()
        assert self._ready.wait(30), "operator did not become ready"
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "operator did not stop"


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """The CRDs, the 8 nodes and the queue on this module's cluster (either one)."""
    close = install_operator_cluster(request, cluster, kubectl, NODES, SETUP)
    yield
    close()


@pytest.fixture(scope="module")
def seeded(devcluster: DevCluster, installed: None) -> DevCluster:
    """The installed devcluster itself, for tests that reach into it (fault injection): devcluster only."""
    return devcluster


@pytest.fixture(scope="module")
def operator(installed: None, kubeconfig: Path) -> Iterator[RunningOperator]:
    running = RunningOperator(kubeconfig).start()
    yield running
    running.stop()


def job(name: str, namespace: str, pods: int, gpus: int, *, annotations: dict[str, str] | None = None,
        run_seconds: float = 1.0, priority_class: str | None = None, gated: bool = False) -> str:
    """A suspended Indexed Job of `pods` pods of 1 CPU and `gpus` GPUs on LocalQueue `lq`, as JSON;
    `gated`: its pods carry tasq's scheduling gate (standing in for the Pod webhook)."""
    built = (make_job(name, namespace).queue("lq").parallelism(pods).requests({"cpu": "1", GPU: str(gpus)})
             .limits({GPU: str(gpus)})
             .run_seconds(run_seconds).suspended().priority(class_name=priority_class))
    for key, value in (annotations or {}).items():
        built.annotate(key, value)
    if gated:
        built.topology_gated()
    return json.dumps(built.obj())


def local_queue(namespace: str) -> str:
    return local_queue_of(namespace, "team")


def get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def workload_of(kubectl: Kubectl, namespace: str, job_name: str) -> dict[str, Any] | None:
    for wl in get(kubectl, "workloads", "-n", namespace)["items"]:
        if any(ref.get("name") == job_name for ref in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == type_:
            return dict(cond)
    return None


def test_a_require_rack_job_is_admitted_into_one_rack_and_runs_to_completion(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("rack", namespace, 2, 8, annotations={
        "kueue.x-k8s.io/require-topology": RACK}))
    wl = wait_for(lambda: (w := workload_of(kubectl, namespace, "rack")) and condition(w, "Admitted") and w,
                  what="Workload admitted")
    assert wl["metadata"]["name"].startswith("job-rack-")
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert psa["flavors"] == {"cpu": "h100", "nvidia.com/gpu": "h100"}
    slices = label_slices(psa["topologyAssignment"])
    assert {s["nodeLabels"][RACK] for s in slices} == {"b1-r1"}  # tightest rack, first by name
    assert sum(s["count"] for s in slices) == 2
    started = wait_for(lambda: (j := get(kubectl, "job", "rack", "-n", namespace)) and
                       not j["spec"].get("suspend") and j, what="Job unsuspended")
    template = started["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/topology-workload"] == wl["metadata"]["name"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/topology-podset"] == "main"
    assert template["metadata"]["labels"]["tasq.io/tas"] == "true"
    done = wait_for(lambda: condition(workload_of(kubectl, namespace, "rack"), "Finished"), 60, "Finished")
    assert done["reason"] == "Succeeded"
    events = get(kubectl, "events", "-n", namespace)["items"]
    assert {"CreatedWorkload", "Admitted", "Started"} <= {e["reason"] for e in events}


def test_gang_deadlock_the_second_job_creates_no_pod_until_the_first_finishes(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    """Two 4-pod x 8-GPU gangs (32 GPUs each) against 48 GPUs of quota: one runs whole, the other
    stays suspended with zero pods and a quantitative reason, then runs after the first."""
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("first", namespace, 4, 8, run_seconds=3))
    wait_for(lambda: condition(workload_of(kubectl, namespace, "first"), "Admitted"), what="first admitted")
    kubectl("apply", "-f", "-", stdin=job("second", namespace, 4, 8, run_seconds=1))
    pending = wait_for(lambda: (c := condition(workload_of(kubectl, namespace, "second"), "QuotaReserved"))
                       and c["status"] == "False" and c, what="second pending")
    assert pending["reason"] == "Pending"
    assert "nvidia.com/gpu" in pending["message"]
    cq = wait_for(lambda: (q := get(kubectl, "clusterqueue", "team")) and
                  q.get("status", {}).get("pendingWorkloads", 0) >= 1 and q, what="ClusterQueue status")
    assert cq["status"]["admittedWorkloads"] >= 1
    gpu = [r for f in cq["status"]["flavorsUsage"] for r in f["resources"] if r["name"] == "nvidia.com/gpu"]
    assert gpu and gpu[0]["total"] == "32"
    # Read the second Job's state first and the first's Finished after: whenever the second has
    # started or has pods, the first must already have finished.
    while True:
        second_pods = [p for p in get(kubectl, "pods", "-n", namespace)["items"]
                       if p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == "second"]
        second_started = get(kubectl, "job", "second", "-n", namespace)["spec"]["suspend"] is False
        first_finished = condition(workload_of(kubectl, namespace, "first"), "Finished") is not None
        if second_pods or second_started:
            assert first_finished, "the second gang started before the first finished"
        if first_finished:
            break
        time.sleep(0.2)
    wait_for(lambda: condition(workload_of(kubectl, namespace, "second"), "Admitted"), what="second admitted")
    wait_for(lambda: condition(workload_of(kubectl, namespace, "second"), "Finished"), 60, "second finished")


def test_a_job_with_a_missing_priority_class_gets_no_workload_and_an_event(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("nopc", namespace, 1, 1, priority_class="does-not-exist"))
    event = wait_for(lambda: next((e for e in get(kubectl, "events", "-n", namespace)["items"]
                                   if e["reason"] == "ErrWorkloadCompose"), None), what="event")
    assert '"does-not-exist" not found' in event["message"]
    assert event["involvedObject"]["name"] == "nopc"
    assert workload_of(kubectl, namespace, "nopc") is None
    assert get(kubectl, "job", "nopc", "-n", namespace)["spec"]["suspend"] is True


def test_deleting_a_job_deletes_its_workload_and_releases_its_quota(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("long", namespace, 1, 8, run_seconds=600))
    wait_for(lambda: condition(workload_of(kubectl, namespace, "long"), "Admitted"), what="admitted")
    kubectl("delete", "job", "long", "-n", namespace)
    wait_for(lambda: workload_of(kubectl, namespace, "long") is None, what="Workload deleted")
    running = operator.operator
    assert running is not None
    wait_for(lambda: all(not k.startswith(namespace + "/") for k in running.cache.snapshot().quota.by_workload),
             what="quota released")


def test_deactivating_a_workload_suspends_its_job_restores_its_template_and_releases_its_quota(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    """`spec.active: false` (Kueue's way to evict): the Job is suspended with the pod template its
    author wrote (no flavor nodeSelector, no topology annotations, no tasq label), its pods go, the
    Workload says Evicted/Deactivated and holds no quota; reactivated, it is admitted and started again
    (and no longer says Evicted)."""
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    kubectl("apply", "-f", "-", stdin=job("evictee", namespace, 2, 8, run_seconds=600,
                                          annotations={c.ANNOTATION_REQUIRE_TOPOLOGY: RACK}))
    wl = wait_for(lambda: (w := workload_of(kubectl, namespace, "evictee")) and condition(w, "Admitted") and w,
                  what="admitted")
    wait_for(lambda: len([p for p in get(kubectl, "pods", "-n", namespace)["items"]
                          if p["status"].get("phase") == "Running"]) == 2, 60, "pods running")
    kubectl("patch", "workload", wl["metadata"]["name"], "-n", namespace, "--type=merge",
            "-p", '{"spec": {"active": false}}')
    evicted = wait_for(lambda: (cond := condition(workload_of(kubectl, namespace, "evictee"), "Evicted")) and
                       cond["status"] == "True" and cond, what="Workload evicted")
    assert evicted["reason"] == "Deactivated"
    stopped = get(kubectl, "job", "evictee", "-n", namespace)
    assert stopped["spec"]["suspend"] is True
    template = stopped["spec"]["template"]
    assert "nodeSelector" not in template["spec"]  # the flavor's gpu=h100 gone: the author set none
    assert "schedulingGates" not in template["spec"]  # the topology gate tasq wrote at the start gone
    assert template["metadata"]["annotations"] == {c.ANNOTATION_DEVCLUSTER_RUN_SECONDS: "600"}
    assert c.LABEL_TAS not in template["metadata"].get("labels", {})
    now = workload_of(kubectl, namespace, "evictee")
    assert now is not None and "admission" not in now["status"]
    assert condition(now, "QuotaReserved")["status"] == "False"  # type: ignore[index]
    wait_for(lambda: not get(kubectl, "pods", "-n", namespace)["items"], 60, "pods removed")
    wait_for(lambda: (q := get(kubectl, "localqueue", "lq", "-n", namespace)) and
             (q.get("status") or {}).get("admittedWorkloads") == 0, what="quota released")

    kubectl("patch", "workload", wl["metadata"]["name"], "-n", namespace, "--type=merge",
            "-p", '{"spec": {"active": true}}')
    wait_for(lambda: (j := get(kubectl, "job", "evictee", "-n", namespace)) and not j["spec"]["suspend"] and
             j["spec"]["template"]["metadata"]["annotations"].get(c.ANNOTATION_TOPOLOGY_WORKLOAD) ==
             wl["metadata"]["name"], 60, "started again after reactivation")
    again = condition(workload_of(kubectl, namespace, "evictee"), "Evicted")
    assert again is not None and (again["status"], again["reason"]) == ("False", "QuotaReserved")
    kubectl("delete", "job", "evictee", "-n", namespace)


def tree_setup(prefix: str) -> str:
    """The objects of the cohort tests, as `kubectl apply` YAML (cluster-scoped, so named per test):

                 {prefix}-org (8 GPUs of its own)
                /                  \\
        {prefix}-left         {prefix}-right
              |                     |
        {prefix}-cq-left (8)   {prefix}-cq-right (8)        (GPUs of flavor h100)

    and the WorkloadPriorityClass {prefix}-urgent (value 100000), all in v1beta2 as Kueue documents them.
    """
    def quota(gpus: int) -> list[dict[str, Any]]:
        return [{"coveredResources": ["cpu", GPU], "flavors": [{"name": "h100", "resources": [
            {"name": "cpu", "nominalQuota": "100"}, {"name": GPU, "nominalQuota": str(gpus)}]}]}]
    v1beta2 = f"{c.GROUP}/{c.VERSION_V1BETA2}"
    docs: list[dict[str, Any]] = [
        {"apiVersion": v1beta2, "kind": "WorkloadPriorityClass", "metadata": {"name": f"{prefix}-urgent"},
         "value": 100000, "description": "jumps the queue"},
        {"apiVersion": v1beta2, "kind": "Cohort", "metadata": {"name": f"{prefix}-org"},
         "spec": {"resourceGroups": quota(8)}},
    ]
    for side in ("left", "right"):
        docs.append({"apiVersion": v1beta2, "kind": "Cohort", "metadata": {"name": f"{prefix}-{side}"},
                     "spec": {"parentName": f"{prefix}-org"}})
        docs.append({"apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": f"{prefix}-cq-{side}"},
                     "spec": {"cohortName": f"{prefix}-{side}", "namespaceSelector": {}, "resourceGroups": quota(8)}})
    return "---\n".join(json.dumps(doc) + "\n" for doc in docs)


def test_a_job_borrows_across_a_two_level_cohort_tree_with_its_labelled_priority(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    """16 GPUs in a queue of 8: 8 come from the root cohort's own quota or the cousin queue. The Job's
    kueue.x-k8s.io/priority-class label gives its Workload the class's value and reference."""
    kubectl("apply", "-f", "-", stdin=tree_setup("tree"))
    kubectl("apply", "-f", "-", stdin=local_queue_of(namespace, "tree-cq-left", name="lq-left"))
    built = (make_job("borrower", namespace).queue("lq-left").parallelism(2).requests({"cpu": "1", GPU: "8"})
             .limits({GPU: "8"}).run_seconds(600).suspended().label(c.LABEL_PRIORITY_CLASS, "tree-urgent"))
    kubectl("apply", "-f", "-", stdin=json.dumps(built.obj()))
    wl = wait_for(lambda: (w := workload_of(kubectl, namespace, "borrower")) and condition(w, "Admitted") and w,
                  60, "borrower admitted")
    assert wl["status"]["admission"]["clusterQueue"] == "tree-cq-left"
    assert (wl["spec"]["priority"], wl["spec"]["priorityClassRef"]) == (
        100000, {"group": c.GROUP, "kind": c.KIND_WORKLOAD_PRIORITY_CLASS, "name": "tree-urgent"})

    def borrowed() -> str | None:
        status = get(kubectl, "clusterqueue", "tree-cq-left").get("status") or {}
        for flavor in status.get("flavorsUsage") or []:
            for res in flavor["resources"]:
                if res["name"] == GPU and res.get("total") == "16":
                    return str(res.get("borrowed"))
        return None
    assert wait_for(borrowed, what="tree-cq-left's usage written") == "8"
    org = wait_for(lambda: condition(get(kubectl, "cohort", "tree-org"), "Active"), what="tree-org's status")
    assert (org["status"], org["reason"]) == ("True", "Ready")
    kubectl("delete", "job", "borrower", "-n", namespace)
    wait_for(lambda: workload_of(kubectl, namespace, "borrower") is None, what="Workload deleted")


def test_a_cycle_of_cohorts_makes_its_queue_inactive_and_is_reported_on_both(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    v1beta2 = f"{c.GROUP}/{c.VERSION_V1BETA2}"
    loop = [{"apiVersion": v1beta2, "kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent}}
            for name, parent in (("loop-a", "loop-b"), ("loop-b", "loop-a"))]
    queue = {"apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": "loop-cq"},
             "spec": {"cohortName": "loop-a", "namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": ["cpu", GPU], "flavors": [{"name": "h100", "resources": [
                     {"name": "cpu", "nominalQuota": "10"}, {"name": GPU, "nominalQuota": "8"}]}]}]}}
    kubectl("apply", "-f", "-", stdin="---\n".join(json.dumps(doc) + "\n" for doc in [*loop, queue]))
    kubectl("apply", "-f", "-", stdin=local_queue_of(namespace, "loop-cq", name="lq-loop"))
    built = (make_job("looped", namespace).queue("lq-loop").requests({"cpu": "1", GPU: "1"}).limits({GPU: "1"})
             .suspended())
    kubectl("apply", "-f", "-", stdin=json.dumps(built.obj()))
    active = wait_for(lambda: condition(get(kubectl, "clusterqueue", "loop-cq"), "Active"), what="loop-cq's status")
    assert (active["status"], active["reason"]) == ("False", c.REASON_COHORT_HAS_CYCLE)
    assert "loop-a -> loop-b -> loop-a" in active["message"]
    cohort = wait_for(lambda: condition(get(kubectl, "cohort", "loop-b"), "Active"), what="loop-b's status")
    assert (cohort["status"], cohort["reason"]) == ("False", c.REASON_COHORT_HAS_CYCLE)
    reserved = wait_for(lambda: condition(workload_of(kubectl, namespace, "looped"), "QuotaReserved"),
                        what="looped's pending reason")
    assert reserved["status"] == "False" and "cycle of cohorts" in reserved["message"]
    # Breaking the cycle lets the queue admit.
    kubectl("apply", "-f", "-", stdin=json.dumps({**loop[1], "spec": {}}))
    wait_for(lambda: condition(workload_of(kubectl, namespace, "looped"), "Admitted"), 60, "looped admitted")


def test_a_job_labelled_with_a_missing_workload_priority_class_gets_no_workload_and_an_event(
        operator: RunningOperator, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace))
    built = (make_job("nowpc", namespace).queue("lq").requests({"cpu": "1"}).suspended()
             .label(c.LABEL_PRIORITY_CLASS, "no-such-class"))
    kubectl("apply", "-f", "-", stdin=json.dumps(built.obj()))
    event = wait_for(lambda: next((e for e in get(kubectl, "events", "-n", namespace)["items"]
                                   if e["reason"] == c.EVENT_REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND), None),
                     what="event")
    assert event["message"].startswith('WorkloadPriorityClass "no-such-class" not found')
    assert event["involvedObject"]["name"] == "nowpc"
    assert workload_of(kubectl, namespace, "nowpc") is None
