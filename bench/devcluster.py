"""Benchmark the devcluster API server over HTTP: create, list, patch and watch with 1,000 nodes and 5,000 pods.

Runs `tasq dev` in a subprocess (its own interpreter, as a real API server would be) and drives
it with an aiohttp client at a fixed concurrency. Prints one table; results go to bench/RESULTS.md
under `## devcluster`. Usage: `.venv/bin/python bench/devcluster.py [--nodes N] [--pods N] [--concurrency N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from controller.api import constants as c

REPO = Path(__file__).resolve().parents[1]
BLOCK, RACK, GPU = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "nvidia.com/gpu"


SERVER_PID = 0  # the `tasq dev` process, whose CPU time each phase reports


def server_cpu_seconds() -> float:
    """utime + stime of the server process (/proc/<pid>/stat fields 14 and 15)."""
    if not SERVER_PID:
        return 0.0
    fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    phase: str
    requests: int
    seconds: float
    latencies_ms: list[float]
    server_cpu: float = 0.0

    def line(self) -> str:
        lat = sorted(self.latencies_ms) or [0.0]
        p50 = statistics.median(lat)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        rate = self.requests / self.seconds if self.seconds else 0.0
        per_request = self.server_cpu / self.requests * 1000 if self.requests else 0.0
        return (f"{self.phase:<34} {self.requests:>7} {self.seconds:>9.2f} {rate:>10.0f} "
                f"{p50:>9.2f} {p99:>9.2f} {self.server_cpu:>8.2f} {per_request:>9.3f}")


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    resources = {"cpu": "64", "memory": "512Gi", c.RESOURCE_PODS: "110", GPU: "8"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {c.LABEL_HOSTNAME: name, RACK: f"r{i // 16}",
                                                  BLOCK: f"b{i // 128}"}},
            "status": {"allocatable": resources, "capacity": resources,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "labels": {"app": "bench", "shard": str(i % 8)},
                         "annotations": {c.ANNOTATION_TOPOLOGY_PODSET: "main"}},
            "spec": {"schedulingGates": [{"name": c.SCHEDULING_GATE_TOPOLOGY}],
                     "containers": [{"name": "main", "image": "trainer:1",
                                     "resources": {"requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}}]}}


async def measure(phase: str, count: int, concurrency: int, call: Callable[[int], Awaitable[None]]) -> Row:
    cpu = server_cpu_seconds()
    secs, lat = await run_many(count, concurrency, call)
    return Row(phase, count, secs, lat, server_cpu_seconds() - cpu)


async def run_many(count: int, concurrency: int, call: Callable[[int], Awaitable[None]]) -> tuple[float, list[float]]:
    """Run call(0..count-1) with at most `concurrency` in flight; (wall seconds, per-call ms)."""
    latencies: list[float] = []
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            start = time.perf_counter()
            await call(i)
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start, latencies


async def expect(resp: aiohttp.ClientResponse, *codes: int) -> Any:
    body = await resp.read()
    if resp.status not in codes:
        raise RuntimeError(f"{resp.method} {resp.url}: {resp.status} {body[:300]!r}")
    return json.loads(body) if body else None


async def bench(url: str, nodes: int, pods: int, patches: int, concurrency: int) -> list[Row]:
    """Every phase in order on one HTTP session: creates and lists, then patches with a watcher attached."""
    timeout = aiohttp.ClientTimeout(total=600)
    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(url, timeout=timeout, connector=connector) as http:
        rows = await create_and_list(http, nodes, pods, concurrency)
        rows += await patch_and_watch(http, patches, concurrency)
    return rows


async def create_and_list(http: aiohttp.ClientSession, nodes: int, pods: int, concurrency: int) -> list[Row]:
    """Phase 1: the server starts empty of bench objects; afterwards it holds `nodes` nodes and `pods` gated pods."""
    rows: list[Row] = []

    async def create_node(i: int) -> None:
        async with http.post("/api/v1/nodes", json=node(i)) as r:
            await expect(r, 201)
    rows.append(await measure("create nodes (POST)", nodes, concurrency, create_node))

    async def create_pod(i: int) -> None:
        async with http.post("/api/v1/namespaces/default/pods", json=pod(i)) as r:
            await expect(r, 201)
    rows.append(await measure("create gated pods (POST)", pods, concurrency, create_pod))

    async def list_all(_i: int) -> None:
        async with http.get("/api/v1/namespaces/default/pods") as r:
            body = await expect(r, 200)
            assert len(body["items"]) == pods
    rows.append(await measure(f"list {pods} pods", 5, 1, list_all))

    async def list_selected(_i: int) -> None:
        async with http.get("/api/v1/namespaces/default/pods", params={"labelSelector": "shard=3"}) as r:
            await expect(r, 200)
    rows.append(await measure("list pods, labelSelector (1/8)", 20, 1, list_selected))

    async def list_nodes_table(_i: int) -> None:
        headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
        async with http.get("/api/v1/nodes", headers=headers) as r:
            await expect(r, 200)
    rows.append(await measure(f"list {nodes} nodes as Table", 5, 1, list_nodes_table))

    async def paginate(_i: int) -> None:
        token = ""
        while True:
            params = {"limit": "500", **({"continue": token} if token else {})}
            async with http.get("/api/v1/namespaces/default/pods", params=params) as r:
                body = await expect(r, 200)
            token = body["metadata"].get("continue", "")
            if not token:
                return
    rows.append(await measure("paginated list (limit=500)", 3, 1, paginate))
    return rows


async def patch_and_watch(http: aiohttp.ClientSession, patches: int, concurrency: int) -> list[Row]:
    """Phase 2: the first `patches` pods are ungated (a watcher times each change), then labelled."""
    rows: list[Row] = []
    async with http.get("/api/v1/namespaces/default/pods", params={"limit": "1"}) as r:
        rv = (await expect(r, 200))["metadata"]["resourceVersion"]
    watch_done = asyncio.get_running_loop().create_future()
    sent: dict[str, float] = {}
    watch_lat: list[float] = []

    async def watcher() -> None:
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": "120"}
        async with http.get("/api/v1/namespaces/default/pods", params=params) as r:
            async for line in r.content:
                event = json.loads(line)
                name = event["object"]["metadata"]["name"]
                # the first MODIFIED event of each patched pod (a later one would count it twice)
                if event["type"] == "MODIFIED" and name in sent:
                    watch_lat.append((time.perf_counter() - sent.pop(name)) * 1000)
                    if len(watch_lat) == patches:
                        watch_done.set_result(True)
                        return
    watch_task = asyncio.create_task(watcher())
    await asyncio.sleep(0.2)

    async def ungate(i: int) -> None:
        name = f"pod-{i:05d}"
        patch = {"spec": {"$setElementOrder/schedulingGates": [], "schedulingGates": [
            {"name": c.SCHEDULING_GATE_TOPOLOGY, "$patch": "delete"}], "nodeSelector": {RACK: f"r{i % 60}"}}}
        sent[name] = time.perf_counter()
        async with http.patch(f"/api/v1/namespaces/default/pods/{name}", data=json.dumps(patch),
                              headers={"Content-Type": "application/strategic-merge-patch+json"}) as r:
            await expect(r, 200)
    start, cpu = time.perf_counter(), server_cpu_seconds()
    rows.append(await measure("ungate pods (strategic PATCH)", patches, concurrency, ungate))
    await asyncio.wait_for(watch_done, 60)
    rows.append(Row("watch: all MODIFIED events seen", patches, time.perf_counter() - start, watch_lat,
                    server_cpu_seconds() - cpu))
    await watch_task

    async def label(i: int) -> None:
        patch = {"metadata": {"labels": {"round": "2"}}}
        async with http.patch(f"/api/v1/namespaces/default/pods/pod-{i:05d}", data=json.dumps(patch),
                              headers={"Content-Type": "application/merge-patch+json"}) as r:
            await expect(r, 200)
    rows.append(await measure("label pods (merge PATCH)", patches, concurrency, label))
    return rows


def machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--patches", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        no_crds = Path(tmp) / "crds"
        no_crds.mkdir()
        # API server only: the simulated scheduler and kubelet would add their own writes and events
        server = subprocess.Popen([sys.executable, "-m", "controller.cli", "dev", "--kubeconfig", str(kubeconfig),
                                   "--crds", str(no_crds), "--no-components"],
                                  cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not kubeconfig.exists():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("tasq dev did not start")
                time.sleep(0.05)
            url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
            global SERVER_PID
            SERVER_PID = server.pid
            rows = asyncio.run(bench(url, args.nodes, args.pods, min(args.patches, args.pods), args.concurrency))
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(30)
    print(f"devcluster over HTTP (aiohttp client, {args.concurrency} in flight); {machine()}")
    print(f"{'phase':<34} {'requests':>7} {'seconds':>9} {'req/s':>10} {'p50 ms':>9} {'p99 ms':>9} "
          f"{'srv cpu':>8} {'cpu ms/req':>9}")
    for row in rows:
        print(row.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
