"""The control plane itself: the server version kubectl reports and the sample nodes of `tasq dev`
(2 blocks x 4 racks x 4 nodes x 8 GPUs, named gpu-b1-r1-n1...), Ready, with their topology labels and allocatable;
and what kubectl asks of it besides the resources (the OpenAPI v2 document a `kind: List` is checked against)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import Kubectl


def test_kubectl_version_reports_a_v1_37_server(kubectl: Kubectl) -> None:
    version = json.loads(kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.37.")
    assert (version["serverVersion"]["major"], version["serverVersion"]["minor"]) == ("1", "37")


def test_get_nodes_lists_the_sample_nodes_ready_with_topology_labels_and_gpus(kubectl: Kubectl) -> None:
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    names = sorted(n["metadata"]["name"] for n in nodes)
    assert names == sorted(f"gpu-b{b}-r{r}-n{n}" for b in (1, 2) for r in (1, 2, 3, 4) for n in (1, 2, 3, 4))
    node = next(n for n in nodes if n["metadata"]["name"] == "gpu-b2-r3-n4")
    labels = node["metadata"]["labels"]
    assert (labels["cloud.provider.com/topology-block"], labels["cloud.provider.com/topology-rack"],
            labels["kubernetes.io/hostname"]) == ("b2", "b2-r3", "gpu-b2-r3-n4")
    assert node["status"]["allocatable"] == {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    table = kubectl("get", "nodes", "--no-headers").stdout.splitlines()
    assert len(table) == 32 and all(line.split()[1] == "Ready" for line in table)


def test_kubectl_creates_a_list_of_nodes(kubectl: Kubectl, tmp_path: Path) -> None:
    """kubectl checks a `kind: List` against the OpenAPI v2 document before creating its items."""
    names = ["list-node-a", "list-node-b"]
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"tasq.io/test": "list"}},
              "spec": {"unschedulable": True, "taints": [{"key": "tasq.io/test", "effect": "NoSchedule"}]}}
             for n in names]
    manifest = tmp_path / "nodes.yaml"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    try:
        created = kubectl("create", "-f", str(manifest), check=False)
        assert created.returncode == 0, created.stderr
        assert created.stdout.splitlines() == [f"node/{n} created" for n in names]
        listed = json.loads(kubectl("get", "nodes", "-l", "tasq.io/test=list", "-o", "json").stdout)["items"]
        assert sorted(n["metadata"]["name"] for n in listed) == names
    finally:
        kubectl("delete", "nodes", *names, "--ignore-not-found", "--wait=false")
