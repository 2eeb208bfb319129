"""Status bytes of one admitted Workload over 1,024 / 4,096 / 16,384 hosts of a 50,000-node cluster.

The topology engine places one 8-GPU pod per host (unconstrained: the pods spread over many racks and
blocks); the Workload's status is then written in the KEP's per-slice `nodeLabels` form (what tasq
wrote before), in v1beta1's `levels` + `domains`, and in Kueue's compact v1beta2 form (what tasq
writes now), for two naming schemes of the hosts. Prints a table; etcd's default request limit is
1.5 MiB. Run: `.venv/bin/python bench/assignment_size.py`.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api import constants as c  # noqa: E402
from controller.api.topology_assignment import TopologyAssignment  # noqa: E402
from controller.api.views import NodeView  # noqa: E402
from controller.core.topology import (  # noqa: E402
    AssignmentSuccess,
    FlavorTopology,
    PodSetRequest,
    TopologyRequest,
    Usage,
    assign,
)
from controller.core.topology.outcome import TopologyAssignment as Chosen  # noqa: E402

BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", c.LABEL_HOSTNAME
LEVELS = (BLOCK, RACK, HOST)
GPU = "nvidia.com/gpu"
NODES, HOSTS_PER_RACK, RACKS_PER_BLOCK = 50_000, 32, 16
ETCD_LIMIT = 1536 * 1024  # etcd's default --max-request-bytes
HOSTS = (1_024, 4_096, 16_384)


def hostname(scheme: str, i: int, rng: random.Random) -> str:
    """`sequential`: node-00042; `cloud`: GKE-style, a node pool per 1,000 nodes with a random hash and
    a random 4-character node suffix (no two hosts of a pool share more than the pool's prefix)."""
    if scheme == "sequential":
        return f"node-{i:05d}"
    pool = i // 1000
    return f"gke-tas-cluster-pool-{pool:02d}-{(pool * 2654435761) % 2**32:08x}-{rng.getrandbits(20):05x}"


def make_nodes(scheme: str) -> list[NodeView]:
    rng = random.Random(7)
    nodes = []
    for i in range(NODES):
        rack, block = i // HOSTS_PER_RACK, i // (HOSTS_PER_RACK * RACKS_PER_BLOCK)
        name = hostname(scheme, i, rng)
        labels = {BLOCK: f"block-{block:03d}", RACK: f"rack-{rack:04d}", HOST: name}
        nodes.append(NodeView(name, labels, (), {GPU: 8000, "cpu": 96000, c.RESOURCE_PODS: 110000}, True, False))
    return nodes


def workload(topology_assignment: dict[str, Any], pods: int) -> dict[str, Any]:
    """The whole Workload as the API stores it: spec with one pod set, status with the admission."""
    return {
        "apiVersion": c.API_VERSION if hasattr(c, "API_VERSION") else "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-train-5f2c1", "namespace": "research", "uid": "3f0c2b9e-1d0a-4f4e-9d62-6a4c1f0d2b11",
                     "resourceVersion": "123456", "generation": 1, "creationTimestamp": "2026-11-27T00:00:00Z",
                     "labels": {"kueue.x-k8s.io/job-uid": "8c1d"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                          "uid": "8c1d", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": "research", "podSets": [{"name": "main", "count": pods, "template": {"spec": {
            "containers": [{"name": "trainer", "image": "registry.example/trainer:1.0",
                            "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}],
            "restartPolicy": "Never"}}}]},
        "status": {
            "admission": {"clusterQueue": "research", "podSetAssignments": [{
                "name": "main", "flavors": {GPU: "h100"}, "resourceUsage": {GPU: str(8 * pods)}, "count": pods,
                "topologyAssignment": topology_assignment}]},
            "conditions": [{"type": t, "status": "True", "reason": t, "message": "Quota reserved in ClusterQueue research",
                            "lastTransitionTime": "2026-11-27T00:00:01Z", "observedGeneration": 1}
                           for t in ("QuotaReserved", "Admitted")]},
    }


def size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":")).encode())


def node_label_form(chosen: Chosen) -> dict[str, Any]:
    """The KEP's per-slice form tasq wrote before: every level's label on every slice."""
    return {"slices": [{"nodeLabels": dict(s.node_labels), "count": s.count} for s in chosen.slices]}


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"cluster: {NODES:,} nodes, block > rack > host ({HOSTS_PER_RACK} hosts a rack, {RACKS_PER_BLOCK} racks a "
          f"block); one 8-GPU pod per host; limit = etcd's 1.5 MiB ({ETCD_LIMIT:,} bytes); bytes of the whole "
          "Workload JSON (compact)")
    print(f"{'hostnames':<11}{'hosts':>7}  {'KEP nodeLabels':>18}  {'v1beta1 domains':>18}  {'v1beta2 compact':>18}"
          f"  {'slices':>6}  {'encode ms':>9}")
    for scheme in ("sequential", "cloud"):
        nodes = make_nodes(scheme)
        topo = FlavorTopology.build("h100", LEVELS, {}, (), nodes)
        for hosts in HOSTS:
            request = PodSetRequest("main", hosts, {GPU: 8000, c.RESOURCE_PODS: 1000},
                                    TopologyRequest("unconstrained", None))
            outcome = assign(topo, Usage(), [request])
            assert isinstance(outcome, AssignmentSuccess), outcome
            chosen = outcome.assignments[0]
            times = []
            for _ in range(5):
                start = time.perf_counter()
                compact = chosen.to_dict()
                times.append((time.perf_counter() - start) * 1000)
            v1beta1 = TopologyAssignment.model_validate(compact).to_v1beta1()
            cells = []
            for form in (node_label_form(chosen), v1beta1, compact):
                n = size(workload(form, hosts))
                cells.append(f"{n:>10,} {100 * n / ETCD_LIMIT:>5.1f}%")
            print(f"{scheme:<11}{hosts:>7,}  {cells[0]:>18}  {cells[1]:>18}  {cells[2]:>18}  "
                  f"{len(compact.get('slices', [])):>6}  {statistics.median(times):>9.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
