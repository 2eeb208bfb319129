"""Benchmark of the topology engine: build, incremental updates and assignment latency.

Pod sets of 8..4096 one-GPU pods under required block, required rack, preferred rack and
unconstrained on clusters of `make_cluster`; Kueue's slices, multi-layer slices, pod-set groups and
balanced placement; a node joining under a new name followed by an assignment; then a cluster split
between two flavors by a pool label (each tree holds only its flavor's nodes).
Run: `.venv/bin/python bench/topology.py [--quick] [--sizes 1000,10000] [--split 50000] [--reps 30]`.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import platform
import random
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from controller.api import constants as c
from controller.api.views import NodeView, PodView
from controller.core.topology import (
    AssignmentSuccess,
    FlavorTopology,
    PodSetRequest,
    SliceLayer,
    TopologyRequest,
    Usage,
    assign,
)

BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", c.LABEL_HOSTNAME
LEVELS = (BLOCK, RACK, HOST)
GPU = "nvidia.com/gpu"
HOSTS_PER_RACK, RACKS_PER_BLOCK = 16, 8
GIB = 1024**3 * 1000  # milli


def make_cluster(n: int, rng: random.Random) -> tuple[list[NodeView], list[PodView]]:
    """n nodes of block > rack > host (16 hosts per rack, 8 racks per block), each 8 GPUs + 64 cpu +
    512Gi memory + 110 pods, and bound pods using ~40% of GPUs, cpu and memory (random per node)."""
    nodes: list[NodeView] = []
    pods: list[PodView] = []
    for i in range(n):
        rack, block = i // HOSTS_PER_RACK, i // (HOSTS_PER_RACK * RACKS_PER_BLOCK)
        name = f"node-{i:05d}"
        labels = {BLOCK: f"b{block:03d}", RACK: f"r{rack:04d}", HOST: name}
        nodes.append(NodeView(name, labels, (), {GPU: 8000, "cpu": 64000, "memory": 512 * GIB,
                                                 c.RESOURCE_PODS: 110000}, True, False))
        used = rng.choice([0, 0, 2, 4, 4, 6, 8, 0, 2, 6])  # mean 3.2 of 8 GPUs = 40%
        for k in range(used // 2):
            pods.append(PodView(
                namespace="other", name=f"{name}-p{k}", uid="", labels={}, annotations={}, node_name=name,
                phase="Running", requests={GPU: 2000, "cpu": 12800, "memory": 100 * GIB, c.RESOURCE_PODS: 1000},
                scheduling_gates=(), node_selector={}, tolerations=(), affinity_terms=(), owners=(),
                deleting=False))
    return nodes, pods


def timed(fn: Callable[[], Any], reps: int) -> list[float]:
    """Wall times in ms of `reps` calls (GC paused so a collection does not land in one sample)."""
    out = []
    gc.disable()
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        gc.enable()
    return out


def p95(samples: list[float]) -> float:
    return float(np.percentile(samples, 95))


MODES = {
    "required block": TopologyRequest("required", BLOCK),
    "required rack": TopologyRequest("required", RACK),
    "preferred rack": TopologyRequest("preferred", RACK),
    "unconstrained": TopologyRequest("unconstrained", None),
}


def traced_peak_mib(fn: Callable[[], Any]) -> float:
    """Peak traced allocation of one call, in MiB (untimed: tracemalloc slows allocation)."""
    gc.collect()
    tracemalloc.start()
    kept = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return peak / 2**20


def bench_size(n: int, counts: list[int], reps: int, rng: random.Random) -> None:
    """One cluster size: build and memory, the assignment table, then incremental updates."""
    nodes, pods = make_cluster(n, rng)
    topo, usage = report_build(n, nodes, pods)
    report_assign(topo, usage, counts, reps)
    report_kueue_requests(topo, usage, reps)
    report_join(topo, usage, reps)
    report_incremental(n, topo, usage, nodes, pods)


def report_build(n: int, nodes: list[NodeView], pods: list[PodView]) -> tuple[FlavorTopology, Usage]:
    """Times the tree build, the usage from pods and the first assignment; prints them with memory."""
    gc.collect()
    t0 = time.perf_counter()
    topo = FlavorTopology.build("gpu", LEVELS, {}, (), nodes)
    build_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    usage = Usage.from_pods(pods)
    usage_ms = (time.perf_counter() - t0) * 1000
    # Memory in a separate, untimed pass; both are kept alive so the peak is tree + usage (dropping
    # the tree before building the usage measured only the larger of the two).
    peak = traced_peak_mib(lambda: (FlavorTopology.build("gpu", LEVELS, {}, (), nodes), Usage.from_pods(pods)))
    first = PodSetRequest("warm", 8, {GPU: 1000, c.RESOURCE_PODS: 1000}, MODES["required rack"])
    t0 = time.perf_counter()
    assign(topo, usage, [first])  # computes the candidacy mask and usage rows once
    first_ms = (time.perf_counter() - t0) * 1000
    clone_ms = statistics.median(timed(usage.clone, 20))

    print(f"\n== {n:,} nodes ({len(pods):,} bound pods)")
    print(f"tree build {build_ms:.1f} ms | usage from pods {usage_ms:.1f} ms | first assign (mask, rows) "
          f"{first_ms:.1f} ms | usage clone {clone_ms:.3f} ms | traced peak (tree+usage) {peak:.1f} MiB")
    return topo, usage


def report_assign(topo: FlavorTopology, usage: Usage, counts: list[int], reps: int) -> None:
    """The latency table: each placement mode at each pod count, over `reps` calls."""
    print(f"{'mode':<16}{'pods':>6}{'result':>8}{'median ms':>11}{'p95 ms':>9}")
    for mode, request in MODES.items():
        for count in counts:
            ps = PodSetRequest("main", count, {GPU: 1000, c.RESOURCE_PODS: 1000}, request)
            outcome = assign(topo, usage, [ps])
            samples = timed(functools.partial(assign, topo, usage, [ps]), reps)
            result = "fit" if isinstance(outcome, AssignmentSuccess) else "unfit"
            print(f"{mode:<16}{count:>6}{result:>8}{statistics.median(samples):>11.2f}{p95(samples):>9.2f}")


def _one_gpu(name: str, count: int, request: TopologyRequest) -> PodSetRequest:
    return PodSetRequest(name, count, {GPU: 1000, c.RESOURCE_PODS: 1000}, request)


KUEUE_REQUESTS: dict[str, tuple[list[PodSetRequest], bool]] = {
    "slices 4/host, req rack 64": ([_one_gpu("main", 64, TopologyRequest(
        "required", RACK, (SliceLayer(HOST, 4),)))], False),
    "slices 4/host, req blk 512": ([_one_gpu("main", 512, TopologyRequest(
        "required", BLOCK, (SliceLayer(HOST, 4),)))], False),
    "slices 32/rack, req blk 512": ([_one_gpu("main", 512, TopologyRequest(
        "required", BLOCK, (SliceLayer(RACK, 32),)))], False),
    "slices 4/host, pref rk 4096": ([_one_gpu("main", 4096, TopologyRequest(
        "preferred", RACK, (SliceLayer(HOST, 4),)))], False),
    "layers rack 32/host 4, 128": ([_one_gpu("main", 128, TopologyRequest(
        "required", BLOCK, (SliceLayer(RACK, 32), SliceLayer(HOST, 4))))], False),
    "group 1+63, req rack": ([_one_gpu("leader", 1, TopologyRequest("required", RACK, group="g")),
                              _one_gpu("workers", 63, TopologyRequest("required", RACK, group="g"))], False),
    "group 1+511, req block": ([_one_gpu("leader", 1, TopologyRequest("required", BLOCK, group="g")),
                                _one_gpu("workers", 511, TopologyRequest("required", BLOCK, group="g"))], False),
    "balanced, pref rack 128": ([_one_gpu("main", 128, TopologyRequest("preferred", RACK))], True),
}


def report_kueue_requests(topo: FlavorTopology, usage: Usage, reps: int) -> None:
    """Kueue 0.19's requests: slices, multi-layer slices, pod-set groups, balanced placement."""
    print(f"{'kueue request':<30}{'result':>8}{'median ms':>11}{'p95 ms':>9}")
    for label, (podsets, balanced) in KUEUE_REQUESTS.items():
        outcome = assign(topo, usage, podsets, balanced=balanced)
        samples = timed(functools.partial(assign, topo, usage, podsets, balanced=balanced), reps)
        result = "fit" if isinstance(outcome, AssignmentSuccess) else "unfit"
        print(f"{label:<30}{result:>8}{statistics.median(samples):>11.2f}{p95(samples):>9.2f}")


def report_join(topo: FlavorTopology, usage: Usage, reps: int) -> None:
    """A node joining under a new name (a new host domain), then a 512-pod required-block
    assignment: the join's whole cost lands on that assignment (and on the tree update)."""
    ps = _one_gpu("main", 512, MODES["required block"])
    joined = [0]

    def join() -> None:
        name = f"joined-{joined[0]:05d}"
        joined[0] += 1
        topo.upsert_node(NodeView(name, {BLOCK: "b000", RACK: "r0000", HOST: name}, (),
                                  {GPU: 8000, "cpu": 64000, c.RESOURCE_PODS: 110000}, True, False))

    def join_and_assign() -> None:
        join()
        assign(topo, usage, [ps])

    assign(topo, usage, [ps])
    join_ms = statistics.median(timed(join, reps))
    both_ms = statistics.median(timed(join_and_assign, reps))
    alone_ms = statistics.median(timed(functools.partial(assign, topo, usage, [ps]), reps))
    print(f"node join under a new name: tree update {join_ms:.2f} ms | join + 512-pod assignment "
          f"{both_ms:.2f} ms | the assignment alone {alone_ms:.2f} ms")
    for i in range(joined[0]):
        topo.remove_node(f"joined-{i:05d}")


def report_incremental(n: int, topo: FlavorTopology, usage: Usage, nodes: list[NodeView],
                       pods: list[PodView]) -> None:
    """Per-update costs: a bound pod, a node leaving the usage, a node moving racks, renumbering."""
    pod = pods[len(pods) // 2]
    bound = usage.clone()

    def pod_cycle() -> None:
        bound.remove_bound_pod(pod)
        bound.add_bound_pod(pod)

    per_pod_us = statistics.median(timed(pod_cycle, 2000)) * 1000 / 2
    # A node leaving drops only its own pods (a per-node index), then comes back with them.
    gone = pod.node_name or ""
    its_pods = [p for p in pods if p.node_name == gone]

    def usage_node_cycle() -> None:
        bound.remove_node(gone)
        for p in its_pods:
            bound.add_bound_pod(p)

    usage_node_us = statistics.median(timed(usage_node_cycle, 200)) * 1000
    victim = nodes[len(nodes) // 2]
    moved = NodeView(victim.name, {**victim.labels, RACK: "r-moved"}, (), victim.allocatable, True, False)
    flip = [moved, victim]

    def node_change() -> None:
        topo.upsert_node(flip[0])
        flip.reverse()

    per_node_us = statistics.median(timed(node_change, 200)) * 1000
    # Churn leaves empty domains; the tree renumbers them once they outnumber the nodes, so each
    # removal pays this divided by the node count on top of its own update.
    renumber_ms = statistics.median(timed(topo._compact, 3))
    print(f"incremental: bound pod add/remove {per_pod_us:.1f} us per update | node change "
          f"{per_node_us:.1f} us per update | domain renumbering {renumber_ms:.0f} ms "
          f"(once per {n:,} node removals: {renumber_ms * 1000 / n:.1f} us each)")
    print(f"usage: node removal + re-adding its {len(its_pods)} pod(s) {usage_node_us:.1f} us")


POOL = "cloud.com/pool"


def bench_split(n: int, reps: int, rng: random.Random) -> None:
    """Two flavors, `pool=a` on the first half of the blocks and `pool=b` on the rest: build time and
    memory of both trees, against two trees over the whole cluster (what each flavor held when every
    node went into every tree), and one assignment's latency in a flavor tree against a whole tree."""
    nodes, pods = make_cluster(n, rng)
    half = n // 2
    nodes = [NodeView(v.name, {**v.labels, POOL: "a" if i < half else "b"}, v.taints, v.allocatable, v.ready,
                      v.unschedulable) for i, v in enumerate(nodes)]
    usage = Usage.from_pods(pods)

    def flavors() -> list[FlavorTopology]:
        return [FlavorTopology.build(f"pool-{p}", LEVELS, {POOL: p}, (), nodes) for p in ("a", "b")]

    def whole() -> list[FlavorTopology]:
        return [FlavorTopology.build(f"all-{p}", LEVELS, {}, (), nodes) for p in ("a", "b")]

    print(f"\n== {n:,} nodes split into 2 flavors by {POOL} (before: every tree held all {n:,} nodes)")
    print(f"{'trees':<26}{'nodes/tree':>11}{'build ms (both)':>17}{'traced MiB (both)':>19}{'assign ms':>11}")
    ps = PodSetRequest("main", 64, {GPU: 1000, c.RESOURCE_PODS: 1000}, MODES["required rack"])
    for label, make in (("one per flavor (now)", flavors), ("whole cluster (before)", whole)):
        gc.collect()
        build_ms = statistics.median(timed(make, 3))
        peak = traced_peak_mib(make)
        topo = make()[0]
        assign(topo, usage, [ps])  # the mask and rows, once
        assign_ms = statistics.median(timed(functools.partial(assign, topo, usage, [ps]), reps))
        print(f"{label:<26}{topo.node_count:>11,}{build_ms:>17.1f}{peak:>19.1f}{assign_ms:>11.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run (1,000 nodes, few reps)")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--split", type=int, default=50000, help="cluster size split into 2 flavors (0: skip)")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    counts = [8, 64] if args.quick else [8, 64, 512, 4096]
    reps = 3 if args.quick else args.reps
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}, numpy {np.__version__}; load average {os.getloadavg()[0]:.1f}")
    rng = random.Random(42)
    for n in sizes:
        bench_size(n, counts, reps, rng)
    split = 1000 if args.quick else args.split
    if split:
        bench_split(split, reps, rng)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    print(f"\npeak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
