"""Benchmark of the TopologyUngater: the pure planner alone, then a 4,096-pod Workload on a devcluster.

Planner rows time `plan_ungating` on 4,096 pods in 64 slices. Devcluster rows: an API server (devcluster,
no simulated scheduler or kubelet) in its own process; 4,096 gated pods created; then the ungater in
this process (kubernetes.aio client) releases them all: `sync` is plan + patches, `notify->done` also
includes the 1 s batch window. Target: pods created -> all ungated <= 3 s. With `--kubeconfig` the
same rows run against that cluster instead (e.g. `hack/realcluster/up`'s kube-apiserver; its server
CPU is not measured).
Run: `.venv/bin/python bench/ungating.py [--pods 4096] [--parallelism 16,32] [--reps 30] [--kubeconfig K]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes.aio import config as aconfig
from kubernetes.aio.client import ApiClient, CoreV1Api

from controller.api import constants as c
from controller.api.topology_assignment import DomainPods
from controller.core.ungating import PodState, UngatingInput, plan_ungating
from controller.kube.api import KubeApi
from controller.kube.ungating import TopologyUngater

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script, the repository root is not on the path

from tests.client_models import as_body, present  # noqa: E402

BLOCK, RACK = "cloud.com/block", "cloud.com/rack"
PODS_PER_SLICE = 64
SERVER_PID = 0  # the devcluster process, whose CPU time the devcluster rows report


def server_cpu_seconds() -> float:
    """utime + stime of the server process (/proc/<pid>/stat fields 14 and 15); NaN for another cluster."""
    if not SERVER_PID:
        return float("nan")
    fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
SERVER = """
import asyncio, sys
from devcluster.cluster import DevCluster
async def main():
    async with DevCluster() as cluster:
        cluster.write_kubeconfig(sys.argv[1])
        await asyncio.Event().wait()
asyncio.run(main())
"""


def slices_for(pods: int) -> dict[str, list[DomainPods]]:
    n = -(-pods // PODS_PER_SLICE)
    return {"main": [DomainPods(node_labels={BLOCK: f"b{i // 8}", RACK: f"r{i:03d}"},
                                   count=min(PODS_PER_SLICE, pods - i * PODS_PER_SLICE)) for i in range(n)]}


def pod_states(pods: int, running: int = 0, indexed: bool = True) -> list[PodState]:
    """`running` pods already released into their slot's slice (every other one), the rest gated."""
    slices = slices_for(pods)["main"]
    states = []
    for i in range(pods):
        released = i % 2 == 0 and i // 2 < running
        labels = dict(slices[i // PODS_PER_SLICE].node_labels) if released else None
        states.append(PodState(f"p{i}", f"u{i}", "main", i if indexed else None, not released, labels, False,
                               f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"))
    return states


def time_planner(pods: int, reps: int) -> list[str]:
    cases = [("fresh, indexed", pod_states(pods)),
             ("half running, indexed", pod_states(pods, running=pods // 2)),
             ("fresh, no index", pod_states(pods, indexed=False))]
    lines = []
    for name, states in cases:
        inp = UngatingInput("ns", "wl", slices_for(pods), states)
        samples = []
        for _ in range(reps):
            gc.collect()  # time the planner, not a collection of the previous repetition's garbage
            t = time.perf_counter()
            plan = plan_ungating(inp)
            samples.append(time.perf_counter() - t)
        lines.append(f"planner {name:<24} {pods:>6} {len(plan.ungate):>8} {statistics.median(samples) * 1e3:>9.2f} "
                     f"{max(samples) * 1e3:>9.2f}")
    return lines


def gated_pod(name: str, index: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {c.LABEL_JOB_COMPLETION_INDEX: str(index)}},
            "spec": {"schedulingGates": [{"name": c.SCHEDULING_GATE_TOPOLOGY}],
                     "containers": [{"name": "c", "image": "busybox"}]}}


def state_of(pod: Any) -> PodState:
    gated = any(g.name == c.SCHEDULING_GATE_TOPOLOGY for g in pod.spec.scheduling_gates or [])
    return PodState(pod.metadata.name, pod.metadata.uid, "main",
                    int(pod.metadata.labels[c.LABEL_JOB_COMPLETION_INDEX]), gated, pod.spec.node_selector,
                    False, pod.metadata.creation_timestamp.isoformat())


async def create_pods(core: CoreV1Api, namespace: str, pods: int) -> float:
    await core.create_namespace(as_body({"metadata": {"name": namespace}}))
    while not SERVER_PID and not (await core.list_namespaced_service_account(namespace)).items:
        # kube-apiserver admits pods only once the namespace's default ServiceAccount exists (the
        # devcluster has no ServiceAccounts and does not ask for one).
        await asyncio.sleep(0.1)
    limit = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        async with limit:
            await core.create_namespaced_pod(namespace, as_body(gated_pod(f"p{i:05d}", i)))
    t = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(pods)))
    return time.perf_counter() - t


async def verify(core: CoreV1Api, namespace: str, pods: int) -> str:
    """Every pod ungated exactly into the slice of its index; returns a short verdict."""
    listed = (await core.list_namespaced_pod(namespace)).items
    gated = sum(1 for p in listed if any(g.name == c.SCHEDULING_GATE_TOPOLOGY for g in present(p.spec).scheduling_gates or []))
    per_rack = Counter((present(p.spec).node_selector or {}).get(RACK) for p in listed)
    wrong = sum(1 for p in listed
                if (present(p.spec).node_selector or {}).get(RACK)
                != f"r{int(present(present(p.metadata).labels)[c.LABEL_JOB_COMPLETION_INDEX]) // PODS_PER_SLICE:03d}")
    full = all(n <= PODS_PER_SLICE for r, n in per_rack.items() if r is not None)
    return "ok" if (gated, wrong, full, len(listed)) == (0, 0, True, pods) else \
        f"BAD: gated {gated}, misplaced {wrong}, over-full {not full}, {len(listed)} pods"


async def bench_devcluster(api_client: ApiClient, pods: int, parallelism: int, run: int) -> str:
    core = CoreV1Api(api_client)
    namespace = f"bench-{run}"
    create_s = await create_pods(core, namespace, pods)
    cache = [state_of(p) for p in (await core.list_namespaced_pod(namespace)).items]
    slices = slices_for(pods)
    ungater = TopologyUngater(KubeApi(api_client), lambda ns, wl: UngatingInput(ns, wl, slices, cache),
                              parallelism=parallelism)
    srv0, cli0 = server_cpu_seconds(), time.process_time()
    if run % 2 == 0:  # plan + patches only
        t = time.perf_counter()
        await ungater.sync(namespace, "wl")
        await ungater.close()
        label = "sync"
    else:  # through notify and the 1 s batch window, as the operator runs it
        done = asyncio.Event()
        sync = ungater.sync

        async def sync_then_signal(namespace: str, workload: str) -> int:
            n = await sync(namespace, workload)
            done.set()
            return n
        ungater.sync = sync_then_signal  # type: ignore[method-assign]  # wrapped to signal the end of the batch
        task = asyncio.create_task(ungater.run())
        t = time.perf_counter()
        ungater.notify(namespace, "wl")
        await done.wait()
        task.cancel()
        label = "notify->done"
    seconds = time.perf_counter() - t
    srv, cli = server_cpu_seconds() - srv0, time.process_time() - cli0
    verdict = await verify(core, namespace, pods)
    return (f"{'devcluster' if SERVER_PID else 'kubeconfig'} {label:<13} x{parallelism:<3} {pods:>6} {ungater.patches:>8} {ungater.failures:>6} "
            f"{seconds:>8.2f} {ungater.patches / seconds:>8.0f} {srv:>8.2f} {cli:>8.2f} {create_s:>9.2f}  {verdict}")


async def devcluster_rows(kubeconfig: Path, pods: int, parallelisms: list[int]) -> list[str]:
    api_client = await aconfig.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
    rows = []
    async with api_client:
        run = 0
        for parallelism in parallelisms:
            for _ in range(2):
                rows.append(await bench_devcluster(api_client, pods, parallelism, run))
                run += 1
    return rows


def machine() -> str:
    load = os.getloadavg()[0]
    return f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; load average {load:.2f}"


def with_devcluster(pods: int, parallelisms: list[int]) -> list[str]:
    """The API rows against a devcluster started for them in its own process."""
    global SERVER_PID
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(kubeconfig)], cwd=REPO)
        SERVER_PID = server.pid
        try:
            deadline = time.monotonic() + 30
            while not kubeconfig.exists():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the devcluster did not start")
                time.sleep(0.05)
            return asyncio.run(devcluster_rows(kubeconfig, pods, parallelisms))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=4096)
    parser.add_argument("--parallelism", default="16,32")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--kubeconfig", type=Path, help="run the API rows against this cluster, not a devcluster")
    args = parser.parse_args()
    parallelisms = [int(p) for p in args.parallelism.split(",")]
    print(f"ungating, {args.pods} pods in slices of {PODS_PER_SLICE}; {machine()}")
    print(f"{'planner case':<32} {'pods':>6} {'ungated':>8} {'p50 ms':>9} {'max ms':>9}")
    for line in time_planner(args.pods, args.reps):
        print(line)
    if args.kubeconfig is not None:
        rows = asyncio.run(devcluster_rows(args.kubeconfig, args.pods, parallelisms))
    else:
        rows = with_devcluster(args.pods, parallelisms)
    print(f"{'devcluster phase':<30} {'pods':>6} {'patches':>8} {'failed':>6} {'seconds':>8} {'patch/s':>8} "
          f"{'srv cpu':>8} {'cli cpu':>8} {'create s':>9}  check")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
