"""Benchmark of the admission webhooks: throughput and latency percentiles, before and after.

Rows: `engine` answers reviews in-process with tasq's `Reviewer` (its handler table): the CPU cost per
review (Pod: a pod gated; Job create: the mutating then the validating review of a queued Job, as
kube-apiserver sends them; kopf's admission engine, which answered them before, is gone). `https` rows post
Job creates (both reviews, one after the other) over TLS from a client in another process, as
kube-apiserver does, at concurrency 8, to a server on this process's event loop (`loop`) or to the
webhook process (`process`, `controller.kube.webhook_serving`; `process x2`: two of them on one port,
SO_REUSEPORT); `busy` runs a stand-in for a busy operator on this loop meanwhile (Python work in 20 ms
slices, all the time). `process` rows print the children's CPU per create and peak RSS. The server
logs every request at INFO into /dev/null, as in production. Run: `.venv/bin/python bench/webhooks.py
[--creates N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

# Run as a script, this file's directory comes first on sys.path and this module's own name would
# hide the `webhooks` package: drop the directory before importing it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from controller.api import constants as c  # noqa: E402
from controller.kube.webhook_serving import WebhookProcess  # noqa: E402
from webhooks.certificates import write_serving_files  # noqa: E402
from webhooks.reviewing import Reviewer  # noqa: E402
from webhooks.serving import AdmissionServer, TlsFiles, answer  # noqa: E402

WARM_UP = 50
"""Creates the https client makes before it starts counting (connections, TLS sessions)."""


def pod(i: int) -> dict[str, Any]:
    """A pod of an admitted pod set, as the Job controller creates it (about 1.5 KB of JSON)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "train-", "name": f"train-{i}", "namespace": "team-a", "uid": f"uid-{i}",
                     "labels": {c.LABEL_TAS: c.LABEL_TAS_VALUE, c.LABEL_JOB_NAME: "train",
                                c.LABEL_CONTROLLER_UID: "c0ffee", c.LABEL_JOB_COMPLETION_INDEX: str(i % 512)},
                     "annotations": {c.ANNOTATION_TOPOLOGY_PODSET: "main", c.ANNOTATION_TOPOLOGY_WORKLOAD: "job-train",
                                     c.ANNOTATION_PREFER_TOPOLOGY: "cloud.com/rack"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "c0ffee",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"restartPolicy": "Never", "nodeSelector": {"gpu": "h100"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "main", "image": "registry.example.com/train:1", "args": ["--steps", "1000"],
                                 "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
                                               "limits": {"nvidia.com/gpu": "1"}}}]},
    }


def job(i: int) -> dict[str, Any]:
    """A queued Job with a topology annotation and the same pod template, as a user submits it."""
    template = pod(i)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"train-{i}", "namespace": "team-a", "uid": f"job-{i}",
                         "labels": {c.LABEL_QUEUE_NAME: "training"},
                         "annotations": {c.ANNOTATION_REQUIRE_TOPOLOGY: "cloud.com/rack"}},
            "spec": {"parallelism": 64, "completions": 64, "completionMode": "Indexed",
                     "template": {"metadata": {"labels": {"app": "train"}}, "spec": template["spec"]}}}


def review(i: int, kind: str = "Pod") -> dict[str, Any]:
    obj = pod(i) if kind == "Pod" else job(i)
    group, version, plural = ("", "v1", "pods") if kind == "Pod" else ("batch", "v1", "jobs")
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": f"req-{i}", "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural}, "namespace": "team-a",
        "name": obj["metadata"]["name"], "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
        "object": obj, "oldObject": None, "dryRun": False}}


def summary(name: str, latencies_s: list[float], wall_s: float) -> str:
    ms = sorted(x * 1000 for x in latencies_s)
    p = statistics.quantiles(ms, n=100, method="inclusive")
    return (f"{name:<44} {len(ms):>7} {len(ms) / wall_s:>9.0f} {statistics.median(ms):>8.2f} {p[94]:>8.2f} "
            f"{p[98]:>8.2f} {ms[-1]:>8.2f}")


def reviews_of(kind: str, count: int) -> list[list[tuple[str, bytes]]]:
    """Per object, the (path, encoded review) kube-apiserver sends for its creation, in order."""
    if kind == "Pod":
        return [[(c.WEBHOOK_MUTATE_POD, json.dumps(review(i)).encode())] for i in range(count)]
    return [[(c.WEBHOOK_MUTATE_JOB, json.dumps(review(i, "Job")).encode()),
             (c.WEBHOOK_VALIDATE_JOB, json.dumps(review(i, "Job")).encode())] for i in range(count)]


async def engine_row(fn: Any, count: int, name: str, kind: str) -> str:
    """Sequential creates in-process (decode, answer, encode each review); each review must be
    allowed, a mutating one with a patch."""
    creates = reviews_of(kind, count)

    async def create(reviews: list[tuple[str, bytes]]) -> None:
        for path, raw in reviews:
            status, out = await answer(fn, json.loads(raw), path)
            json.dumps(out)
            assert status == 200 and out["response"]["allowed"], out
            assert not path.startswith("mutate") or out["response"]["patch"], out
    for reviews in creates[:200]:  # warm-up
        await create(reviews)
    latencies = []
    started = time.perf_counter()
    for reviews in creates:
        t = time.perf_counter()
        await create(reviews)
        latencies.append(time.perf_counter() - t)
    return summary(name, latencies, time.perf_counter() - started)


def client(url: str, ca: str, creates: int, concurrency: int, out: Any) -> None:
    """The kube-apiserver stand-in: `concurrency` keep-alive connections creating Jobs (the mutating
    then the validating review of each)."""
    async def run() -> tuple[list[float], float]:
        import ssl
        context = ssl.create_default_context(cafile=ca)
        bodies = reviews_of("Job", creates)
        latencies: list[float] = []
        connector = aiohttp.TCPConnector(limit=concurrency, ssl=context)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def create(reviews: list[tuple[str, bytes]]) -> None:
                t = time.perf_counter()
                for path, body in reviews:
                    async with session.post(f"{url}/{path}", data=body,
                                            headers={"Content-Type": "application/json"}) as resp:
                        answer_ = await resp.json()
                        assert resp.status == 200 and answer_["response"]["allowed"], answer_
                latencies.append(time.perf_counter() - t)
            for reviews in bodies[:WARM_UP]:  # warm-up: connections and TLS sessions
                await create(reviews)
            latencies.clear()
            queue = list(bodies)
            started = time.perf_counter()

            async def worker() -> None:
                while queue:
                    await create(queue.pop())
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return latencies, time.perf_counter() - started
    out.put(asyncio.run(run()))


async def busy_operator(slice_s: float = 0.02) -> None:
    """A stand-in for an operator busy with a burst: Python work on this loop in `slice_s` slices."""
    while True:
        until = time.perf_counter() + slice_s
        while time.perf_counter() < until:
            sum(range(200))
        await asyncio.sleep(0)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(x for x in status if x.startswith("VmHWM:")).split()[1]) // 1024


async def https_row(name: str, tls: TlsFiles, where: str, fn: Any, creates: int, concurrency: int,
                    busy: bool, children: int = 1) -> str:
    """Job creates/s through a server on this loop (`fn` answering) or in `children` webhook
    processes listening on one port (SO_REUSEPORT when more than one); for processes, their CPU per
    create (the client's warm-up creates included) and each one's peak RSS."""
    servers: list[Any] = []
    tasks: list[asyncio.Task[None]] = []
    if where == "process":
        for _ in range(children):
            port = servers[0].port if servers else 0
            servers.append(WebhookProcess(tls, port=port, reuse_port=children > 1))
            tasks.append(asyncio.create_task(servers[-1].serve_reviews(None)))
            await servers[-1].wait_listening()
    else:
        servers.append(AdmissionServer(tls, reload_interval=10.0))
        tasks.append(asyncio.create_task(servers[0].serve(fn)))
        await servers[0].wait_listening()
    if busy:
        tasks.append(asyncio.create_task(busy_operator()))
    try:
        pids = [server.pid for server in servers if where == "process"]
        cpu_before = sum(_cpu_s(pid) for pid in pids)
        queue = multiprocessing.get_context("spawn").Queue()
        proc = multiprocessing.get_context("spawn").Process(
            target=client, args=(servers[0].url, str(tls.ca), creates, concurrency, queue))
        proc.start()
        while proc.is_alive() and queue.empty():
            await asyncio.sleep(0.05)
        latencies, wall = queue.get(timeout=5)
        proc.join(10)
        row = summary(name, latencies, wall)
        if pids:
            cpu_ms = (sum(_cpu_s(pid) for pid in pids) - cpu_before) * 1000 / (creates + WARM_UP)
            row += f"  (child CPU {cpu_ms:.2f} ms/create, peak RSS {'+'.join(str(_peak_rss_mib(p)) for p in pids)} MiB)"
        return row
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def https_rows(creates: int, concurrency: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_serving_files(directory, datetime.now(UTC))
        tls = TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)
        rows = []
        for busy in (False, True):
            for where, children in (("loop", 1), ("process", 1), ("process", 2)):
                label = f"https Job creates {where}{' x2' if children > 1 else ''}{', busy' if busy else ''}"
                rows.append(await https_row(label, tls, where, Reviewer(), creates, concurrency, busy, children))
                print(rows[-1], flush=True)
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=2000, help="objects created per row (default 2000)")
    parser.add_argument("--concurrency", type=int, default=8, help="the https client's connections (default 8)")
    args = parser.parse_args()
    handler = logging.FileHandler(os.devnull)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    logging.getLogger("webhooks.serving").setLevel(logging.INFO)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'row':<44} {'creates':>7} {'per s':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for kind in ("Pod", "Job"):
        print(asyncio.run(engine_row(Reviewer(), args.creates,
                                     f"engine reviewer: {kind} create{'' if kind == 'Job' else ' (gate)'}", kind)),
              flush=True)
    asyncio.run(https_rows(args.creates, args.concurrency))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
