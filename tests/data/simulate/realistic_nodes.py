"""Generates a `kubectl get nodes -o yaml`-shaped List of realistic nodes for `tasq simulate` tests.

Well-known and sample topology labels, GPU taints, addresses, capacity vs allocatable (`95500m` cpu,
`257741228Ki` memory), conditions with heartbeat times, nodeInfo; a few NotReady, cordoned or tainted
broken; deterministic for a seed. Tests call `node_list`; `python tests/data/simulate/realistic_nodes.py
1000 > nodes.yaml` writes a file.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import yaml

HEARTBEAT = "2026-01-01T00:00:00Z"
RACKS_PER_BLOCK = 8
NODES_PER_RACK = 16


def _conditions(ready: bool) -> list[dict[str, Any]]:
    def cond(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {"type": type_, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": HEARTBEAT, "lastTransitionTime": "2025-12-01T08:00:00Z"}
    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status") if ready else
        cond("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."),
    ]


def make_node(index: int, rng: random.Random) -> dict[str, Any]:
    """GPU nodes (H100 in the first half of the blocks, A100 after) and, every tenth, a CPU node."""
    name = f"gke-ml-pool-{index:05d}"
    block, rack = divmod(index // NODES_PER_RACK, RACKS_PER_BLOCK)
    gpu = None if index % 10 == 9 else ("h100" if block % 2 == 0 else "a100")
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "a3-highgpu-8g" if gpu else "n2-standard-96",
        "topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-a",
        "cloud.provider.com/topology-block": f"block-{block}", "cloud.provider.com/topology-rack": f"rack-{rack}",
    }
    capacity = {"cpu": "96", "memory": "264243948Ki", "pods": "110", "ephemeral-storage": "507944172Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    allocatable = {"cpu": "95500m", "memory": "257741228Ki", "pods": "110",
                   "ephemeral-storage": "468125348196", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    taints: list[dict[str, str]] = []
    if gpu:
        labels["cloud.provider.com/gpu"] = gpu
        labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3" if gpu == "h100" else "NVIDIA-A100-SXM4-80GB"
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = "8"
        if gpu == "h100":
            taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    roll = rng.random()
    ready = roll >= 0.005
    spec: dict[str, Any] = {"podCIDR": f"10.{index // 256}.{index % 256}.0/24",
                            "providerID": f"gce://ml-project/us-central1-a/{name}"}
    if 0.005 <= roll < 0.01:
        spec["unschedulable"] = True
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                       "timeAdded": HEARTBEAT})
    if 0.01 <= roll < 0.015:
        taints.append({"key": "gpu", "value": "broken", "effect": "NoSchedule"})
    if not ready:
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": HEARTBEAT})
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": f"5f0c{index:08x}-0000-4000-8000-{index:012x}",
            "resourceVersion": str(100000 + index), "creationTimestamp": "2025-12-01T08:00:00Z",
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": spec,
        "status": {
            "addresses": [{"type": "InternalIP", "address": f"10.128.{index // 256}.{index % 256}"},
                          {"type": "Hostname", "address": name}],
            "allocatable": allocatable, "capacity": capacity, "conditions": _conditions(ready),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.24",
                         "kernelVersion": "6.1.112+", "kubeProxyVersion": "v1.31.4", "kubeletVersion": "v1.31.4",
                         "operatingSystem": "linux", "osImage": "Container-Optimized OS from Google",
                         "bootID": f"b{index:07d}", "machineID": f"m{index:07d}", "systemUUID": f"s{index:07d}"},
        },
    }


def node_list(count: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": [make_node(i, rng) for i in range(count)]}


if __name__ == "__main__":
    yaml.safe_dump(node_list(int(sys.argv[1]) if len(sys.argv) > 1 else 1000), sys.stdout, sort_keys=False)
