"""Benchmark of the Pod admission webhook: throughput and latency percentiles.

Rows: `engine` answers Pod AdmissionReviews in-process (`webhooks.serving.answer` over
kopf's admission engine with tasq's handlers: the CPU cost per review), `https` posts them over TLS to
the real `AdmissionServer` from a client in another process (as kube-apiserver would), at several
concurrencies; a last `engine` row validates queued Jobs (64-pod template, a topology annotation)
for comparison. Every Pod review gates a pod (a JSON patch in the answer); the server logs each request at
INFO into /dev/null, as in production. Run: `.venv/bin/python bench/webhooks.py [--requests N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import kopf
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import admission
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.reactor import inventory

# Run as a script, this file's directory comes first on sys.path and this module's own name would
# hide the `webhooks` package: drop the directory before importing it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from controller.api import constants as c  # noqa: E402
from webhooks.certificates import write_serving_files  # noqa: E402
from webhooks.handlers import register_handlers  # noqa: E402
from webhooks.serving import AdmissionServer, TlsFiles, answer  # noqa: E402


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


def webhook_fn() -> kopf.WebhookFn:
    """kopf's admission engine with tasq's handlers, as the operator binds it (no cluster needed)."""
    registry = kopf.OperatorRegistry()
    register_handlers(registry)
    insights = references.Insights()
    insights.webhook_resources.update({
        references.Resource(group="", version="v1", plural="pods", kind="Pod", namespaced=True, verbs=frozenset({"create"})),
        references.Resource(group="batch", version="v1", plural="jobs", kind="Job", namespaced=True,
                            verbs=frozenset({"create"}))})
    fn: kopf.WebhookFn = functools.partial(
        admission.serve_admission_request, settings=kopf.OperatorSettings(), registry=registry, insights=insights,
        memories=inventory.ResourceMemories(), memobase=ephemera.AnyMemo(kopf.Memo()),
        indices=OperatorIndexers().indices)
    return fn


def summary(name: str, latencies_s: list[float], wall_s: float) -> str:
    ms = sorted(x * 1000 for x in latencies_s)
    p = statistics.quantiles(ms, n=100, method="inclusive")
    return (f"{name:<22} {len(ms):>7} {len(ms) / wall_s:>9.0f} {statistics.median(ms):>8.2f} {p[94]:>8.2f} "
            f"{p[98]:>8.2f} {ms[-1]:>8.2f}")


async def engine_row(requests: int, name: str, kind: str, handler_id: str) -> str:
    """Sequential reviews in-process; each must be allowed (Pods: with the gate's patch)."""
    fn = webhook_fn()
    bodies = [review(i, kind) for i in range(requests)]
    for body in bodies[:200]:  # warm-up
        await answer(fn, body, handler_id)
    latencies = []
    started = time.perf_counter()
    for body in bodies:
        t = time.perf_counter()
        status, out = await answer(fn, body, handler_id)
        latencies.append(time.perf_counter() - t)
        assert status == 200 and out["response"]["allowed"] and (kind != "Pod" or out["response"]["patch"]), out
    return summary(name, latencies, time.perf_counter() - started)


def client(url: str, ca: str, requests: int, concurrency: int, out: Any) -> None:
    """The kube-apiserver stand-in: `concurrency` keep-alive connections posting Pod reviews."""
    async def run() -> tuple[list[float], float]:
        import ssl
        context = ssl.create_default_context(cafile=ca)
        bodies = [json.dumps(review(i)).encode() for i in range(requests)]
        latencies: list[float] = []
        connector = aiohttp.TCPConnector(limit=concurrency, ssl=context)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def post(body: bytes) -> None:
                t = time.perf_counter()
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    answer_ = await resp.json()
                    assert resp.status == 200 and answer_["response"]["allowed"], answer_
                latencies.append(time.perf_counter() - t)
            for body in bodies[:100]:  # warm-up: connections and TLS sessions
                await post(body)
            latencies.clear()
            queue = list(bodies)
            started = time.perf_counter()

            async def worker() -> None:
                while queue:
                    await post(queue.pop())
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return latencies, time.perf_counter() - started
    out.put(asyncio.run(run()))


async def https_rows(requests: int, concurrencies: list[int]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_serving_files(directory, datetime.now(UTC))
        tls = TlsFiles(directory / c.WEBHOOK_CERT_FILE, directory / c.WEBHOOK_KEY_FILE, directory / c.WEBHOOK_CA_FILE)
        server = AdmissionServer(tls, reload_interval=10.0)
        serving = server(webhook_fn())
        assert isinstance(serving, AsyncGenerator)  # AdmissionServer.__call__ is an async generator
        await anext(serving)
        reloader = asyncio.ensure_future(anext(serving))
        rows = []
        try:
            ctx = multiprocessing.get_context("spawn")
            for concurrency in concurrencies:
                queue = ctx.Queue()
                proc = ctx.Process(target=client, args=(f"{server.url}/{c.WEBHOOK_MUTATE_POD}", str(tls.ca),
                                                        requests, concurrency, queue))
                proc.start()
                while proc.is_alive() and queue.empty():
                    await asyncio.sleep(0.05)
                latencies, wall = queue.get(timeout=5)
                proc.join(10)
                rows.append(summary(f"https concurrency {concurrency}", latencies, wall))
        finally:
            reloader.cancel()
            await asyncio.gather(reloader, return_exceptions=True)
            await serving.aclose()
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="reviews per row (default 5000)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    handler = logging.FileHandler(os.devnull)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    logging.getLogger("webhooks.serving").setLevel(logging.INFO)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    load = os.getloadavg()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"kopf {kopf.__version__ if hasattr(kopf, '__version__') else '?'}; load average {load[0]:.1f}",
          file=sys.stdout)
    print(f"{'row':<22} {'reviews':>7} {'per s':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    print(asyncio.run(engine_row(args.requests, "engine (in-process)", "Pod", c.WEBHOOK_MUTATE_POD)))
    for row in asyncio.run(https_rows(args.requests, args.concurrency)):
        print(row)
    print(asyncio.run(engine_row(args.requests, "engine: validate Job", "Job", c.WEBHOOK_VALIDATE_JOB)))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
