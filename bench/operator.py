"""Benchmark the operator: Job creation -> Admitted latency with 10,000 nodes and 1,000 arriving Jobs.

A bare devcluster (no simulated components: pods are never created, only admission is timed) runs
in a subprocess, seeded with `--nodes` GPU nodes (block > rack > host, 8 GPUs each). This process
runs the operator on its own thread and event loop; the scenarios start once it is ready (the
startup time and RSS are printed). Each scenario's `--jobs` queue-labelled, suspended
Jobs (4 pods x 8 GPUs; half require a rack, a quarter prefer a block, a quarter unconstrained) are
created by a client in another process (so it does not compete for the operator's GIL), at a rate
per second or all at once (`0` in `--rates`). Latency is from just before a Job's create request
to the return of the operator's Admitted status write (CLOCK_MONOTONIC, one clock for both
processes). Also per Job: the operator thread's CPU time (`time.thread_time`, far less sensitive
to the machine's load than latency) and the API requests it sent, by kind, and its Events (posted,
count bumps, repeats not written), all counted once the trailing Events are posted, and the CPU per
Job of the devcluster and the client. `--profile FILE` writes a cProfile of the operator thread,
`--profile-devcluster FILE` one of the devcluster; `--timeline` prints where each scenario's time
went (`Timeline`: per-stage latencies of the Jobs, the cycles, per-process CPU every half second).
Results in bench/RESULTS.md under `## operator`.
Usage: `.venv/bin/python bench/operator.py [--nodes N] [--jobs N] [--rates 50,0] [--timeline] [--profile FILE]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import multiprocessing
import multiprocessing.connection
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, where bench/webhooks.py would shadow
# the webhooks package: tasq's own packages are imported from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api import constants as c  # noqa: E402
from controller.core.jobs.batch_job import workload_name_for_job  # noqa: E402
from controller.kube.api import JOBS, KubeApi, _call_kind, connect, path  # noqa: E402
from controller.kube.operating import Operator  # noqa: E402
from controller.kube.routing import Applied  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BLOCK, RACK = "example.com/block", "example.com/rack"
NODES_PER_RACK, RACKS_PER_BLOCK = 16, 8
PODS_PER_JOB = 4
"""Each pod asks for a whole node's 8 GPUs."""

SERVER = """
import asyncio, sys
from pathlib import Path
from devcluster.cluster import DevCluster
from devcluster.simulated.nodes import create_nodes, node_object
from devcluster.simulated.seeding import apply_crds
count, per_rack, per_block = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
async def main():
    async with DevCluster() as cluster:
        await apply_crds(cluster.api, Path("crds"))
        nodes = []
        for i in range(count):
            rack, block = i // per_rack, i // (per_rack * per_block)
            nodes.append(node_object(f"n{i}", {"example.com/block": f"b{block}", "example.com/rack": f"b{block}-r{rack}",
                                               "gpu": "h100"},
                                     {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}))
        await create_nodes(cluster.api, nodes)
        cluster.write_kubeconfig(sys.argv[1])
        await asyncio.Event().wait()
if len(sys.argv) > 5:  # --profile-devcluster: its cProfile written when it is stopped
    import cProfile, signal
    profiler = cProfile.Profile()
    def stop(*_):
        profiler.disable()
        profiler.dump_stats(sys.argv[5])
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    profiler.runcall(asyncio.run, main())
else:
    asyncio.run(main())
"""

SETUP: list[tuple[tuple[str, str], dict[str, Any]]] = [
    ((f"{c.GROUP}/{c.VERSION_V1ALPHA1}", c.PLURAL_TOPOLOGIES), {
        "apiVersion": f"{c.GROUP}/{c.VERSION_V1ALPHA1}", "kind": c.KIND_TOPOLOGY, "metadata": {"name": "dc"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": c.LABEL_HOSTNAME}]}}),
    ((c.API_VERSION, c.PLURAL_RESOURCE_FLAVORS), {
        "apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR, "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {"gpu": "h100"}, "topologyName": "dc"}}),
    ((c.API_VERSION, c.PLURAL_CLUSTER_QUEUES), {
        "apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE, "metadata": {"name": "team"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "nvidia.com/gpu"],
            "flavors": [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "1000000"},
                                                       {"name": "nvidia.com/gpu", "nominalQuota": "1000000"}]}]}]}}),
]


def job(name: str, namespace: str, i: int) -> dict[str, Any]:
    annotations = ({c.ANNOTATION_REQUIRE_TOPOLOGY: RACK} if i % 2 == 0 else
                   {c.ANNOTATION_PREFER_TOPOLOGY: BLOCK} if i % 4 == 1 else {})
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {c.LABEL_QUEUE_NAME: "lq"},
                         "annotations": annotations},
            "spec": {"parallelism": PODS_PER_JOB, "completions": PODS_PER_JOB, "suspend": True, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                              "limits": {"nvidia.com/gpu": "8"}}}]}}}}


def status_mib(field_name: str) -> float:
    """A /proc/self/status field (VmRSS, VmHWM) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mib() -> float:
    return status_mib("VmRSS")


SERVER_PIDS: dict[Path, int] = {}
"""kubeconfig -> the process id of the devcluster serving it (`--timeline` reads its CPU)."""


@contextlib.contextmanager
def bare_devcluster(nodes: int, tmp: Path, profile: Path | None = None) -> Iterator[Path]:
    """A bare devcluster subprocess seeded with `nodes` GPU nodes; yields its kubeconfig (in `tmp`)
    once it serves, and stops it on the way out (with `profile`, its cProfile is written there then)."""
    kubeconfig = tmp / "kubeconfig"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(kubeconfig), str(nodes),
                               str(NODES_PER_RACK), str(RACKS_PER_BLOCK),
                               *([str(profile.resolve())] if profile is not None else [])], cwd=REPO)
    SERVER_PIDS[kubeconfig] = server.pid
    try:
        deadline = time.monotonic() + 600
        while not kubeconfig.exists():
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the devcluster did not start")
            time.sleep(0.1)
        yield kubeconfig
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def cpu_ticks(stat: Path) -> int:
    """utime + stime of a process or thread (`/proc/.../stat`), in clock ticks; 0 once it is gone."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


class Timeline:
    """Where a scenario's time went (`--timeline`): per Job, when its create was sent and answered
    (the client), when the operator's cache first held the Job (its watch event) and its Workload
    (the create's answer), and when its admission was written; every admission cycle's start, end
    and admissions; when the operator's event loop waited in `select` with nothing to run; and the
    CPU of the operator's thread, this process, the devcluster and the client, sampled every 50 ms
    from /proc. Hooks the operator's objects from outside (a benchmark's instrument only)."""

    def __init__(self, running: OperatorThread, server_pid: int) -> None:
        operator = running.operator
        assert operator is not None and running.loop is not None and running.tid is not None
        self.first_seen: dict[tuple[str, str], float] = {}
        self.cycles: list[tuple[float, float, int, int]] = []
        """(start, end, admissions written from it, Workloads waiting at its start)."""
        self.idle: list[tuple[float, float]] = []
        self.requests: list[tuple[str, float, float]] = []
        """The operator's requests: (kind, sent, answered)."""
        self.decided: dict[str, float] = {}
        """Workload key -> when a cycle decided to admit it (its status write was started)."""
        self.samples: list[tuple[float, int, int, int, int]] = []
        """(time, operator thread, this process, devcluster, client) CPU ticks so far."""
        self.server_pid, self.client_pid = server_pid, 0
        self.thread_stat = Path(f"/proc/self/task/{running.tid}/stat")
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._unhook: list[Callable[[], None]] = []
        self._hook(operator, running.loop)

    def _hook(self, operator: Operator, loop: asyncio.AbstractEventLoop) -> None:
        first_seen = self.first_seen

        def seeing(applied: Applied) -> Applied:
            def seen(kind: str, obj: Any) -> bool:
                meta = obj.get("metadata") or {}
                key = (kind, f"{meta.get('namespace')}/{meta.get('name')}")
                if key not in first_seen:
                    first_seen[key] = time.monotonic()
                return applied(kind, obj)
            return seen
        # Where the watch streams (the router's) and the Job reconciler's writes (its own reference)
        # put what they got into the cache.
        router_applied, jobs_applied = operator.router.applied, operator.jobs.applied
        operator.router.applied = seeing(router_applied)  # type: ignore[method-assign,assignment]
        operator.jobs.applied = seeing(jobs_applied)
        self._unhook.append(lambda: delattr(operator.router, "applied"))
        self._unhook.append(functools.partial(setattr, operator.jobs, "applied", jobs_applied))
        request, requests = operator.api.request, self.requests

        async def sent_request(method: str, url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
            begin = time.monotonic()
            try:
                return await request(method, url, *args, **kwargs)
            finally:
                requests.append((_call_kind(method, url), begin, time.monotonic()))
        operator.api.request = sent_request  # type: ignore[method-assign]
        self._unhook.append(lambda: delattr(operator.api, "request"))
        admission, cycle, written = operator.admission, operator.admission.cycle, operator.admission._admission_written
        started = [0]

        def counted(admit: Any) -> Any:
            started[0] += 1
            self.decided.setdefault(admit.key, time.monotonic())
            return written(admit)

        async def timed() -> None:
            begin, started[0] = time.monotonic(), 0
            waiting = sum(1 for entry in admission.cache.workloads.values() if entry.fit is None and not entry.finished)
            try:
                await cycle()
            finally:
                self.cycles.append((begin, time.monotonic(), started[0], waiting))
        admission._admission_written = counted  # type: ignore[method-assign]
        admission.cycle = timed  # type: ignore[method-assign]
        self._unhook += [lambda: delattr(admission, "_admission_written"), lambda: delattr(admission, "cycle")]
        selector = loop._selector  # type: ignore[attr-defined]
        select, idle = selector.select, self.idle

        def waited(timeout: float | None = None) -> Any:
            begin = time.monotonic()
            try:
                return select(timeout)
            finally:
                idle.append((begin, time.monotonic()))
        selector.select = waited
        self._unhook.append(lambda: delattr(selector, "select"))

    def _sample(self) -> None:
        own, server = Path("/proc/self/stat"), Path(f"/proc/{self.server_pid}/stat")
        while not self._stop.is_set():
            client = cpu_ticks(Path(f"/proc/{self.client_pid}/stat")) if self.client_pid else 0
            last = self.samples[-1][4] if self.samples else 0
            self.samples.append((time.monotonic(), cpu_ticks(self.thread_stat), cpu_ticks(own), cpu_ticks(server),
                                 max(client, last)))
            self._stop.wait(0.05)

    def start(self) -> None:
        self._sampler.start()

    def stop(self) -> None:
        self._stop.set()
        self._sampler.join()
        for unhook in self._unhook:
            unhook()

    def report(self, sent: dict[str, float], answered: dict[str, float], admitted_at: dict[str, float],
               namespace: str, bucket_s: float = 0.5) -> str:
        """Stage latencies (p50 / p99 / max), then a row per `bucket_s` from the first send."""
        jobs = {f"{namespace}/{workload_name_for_job(name)}": name
                for (kind, key) in self.first_seen if kind == c.KIND_JOB
                for name in [key.split("/", 1)[1]] if key.startswith(namespace + "/")}
        job_seen = {wl: self.first_seen[(c.KIND_JOB, f"{namespace}/{name}")] for wl, name in jobs.items()}
        wl_seen = {key: t for (kind, key), t in self.first_seen.items() if kind == c.KIND_WORKLOAD}
        stages = [("create sent -> answered (client, devcluster)", sent, answered),
                  ("create answered -> Job in operator's cache (watch)", answered, job_seen),
                  ("Job cached -> Workload cached (reconciler's create)", job_seen, wl_seen),
                  ("Workload cached -> Admitted written (admission only)", wl_seen, admitted_at),
                  ("  of which Workload cached -> decided by a cycle", wl_seen, self.decided),
                  ("  and decided -> Admitted written (the status write)", self.decided, admitted_at),
                  ("create sent -> Admitted written (the bench's latency)", sent, admitted_at)]
        lines = [f"  {'stage':<56} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"]
        for title, since, until in stages:
            spans = [until[k] - since[k] for k in sent if k in since and k in until]
            if spans:
                lines.append(f"  {title:<56} {statistics.median(spans) * 1000:>8.0f} "
                             f"{percentile(spans, 0.99) * 1000:>8.0f} {max(spans) * 1000:>8.0f}")
        t0 = min(sent.values())
        by_kind: dict[str, list[float]] = {}
        for kind, begin, ended in self.requests:
            if begin >= t0:
                by_kind.setdefault(kind, []).append(ended - begin)
        lines.append("  the operator's requests, answered in ms (p50 / p99, count): " + "; ".join(
            f"{kind} {statistics.median(spans) * 1000:.0f} / {percentile(spans, 0.99) * 1000:.0f} ({len(spans)})"
            for kind, spans in sorted(by_kind.items(), key=lambda item: -len(item[1]))))
        end = max(admitted_at.get(k, t0) for k in sent) + bucket_s
        cycles = [cy for cy in self.cycles if t0 <= cy[0] <= end]
        sizes = sorted(n for _, _, n, _ in cycles)
        if sizes:
            lines.append(f"  cycles {len(cycles)}, busy {sum(e - b for b, e, _, _ in cycles):.2f} s; admissions per "
                         f"cycle median {sizes[len(sizes) // 2]}, max {sizes[-1]}; waiting at a cycle's start max "
                         f"{max(w for *_, w in cycles)}")
        lines.append(f"  {'from s':>6} {'created':>7} {'Jobs':>5} {'wls':>5} {'admit':>5} {'cycles (admits)':<22} "
                     f"{'op thr%':>7} {'loop idle%':>10} {'proc%':>6} {'devcl%':>6} {'client%':>7} {'in flight':>9}")
        at = t0
        while at < end:
            def within(times: dict[str, float], at: float = at) -> int:
                return sum(1 for k in sent if at <= times.get(k, -1.0) < at + bucket_s)
            these = [n for b, _, n, _ in cycles if at <= b < at + bucket_s]
            idle = sum(max(0.0, min(e, at + bucket_s) - max(b, at)) for b, e in self.idle if e > at and b < at + bucket_s)
            flight = sum(max(0.0, min(e, at + bucket_s) - max(b, at)) for _, b, e in self.requests
                         if e > at and b < at + bucket_s) / bucket_s
            inside = [s for s in self.samples if at <= s[0] <= at + bucket_s]
            cpu = ["" if len(inside) < 2 else f"{(inside[-1][i] - inside[0][i]) * TICK_S * 100 / (inside[-1][0] - inside[0][0]):.0f}"
                   for i in range(1, 5)]
            lines.append(f"  {at - t0:>6.1f} {within(answered):>7} {within(job_seen):>5} {within(wl_seen):>5} "
                         f"{within(admitted_at):>5} {len(these):>3} {str(these)[:18]:<18} {cpu[0]:>7} "
                         f"{idle * 100 / bucket_s:>10.0f} {cpu[1]:>6} {cpu[2]:>6} {cpu[3]:>7} {flight:>9.0f}")
            at += bucket_s
        return "\n".join(lines)


class OperatorThread:
    """The operator on its own loop (as `tasq run` would be) in this process."""

    def __init__(self, kubeconfig: Path, profile: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.profile = profile
        self.operator: Operator | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.tid: int | None = None
        """The operator thread's id as the kernel knows it (its /proc/self/task entry)."""
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._thread, daemon=True)

    def _thread(self) -> None:
        if self.profile is None:
            asyncio.run(self._main())
            return
        profiler = cProfile.Profile()
        profiler.runcall(asyncio.run, self._main())
        profiler.dump_stats(self.profile)

    def cpu_seconds(self) -> float:
        """CPU time the operator's thread has used so far (its own clock: the client and the
        devcluster, in other processes, are not counted)."""
        assert self.loop is not None

        async def now() -> float:
            return time.thread_time()
        return asyncio.run_coroutine_threadsafe(now(), self.loop).result(30)

    async def _main(self) -> None:
        self.tid = threading.get_native_id()
        self.loop = asyncio.get_running_loop()
        self.stop_event = asyncio.Event()
        api_client = await connect(self.kubeconfig)
        self.operator = Operator(api_client)
        waiter = asyncio.create_task(self._ready())
        try:
            await self.operator.run(self.stop_event)
        finally:
            waiter.cancel()
            await api_client.close()  # type: ignore[no-untyped-call]

    async def _ready(self) -> None:
        assert self.operator is not None
        await self.operator.ready.wait()
        self.ready.set()

    def start(self) -> OperatorThread:
        self.thread.start()
        if not self.ready.wait(300):
            raise RuntimeError("the operator did not become ready")
        return self

    def stop(self) -> None:
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(60)


async def setup(kubeconfig: Path, namespaces: list[str]) -> None:
    api_client = await connect(kubeconfig)
    api = KubeApi(api_client)
    for resource, obj in SETUP:
        await api.create(resource, None, obj)
    for ns in namespaces:
        await api.create(("v1", "namespaces"), None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await api.create((c.API_VERSION, c.PLURAL_LOCAL_QUEUES), ns, {
            "apiVersion": c.API_VERSION, "kind": c.KIND_LOCAL_QUEUE, "metadata": {"name": "lq", "namespace": ns},
            "spec": {"clusterQueue": "team"}})
    await api_client.close()  # type: ignore[no-untyped-call]


async def create_jobs(kubeconfig: Path, namespace: str, count: int, rate: float,
                      answered: dict[str, float] | None = None) -> dict[str, float]:
    """Create the Jobs (at `rate` per second, or all at once with 0); workload key -> send time (and
    into `answered`, when given, the time its create was answered)."""
    api_client = await connect(kubeconfig)
    api = KubeApi(api_client)
    sent: dict[str, float] = {}
    slots = asyncio.Semaphore(32)
    start = time.monotonic()

    async def one(i: int) -> None:
        name = f"j{i}"
        if rate > 0:
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        async with slots:
            key = f"{namespace}/{workload_name_for_job(name)}"
            sent[key] = time.monotonic()
            await api.request("POST", path(*JOBS, namespace), job(name, namespace, i))
            if answered is not None:
                answered[key] = time.monotonic()

    await asyncio.gather(*(one(i) for i in range(count)))
    await api_client.close()  # type: ignore[no-untyped-call]
    return sent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def client_process(kubeconfig: Path, namespace: str, count: int, rate: float,
                   answer: multiprocessing.connection.Connection) -> None:
    """The Job-creating client in its own process (so it does not share the operator's GIL): sends
    back the send times, the answer times and its own CPU seconds."""
    answered: dict[str, float] = {}
    sent = asyncio.run(create_jobs(kubeconfig, namespace, count, rate, answered))
    answer.send((sent, answered, time.process_time()))
    answer.close()


def scenario(running: OperatorThread, kubeconfig: Path, namespace: str, jobs: int, rate: float,
             timeline: bool = False) -> str:
    operator = running.operator
    assert operator is not None
    watch = Timeline(running, SERVER_PIDS[kubeconfig]) if timeline else None
    server_before = cpu_ticks(Path(f"/proc/{SERVER_PIDS[kubeconfig]}/stat")) if kubeconfig in SERVER_PIDS else 0
    process_before = time.process_time()
    cycles_before, calls_before = operator.admission.cycles, operator.api.calls
    calls_by_before = operator.api.calls_by.copy()
    events_before = (operator.recorder.posted, operator.recorder.bumped, operator.recorder.dropped)
    stale_before = operator.cache.stale_events
    relists_before = sum(stream.relists for stream in operator.streams)
    cpu_before = running.cpu_seconds()
    begin = time.monotonic()
    receiving, sending = multiprocessing.get_context("spawn").Pipe(duplex=False)
    client = multiprocessing.get_context("spawn").Process(
        target=client_process, args=(kubeconfig, namespace, jobs, rate, sending))
    client.start()
    if watch is not None:
        watch.client_pid = client.pid or 0
        watch.start()
    sending.close()
    # CLOCK_MONOTONIC is one clock for the whole machine on Linux: the client's send times and the
    # operator's write times compare directly.
    try:
        sent, answered, client_cpu = receiving.recv()
    except EOFError:
        raise RuntimeError("the Job-creating client failed (its error is above)") from None
    client.join()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not all(key in operator.admission.admitted_at for key in sent):
        time.sleep(0.05)
    admitted = {key: operator.admission.admitted_at[key] - t for key, t in sent.items()
                if key in operator.admission.admitted_at}
    latencies = list(admitted.values())
    wall = time.monotonic() - begin
    # The Events (posted in the background, a few at a time) and queue statuses that trail the
    # last admission are part of each Job's cost: CPU and API calls are counted once they are done.
    trailing = time.monotonic() + 120
    while time.monotonic() < trailing and operator.recorder.unsent:
        time.sleep(0.1)
    time.sleep(0.5)
    cpu_ms = (running.cpu_seconds() - cpu_before) * 1000 / jobs
    if watch is not None:
        watch.stop()
        print(watch.report(sent, answered, operator.admission.admitted_at, namespace), flush=True)
    if kubeconfig in SERVER_PIDS:
        server_ms = (cpu_ticks(Path(f"/proc/{SERVER_PIDS[kubeconfig]}/stat")) - server_before) * TICK_S * 1000 / jobs
        print(f"  CPU ms per Job: operator thread {cpu_ms:.1f}, this process {(time.process_time() - process_before) * 1000 / jobs:.1f}, "
              f"devcluster {server_ms:.1f}, client {client_cpu * 1000 / jobs:.1f}; load average {os.getloadavg()[0]:.1f}",
              flush=True)
    calls = (operator.api.calls - calls_before) / jobs
    by_kind = operator.api.calls_by - calls_by_before
    events = [(now - before) / jobs for now, before in zip(
        (operator.recorder.posted, operator.recorder.bumped, operator.recorder.dropped), events_before, strict=True)]
    relists = sum(stream.relists for stream in operator.streams) - relists_before
    print("  requests per Job: " + ", ".join(f"{kind} {n / jobs:.2f}" for kind, n in by_kind.most_common())
          + "; Events per Job posted {:.2f}, count bumps {:.2f}, repeats not written {:.2f}".format(*events)
          + f"; relists {relists}", flush=True)
    arrival = f"{rate:g}/s" if rate > 0 else "burst"
    if not latencies:
        return f"{arrival:<10} {jobs:>6} {0:>9}  (nothing admitted)"
    return (f"{arrival:<10} {jobs:>6} {len(latencies):>9} {statistics.median(latencies) * 1000:>9.0f} "
            f"{percentile(latencies, 0.99) * 1000:>9.0f} {max(latencies) * 1000:>9.0f} "
            f"{operator.admission.cycles - cycles_before:>7} {wall:>8.1f} {cpu_ms:>8.1f} {calls:>6.1f} "
            f"{rss_mib():>8.0f} {operator.cache.stale_events - stale_before:>7}")


def machine() -> str:
    load = os.getloadavg()[0]
    return (f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
            f"load average {load:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--rates", default="50,0", help="Jobs per second per scenario; 0 = all at once")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the operator's thread to this file")
    parser.add_argument("--profile-devcluster", type=Path, help="write a cProfile of the devcluster to this file")
    parser.add_argument("--timeline", action="store_true",
                        help="per scenario, where the time went: stage latencies and a row per half second")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    if args.jobs * len(rates) * PODS_PER_JOB > args.nodes:
        parser.error(f"--jobs {args.jobs} x {len(rates)} scenarios x {PODS_PER_JOB} nodes per Job do not fit on "
                     f"--nodes {args.nodes}: the later Jobs would wait for capacity, not for the operator")
    print(f"operator, {args.nodes} nodes, {args.jobs} Jobs per scenario; {machine()}")
    with tempfile.TemporaryDirectory() as tmp, bare_devcluster(args.nodes, Path(tmp), args.profile_devcluster) as kubeconfig:
        namespaces = [f"s{i}" for i in range(len(rates))]
        asyncio.run(setup(kubeconfig, namespaces))
        rss_before = rss_mib()
        started = time.monotonic()
        running = OperatorThread(kubeconfig, args.profile).start()
        ready = time.monotonic() - started
        operator = running.operator
        assert operator is not None
        print(f"operator ready in {ready:.1f} s (priming {args.nodes} nodes; its watch streams go on from "
              f"the priming lists); process RSS {rss_before:.0f} -> {rss_mib():.0f} MiB")
        print(f"{'arrival':<10} {'jobs':>6} {'admitted':>9} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} "
              f"{'cycles':>7} {'wall s':>8} {'cpu ms/job':>8} {'calls/job':>6} {'RSS MiB':>8} {'stale':>7}")
        try:
            for namespace, rate in zip(namespaces, rates, strict=True):
                print(scenario(running, kubeconfig, namespace, args.jobs, rate, args.timeline), flush=True)
        finally:
            running.stop()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        sys.exit(f"bench/operator.py: {e}")
