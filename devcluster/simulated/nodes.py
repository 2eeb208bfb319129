"""Node objects for the devcluster: from a compact topology shape or from a `kubectl get nodes -o yaml` dump.

`topology_nodes(parse_shape("2x4x4x8"))` gives Ready nodes labelled with block, rack and hostname,
`nodes_from_dump(text)` reads a dumped `kind: List` (or single Nodes) and strips server-set fields.
`create_nodes` stores them through the in-process API. Used by `tasq dev`, `tasq demo` and the tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from devcluster import constants as c
from devcluster.front.discovery import KUBERNETES_VERSION
from devcluster.server.apiserver import ApiServer
from devcluster.server.errors import ApiError

LABEL_BLOCK = "cloud.provider.com/topology-block"
LABEL_RACK = "cloud.provider.com/topology-rack"
RESOURCE_GPU = "nvidia.com/gpu"
KUBELET_VERSION = KUBERNETES_VERSION[2]  # the nodes run the version /version reports
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"

# Fields the API server sets, dropped from dumps so the nodes can be created again.
_SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences")
_SHAPE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*$")


class NodeDumpError(ValueError):
    """A dump that does not describe Nodes; `where` names the offending item."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True, slots=True)
class TopologyShape:
    """blocks x racks per block x nodes per rack, each node with `gpus` GPUs and the other allocatables."""

    blocks: int
    racks: int
    nodes: int
    gpus: int
    cpu: str = "96"
    memory: str = "1Ti"
    pods: int = 110

    @property
    def node_count(self) -> int:
        return self.blocks * self.racks * self.nodes


def parse_shape(text: str) -> TopologyShape:
    """`2x4x4x8` (blocks x racks x nodes x gpus); ValueError on anything else or on zero sizes."""
    m = _SHAPE.match(text)
    if not m:
        raise ValueError(f"topology shape {text!r}: want BLOCKSxRACKSxNODESxGPUS, e.g. 2x4x4x8")
    blocks, racks, nodes, gpus = (int(g) for g in m.groups())
    if min(blocks, racks, nodes) <= 0:
        raise ValueError(f"topology shape {text!r}: blocks, racks and nodes must be greater than 0")
    return TopologyShape(blocks, racks, nodes, gpus)


def node_object(name: str, labels: Mapping[str, str], allocatable: Mapping[str, str],
                taints: Iterable[Mapping[str, str]] = (), ready: bool = True, internal_ip: str = "") -> dict[str, Any]:
    """A Node as a kubelet registers it: labels, taints, capacity = allocatable, Ready, addresses
    (InternalIP when given, Hostname), nodeInfo."""
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {c.LABEL_HOSTNAME: name, **labels}},
        "spec": {},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": dict(allocatable),
            "conditions": [ready_condition(ready)],
            "addresses": ([{"type": "InternalIP", "address": internal_ip}] if internal_ip else [])
                         + [{"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                         "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "devcluster://1", "osImage": "devcluster",
                         "kernelVersion": "6.1.0", "machineID": name, "systemUUID": name, "bootID": name},
        },
    }
    taint_list = [dict(t) for t in taints]
    if taint_list:
        node["spec"]["taints"] = taint_list
    return node


def ready_condition(ready: bool, reason: str = "", message: str = "") -> dict[str, str]:
    """The node Ready condition as the kubelet posts it: True (KubeletReady) or False (KubeletNotReady);
    `Kubelet.set_node_ready` turns the False one into the node lifecycle controller's Unknown."""
    if ready:
        return {"type": "Ready", "status": "True", "reason": reason or "KubeletReady",
                "message": message or "kubelet is posting ready status"}
    return {"type": "Ready", "status": "False", "reason": reason or "KubeletNotReady",
            "message": message or "kubelet stopped posting node status"}


def ready_status(obj: Mapping[str, Any]) -> str:
    """A node's (or pod's) Ready condition status: `True`, `False`, or `Unknown` (also when it has none yet)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return str(cond.get("status") or "Unknown")
    return "Unknown"


def not_ready_taint_key(status: str) -> str:
    """The taint the node lifecycle controller puts on a node whose Ready status is not True:
    `not-ready` for False, `unreachable` for Unknown (the kubelet stopped posting)."""
    return TAINT_NOT_READY if status == "False" else TAINT_UNREACHABLE


def topology_nodes(shape: TopologyShape, prefix: str = "") -> list[dict[str, Any]]:
    """Nodes `<prefix>b<B>-r<R>-n<N>` (1-based), labelled block `b<B>`, rack `b<B>-r<R>` and hostname, with
    InternalIPs 10.0.0.1, 10.0.0.2, ... in that order."""
    nodes: list[dict[str, Any]] = []
    allocatable = {c.RESOURCE_CPU: shape.cpu, c.RESOURCE_MEMORY: shape.memory, c.RESOURCE_PODS: str(shape.pods)}
    if shape.gpus:
        allocatable[RESOURCE_GPU] = str(shape.gpus)
    for b in range(1, shape.blocks + 1):
        for r in range(1, shape.racks + 1):
            for n in range(1, shape.nodes + 1):
                block, rack = f"b{b}", f"b{b}-r{r}"
                i = len(nodes) + 1
                nodes.append(node_object(f"{prefix}{rack}-n{n}", {LABEL_BLOCK: block, LABEL_RACK: rack},
                                         allocatable, internal_ip=f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"))
    return nodes


def nodes_from_dump(text: str) -> list[dict[str, Any]]:
    """Nodes from `kubectl get nodes -o yaml` (a `kind: List`), a NodeList, or YAML documents of Nodes."""
    nodes: list[dict[str, Any]] = []
    for doc_index, doc in enumerate(yaml.safe_load_all(text)):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise NodeDumpError(f"document {doc_index}", "not a mapping")
        items = doc.get("items") if doc.get("kind") in ("List", "NodeList") else [doc]
        if items is not None and not isinstance(items, list):
            raise NodeDumpError(f"document {doc_index}", "items is not a list")
        for i, item in enumerate(items or []):
            where = f"document {doc_index} item {i}"
            if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
                kind = item.get("kind") if isinstance(item, dict) else type(item).__name__
                raise NodeDumpError(where, f"kind {kind!r} is not Node")
            nodes.append(_clean_node(item, where))
    return nodes


def _clean_node(item: dict[str, Any], where: str) -> dict[str, Any]:
    """The dumped node without server-set metadata; capacity/allocatable kept as they were."""
    for part in ("metadata", "spec", "status"):
        if not isinstance(item.get(part) or {}, dict):
            raise NodeDumpError(where, f"{part} is not a mapping")
    meta = dict(item.get("metadata") or {})
    if not meta.get("name"):
        raise NodeDumpError(where, "metadata.name is missing")
    for key in _SERVER_META:
        meta.pop(key, None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": dict(item.get("spec") or {}),
            "status": dict(item.get("status") or {})}


async def create_nodes(api: ApiServer, nodes: Iterable[Mapping[str, Any]]) -> int:
    """Create (or replace the labels, spec and status of) each node; returns how many were written."""
    r = api.resource("v1", "nodes")
    count = 0
    for node in nodes:
        name = str(node["metadata"]["name"])
        try:
            await api.create(r, "", node, copy=False)
        except ApiError as e:
            if e.code != 409:
                raise
            current = await api.get(r, "", name)
            replacement = {**node, "metadata": {**current["metadata"], **node["metadata"],
                                                "resourceVersion": current["metadata"]["resourceVersion"]}}
            await api.update(r, "", name, replacement, copy=False)
            await api.update(r, "", name, {**replacement, "metadata": {"name": name}}, subresource="status",
                             copy=False)
        count += 1
    return count
