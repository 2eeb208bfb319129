"""Plain pod groups through kubectl on either control plane running `tasq run --local-webhooks`:
pods labelled with a queue and a group (Kueue's labels, or the coscheduling plugin's) are stored
behind the admission gate, wait while their group is incomplete, once admitted are released
together into the domain their Workload was given, and finish it when they all succeed (Kueue's
pod finalizer then comes off); a pod disagreeing with its group is refused; a pod beyond its
group's count is deleted with an Event; a deactivated group's pods are deleted and its quota freed.

Nodes: Kueue's TAS guide kind cluster (8 workers of 8 CPUs, 7 one-CPU pods each) and its queues
(tas-cluster-queue, LocalQueue tas-user-queue in `default`):

    b1: r1 [kind-worker  kind-worker2]   r2 [kind-worker3 kind-worker4]
    b2: r1 [kind-worker5 kind-worker6]   r2 [kind-worker7 kind-worker8]
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from devcluster.simulated.nodes import parse_shape, topology_nodes
from tests.builders.kueue_examples import EXAMPLES, kind_workers
from tests.e2e.conftest import Kubectl, install_operator_cluster, wait_for
from tests.e2e.test_operator_clusters import PodWatch, Process, condition, get, leading_tasq

pytestmark = pytest.mark.e2e

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
NAMESPACE = "default"
QUEUE = "tas-user-queue"


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    nodes = kind_workers() + ([] if cluster == "real" else topology_nodes(parse_shape("2x4x4x8"), "gpu-"))
    close = install_operator_cluster(request, cluster, kubectl, nodes,
                                     (EXAMPLES / "tas" / "sample-queues.yaml").read_text())
    if cluster == "real":  # the ServiceAccount admission plugin refuses pods until the controller made it
        wait_for(lambda: kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
                 30, "the default ServiceAccount")
    yield
    close()


@pytest.fixture(scope="module")
def tasq(installed: None, kubeconfig: Path, kubectl: Kubectl,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    with leading_tasq(kubeconfig, kubectl, tmp_path_factory.mktemp("tasq")) as proc:
        yield proc
        # while tasq still runs: it lets the pods' finalizers go as they are deleted
        kubectl("delete", "pods", "-n", NAMESPACE, "-l", f"{c.LABEL_MANAGED}=true", "--wait=true", "--timeout=60s")


def group_pods(prefix: str, count: int, labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """`count` one-CPU pause pods named prefix-0.., with the queue label and the given group metadata."""
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{prefix}-{i}", "namespace": NAMESPACE,
                          "labels": {c.LABEL_QUEUE_NAME: QUEUE, **labels}, "annotations": dict(annotations)},
             "spec": {"restartPolicy": "Never", "containers": [{
                 "name": "main", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53", "args": ["pause"],
                 "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}
            for i in range(count)]
    return yaml.safe_dump_all(pods)


def pods_named(kubectl: Kubectl, prefix: str) -> list[dict[str, Any]]:
    return [p for p in get(kubectl, "pods", "-n", NAMESPACE)["items"] if p["metadata"]["name"].startswith(f"{prefix}-")]


def running(kubectl: Kubectl, prefix: str, count: int) -> list[dict[str, Any]] | None:
    pods = pods_named(kubectl, prefix)
    bound = [p for p in pods if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"]
    return bound if len(bound) == count else None


def workload(kubectl: Kubectl, name: str) -> dict[str, Any] | None:
    proc = kubectl("get", "workload", name, "-n", NAMESPACE, "-o", "json", check=False)
    return yaml.safe_load(proc.stdout) if proc.returncode == 0 else None


def admitted(kubectl: Kubectl, name: str) -> dict[str, Any] | None:
    wl = workload(kubectl, name)
    cond = condition(wl, "Admitted")
    return wl if cond and cond["status"] == "True" else None


def states(kubectl: Kubectl) -> str:
    return "\n".join(f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')} {p['spec'].get('nodeName')} "
                     f"{[g['name'] for g in p['spec'].get('schedulingGates') or []]}"
                     for p in get(kubectl, "pods", "-n", NAMESPACE)["items"])


def racks_of(kubectl: Kubectl, pods: list[dict[str, Any]]) -> set[tuple[str, str]]:
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}
    return {(labels[p["spec"]["nodeName"]][BLOCK], labels[p["spec"]["nodeName"]][RACK]) for p in pods}


def test_a_group_of_8_with_a_required_rack_is_admitted_whole_and_ungated_into_one_rack(
        tasq: Process, kubectl: Kubectl, tmp_path: Path) -> None:
    watch = PodWatch(kubectl, NAMESPACE, tmp_path / "watch.json")
    try:
        kubectl("apply", "-f", "-", stdin=group_pods(
            "train", 8, {c.LABEL_POD_GROUP_NAME: "train"},
            {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "8", c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK}))
        wl = wait_for(lambda: admitted(kubectl, "train"), 60, "the group's Workload admitted",
                      logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
        pods = wait_for(lambda: running(kubectl, "train", 8), 90, "the 8 pods running",
                        logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
        first = watch.stop(8)
    finally:
        watch.close()
    assert len(racks_of(kubectl, pods)) == 1, racks_of(kubectl, pods)
    (pod_set,) = wl["spec"]["podSets"]
    assert pod_set["count"] == 8 and pod_set["topologyRequest"] == {"required": RACK}
    assert {ref["name"] for ref in wl["metadata"]["ownerReferences"]} == {f"train-{i}" for i in range(8)}
    for pod in pods:  # released by tasq: no gate left, placed on the node the ungater chose
        assert not pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
        assert pod["spec"]["nodeSelector"][c.LABEL_HOSTNAME] == pod["spec"]["nodeName"]
        assert pod["metadata"]["labels"][c.LABEL_MANAGED] == "true"
    for name, stored in first.items():  # every pod was stored behind both gates
        gates = {g["name"] for g in stored["spec"].get("schedulingGates") or []}
        assert gates == {c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY}, name


def test_a_group_with_one_pod_missing_waits_with_none_running_then_runs_when_it_comes(
        tasq: Process, kubectl: Kubectl) -> None:
    meta = ({c.LABEL_POD_GROUP_NAME: "partial"}, {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "4"})
    three = yaml.safe_load_all(group_pods("partial", 4, *meta))
    *first_three, last = list(three)
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(first_three))
    wait_for(lambda: len(pods_named(kubectl, "partial")) == 3, 30, "three pods stored")
    time.sleep(3)  # tasq has seen them (its reconcile takes milliseconds): still nothing may run
    assert workload(kubectl, "partial") is None
    for pod in pods_named(kubectl, "partial"):
        assert not pod["spec"].get("nodeName"), pod["metadata"]["name"]
        assert c.SCHEDULING_GATE_ADMISSION in {g["name"] for g in pod["spec"]["schedulingGates"]}
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(last))
    wait_for(lambda: admitted(kubectl, "partial"), 60, "the completed group admitted",
             logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
    wait_for(lambda: running(kubectl, "partial", 4), 90, "the 4 pods running",
             logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")


def queue_of_cpus(name: str, cpus: int, **spec: Any) -> str:
    """A ClusterQueue of `cpus` CPUs on the TAS flavor and its LocalQueue `name` in the namespace."""
    return yaml.safe_dump_all([
        {"apiVersion": c.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name},
         "spec": {"namespaceSelector": {}, **spec,
                  "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "tas-flavor",
                                      "resources": [{"name": "cpu", "nominalQuota": cpus},
                                                    {"name": "memory", "nominalQuota": "10Gi"}]}]}]}},
        {"apiVersion": c.API_VERSION, "kind": "LocalQueue", "metadata": {"name": name, "namespace": NAMESPACE},
         "spec": {"clusterQueue": name}}])


def test_a_coscheduling_labelled_group_with_min_available_4_of_6_runs_4_where_only_4_fit(
        tasq: Process, kubectl: Kubectl) -> None:
    # quota for 4 one-CPU pods: partial admission (on by default) admits the group's minimum; the
    # oldest 4 pods run, the other 2 stay behind the admission gate
    kubectl("apply", "-f", "-", stdin=queue_of_cpus("pg-gang", 4))
    pods = list(yaml.safe_load_all(group_pods(
        "gang", 6, {c.LABEL_COSCHEDULING_NAME: "gang", c.LABEL_COSCHEDULING_MIN_AVAILABLE: "4"},
        {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "6"})))
    for pod in pods:
        pod["metadata"]["labels"][c.LABEL_QUEUE_NAME] = "pg-gang"
    wait_for(lambda: kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(pods), check=False).returncode == 0, 30,
             "the group created (the LocalQueue known)")
    wl = wait_for(lambda: admitted(kubectl, "gang"), 60, "the coscheduling group admitted",
                  logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
    (pod_set,) = wl["spec"]["podSets"]
    assert (pod_set["count"], pod_set["minCount"]) == (6, 4)
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 4
    wait_for(lambda: running(kubectl, "gang", 4), 90, "4 of the 6 pods running",
             logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
    time.sleep(2)  # the admission covers 4 pods: no fifth one may start
    assert running(kubectl, "gang", 4)
    gated = [p for p in pods_named(kubectl, "gang") if not p["spec"].get("nodeName")]
    assert len(gated) == 2
    assert all(c.SCHEDULING_GATE_ADMISSION in {g["name"] for g in p["spec"]["schedulingGates"]} for p in gated)


def test_a_pod_disagreeing_with_its_group_is_refused_naming_the_pod_the_field_and_the_conflict(
        tasq: Process, kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", stdin=group_pods("mixed", 1, {c.LABEL_POD_GROUP_NAME: "mixed"},
                                                  {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "2"}))
    time.sleep(2)  # the webhook checks against tasq's cache, which the watch fills within milliseconds
    second = list(yaml.safe_load_all(group_pods("mixed", 2, {c.LABEL_POD_GROUP_NAME: "mixed"},
                                                {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "3"})))[1]
    proc = kubectl("create", "-f", "-", stdin=yaml.safe_dump(second), check=False)
    assert proc.returncode != 0, proc.stdout
    assert (f'"mixed-1" is invalid: metadata.annotations[{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}]: pod mixed-1: '
            "3 differs from 2 of pod mixed-0 in the same group") in proc.stderr, proc.stderr
    assert [p["metadata"]["name"] for p in pods_named(kubectl, "mixed")] == ["mixed-0"]
    lonely = yaml.safe_load(group_pods("lonely", 1, {c.LABEL_POD_GROUP_NAME: "lonely"}, {}))
    proc = kubectl("create", "-f", "-", stdin=yaml.safe_dump(lonely), check=False)
    assert proc.returncode != 0
    assert f"metadata.annotations[{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}]: Required value" in proc.stderr, proc.stderr


def test_a_group_whose_pods_all_succeed_finishes_its_workload(tasq: Process, kubectl: Kubectl) -> None:
    # each pod exits 0 two seconds after it starts (the devcluster's kubelet and kwok both read the annotation)
    kubectl("apply", "-f", "-", stdin=group_pods(
        "done", 3, {c.LABEL_POD_GROUP_NAME: "done"},
        {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "3", "devcluster.tasq.io/run-seconds": "2"}))

    def finished() -> dict[str, Any] | None:
        cond = condition(workload(kubectl, "done"), "Finished")
        return cond if cond and cond["status"] == "True" else None
    stored = pods_named(kubectl, "done")  # Kueue's finalizer holds each pod until the Workload records its end
    assert all(c.LABEL_MANAGED in (p["metadata"].get("finalizers") or []) for p in stored), stored
    cond = wait_for(finished, 90, "the group's Workload Finished", logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
    assert (cond["reason"], cond["message"]) == ("Succeeded", "Pods succeeded: 3/3.")
    assert {(p.get("status") or {}).get("phase") for p in pods_named(kubectl, "done")} == {"Succeeded"}
    wait_for(lambda: not any(c.LABEL_MANAGED in (p["metadata"].get("finalizers") or [])
                             for p in pods_named(kubectl, "done")), 30, "the finished pods' finalizers removed",
             logs=lambda: f"{states(kubectl)}\n{tasq.tail()}")
    assert len(pods_named(kubectl, "done")) == 3  # finished pods stay (only their finalizer went)


def test_a_pod_beyond_its_group_s_count_is_deleted_with_an_event(tasq: Process, kubectl: Kubectl) -> None:
    meta = ({c.LABEL_POD_GROUP_NAME: "extra"}, {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "2"})
    kubectl("apply", "-f", "-", stdin=group_pods("extra", 2, *meta))
    logs = lambda: f"{states(kubectl)}\n{tasq.tail()}"  # noqa: E731
    wait_for(lambda: running(kubectl, "extra", 2), 90, "the group of 2 running", logs=logs)
    third = list(yaml.safe_load_all(group_pods("extra", 3, *meta)))[2]
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(third))
    wait_for(lambda: sorted(p["metadata"]["name"] for p in pods_named(kubectl, "extra")) == ["extra-0", "extra-1"],
             60, "the third pod of a group of 2 deleted", logs=logs)
    assert running(kubectl, "extra", 2)  # the started pods stay
    events = [e for e in get(kubectl, "events", "-n", NAMESPACE)["items"] if e.get("reason") == "ExcessPodsDeleted"]
    assert any("extra-2" in e.get("message", "") for e in events), events


def test_a_deactivated_group_has_its_pods_deleted_and_its_quota_freed(tasq: Process, kubectl: Kubectl) -> None:
    # a ClusterQueue of 4 CPUs: a group of 4 runs; deactivated, its pods go and its admission is
    # released, so a second group of 4 is admitted on the same quota
    kubectl("apply", "-f", "-", stdin=queue_of_cpus("pg-off", 4))

    def group(prefix: str) -> str:
        pods = list(yaml.safe_load_all(group_pods(prefix, 4, {c.LABEL_POD_GROUP_NAME: prefix},
                                                  {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "4"})))
        for pod in pods:
            pod["metadata"]["labels"][c.LABEL_QUEUE_NAME] = "pg-off"
        return yaml.safe_dump_all(pods)
    logs = lambda: f"{states(kubectl)}\n{tasq.tail()}"  # noqa: E731
    wait_for(lambda: kubectl("apply", "-f", "-", stdin=group("first"), check=False).returncode == 0, 30,
             "the first group created (the LocalQueue known)")
    wait_for(lambda: running(kubectl, "first", 4), 90, "the first group running", logs=logs)
    kubectl("apply", "-f", "-", stdin=group("second"))
    time.sleep(2)
    assert admitted(kubectl, "second") is None  # no quota left for it
    kubectl("patch", "workload", "first", "-n", NAMESPACE, "--type=merge", "-p", '{"spec": {"active": false}}')
    wait_for(lambda: pods_named(kubectl, "first") == [], 60, "the deactivated group's pods deleted", logs=logs)
    wait_for(lambda: running(kubectl, "second", 4), 90, "the second group running on the freed quota", logs=logs)
    first = workload(kubectl, "first")  # gone with its last owner, or released and inactive
    assert first is None or not (first.get("status") or {}).get("admission"), first


def test_a_preempted_group_has_its_pods_deleted_and_the_preemptor_runs_in_their_place(
        tasq: Process, kubectl: Kubectl) -> None:
    # a ClusterQueue of 4 CPUs that preempts lower priorities: a low group of 4 runs; a high group
    # of 4 evicts it (its pods deleted, pods cannot be suspended) and runs on the freed quota
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pg-low"}, "value": 10},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pg-high"}, "value": 1000}]))
    kubectl("apply", "-f", "-", stdin=queue_of_cpus("pg-evict", 4, preemption={"withinClusterQueue": "LowerPriority"}))

    def group(prefix: str, priority: str) -> str:
        pods = list(yaml.safe_load_all(group_pods(prefix, 4, {c.LABEL_POD_GROUP_NAME: prefix},
                                                  {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "4"})))
        for pod in pods:
            pod["metadata"]["labels"][c.LABEL_QUEUE_NAME] = "pg-evict"
            pod["spec"]["priorityClassName"] = priority
        return yaml.safe_dump_all(pods)
    logs = lambda: f"{states(kubectl)}\n{tasq.tail()}"  # noqa: E731
    wait_for(lambda: kubectl("apply", "-f", "-", stdin=group("low", "pg-low"), check=False).returncode == 0, 30,
             "the low group created (the LocalQueue known)")
    wait_for(lambda: running(kubectl, "low", 4), 90, "the low group running", logs=logs)
    kubectl("apply", "-f", "-", stdin=group("high", "pg-high"))
    wait_for(lambda: running(kubectl, "high", 4), 120, "the high group running in the low group's place", logs=logs)
    assert pods_named(kubectl, "low") == []
    low = workload(kubectl, "low")  # gone with its last owner, or released and waiting again
    assert low is None or not (low.get("status") or {}).get("admission"), low
