"""The admission cycle with preemption at 10,000 nodes and 5,000 admitted Workloads: victim search time.

Builds a full GPU cluster (every node held by admitted gangs of mixed priorities), then times, per
preemptor shape, the pure victim search (`find_victims`: wall time, and the CPU time of this process
since the machine is shared) and one admission cycle that decides the Preempt (`run_cycle`; the
state is put back after each run). Prints a table with p50/p99.
Run: `.venv/bin/python bench/preemption.py [--quick] [--reps N]` (`--quick`: 640 nodes, 320 Workloads).
"""

# Cluster: block > rack > hostname, 5 blocks x 20 racks x 100 nodes of 8 GPUs, 96 cpu (the 10,000-node
# shape of bench/admission.py). One ClusterQueue, withinClusterQueue LowerPriority, quota = every GPU.
# Admitted: 5,000 gangs of 2 pods x 8 GPUs (two whole nodes each), priorities 0-9 drawn with a fixed
# seed; half require a rack, half are unconstrained. Preemptors (priority 10): required rack 2 / 16 /
# 64 pods, required block 256 pods, unconstrained 16 pods, each pod 8 GPUs (one node).

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from controller.api import constants as c  # noqa: E402
from controller.api.flavor import ResourceFlavor  # noqa: E402
from controller.api.queues import ClusterQueue, LocalQueue  # noqa: E402
from controller.api.topology import Topology  # noqa: E402
from controller.api.views import NodeView  # noqa: E402
from controller.api.workload import Workload  # noqa: E402
from controller.core.admission.cycle import AdmissionState, Admit, Preempt, run_cycle, run_until_quiet  # noqa: E402
from controller.core.admission.preempting import VictimSet, find_victims  # noqa: E402
from controller.core.admission.snapshot import build_snapshot  # noqa: E402
from controller.core.admission.workloads import WorkloadInfo, workload_info  # noqa: E402

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
GPU = "nvidia.com/gpu"
NAMESPACE = "perf"
SEED = 20


def make_nodes(blocks: int, racks: int, per_rack: int) -> list[NodeView]:
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
    topology = Topology.from_dict({"metadata": {"name": "gpus"}, "spec": {"levels": [
        {"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": c.LABEL_HOSTNAME}]}})
    flavor = ResourceFlavor.from_dict({"metadata": {"name": "h100"}, "spec": {
        "nodeLabels": {"gpu": "h100"}, "topologyName": "gpus"}})
    cq = ClusterQueue.from_dict({"metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [
            {"name": GPU, "nominalQuota": str(8 * len(nodes))}]}]}]}})
    lq = LocalQueue.from_dict({"metadata": {"name": "lq", "namespace": NAMESPACE}, "spec": {"clusterQueue": "cq"}})
    return AdmissionState(build_snapshot([cq], [lq], [flavor], [topology], nodes, []))


def workload(name: str, pods: int, priority: int, topology: dict[str, Any] | None, seq: int) -> WorkloadInfo:
    pod_set: dict[str, Any] = {"name": "main", "count": pods, "template": {"spec": {"containers": [
        {"name": "w", "resources": {"requests": {GPU: "8"}}}]}}}
    if topology is not None:
        pod_set["topologyRequest"] = topology
    return workload_info(Workload.from_dict({"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {
        "queueName": "lq", "priority": priority, "podSets": [pod_set]}}), seq=seq)


def fill(state: AdmissionState, count: int) -> float:
    """Admit `count` 2-node gangs, priorities 0-9 (seeded); seconds taken."""
    rng = random.Random(SEED)
    started = time.perf_counter()
    for i in range(count):
        state.now = float(i)
        state.submit(workload(f"held-{i:05d}", 2, rng.randrange(10), {"required": RACK} if i % 2 else None, i))
        decisions = run_until_quiet(state)
        assert [type(d) for d in decisions] == [Admit], decisions
    state.now = None
    return time.perf_counter() - started


PREEMPTORS = (
    ("required rack", 2, {"required": RACK}),
    ("required rack", 16, {"required": RACK}),
    ("required rack", 64, {"required": RACK}),
    ("required block", 256, {"required": BLOCK}),
    ("unconstrained", 16, None),
)


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


def time_shape(state: AdmissionState, mode: str, pods: int, topology: dict[str, Any] | None,
               reps: int, seq: int) -> dict[str, Any]:
    """p50/p99 of the victim search and of one cycle deciding the Preempt; the state is restored."""
    info = workload(f"urgent-{seq}", pods, 10, topology, seq)
    state.workloads[info.key] = info
    search: list[float] = []
    cpu: list[float] = []
    found = None
    for _ in range(reps):
        started, started_cpu = time.perf_counter(), time.process_time()
        found = find_victims(state.victim_pool(), state.snapshot, "cq", info)
        search.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    del state.workloads[info.key]
    cycle: list[float] = []
    for _ in range(reps):
        state.submit(info)
        started = time.perf_counter()
        decisions = run_cycle(state)
        cycle.append(time.perf_counter() - started)
        assert [type(d) for d in decisions] == [Preempt], decisions
        state.release(info.key)  # not admitted: it leaves its queue; the claims go with it
        state.evicting.clear()
        state.capacity_changed()
    assert isinstance(found, VictimSet), found
    return {"mode": mode, "pods": pods, "victims": len(found.victims), "where": found.domain or "-",
            "search_p50": percentile(search, 50) * 1e3, "search_p99": percentile(search, 99) * 1e3,
            "cpu_p50": percentile(cpu, 50) * 1e3, "cpu_p99": percentile(cpu, 99) * 1e3,
            "cycle_p50": percentile(cycle, 50) * 1e3, "cycle_p99": percentile(cycle, 99) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="640 nodes, 320 admitted Workloads")
    parser.add_argument("--reps", type=int, default=30, help="runs per preemptor shape (default 30)")
    args = parser.parse_args()
    blocks, racks, per_rack = (1, 10, 64) if args.quick else (5, 20, 100)
    nodes = make_nodes(blocks, racks, per_rack)
    load = os.getloadavg()[0]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"numpy {np.__version__}; load average {load:.1f}")
    started = time.perf_counter()
    state = make_state(nodes)
    built = time.perf_counter() - started
    held = len(nodes) // 2
    filled = fill(state, held)
    gc.collect()
    print(f"{len(nodes):,} nodes ({blocks} x {racks} x {per_rack}), {held:,} admitted gangs of 2 x 8 GPUs "
          f"(every GPU held): snapshot {built:.1f} s, admitting them {filled:.1f} s")
    print(f"{'preemptor':<16}{'pods':>6}{'victims':>9}  {'where':<18}{'search p50 ms':>14}{'p99':>7}"
          f"{'search cpu p50 ms':>18}{'p99':>7}{'cycle p50 ms':>13}{'p99':>7}")
    for i, (mode, pods, topology) in enumerate(PREEMPTORS):
        row = time_shape(state, mode, pods, topology, args.reps, 10_000 + i)
        print(f"{row['mode']:<16}{row['pods']:>6}{row['victims']:>9}  {row['where']:<18}{row['search_p50']:>14.1f}"
              f"{row['search_p99']:>7.1f}{row['cpu_p50']:>18.1f}{row['cpu_p99']:>7.1f}{row['cycle_p50']:>13.1f}"
              f"{row['cycle_p99']:>7.1f}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
