"""Admission throughput on Kueue's TAS performance mix, driven on a simulated clock.

Workloads arrive and finish on the simulated clock; after every event the admission cycle runs until
quiet. Reports admission decisions per second of real time and time-to-admission per class in
simulated time, at 640 and at 10,000 nodes. `--backlog` instead times one operator admission cycle
over a backlog of 100 / 1,000 / 10,000 waiting Workloads of which few fit, with the growth exponent,
then the operator's cycle over the same backlog held by stopped LocalQueues.
Run: `.venv/bin/python bench/admission.py [--quick | --backlog [--sizes 100,1000,10000]]`.
"""

# The mix (Kueue test/performance/scheduler/configs/tas): 1 block x 10 racks x 64 nodes of 96 cpu /
# 256Gi / 110 pods; 5 cohorts x 6 ClusterQueues (nominal 20 cpu, borrowingLimit 100) x 500 workloads:
# per queue 350 small (2 pods x 500m, every 100 ms, runs 200 ms, priority 50), 100 medium (4 x 1250m,
# every 500 ms, runs 500 ms, priority 100), 50 large (8 x 2500m, every 1200 ms, runs 1 s, priority 200);
# half of each class requires a rack, half prefers one (Kueue's "balanced" sets are split between them).
# The 10,000-node run: 5 blocks x 20 racks x 100 nodes.

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, where bench/webhooks.py would shadow
# the webhooks package (the admission loop imports it): tasq is imported from the repository root.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api import constants as c  # noqa: E402
from controller.api.flavor import ResourceFlavor  # noqa: E402
from controller.api.queues import ClusterQueue, LocalQueue  # noqa: E402
from controller.api.topology import Topology  # noqa: E402
from controller.api.views import NodeView  # noqa: E402
from controller.api.workload import Workload  # noqa: E402
from controller.cache.cluster import ClusterCache  # noqa: E402
from controller.core.admission.cycle import AdmissionState, Admit, Pending, explain, run_until_quiet  # noqa: E402
from controller.core.admission.snapshot import build_snapshot  # noqa: E402
from controller.core.admission.workloads import WorkloadInfo, workload_info  # noqa: E402
from controller.kube.admitting import AdmissionLoop  # noqa: E402
from controller.kube.events import EventRecorder  # noqa: E402

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
NAMESPACE = "perf"


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    count: int
    pods: int
    cpu: str
    interval_ms: int
    runtime_ms: int
    priority: int


CLASSES = (
    WorkloadClass("small", 350, 2, "500m", 100, 200, 50),
    WorkloadClass("medium", 100, 4, "1250m", 500, 500, 100),
    WorkloadClass("large", 50, 8, "2500m", 1200, 1000, 200),
)


@dataclass(frozen=True)
class Shape:
    blocks: int
    racks: int
    nodes_per_rack: int

    @property
    def nodes(self) -> int:
        return self.blocks * self.racks * self.nodes_per_rack


def make_nodes(shape: Shape) -> list[NodeView]:
    views = []
    for b in range(shape.blocks):
        for r in range(shape.racks):
            for n in range(shape.nodes_per_rack):
                name = f"node-b{b}-r{r}-{n:03d}"
                views.append(NodeView.from_dict({
                    "metadata": {"name": name, "labels": {c.LABEL_HOSTNAME: name, BLOCK: f"b{b}",
                                                          RACK: f"b{b}-r{r}", "tas-node-group": "tas"}},
                    "status": {"allocatable": {"cpu": "96", "memory": "256Gi", c.RESOURCE_PODS: "110"},
                               "conditions": [{"type": "Ready", "status": "True"}]}}))
    return views


def make_state(shape: Shape, cohorts: int, queues_per_cohort: int) -> AdmissionState:
    """The TAS flavor over the nodes, and one ClusterQueue + LocalQueue per queue of every cohort."""
    topology = Topology.from_dict({"metadata": {"name": "default-topology"}, "spec": {"levels": [
        {"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": c.LABEL_HOSTNAME}]}})
    flavor = ResourceFlavor.from_dict({"metadata": {"name": "tas-flavor"}, "spec": {
        "nodeLabels": {"tas-node-group": "tas"}, "topologyName": "default-topology"}})
    cqs, lqs = [], []
    for co in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cq-{co}-{q}"
            cqs.append(ClusterQueue.from_dict({"metadata": {"name": name}, "spec": {
                "cohort": f"cohort-{co}", "namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": ["cpu"], "flavors": [{"name": "tas-flavor", "resources": [
                        {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]}]}]}}))
            lqs.append(LocalQueue.from_dict({"metadata": {"name": name, "namespace": NAMESPACE},
                                             "spec": {"clusterQueue": name}}))
    snapshot = build_snapshot(cqs, lqs, [flavor], [topology], make_nodes(shape), [])
    return AdmissionState(snapshot)


@dataclass(order=True)
class Arrival:
    at_ms: int
    seq: int
    info: WorkloadInfo = field(compare=False)
    klass: WorkloadClass = field(compare=False)


def workload_manifest(name: str, queue: str, klass: WorkloadClass, mode: str) -> dict[str, Any]:
    container = {"name": "w", "resources": {"requests": {"cpu": klass.cpu}}}
    return {"metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"queueName": queue, "priority": klass.priority, "podSets": [{
                "name": "main", "count": klass.pods, "topologyRequest": {mode: RACK},
                "template": {"spec": {"containers": [container]}}}]}}


def make_arrivals(cohorts: int, queues_per_cohort: int, scale: float) -> list[Arrival]:
    """Every queue creates each class at its own interval; half require the rack, half prefer it."""
    arrivals: list[Arrival] = []
    seq = 0
    for co in range(cohorts):
        for q in range(queues_per_cohort):
            queue = f"cq-{co}-{q}"
            for klass in CLASSES:
                for i in range(max(1, int(klass.count * scale))):
                    mode = "required" if i % 2 == 0 else "preferred"
                    at_ms = i * klass.interval_ms
                    manifest = workload_manifest(f"{queue}-{klass.name}-{i}", queue, klass, mode)
                    info = workload_info(Workload.from_dict(manifest), seq=seq, default_created=at_ms / 1000)
                    arrivals.append(Arrival(at_ms, seq, info, klass))
                    seq += 1
    arrivals.sort()
    return arrivals


@dataclass
class Result:
    nodes: int
    workloads: int
    admitted: int = 0
    decisions: int = 0
    wall_s: float = 0.0
    sim_end_ms: int = 0
    waits: dict[str, list[float]] = field(default_factory=dict)


def drive(state: AdmissionState, arrivals: list[Arrival], nodes: int) -> Result:
    """The event loop: at each simulated instant, finishes release, arrivals queue, cycles run."""
    result = Result(nodes, len(arrivals), waits={k.name: [] for k in CLASSES})
    by_key = {a.info.key: a for a in arrivals}
    finishes: list[tuple[int, str]] = []
    i = 0
    start = time.perf_counter()
    while i < len(arrivals) or finishes:
        now = min(arrivals[i].at_ms if i < len(arrivals) else 1 << 60, finishes[0][0] if finishes else 1 << 60)
        while finishes and finishes[0][0] <= now:
            state.release(heapq.heappop(finishes)[1])
        while i < len(arrivals) and arrivals[i].at_ms <= now:
            state.submit(arrivals[i].info)
            i += 1
        for decision in run_until_quiet(state):
            result.decisions += 1
            if isinstance(decision, Admit):
                arrival = by_key[decision.key]
                result.admitted += 1
                result.waits[arrival.klass.name].append((now - arrival.at_ms) / 1000)
                heapq.heappush(finishes, (now + arrival.klass.runtime_ms, decision.key))
        result.sim_end_ms = now
    result.wall_s = time.perf_counter() - start
    stuck = [d for d in state.pending.values() if isinstance(d, Pending)]
    if stuck:
        print(f"  ! {len(stuck)} workload(s) never admitted, e.g. {stuck[0].key}: {stuck[0].message}")
    return result


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(results: list[Result]) -> None:
    """Markdown tables for bench/RESULTS.md: throughput, then time to admission per class."""
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.system()} {platform.release()}")
    print()
    print("| nodes | workloads | admitted | decisions | wall s | admissions/s | decisions/s | simulated makespan s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r.nodes:,} | {r.workloads:,} | {r.admitted:,} | {r.decisions:,} | {r.wall_s:.2f} | "
              f"{r.admitted / r.wall_s:,.0f} | {r.decisions / r.wall_s:,.0f} | {r.sim_end_ms / 1000:.1f} |")
    print()
    print("time to admission (simulated s): p50 / p90 / max")
    print()
    print("| nodes | " + " | ".join(k.name for k in CLASSES) + " |")
    print("|---:|" + "---:|" * len(CLASSES))
    for r in results:
        cells = [f"{statistics.median(r.waits[k.name]) if r.waits[k.name] else 0:.1f} / "
                 f"{pct(r.waits[k.name], 0.9):.1f} / {max(r.waits[k.name], default=0):.1f}" for k in CLASSES]
        print(f"| {r.nodes:,} | " + " | ".join(cells) + " |")


# The backlog: 64 nodes (1 block x 4 racks x 16) in the operator's ClusterCache; one cohort of four
# ClusterQueues (nominal 16 cpu each, no borrowing limit; the last one StrictFIFO), and N Workloads
# spread over them round-robin, of 48 shapes (1/2/4/8 pods x 500m/1/2 cpu x rack required/preferred x
# two pod-set names) and three priorities. The quota takes a few dozen; the rest wait ("few fit").
# "all fit": the same cluster and queues with 10,000 cpu of quota each and every Workload one pod of
# 100m preferring a rack (one shape, one priority): the whole backlog is admitted in the cycle.

BACKLOG_SHAPE = Shape(1, 4, 16)
BACKLOG_QUEUES = 4


def backlog_cache(n: int, all_fit: bool) -> ClusterCache:
    """The cluster, queues and `n` Workloads as the operator's cache holds them after their events."""
    cache = ClusterCache()
    cache.upsert(c.KIND_TOPOLOGY, {"metadata": {"name": "default-topology"}, "spec": {"levels": [
        {"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": c.LABEL_HOSTNAME}]}})
    cache.upsert(c.KIND_RESOURCE_FLAVOR, {"metadata": {"name": "tas-flavor"}, "spec": {
        "nodeLabels": {"tas-node-group": "tas"}, "topologyName": "default-topology"}})
    for view in make_nodes(BACKLOG_SHAPE):
        cache.nodes[view.name] = view
    for q in range(BACKLOG_QUEUES):
        name = f"cq-{q}"
        strategy = c.QUEUEING_STRICT_FIFO if q == BACKLOG_QUEUES - 1 else c.QUEUEING_BEST_EFFORT_FIFO
        cache.upsert(c.KIND_CLUSTER_QUEUE, {"metadata": {"name": name}, "spec": {
            "cohort": "backlog", "namespaceSelector": {}, "queueingStrategy": strategy, "resourceGroups": [{
                "coveredResources": ["cpu"], "flavors": [{"name": "tas-flavor", "resources": [
                    {"name": "cpu", "nominalQuota": "10000" if all_fit else "16"}]}]}]}})
        cache.upsert(c.KIND_LOCAL_QUEUE, {"metadata": {"name": name, "namespace": NAMESPACE},
                                          "spec": {"clusterQueue": name}})
    for i in range(n):
        klass = CLASSES[i % 3]
        pods, cpu = (1, 2, 4, 8)[i // 3 % 4], ("500m", "1", "2")[i // 12 % 3]
        mode = ("required", "preferred")[i // 36 % 2]
        if all_fit:
            klass, pods, cpu, mode = CLASSES[0], 1, "100m", "preferred"
        manifest = workload_manifest(f"wl-{i:05d}", f"cq-{i % BACKLOG_QUEUES}", klass, mode)
        pod_set = manifest["spec"]["podSets"][0]
        pod_set["count"], pod_set["name"] = pods, ("main", "worker")[0 if all_fit else i // 72 % 2]
        pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        manifest["metadata"]["resourceVersion"] = "1"
        manifest["metadata"]["creationTimestamp"] = f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        cache.upsert(c.KIND_WORKLOAD, manifest)
    return cache


@dataclass
class BacklogRow:
    waiting: int
    state_s: float
    decide_s: float
    reasons_s: float
    admitted: int
    cpu_s: float
    """Process CPU time of the whole cycle (less noisy than wall time on a shared machine)."""
    gc_s: float
    """Wall time the garbage collector ran during the cycle (its pauses are part of `cpu_s`)."""
    waited_s: float | None
    """Time the process was runnable but not running (the kernel's run-queue wait, from
    /proc/self/schedstat; None where that file does not exist): wall = CPU + this on a busy machine."""

    @property
    def total_s(self) -> float:
        return self.state_s + self.decide_s + self.reasons_s


def backlog_cycle(n: int, all_fit: bool) -> BacklogRow:
    """One cycle as `AdmissionLoop.cycle` runs it on a fresh backlog: the state from the cache
    (every waiting Workload queued), the decisions, then why each waiting one waits (its decision,
    else `explain`: on a first cycle no Workload shows a reason yet) and the waiting map."""
    cache = backlog_cache(n, all_fit)
    cache.snapshot()  # the static parts (flavor trees, quotas) are built once, not per cycle
    gc.collect()
    collecting = _GcTimer()
    gc.callbacks.append(collecting)
    q0 = _run_queue_wait()
    c0, t0 = time.process_time(), time.perf_counter()
    state = cache.admission_state()
    t1 = time.perf_counter()
    decisions = run_until_quiet(state)
    t2 = time.perf_counter()
    memo: dict[tuple[str, tuple[Any, ...]], Pending] = {}
    reasons = [state.pending.get(key) or explain(state, key, memo) for key in state.waiting()]
    waiting = {key: q for key in state.waiting() if (q := state.queue_of.get(key)) is not None}
    t3, c3 = time.perf_counter(), time.process_time()
    q3 = _run_queue_wait()
    gc.callbacks.remove(collecting)
    assert len(reasons) == len(waiting) == n - sum(isinstance(d, Admit) for d in decisions)
    return BacklogRow(n, t1 - t0, t2 - t1, t3 - t2, sum(isinstance(d, Admit) for d in decisions), c3 - c0,
                      collecting.total, None if q0 is None or q3 is None else q3 - q0)


def _run_queue_wait() -> float | None:
    """Seconds this process has waited on the kernel's run queue (runnable, no core free), or None."""
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class _GcTimer:
    """A gc callback adding up the wall time of every collection while it is registered."""

    def __init__(self) -> None:
        self.total, self._started = 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._started


class _AcceptingApi:
    """Answers the loop's writes at once (the object as patched; Events accepted), off any network."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        if "status" not in patch:  # a ClusterQueue's or ResourceFlavor's resource-in-use finalizer
            held = self.cache.cluster_queues.get(name) or self.cache.flavors.get(name)
            current = held.to_dict() if held is not None else {"metadata": {"name": name}}
            return {**current, "metadata": {**current["metadata"], **patch.get("metadata", {})}}
        entry = self.cache.workloads.get(f"{namespace}/{name}")
        current = entry.obj.to_dict() if entry is not None else {"metadata": {"name": name}}
        return {**current, "status": patch["status"]}

    async def create(self, resource: tuple[str, str], namespace: str | None, obj: Mapping[str, Any]) -> dict[str, Any]:
        return dict(obj)


def longest_stall(n: int, all_fit: bool, collect: bool) -> tuple[float, float]:
    """The operator's `AdmissionLoop.cycle` over a fresh backlog on an event loop, with a task that
    measures the longest time the loop went without giving it a turn (cycle and status writes), and
    the longest garbage collection meanwhile; `collect` False runs it with the collector off."""
    cache = backlog_cache(n, all_fit)
    cache.snapshot()
    api = _AcceptingApi(cache)
    loop = AdmissionLoop(cache, api, EventRecorder(api))  # type: ignore[arg-type]
    longest = [0.0]

    async def watch(done: asyncio.Event) -> None:
        while not done.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0)
            longest[0] = max(longest[0], time.perf_counter() - t)

    async def run() -> None:
        done = asyncio.Event()
        watcher = asyncio.create_task(watch(done))
        await asyncio.sleep(0)
        await loop.cycle()
        while loop._in_flight or loop._unstarted:
            await asyncio.sleep(0.01)
        done.set()
        await watcher
        if loop._queue_writer is not None:
            loop._queue_writer.cancel()

    pause, started = [0.0], [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pause[0] = max(pause[0], time.perf_counter() - started[0])

    gc.collect()
    gc.callbacks.append(timed)
    if not collect:
        gc.disable()
    try:
        asyncio.run(run())
    finally:
        gc.enable()
        gc.callbacks.remove(timed)
    return longest[0], pause[0]


class _VersioningApi(_AcceptingApi):
    """`_AcceptingApi` whose answers carry a new resourceVersion each, as the API server's do: the
    status the loop wrote then lands in the cache (the same version would be taken for a stale echo)."""

    def __init__(self, cache: ClusterCache) -> None:
        super().__init__(cache)
        self.version = 1_000_000

    async def merge_patch(self, resource: tuple[str, str], namespace: str | None, name: str,
                          patch: Mapping[str, Any], subresource: str | None = None) -> dict[str, Any]:
        answer = await super().merge_patch(resource, namespace, name, patch, subresource)
        self.version += 1
        return {**answer, "metadata": {**answer["metadata"], "resourceVersion": str(self.version)}}


def held_cycles(n: int, cycles: int = 5) -> tuple[float, float]:
    """The operator's `AdmissionLoop.cycle` over the few-fit backlog with every LocalQueue stopped
    (`stopPolicy: Hold`): the first cycle, which writes every Workload's reason, then the median
    process CPU of `cycles` more once those reasons are in the cache (what each arrival into a held
    queue costs while the backlog waits). Seconds."""
    cache = backlog_cache(n, False)
    for lq in list(cache.local_queues.values()):
        obj = lq.to_dict()
        obj["spec"]["stopPolicy"], obj["metadata"]["resourceVersion"] = "Hold", "2"
        cache.upsert(c.KIND_LOCAL_QUEUE, obj)
    cache.snapshot()
    loop = AdmissionLoop(cache, _VersioningApi(cache), EventRecorder(_VersioningApi(cache)),  # type: ignore[arg-type]
                         applied=cache.upsert)

    async def cycle() -> float:
        gc.collect()
        started = time.process_time()
        await loop.cycle()
        while loop._in_flight or loop._unstarted:
            await asyncio.sleep(0)
        return time.process_time() - started

    async def run() -> tuple[float, float]:
        first = await cycle()
        again = statistics.median([await cycle() for _ in range(cycles)])
        if loop._queue_writer is not None:
            loop._queue_writer.cancel()
        return first, again

    return asyncio.run(run())


def held(sizes: list[int]) -> None:
    print()
    print("held backlog (every LocalQueue stopped): AdmissionLoop.cycle, process CPU seconds")
    print()
    print("| workloads | first cycle (writes every reason) | each later cycle (median of 5) |")
    print("|---:|---:|---:|")
    for n in sizes:
        first, again = held_cycles(n)
        print(f"| {n:,} | {first:.3f} | {again:.4f} |", flush=True)


def backlog(sizes: list[int]) -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{platform.python_implementation()} {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{BACKLOG_SHAPE.nodes} nodes, {BACKLOG_QUEUES} ClusterQueues; one admission cycle, seconds")
    print()
    print("| scenario | workloads | admitted | state | decide | reasons | cycle | cycle CPU | GC in cycle "
          "| waited for a core | exponent | stall | of which GC | stall, GC off |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for all_fit in (False, True):
        prev: BacklogRow | None = None
        for n in sizes:
            row = backlog_cycle(n, all_fit)
            slope = "" if prev is None else f"{math.log(row.total_s / prev.total_s) / math.log(n / prev.waiting):.2f}"
            print(f"| {'all fit' if all_fit else 'few fit'} | {n:,} | {row.admitted:,} | {row.state_s:.3f} | "
                  f"{row.decide_s:.3f} | {row.reasons_s:.3f} | {row.total_s:.3f} | {row.cpu_s:.3f} | {row.gc_s:.3f} | "
                  f"{'' if row.waited_s is None else f'{row.waited_s:.3f}'} | {slope} | "
                  f"{'{:.3f} | {:.3f}'.format(*longest_stall(n, all_fit, True))} | "
                  f"{longest_stall(n, all_fit, False)[0]:.3f} |", flush=True)
            prev = row
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; cycle CPU: the process's CPU time over the "
          "cycle; GC in cycle: the garbage collector's share of it; waited for a core: time the process was "
          "runnable but not running (the kernel's run-queue wait; wall is about CPU plus this); exponent: log-log slope of the cycle against the row above; stall: the longest the operator's event loop went without a turn while "
          "AdmissionLoop.cycle ran on the same backlog (its status writes answered at once, in-process), "
          "with the longest garbage collection during that run, and the stall again with the collector off")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 cohort x 2 queues, 10%% of the workloads")
    parser.add_argument("--backlog", action="store_true", help="one cycle over a backlog of waiting Workloads")
    parser.add_argument("--sizes", default="100,1000,10000", help="backlog sizes (with --backlog)")
    args = parser.parse_args()
    if args.backlog:
        backlog([int(size) for size in args.sizes.split(",")])
        held([int(size) for size in args.sizes.split(",")])
        return
    cohorts, queues, scale = (1, 2, 0.1) if args.quick else (5, 6, 1.0)
    shapes = (Shape(1, 10, 64), Shape(5, 20, 100))
    results = []
    for shape in shapes:
        t0 = time.perf_counter()
        state = make_state(shape, cohorts, queues)
        arrivals = make_arrivals(cohorts, queues, scale)
        print(f"{shape.nodes:,} nodes: snapshot + {len(arrivals):,} workloads built in {time.perf_counter() - t0:.2f}s")
        results.append(drive(state, arrivals, shape.nodes))
    print()
    report(results)


if __name__ == "__main__":
    main()
