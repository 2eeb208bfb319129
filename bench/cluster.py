"""Benchmark the devcluster's simulated components in-process: Job controller, scheduler and kubelet.

Creates NODES nodes (blocks x racks x nodes x 8 GPUs) and runs Jobs totalling PODS pods through
pod creation, scheduling, start and completion on a manual clock; prints one table. Results go to
bench/RESULTS.md under `## devcluster cluster`. Usage: `bench/cluster.py [--pods N] [--topology 4x10x25x8]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

# bench/devcluster.py (a sibling script) would shadow the devcluster package: drop this directory.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from controller.api import constants as c  # noqa: E402
from devcluster.server.apiserver import ApiServer  # noqa: E402
from devcluster.simulated.components import Components, ManualClock  # noqa: E402
from devcluster.simulated.nodes import (  # noqa: E402
    LABEL_RACK,
    RESOURCE_GPU,
    TopologyShape,
    create_nodes,
    parse_shape,
    topology_nodes,
)

Row = tuple[str, int, float]


async def timed(label: str, count: int, step: Callable[[], Awaitable[int]]) -> Row:
    start = time.perf_counter()
    await step()
    return (label, count, time.perf_counter() - start)


def job(name: str, pods: int, gpus: int, selector: dict[str, str] | None = None) -> dict[str, object]:
    spec: dict[str, object] = {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "x", "resources": {"requests": {RESOURCE_GPU: str(gpus), "cpu": "1"},
                                                   "limits": {RESOURCE_GPU: str(gpus)}}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": {"metadata": {"annotations": {c.ANNOTATION_DEVCLUSTER_RUN_SECONDS: "60"}},
                                  "spec": spec}}}


async def scenario(shape: TopologyShape, pods: int, per_job: int, pin: str) -> list[Row]:
    """Jobs of `per_job` pods (1 GPU each); `pin` ("rack"/"host") gives each Job a nodeSelector."""
    clock = ManualClock()
    api = ApiServer(now=clock, history_limit=1_000)
    await create_nodes(api, topology_nodes(shape))
    components = Components(api).start()
    jobs = api.resource("batch/v1", "jobs")
    racks = [f"b{b}-r{r}" for b in range(1, shape.blocks + 1) for r in range(1, shape.racks + 1)]
    hosts = [f"{rack}-n{n}" for rack in racks for n in range(1, shape.nodes + 1)]
    for i in range(pods // per_job):
        selector = ({LABEL_RACK: racks[i % len(racks)]} if pin == "rack" else
                    {c.LABEL_HOSTNAME: hosts[i % len(hosts)]} if pin == "host" else None)
        await api.create(jobs, "default", job(f"j{i}", per_job, 1, selector), copy=False)
    rows = [await timed("Job controller: create pods", pods, components.jobs.sync),
            await timed("scheduler: bind pods", pods, components.scheduler.sync),
            await timed("kubelet: start pods", pods, components.kubelet.sync)]
    await components.settle()  # job status updates for Running pods
    clock.advance(60)
    rows.append(await timed("kubelet + Job controller: complete", pods, components.settle))
    return rows


async def unschedulable(shape: TopologyShape, pods: int) -> list[Row]:
    """Pods that fit nowhere: each gets kube-scheduler's message (computed once per kind of pod)."""
    api = ApiServer(history_limit=1_000)
    await create_nodes(api, topology_nodes(shape))
    components = Components(api).start()
    await api.create(api.resource("batch/v1", "jobs"), "default", job("big", pods, 9), copy=False)
    await components.jobs.sync()
    return [await timed("scheduler: mark unschedulable", pods, components.scheduler.sync)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=4096)
    parser.add_argument("--per-job", type=int, default=8)
    parser.add_argument("--topology", default="4x10x25x8", help="BLOCKSxRACKSxNODESxGPUS (default: 1,000 nodes)")
    args = parser.parse_args()
    shape = parse_shape(args.topology)
    print(f"# devcluster cluster: {shape.node_count} nodes, {args.pods} pods in Jobs of {args.per_job}; "
          f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"| {'scenario':<14} | {'phase':<36} | {'pods':>5} | {'seconds':>7} | {'pods/s':>7} |")
    print(f"|{'-' * 16}|{'-' * 38}|{'-' * 7}|{'-' * 9}|{'-' * 9}|")
    for name, rows in (("any node", asyncio.run(scenario(shape, args.pods, args.per_job, ""))),
                       ("rack selector", asyncio.run(scenario(shape, args.pods, args.per_job, "rack"))),
                       ("host selector", asyncio.run(scenario(shape, args.pods, args.per_job, "host"))),
                       ("no fit", asyncio.run(unschedulable(shape, args.pods)))):
        for label, count, seconds in rows:
            print(f"| {name:<14} | {label:<36} | {count:>5} | {seconds:>7.2f} | {count / seconds:>7.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
