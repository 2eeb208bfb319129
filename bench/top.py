"""Benchmark of `tasq top`'s drawing: the occupancy model and the text rendering per cluster size.

Clusters of blocks x 8 racks x nodes-per-rack nodes (8 GPUs each), every other rack's nodes half used
by one Workload per rack; times `occupancy_of` (static tree + Usage -> domains and nodes) and the
rendering into a 100-column console (to a buffer), and counts the lines printed.
Run: `.venv/bin/python -P bench/top.py [--sizes 1024,10000,50000] [--reps 3]`.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time

from rich.console import Console

from controller.api.views import NodeView
from controller.commands.top import render
from controller.core.topology.occupancy import occupancy_of
from controller.core.topology.tree import FlavorTopology
from controller.core.topology.usage import Usage

BLOCK, RACK, HOST = "b", "r", "kubernetes.io/hostname"
RACKS_PER_BLOCK, NODES_PER_RACK = 8, 32


def cluster(size: int) -> tuple[FlavorTopology, Usage, list[str]]:
    nodes, usage, keys = [], Usage(), []
    racks = size // NODES_PER_RACK
    for rack in range(racks):
        held = {}
        for n in range(NODES_PER_RACK):
            name = f"n-{rack:04d}-{n:02d}"
            nodes.append(NodeView.from_dict({"metadata": {"name": name, "labels": {
                HOST: name, BLOCK: f"block-{rack // RACKS_PER_BLOCK:03d}", RACK: f"rack-{rack:04d}"}},
                "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96"}}}))
            held[name] = {"nvidia.com/gpu": 4000}
        if rack % 2 == 0:
            keys.append(f"ml/train-{rack}")
            usage.reserve(keys[-1], held)
    return FlavorTopology.build("dc", (BLOCK, RACK, HOST), {}, (), nodes), usage, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,10000,50000")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| nodes | model ms | render ms | lines |")
    print("|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        topology, usage, keys = cluster(size)
        model, draw, lines = [], [], 0
        for _ in range(args.reps):
            t0 = time.perf_counter()
            occ = occupancy_of("h100", topology, usage, keys)
            t1 = time.perf_counter()
            out = io.StringIO()
            render(Console(file=out, width=100, highlight=False), [occ])
            t2 = time.perf_counter()
            model.append((t1 - t0) * 1000)
            draw.append((t2 - t1) * 1000)
            lines = len(out.getvalue().splitlines())
        print(f"| {size:,} | {statistics.median(model):.0f} | {statistics.median(draw):.0f} | {lines} |")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
