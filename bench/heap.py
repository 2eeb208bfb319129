"""Where the operator's memory goes and how long the garbage collector stops it, at start and in a burst.

Runs bench/operator.py's set-up (a bare devcluster subprocess with `--nodes` GPU nodes, the operator
on its own thread) and one burst of `--jobs` Jobs, and prints per phase (imported, primed, after the
burst): the process's RSS and peak RSS (VmHWM), the collector's passes by generation with the longest
pause (timed with `gc.callbacks` in the operator's process: the pause is what the event loop waits;
its CPU time, `time.thread_time`, is the part the machine's load does not inflate) and, with `--trace`, tracemalloc's traced and peak bytes, the top allocation sites by line and, from the largest
snapshot a polling thread took during the burst, what it held beyond the burst's end (the
tracer slows everything about 3x: its times say nothing, its bytes do).
Results in bench/RESULTS.md under `## operator` ("Memory and collector pauses").
With `--sizes`, the cache's bytes and objects by part after the burst. Last, the RSS once glibc's free
pages are handed back (`malloc_trim`): what the process held but no longer used.
With `--held` the burst goes into a LocalQueue on hold (stopPolicy Hold): Workloads created, none admitted.
Usage: `.venv/bin/python bench/heap.py [--nodes N] [--jobs N] [--held] [--trace [--frames N]] [--top N] [--sizes]`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import tracemalloc
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_operator", HERE / "operator.py")
assert _spec is not None and _spec.loader is not None
bench_operator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_operator)


def client_process(*args: object) -> None:
    """bench/operator.py's Job-creating client, importable by the spawned process (from this file)."""
    _create_jobs(*args)


_create_jobs = bench_operator.__dict__["client_process"]
bench_operator.__dict__["client_process"] = client_process


async def hold_queue(kubeconfig: Path, namespace: str) -> None:
    """Put the scenario's LocalQueue on hold (stopPolicy Hold): its Workloads are created and wait."""
    api_client = await bench_operator.connect(kubeconfig)
    api = bench_operator.KubeApi(api_client)
    await api.request("PATCH", bench_operator.path(bench_operator.c.API_VERSION, bench_operator.c.PLURAL_LOCAL_QUEUES,
                                                    namespace, "lq"),
                      {"spec": {"stopPolicy": "Hold"}}, content_type="application/merge-patch+json")
    await api_client.close()


def held(running: Any, kubeconfig: Path, namespace: str, jobs: int) -> str:
    """`jobs` Jobs created at once into a held queue; done once each has its Workload and the
    operator's Events are posted (as vs_kueue.py's `1000 held`)."""
    operator = running.operator
    started = time.monotonic()
    receiving, sending = multiprocessing.get_context("spawn").Pipe(duplex=False)
    client = multiprocessing.get_context("spawn").Process(
        target=client_process, args=(kubeconfig, namespace, jobs, 0.0, sending))
    client.start()
    sending.close()
    sent = receiving.recv()[0]
    client.join()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not all(key in operator.cache.workloads for key in sent):
        time.sleep(0.1)
    while time.monotonic() < deadline and operator.recorder.unsent:
        time.sleep(0.1)
    time.sleep(1)
    waiting = sum(1 for key in sent if key in operator.cache.workloads)
    return f"held: {waiting} of {jobs} Workloads waiting in {time.monotonic() - started:.1f} s"


class PeakCatcher:
    """With --trace: a thread that polls tracemalloc's traced bytes every 20 ms and, whenever they pass
    the largest snapshot taken so far by `step` bytes, takes a new one; `show` prints what the
    largest held beyond the phase's end (the transient part of the peak), by allocation site."""

    def __init__(self, step: int = 2 << 20) -> None:
        self.step = step
        self.largest: tuple[int, tracemalloc.Snapshot] | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stopped.wait(0.02):
            current = tracemalloc.get_traced_memory()[0]
            if self.largest is None or current > self.largest[0] + self.step:
                self.largest = (current, tracemalloc.take_snapshot())

    def show(self, top: int) -> None:
        self.stopped.set()
        self.thread.join()
        if self.largest is None:
            return
        size, peak = self.largest
        end = tracemalloc.take_snapshot()
        print(f"  the largest snapshot: {size / 2**20:.1f} MiB traced; what it held beyond the end, by site:", flush=True)
        key = "traceback" if tracemalloc.get_traceback_limit() > 1 else "lineno"
        for stat in peak.compare_to(end, key)[:top]:
            where = " < ".join(f"{_short(frame.filename)}:{frame.lineno}" for frame in reversed(stat.traceback))
            print(f"  {stat.size_diff / 2**20:7.1f} MiB {stat.count_diff:>8} blocks  {where}", flush=True)


status_mib = bench_operator.status_mib


@dataclass
class Pauses:
    """The collector's passes seen by `gc.callbacks`: count and longest pause per generation."""

    count: list[int] = field(default_factory=lambda: [0, 0, 0])
    longest: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    total: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    longest_cpu: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    _started: float = 0.0
    _started_cpu: float = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started, self._started_cpu = time.perf_counter(), time.thread_time()
            return
        took, cpu = time.perf_counter() - self._started, time.thread_time() - self._started_cpu
        generation = info["generation"]
        self.count[generation] += 1
        self.total[generation] += took
        if took > self.longest[generation]:
            self.longest[generation], self.longest_cpu[generation] = took, cpu

    def take(self) -> str:
        said = ", ".join(f"gen{g} {self.count[g]} passes (longest {self.longest[g] * 1000:.0f} ms, of it CPU "
                         f"{self.longest_cpu[g] * 1000:.0f} ms; total {self.total[g] * 1000:.0f} ms)" for g in range(3))
        self.count, self.total = [0, 0, 0], [0.0, 0.0, 0.0]
        self.longest, self.longest_cpu = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        return said


def _freezes() -> int:
    """How often the operator's collector hook froze survivors (controller.kube.collecting), if it has one."""
    try:
        from controller.kube import collecting
    except ImportError:
        return 0
    return collecting.install().freezes


def deep_size(root: object, seen: set[int]) -> tuple[int, int]:
    """Bytes and objects reachable from `root` not already in `seen` (classes, modules and functions
    not followed: they are the program's, not the data's)."""
    size = count = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(obj))
        size += sys.getsizeof(obj)
        count += 1
        stack.extend(gc.get_referents(obj))
        if type(obj) is dict:  # a dict of str keys does not give its keys to gc: followed here
            stack.extend(obj.keys())
    return size, count


def cache_sizes(running: object) -> None:
    """The operator's cache by attribute: bytes and objects reachable from each (shared ones counted
    once, under the first attribute that reaches them), then the rest of the operator."""
    operator = getattr(running, "operator", None)
    if operator is None:
        return
    cache = operator.cache
    seen: set[int] = set()
    parts = []
    for name in ("nodes", "pods", "owners", "workloads", "usage", "_flavor_infos", "_ledger", "_versions",
                 "cluster_queues", "local_queues", "namespaces"):
        size, count = deep_size(getattr(cache, name), seen)
        parts.append(f"{name} {size / 2**20:.1f} MiB ({count} objects)")
    size, count = deep_size(operator, seen)
    parts.append(f"the rest of the operator {size / 2**20:.1f} MiB ({count} objects)")
    print("  cache: " + ", ".join(parts), flush=True)
    entries = list(cache.workloads.values())
    seen = set()
    split = []
    parts_of: list[tuple[str, Callable[[Any], object]]] = [
        ("metadata", lambda e: e.obj.metadata), ("spec", lambda e: e.obj.spec), ("status", lambda e: e.obj.status),
        ("the model's own", lambda e: e.obj), ("info", lambda e: e.info), ("fit", lambda e: e.fit)]
    for name, part in parts_of:
        size = count = 0
        for entry in entries:
            more, n = deep_size(part(entry), seen)
            size, count = size + more, count + n
        split.append(f"{name} {size / 2**20:.1f} MiB ({count} objects)")
    print(f"  its {len(entries)} Workloads: " + ", ".join(split), flush=True)


def _release_free_memory() -> None:
    """glibc's free pages back to the system (through the operator's own call, where it has one)."""
    try:
        from controller.kube import collecting
    except ImportError:
        return
    collecting.release_free_memory()


def report(phase: str, pauses: Pauses, trace: bool, top: int) -> None:
    print(f"{phase}: RSS {status_mib('VmRSS'):.0f} MiB, peak {status_mib('VmHWM'):.0f} MiB; "
          f"frozen {gc.get_freeze_count()} objects ({_freezes()} freezes after a slow full pass); {pauses.take()}",
          flush=True)
    if not trace:
        return
    current, peak = tracemalloc.get_traced_memory()
    print(f"  traced {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB", flush=True)
    tracemalloc.reset_peak()
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    for stat in snapshot.statistics("traceback" if tracemalloc.get_traceback_limit() > 1 else "lineno")[:top]:
        where = " < ".join(f"{_short(frame.filename)}:{frame.lineno}" for frame in reversed(stat.traceback))
        print(f"  {stat.size / 2**20:7.1f} MiB {stat.count:>8} blocks  {where}", flush=True)


def _short(filename: str) -> str:
    """A source file's name relative to the repository (or its last three parts elsewhere)."""
    if filename.startswith(str(HERE.parent)) and ".venv" not in filename:
        return os.path.relpath(filename, HERE.parent)
    return "/".join(Path(filename).parts[-2:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--trace", action="store_true", help="tracemalloc's bytes and top allocation sites")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--frames", type=int, default=1, help="with --trace: frames kept per allocation site")
    parser.add_argument("--sizes", action="store_true", help="the cache's bytes by part after the burst")
    parser.add_argument("--held", action="store_true", help="the burst goes into a held LocalQueue: nothing admitted")
    args = parser.parse_args()
    pauses = Pauses()
    gc.callbacks.append(pauses)
    if args.trace:
        tracemalloc.start(args.frames)
    print(f"heap, {args.nodes} nodes, a burst of {args.jobs} Jobs; {bench_operator.machine()}", flush=True)
    report("imported", pauses, args.trace, args.top)
    with tempfile.TemporaryDirectory() as tmp, bench_operator.bare_devcluster(args.nodes, Path(tmp)) as kubeconfig:
        import asyncio
        asyncio.run(bench_operator.setup(kubeconfig, ["s0"]))
        if args.held:
            asyncio.run(hold_queue(kubeconfig, "s0"))
        pauses.take()
        started = time.monotonic()
        running = bench_operator.OperatorThread(kubeconfig).start()
        report(f"primed in {time.monotonic() - started:.1f} s", pauses, args.trace, args.top)
        try:
            catcher = PeakCatcher() if args.trace else None
            row = (held(running, kubeconfig, "s0", args.jobs) if args.held
                   else bench_operator.scenario(running, kubeconfig, "s0", args.jobs, 0))
            print(row, flush=True)
            report("after the burst", pauses, args.trace, args.top)
            if catcher is not None:
                catcher.show(args.top)
            if args.sizes:
                cache_sizes(running)
            _release_free_memory()
            print(f"  after handing glibc's free pages back: RSS {status_mib('VmRSS'):.0f} MiB", flush=True)
        finally:
            running.stop()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        sys.exit(f"bench/heap.py: {e}")
