"""The control plane itself: the server version kubectl reports and the sample nodes of `tasq dev`
(2 blocks x 4 racks x 4 nodes x 8 GPUs, named gpu-b1-r1-n1...), Ready, with their topology labels and allocatable."""

from __future__ import annotations

import json

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
