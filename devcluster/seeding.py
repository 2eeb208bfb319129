"""Sample content for a fresh devcluster: GPU nodes with topology labels, and CRDs from YAML files.

Used by `tasq dev` (and later `tasq demo`) right after the server starts; goes through the
in-process API, so objects are validated and watched like any client's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from devcluster.apiserver import ApiServer
from devcluster.errors import ApiError

LABEL_BLOCK = "cloud.provider.com/topology-block"
LABEL_RACK = "cloud.provider.com/topology-rack"
LABEL_HOSTNAME = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"


def gpu_node(name: str, block: str, rack: str, gpus: int = 8) -> dict[str, Any]:
    """A Ready node with `gpus` GPUs, 96 CPUs, 1 TiB memory, 110 pods, labelled with its block/rack/host."""
    resources = {"cpu": "96", "memory": "1Ti", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {LABEL_BLOCK: block, LABEL_RACK: rack, LABEL_HOSTNAME: name,
                                              "kubernetes.io/os": "linux", "node-role.kubernetes.io/gpu": ""}},
        "spec": {},
        "status": {
            "capacity": dict(resources), "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "devcluster", "kernelVersion": "6.0",
                         "containerRuntimeVersion": "simulated://1.0"},
        },
    }


def sample_gpu_nodes(blocks: int = 1, racks_per_block: int = 2, nodes_per_rack: int = 2) -> list[dict[str, Any]]:
    """blocks x racks x nodes GPU nodes named `gpu-b1-r1-n1`...; rack names are unique cluster-wide."""
    nodes = []
    for b in range(1, blocks + 1):
        for r in range(1, racks_per_block + 1):
            rack = f"b{b}-r{r}"
            for n in range(1, nodes_per_rack + 1):
                nodes.append(gpu_node(f"gpu-{rack}-n{n}", f"b{b}", rack))
    return nodes


async def create_nodes(api: ApiServer, nodes: list[dict[str, Any]]) -> int:
    r = api.resource("v1", "nodes")
    for node in nodes:
        await api.create(r, "", node, copy=False)
    return len(nodes)


async def apply_crds(api: ApiServer, directory: Path) -> list[str]:
    """Create (or replace) every CustomResourceDefinition found in directory/*.yaml; returns their names."""
    r = api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions")
    names = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            try:
                await api.create(r, "", doc, copy=False)
            except ApiError as e:
                if e.code != 409:
                    raise
                current = await api.get(r, "", doc["metadata"]["name"])
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await api.update(r, "", doc["metadata"]["name"], doc, copy=False)
            names.append(str(doc["metadata"]["name"]))
    return names
