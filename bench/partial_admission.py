"""Partial admission at 10,000 nodes: what the search for the largest count that fits costs.

Builds the 10,000-node GPU cluster of bench/preemption.py with some nodes of every rack taken, then
times, per request shape, the full-count assignment that fails (`assign_flavors`) and the partial
search after it (`reserve_largest_count`: a binary search of whole assignments), wall and process CPU
time, and prints the admitted count and the trial assignments made. Prints a table with p50/p99.
Run: `.venv/bin/python bench/partial_admission.py [--quick] [--reps N]` (`--quick`: 640 nodes).
"""

# Cluster: block > rack > hostname, 5 blocks x 20 racks x 100 nodes of 8 GPUs (bench/preemption.py's
# shape); one ClusterQueue with quota for every GPU. Taken first: in rack r of block b,
# (7r + b) mod (nodes a rack / 2) nodes, by gangs of one 8-GPU pod each, so racks have different
# room. Requests (one 8-GPU pod per node, minCount 1), each more than fits: required rack (a rack
# + 10), preferred rack (the cluster + 10), required block (a block + 10), required block with
# slices of 4 pods per rack (a block + 10).

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api import constants as c  # noqa: E402
from controller.api.flavor import ResourceFlavor  # noqa: E402
from controller.api.queues import ClusterQueue, LocalQueue  # noqa: E402
from controller.api.topology import Topology  # noqa: E402
from controller.api.views import NodeView  # noqa: E402
from controller.api.workload import Workload  # noqa: E402
from controller.core.admission.cycle import AdmissionState, run_until_quiet  # noqa: E402
from controller.core.admission.flavoring import NoFit, WorkloadFit, assign_flavors  # noqa: E402
from controller.core.admission.reducing import reducible, reserve_largest_count, with_count  # noqa: E402
from controller.core.admission.snapshot import build_snapshot  # noqa: E402
from controller.core.admission.workloads import WorkloadInfo, workload_info  # noqa: E402

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
GPU = "nvidia.com/gpu"
NAMESPACE = "perf"


def make_nodes(blocks: int, racks: int, per_rack: int) -> list[NodeView]:
    """bench/preemption.py's nodes: 8 GPUs, 96 cpu, 110 pods each."""
    views = []
    for b in range(blocks):
        for r in range(racks):
            for n in range(per_rack):
                name = f"node-b{b}-r{r}-{n:03d}"
                views.append(NodeView.from_dict({
                    "metadata": {"name": name, "labels": {c.LABEL_HOSTNAME: name, BLOCK: f"b{b}",
                                                          RACK: f"b{b}-r{r}", "gpu": "h100"}},
                    "status": {"allocatable": {"cpu": "96", GPU: "8", c.RESOURCE_PODS: "110"},
                               "conditions": [{"type": "Ready", "status": "True"}]}}))
    return views


def make_state(nodes: list[NodeView]) -> AdmissionState:
    """One topology flavor over every node, one ClusterQueue `cq` with quota for every GPU."""
    topology = Topology.from_dict({"metadata": {"name": "gpus"}, "spec": {"levels": [
        {"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": c.LABEL_HOSTNAME}]}})
    flavor = ResourceFlavor.from_dict({"metadata": {"name": "h100"}, "spec": {
        "nodeLabels": {"gpu": "h100"}, "topologyName": "gpus"}})
    cq = ClusterQueue.from_dict({"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [
            {"name": GPU, "nominalQuota": str(8 * len(nodes))}]}]}]}})
    lq = LocalQueue.from_dict({"metadata": {"name": "lq", "namespace": NAMESPACE}, "spec": {"clusterQueue": "cq"}})
    return AdmissionState(build_snapshot([cq], [lq], [flavor], [topology], nodes, []))


def workload(name: str, pods: int, topology: dict[str, Any], seq: int, min_count: int | None = None) -> WorkloadInfo:
    pod_set: dict[str, Any] = {"name": "main", "count": pods, "topologyRequest": topology, "template": {
        "spec": {"containers": [{"name": "w", "resources": {"requests": {GPU: "8"}}}]}}}
    if min_count is not None:
        pod_set["minCount"] = min_count
    return workload_info(Workload.from_dict({"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {
        "queueName": "lq", "podSets": [pod_set]}}), seq=seq)


def fill(state: AdmissionState, blocks: int, racks: int, per_rack: int) -> int:
    """Take rack r's first (r * 7) % (per_rack // 2) nodes with one-pod gangs; the gangs admitted."""
    seq = 0
    for b in range(blocks):
        for r in range(racks):
            for _ in range((r * 7 + b) % (per_rack // 2)):
                state.submit(workload(f"f{seq}", 1, {"required": f"{RACK}"}, seq))
                seq += 1
    run_until_quiet(state)
    return len(state.admitted)


def count_trials(snap: Any, wl: WorkloadInfo) -> int:
    """How many assignments the binary search makes (re-run outside the timing, counting)."""
    found = reducible(wl)
    assert found is not None
    trials = 0
    low, high = 0, len(found.counts) - 1
    while low <= high:
        mid = (low + high) // 2
        trials += 1
        fit = assign_flavors(snap, "cq", with_count(wl, found.pod_set.name, found.counts[mid]))
        if isinstance(fit, WorkloadFit):
            snap.usage.release(wl.key)
            low = mid + 1
        else:
            high = mid - 1
    return trials + 1  # and the final assignment that holds the nodes


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="640 nodes (1 x 10 x 64)")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    blocks, racks, per_rack = (1, 10, 64) if args.quick else (5, 20, 100)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    t0 = time.perf_counter()
    nodes = make_nodes(blocks, racks, per_rack)
    state = make_state(nodes)
    taken = fill(state, blocks, racks, per_rack)
    print(f"{len(nodes):,} nodes ({blocks} x {racks} x {per_rack}), {taken:,} one-node gangs admitted first: "
          f"{time.perf_counter() - t0:.1f} s")
    shapes: list[tuple[str, int, dict[str, Any]]] = [("required rack", per_rack + 10, {"required": RACK}),
              ("preferred rack", len(nodes) + 10, {"preferred": RACK}),
              ("required block", per_rack * racks + 10, {"required": BLOCK}),
              ("required block, slices of 4/rack", per_rack * racks + 10,
               {"required": BLOCK, "podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4})]
    header = (f"{'request':32} {'count':>5} {'admitted':>8} {'trials':>6} {'full p50 ms':>11} {'p99':>6} "
              f"{'search p50 ms':>13} {'p99':>6} {'search cpu p50 ms':>17} {'p99':>6}")
    print(header)
    snap = state.snapshot
    for name, pods, topology in shapes:
        wl = workload(f"p-{name}", pods, topology, 10**6, min_count=1)
        full_ms, wall_ms, cpu_ms = [], [], []
        admitted = 0
        for _ in range(args.reps):
            gc.collect()
            t, cpu = time.perf_counter(), time.process_time()
            full = assign_flavors(snap, "cq", wl)
            full_ms.append((time.perf_counter() - t) * 1000)
            assert isinstance(full, NoFit), f"{name}: the whole count fits; the bench needs it not to"
            t, cpu = time.perf_counter(), time.process_time()
            got = reserve_largest_count(snap, "cq", wl, full)
            wall_ms.append((time.perf_counter() - t) * 1000)
            cpu_ms.append((time.process_time() - cpu) * 1000)
            assert isinstance(got, WorkloadFit), f"{name}: nothing fits: {got.message}"
            admitted = got.pod_sets[0].count
            snap.usage.release(wl.key)
        trials = count_trials(snap, wl)
        print(f"{name:32} {pods:>5} {admitted:>8} {trials:>6} {statistics.median(full_ms):>11.1f} "
              f"{pct(full_ms, 0.99):>6.1f} {statistics.median(wall_ms):>13.1f} {pct(wall_ms, 0.99):>6.1f} "
              f"{statistics.median(cpu_ms):>17.1f} {pct(cpu_ms, 0.99):>6.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
