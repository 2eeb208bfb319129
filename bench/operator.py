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
count bumps, repeats not written), all counted once the trailing Events are posted. `--profile FILE` writes a cProfile of the operator thread.
Results in bench/RESULTS.md under `## operator`.
Usage: `.venv/bin/python bench/operator.py [--nodes N] [--jobs N] [--rates 50,0] [--profile FILE]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path, where bench/webhooks.py would shadow
# the webhooks package: tasq's own packages are imported from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api import constants as c  # noqa: E402
from controller.core.jobs.batch_job import workload_name_for_job  # noqa: E402
from controller.kube.api import JOBS, KubeApi, connect, path  # noqa: E402
from controller.kube.operating import Operator  # noqa: E402

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


@contextlib.contextmanager
def bare_devcluster(nodes: int, tmp: Path) -> Iterator[Path]:
    """A bare devcluster subprocess seeded with `nodes` GPU nodes; yields its kubeconfig (in `tmp`)
    once it serves, and stops it on the way out."""
    kubeconfig = tmp / "kubeconfig"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(kubeconfig), str(nodes),
                               str(NODES_PER_RACK), str(RACKS_PER_BLOCK)], cwd=REPO)
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


class OperatorThread:
    """The operator on its own loop (as `tasq run` would be) in this process."""

    def __init__(self, kubeconfig: Path, profile: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.profile = profile
        self.operator: Operator | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
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


async def create_jobs(kubeconfig: Path, namespace: str, count: int, rate: float) -> dict[str, float]:
    """Create the Jobs (at `rate` per second, or all at once with 0); workload key -> send time."""
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
            sent[f"{namespace}/{workload_name_for_job(name)}"] = time.monotonic()
            await api.request("POST", path(*JOBS, namespace), job(name, namespace, i))

    await asyncio.gather(*(one(i) for i in range(count)))
    await api_client.close()  # type: ignore[no-untyped-call]
    return sent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def client_process(kubeconfig: Path, namespace: str, count: int, rate: float,
                   answer: multiprocessing.connection.Connection) -> None:
    """The Job-creating client in its own process (so it does not share the operator's GIL)."""
    answer.send(asyncio.run(create_jobs(kubeconfig, namespace, count, rate)))
    answer.close()


def scenario(running: OperatorThread, kubeconfig: Path, namespace: str, jobs: int, rate: float) -> str:
    operator = running.operator
    assert operator is not None
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
    sending.close()
    # CLOCK_MONOTONIC is one clock for the whole machine on Linux: the client's send times and the
    # operator's write times compare directly.
    try:
        sent: dict[str, float] = receiving.recv()
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
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    if args.jobs * len(rates) * PODS_PER_JOB > args.nodes:
        parser.error(f"--jobs {args.jobs} x {len(rates)} scenarios x {PODS_PER_JOB} nodes per Job do not fit on "
                     f"--nodes {args.nodes}: the later Jobs would wait for capacity, not for the operator")
    print(f"operator, {args.nodes} nodes, {args.jobs} Jobs per scenario; {machine()}")
    with tempfile.TemporaryDirectory() as tmp, bare_devcluster(args.nodes, Path(tmp)) as kubeconfig:
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
                print(scenario(running, kubeconfig, namespace, args.jobs, rate), flush=True)
        finally:
            running.stop()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        sys.exit(f"bench/operator.py: {e}")
