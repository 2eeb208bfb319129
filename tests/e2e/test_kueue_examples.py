"""Kueue's current documentation examples (v1beta2, unmodified, tests/data/kueue-examples/) applied
with the real kubectl to either control plane running `tasq run --local-webhooks`: they admit and
their pods land as Kueue's guides say. The same inputs through `tasq simulate` are in
tests/integration/test_simulate_kueue_examples.py.

Nodes: the guide's kind cluster (tas/kind-cluster.yaml), 8 workers of 8 CPUs of which kind's own
pods take 100m, so 7 one-CPU pods each, 56 in all, labelled node-group tas-group:

    b1: r1 [kind-worker  kind-worker2]   r2 [kind-worker3 kind-worker4]
    b2: r1 [kind-worker5 kind-worker6]   r2 [kind-worker7 kind-worker8]

beside the 32 sample GPU nodes the real control plane starts with (the devcluster gets them too),
which no example flavor selects.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from devcluster.simulated.nodes import parse_shape, topology_nodes
from tests.builders.kueue_examples import EXAMPLES, kind_workers
from tests.e2e.conftest import Kubectl, install_operator_cluster, wait_for
from tests.e2e.test_operator_clusters import PodWatch, Process, condition, get

pytestmark = pytest.mark.e2e

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
NAMESPACE = "default"  # the examples' LocalQueues are in it and their Jobs name no other
WORKERS = kind_workers()
PODS_PER_WORKER = 7


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """tasq's CRDs, the guide's kind workers (and on the devcluster the real control plane's sample
    nodes), then the TAS guide's queues, applied unmodified."""
    nodes = WORKERS + ([] if cluster == "real" else topology_nodes(parse_shape("2x4x4x8"), "gpu-"))
    close = install_operator_cluster(request, cluster, kubectl, nodes,
                                     (EXAMPLES / "tas" / "sample-queues.yaml").read_text())
    if cluster == "real":  # the ServiceAccount admission plugin refuses pods until the controller made it
        wait_for(lambda: kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
                 30, "the default ServiceAccount")
    yield
    close()


def create_example(kubectl: Kubectl, path: str) -> str:
    """`kubectl create -f` of an example Job (they use generateName): the Job's name."""
    created = json.loads(kubectl("create", "-f", str(EXAMPLES / path), "-o", "json").stdout)
    assert created["spec"]["suspend"] is True, "the Job webhook did not suspend the Job"
    return str(created["metadata"]["name"])


def workload_of(kubectl: Kubectl, name: str, kind: str = "Job") -> dict[str, Any] | None:
    """The Workload of the Job (or the JobSet, with `kind`) `name` in NAMESPACE (test_jobset.py's too)."""
    for wl in get(kubectl, "workloads", "-n", NAMESPACE)["items"]:
        if any(ref["kind"] == kind and ref["name"] == name for ref in wl["metadata"].get("ownerReferences", [])):
            return dict(wl)
    return None


def admitted(kubectl: Kubectl, name: str, kind: str = "Job") -> dict[str, Any] | None:
    wl = workload_of(kubectl, name, kind)
    cond = condition(wl, "Admitted")
    return wl if cond and cond["status"] == "True" else None


def bound_pods(kubectl: Kubectl, name: str, count: int, label: str = c.LABEL_JOB_NAME) -> list[dict[str, Any]] | None:
    """The pods labelled `label`=`name` (the Job's, or a JobSet's with its label) once there are
    `count` of them, each bound to a node and running."""
    pods: list[dict[str, Any]] = get(kubectl, "pods", "-n", NAMESPACE, "-l", f"{label}={name}")["items"]
    if len(pods) == count and all(p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"
                                  for p in pods):
        return pods
    return None


def pod_states(kubectl: Kubectl) -> str:
    """One line per pod of the namespace: name, phase, node, gates; for a failure message."""
    return "\n".join(f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')} {p['spec'].get('nodeName')} "
                     f"{[g['name'] for g in p['spec'].get('schedulingGates') or []]} {p['metadata'].get('labels')}"
                     for p in get(kubectl, "pods", "-n", NAMESPACE)["items"])


def node_labels(kubectl: Kubectl) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}


def cpu_used(kubectl: Kubectl, cluster_queue: str) -> str:
    for flavor in (get(kubectl, "clusterqueue", cluster_queue).get("status") or {}).get("flavorsUsage") or []:
        for res in flavor["resources"]:
            if res["name"] == "cpu":
                return str(res["total"])
    return "missing"


def test_tas_guide_required_preferred_required_again_unconstrained(
        tasq: Process, kubectl: Kubectl, tmp_path: Path) -> None:
    # Kueue's "Setup Topology Aware Scheduling" guide, step by step: a Job required in one rack; a
    # Job preferring a block, spread over what is left; the required Job again, which waits though
    # quota allows it (no rack has 10 CPUs free); an unconstrained Job that fills the last gaps.
    labels = node_labels(kubectl)
    workers = {n["metadata"]["name"] for n in WORKERS}
    watch = PodWatch(kubectl, NAMESPACE, tmp_path / "watch.json")
    try:
        required = create_example(kubectl, "tas/sample-job-required.yaml")
        wait_for(lambda: admitted(kubectl, required), 60, "the required Job admitted")
        pods = wait_for(lambda: bound_pods(kubectl, required, 10), 60, "the required Job's 10 pods running",
                         logs=lambda: pod_states(kubectl))
        racks = {(labels[p["spec"]["nodeName"]][BLOCK], labels[p["spec"]["nodeName"]][RACK]) for p in pods}
        assert len(racks) == 1, racks
        # the guide's figures: 7 pods on kind-worker and 3 on kind-worker2
        assert Counter(p["spec"]["nodeName"] for p in pods) == {"kind-worker": 7, "kind-worker2": 3}
        for pod in pods:  # the ungater's node selector names the assigned node, inside the rack
            assert not pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
            assert pod["spec"]["nodeSelector"][c.LABEL_HOSTNAME] == pod["spec"]["nodeName"]

        preferred = create_example(kubectl, "tas/sample-job-preferred.yaml")
        wait_for(lambda: admitted(kubectl, preferred), 60, "the preferred Job admitted")
        pods += wait_for(lambda: bound_pods(kubectl, preferred, 40), 90, "the preferred Job's 40 pods running",
                         logs=lambda: pod_states(kubectl))

        again = create_example(kubectl, "tas/sample-job-required.yaml")
        waiting = wait_for(lambda: (cond := condition(workload_of(kubectl, again), "QuotaReserved"))
                           and cond["status"] == "False" and cond, 60, "the second required Job waiting")
        assert get(kubectl, "job", again, "-n", NAMESPACE)["spec"]["suspend"] is True
        assert wait_for(lambda: cpu_used(kubectl, "tas-cluster-queue") == "50", 30, "50 CPUs used")

        unconstrained = create_example(kubectl, "tas/sample-job-unconstrained.yaml")
        wait_for(lambda: admitted(kubectl, unconstrained), 60, "the unconstrained Job admitted")
        pods += wait_for(lambda: bound_pods(kubectl, unconstrained, 6), 60, "the unconstrained Job's 6 pods running",
                         logs=lambda: pod_states(kubectl))
        first = watch.stop(56)
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    finally:
        watch.close()
    # As the guide shows: the waiting Job fits 4 of its 10 pods in the best rack, and the three
    # admitted Jobs together fill every worker.
    assert 'topology "default" allows to fit only 4 out of 10 pod(s)' in waiting["message"], waiting
    assert Counter(p["spec"]["nodeName"] for p in pods) == {w: PODS_PER_WORKER for w in workers}
    assert get(kubectl, "pods", "-n", NAMESPACE, "-l", f"{c.LABEL_JOB_NAME}={again}")["items"] == []
    for name, pod in first.items():  # every pod was stored gated, before any node was chosen
        assert c.SCHEDULING_GATE_TOPOLOGY in [g["name"] for g in pod["spec"].get("schedulingGates") or []], name


def test_single_clusterqueue_setup_admits_the_sample_job(tasq: Process, kubectl: Kubectl) -> None:
    # The administrator's single-ClusterQueue setup (a flavor with no labels: quota only) and the
    # sample Job of 3 one-CPU pods.
    kubectl("apply", "-f", str(EXAMPLES / "admin" / "single-clusterqueue-setup.yaml"))
    job = create_example(kubectl, "jobs/sample-job.yaml")
    try:
        wl = wait_for(lambda: admitted(kubectl, job), 60, "the sample Job admitted")
        wait_for(lambda: bound_pods(kubectl, job, 3), 60, "the sample Job's 3 pods running",
                         logs=lambda: pod_states(kubectl))
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- tasq run:\n{tasq.tail()}") from None
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert wl["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert psa["flavors"] == {"cpu": "default-flavor", "memory": "default-flavor"}
    assert "topologyAssignment" not in psa
    assert wait_for(lambda: cpu_used(kubectl, "cluster-queue") == "3", 30, "3 CPUs used")
