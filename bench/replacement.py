"""Benchmark of failed-node replacement (controller.core.topology.replacing.find_replacement).

Clusters of `bench/topology.py`'s `make_cluster` (16 hosts per rack, 8 racks per block, ~40% of the
GPUs used); a Workload of 32 pods of 8 GPUs (a whole host each) admitted in one block (required
block: BestFit takes the tightest block that holds it, so few hosts are left there) or unconstrained
(a replacement may then widen to the whole flavor), then 1, 4 or 16 of its hosts fail. Prints the median and p95 latency of one search (the
per-shape counts warm, as in the operator, where admission keeps them) and its outcome: where the
replacements went, or the eviction when the block has too few free hosts.
Run: `.venv/bin/python bench/replacement.py [--sizes 1000,10000,50000] [--reps 20]`.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repository root

from bench.topology import BLOCK, GPU, LEVELS, RACK, make_cluster
from controller.api import constants as c
from controller.api.topology_assignment import AssignedDomain
from controller.core.topology import (
    AssignmentSuccess,
    FlavorTopology,
    PodSetRequest,
    TopologyRequest,
    Usage,
    assign,
)
from controller.core.topology.replacing import ReplacementSuccess, find_replacement

PODS = 32


def one_size(n: int, reps: int, rng: random.Random,
             topology: TopologyRequest) -> list[tuple[int, str, int, float, float, str]]:
    nodes, pods = make_cluster(n, rng)
    tree = FlavorTopology.build("gpu", LEVELS, {}, (), nodes)
    usage = Usage.from_pods(pods)
    request = PodSetRequest("main", PODS, {GPU: 8000, c.RESOURCE_PODS: 1000}, topology)
    outcome = assign(tree, usage, [request])
    assert isinstance(outcome, AssignmentSuccess), outcome
    usage.reserve("ns/wl", outcome.placement.resources)
    labels = {node.name: node.labels for node in nodes}
    assigned = [AssignedDomain(tuple(s.node_labels[level] for level in LEVELS), s.count)
                for s in outcome.assignments[0].slices]
    rows = []
    for failing in (1, 4, 16):
        failed = {d.values[-1] for d in assigned[:failing]}
        times = []
        result = None
        for _ in range(reps):
            started = time.perf_counter()
            result = find_replacement(tree, usage, request, LEVELS, assigned, failed)
            times.append((time.perf_counter() - started) * 1000)
        if isinstance(result, ReplacementSuccess):
            same_rack = sum(1 for r in result.replaced for name, _ in r.to
                            if labels[name][RACK] == labels[r.failed][RACK])
            moved = sum(len(r.to) for r in result.replaced)
            what = f"replaced on {moved} host(s), {same_rack} in the failed host's rack"
        else:
            what = f"evicted ({len(result.nodes) if result is not None else 0} host(s) without room)"
        times.sort()
        mode = f"{topology.mode} {topology.level or ''}".strip()
        rows.append((n, mode, failing, statistics.median(times), times[int(0.95 * (len(times) - 1))], what))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(7)
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    print("\n| nodes | pod set | failed hosts | median ms | p95 ms | outcome |\n|---:|---|---:|---:|---:|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for topology in (TopologyRequest("required", BLOCK), TopologyRequest("unconstrained", None)):
            for row in one_size(n, args.reps, rng, topology):
                print(f"| {row[0]:,} | {row[1]} | {row[2]} | {row[3]:.2f} | {row[4]:.2f} | {row[5]} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
