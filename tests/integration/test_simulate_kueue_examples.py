"""Kueue's current documentation examples (v1beta2, unmodified, tests/data/kueue-examples/) through
`tasq simulate`: the steps of Kueue's TAS guide on its kind cluster's nodes admit and place as the
guide shows, as they do on both clusters in tests/e2e/test_kueue_examples.py.

Nodes (tas/kind-cluster.yaml's workers, 7 one-CPU pod slots each):

    b1: r1 [kind-worker  kind-worker2]   r2 [kind-worker3 kind-worker4]
    b2: r1 [kind-worker5 kind-worker6]   r2 [kind-worker7 kind-worker8]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from controller.cli import main
from tests.builders.kueue_examples import EXAMPLES, assigned_domains, kind_workers

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
REQUIRED, PREFERRED = "tas/sample-job-required.yaml", "tas/sample-job-preferred.yaml"
UNCONSTRAINED = "tas/sample-job-unconstrained.yaml"
NODES = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kind_workers()}


@pytest.fixture
def nodes_file(tmp_path: Path) -> Path:
    path = tmp_path / "kind-workers.yaml"
    path.write_text(yaml.safe_dump_all(kind_workers()))
    return path


def simulate(capsys: pytest.CaptureFixture[str], *steps: str | Path) -> list[dict[str, Any]]:
    """The Workloads of `tasq simulate -o json`, each step one -f, in the order their Jobs were given."""
    code = main(["simulate", *(a for s in steps for a in ("-f", str(s if isinstance(s, Path) else EXAMPLES / s))),
                 "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return sorted(items, key=lambda w: w["metadata"]["creationTimestamp"])


def condition(wl: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((cd for cd in wl.get("status", {}).get("conditions", []) if cd["type"] == type_), None)


def pods_per_node(wl: dict[str, Any]) -> Counter[str]:
    """Pods per kind worker of an admitted Workload's one pod set, its domains read as Kueue encodes them."""
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    placed: Counter[str] = Counter()
    for values, count in assigned_domains(psa["topologyAssignment"]):
        hosts = [name for name, labels in NODES.items() if all(labels.get(k) == v for k, v in values.items())]
        assert len(hosts) == 1, f"the domain {values} is not one node"
        placed[hosts[0]] += count
    return placed


def racks(placed: Counter[str]) -> set[tuple[str, str]]:
    return {(NODES[n][BLOCK], NODES[n][RACK]) for n in placed}


def test_the_examples_are_kueues_v1beta2_manifests() -> None:
    docs = [d for p in EXAMPLES.rglob("*.yaml") for d in yaml.safe_load_all(p.read_text()) if d]
    versions = {d["apiVersion"] for d in docs if d["apiVersion"].startswith(c.GROUP)}
    assert versions == {f"{c.GROUP}/v1beta2"}


def test_tas_guide_the_second_required_job_waits_as_the_guide_says(
        capsys: pytest.CaptureFixture[str], nodes_file: Path) -> None:
    first, preferred, again = simulate(capsys, nodes_file, "tas/sample-queues.yaml", REQUIRED, PREFERRED, REQUIRED)
    assert all(condition(w, "Admitted") for w in (first, preferred))
    waiting = condition(again, "QuotaReserved")
    assert waiting is not None and waiting["status"] == "False"
    # the guide's figure: the best rack left holds 4 of its 10 pods, though the quota allows it
    assert 'topology "default" allows to fit only 4 out of 10 pod(s)' in waiting["message"], waiting
    assert "admission" not in again["status"]


def test_tas_guide_required_in_one_rack_then_preferred_and_unconstrained_fill_every_worker(
        capsys: pytest.CaptureFixture[str], nodes_file: Path) -> None:
    first, preferred, again, unconstrained = simulate(
        capsys, nodes_file, "tas/sample-queues.yaml", REQUIRED, PREFERRED, REQUIRED, UNCONSTRAINED)
    placed = {name: pods_per_node(w) for name, w in (("first", first), ("preferred", preferred),
                                                      ("unconstrained", unconstrained))}
    # the guide's figures: 7 pods on kind-worker and 3 on kind-worker2, one rack
    assert placed["first"] == {"kind-worker": 7, "kind-worker2": 3} and len(racks(placed["first"])) == 1
    assert sum(placed["preferred"].values()) == 40 and sum(placed["unconstrained"].values()) == 6
    assert sum(placed.values(), Counter()) == {name: 7 for name in NODES}
    assert condition(again, "Admitted") is None


def test_tas_guide_gpu_queues_tolerate_the_tainted_gpu_nodes(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    # sample-gpu-queues.yaml: the flavor tolerates the nvidia.com/gpu taint the GPU nodes carry
    nodes = kind_workers({"cpu": "7900m", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "2"})
    for node in nodes:
        node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    path = tmp_path / "gpu-workers.yaml"
    path.write_text(yaml.safe_dump_all(nodes))
    (wl,) = simulate(capsys, path, "tas/sample-gpu-queues.yaml", REQUIRED)
    assert condition(wl, "Admitted") is not None
    assert len(racks(pods_per_node(wl))) == 1


@pytest.mark.parametrize("setup, job, queue, pods", [
    ("admin/single-clusterqueue-setup.yaml", "jobs/sample-job.yaml", "cluster-queue", 3),
    ("getting-started/quick-start-setup.yaml", "getting-started/quick-start-job.yaml", "cluster-queue", 3),
])
def test_basic_setup_admits_its_sample_job_without_nodes(capsys: pytest.CaptureFixture[str], setup: str, job: str,
                                                         queue: str, pods: int) -> None:
    (wl,) = simulate(capsys, setup, job)
    assert condition(wl, "Admitted") is not None
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert wl["status"]["admission"]["clusterQueue"] == queue
    assert psa["count"] == pods and psa["flavors"] == {"cpu": "default-flavor", "memory": "default-flavor"}


USER_QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: tas-cluster-queue}
"""
"""The LocalQueue Kueue's JobSet examples name, on the TAS guide's ClusterQueue."""


@pytest.mark.parametrize("example, pods, domain", [
    ("jobs/sample-jobset-tas-required.yaml", 4, RACK),
    ("jobs/sample-jobset-tas-combined.yaml", 8, BLOCK),
], ids=["required_rack", "block_in_rack_slices_of_4"])
def test_kueues_jobset_examples_are_admitted_into_one_domain(capsys: pytest.CaptureFixture[str], nodes_file: Path,
                                                             tmp_path: Path, example: str, pods: int,
                                                             domain: str) -> None:
    queue = tmp_path / "user-queue.yaml"
    queue.write_text(USER_QUEUE)
    (wl,) = simulate(capsys, nodes_file, "tas/sample-queues.yaml", queue, example)
    assert wl["metadata"]["name"].startswith("jobset-jobset-tas-")
    assert [ref["kind"] for ref in wl["metadata"]["ownerReferences"]] == ["JobSet"]
    assert condition(wl, "Admitted") is not None
    placed = pods_per_node(wl)
    assert sum(placed.values()) == pods
    level = 0 if domain == BLOCK else 1
    assert len({r[: level + 1] for r in racks(placed)}) == 1, placed
    if domain == BLOCK:  # slices of 4 pods, each in one rack
        per_rack = Counter(NODES[n][RACK] + NODES[n][BLOCK] for n in placed.elements())
        assert all(n % 4 == 0 for n in per_rack.values()), per_rack
