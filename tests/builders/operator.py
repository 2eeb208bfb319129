"""Builders for the operator's end-to-end tests: GPU nodes both control planes run (kwok takes
the real one's, the simulated kubelet the devcluster's), and the Topology, ResourceFlavor and
queues a test applies with kubectl. Used by tests/e2e/test_operator*.py and test_leader_failover.py.
"""

from __future__ import annotations

from typing import Any

import yaml

from controller.api import constants as c
from devcluster.simulated.nodes import node_object

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"  # the annotation selector hack/realcluster/up gives kwok
GPU = "nvidia.com/gpu"


def gpu_nodes(block_label: str, rack_label: str, blocks: int, racks: int, hosts: int, gpus: int = 8,
              labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Nodes `b<B>-r<R>-n<N>` (block `b<B>`, rack `b<B>-r<R>`) of `gpus` GPUs and 64 CPUs each, with
    `labels` on all, annotated so kwok runs them on the real control plane."""
    nodes = []
    for b in range(1, blocks + 1):
        for r in range(1, racks + 1):
            for n in range(1, hosts + 1):
                node = node_object(f"b{b}-r{r}-n{n}", {block_label: f"b{b}", rack_label: f"b{b}-r{r}", **(labels or {})},
                                   {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)})
                node["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE}
                nodes.append(node)
    return nodes


class QueueSetupBuilder:
    """A Topology over `levels`, one ResourceFlavor on it, and ClusterQueues over that flavor;
    `yaml()` is the multi-document text for `kubectl apply -f -`."""

    def __init__(self, topology: str, *levels: str) -> None:
        self._docs: list[dict[str, Any]] = [{
            "apiVersion": f"{c.GROUP}/{c.VERSION_V1ALPHA1}", "kind": c.KIND_TOPOLOGY, "metadata": {"name": topology},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}]
        self._topology = topology
        self._flavor = ""

    def namespace(self, name: str) -> QueueSetupBuilder:
        self._docs.insert(0, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return self

    def flavor(self, name: str, node_labels: dict[str, str]) -> QueueSetupBuilder:
        self._flavor = name
        self._docs.append({"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR, "metadata": {"name": name},
                           "spec": {"nodeLabels": dict(node_labels), "topologyName": self._topology}})
        return self

    def cluster_queue(self, name: str, quotas: dict[str, str | int]) -> QueueSetupBuilder:
        """A ClusterQueue for every namespace with `quotas` (resource -> nominal) of the flavor."""
        self._docs.append({
            "apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE, "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": list(quotas), "flavors": [{"name": self._flavor, "resources": [
                    {"name": r, "nominalQuota": str(q)} for r, q in quotas.items()]}]}]}})
        return self

    def yaml(self) -> str:
        return yaml.safe_dump_all(self._docs, sort_keys=False)


def make_queue_setup(topology: str, *levels: str) -> QueueSetupBuilder:
    return QueueSetupBuilder(topology, *levels)


def local_queue(namespace: str, cluster_queue: str, name: str = "lq") -> str:
    """A LocalQueue manifest (YAML) for `kubectl apply -f -`."""
    return yaml.safe_dump({"apiVersion": c.API_VERSION, "kind": c.KIND_LOCAL_QUEUE,
                           "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}})
