"""Benchmark of the CRD conversion webhook: latency of converting a list of 1,000 Workloads.

Rows: `in-process` answers one ConversionReview of 1,000 admitted v1beta2 Workloads to v1beta1
(`webhooks.converting.answer_conversion` with `controller.api.conversion.convert`: the CPU cost);
`https` posts that review over TLS to the real `AdmissionServer` /convert, running in another process,
as kube-apiserver would (client-measured, JSON encoding and decoding included); with `--kubeconfig` of a
real control plane (`hack/realcluster/up`), `apiserver` rows create 1,000 Workloads (stored as v1beta2),
point the Workload CRD's conversion at that server, time `GET .../v1beta1/.../workloads` against the
same list in v1beta2 and count the objects the server converted per list (kube-apiserver 1.37 serves
both lists from its watch cache of each version, filled as objects arrive).
Run: `.venv/bin/python bench/conversion.py [--repeat N] [--kubeconfig PATH]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import platform
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp

# Run as a script, this file's directory comes first on sys.path and this module's own name would
# hide packages of the same name: drop the directory before importing them.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from controller.api import constants as c  # noqa: E402
from controller.api.conversion import convert  # noqa: E402
from controller.api.topology_assignment import AssignedDomain, encode  # noqa: E402
from webhooks.certificates import write_serving_files  # noqa: E402
from webhooks.configurations import CONVERSION_PATH  # noqa: E402
from webhooks.converting import answer_conversion  # noqa: E402
from webhooks.serving import AdmissionServer, TlsFiles  # noqa: E402

WORKLOADS = 1_000
NAMESPACE = "bench-conversion"
HOSTS_PER_WORKLOAD = 8


def workload(i: int, namespace: str = NAMESPACE) -> dict[str, Any]:
    """An admitted v1beta2 Workload of one 8-pod GPU pod set, one pod per host of one rack (the
    assignment in the form tasq writes), as the Job reconciler and the admission cycle leave it."""
    hosts = [f"gpu-b{i % 4}-r{i % 8}-n{k}" for k in range(HOSTS_PER_WORKLOAD)]
    template = {"metadata": {"labels": {"app": f"train-{i}"}}, "spec": {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "registry.example.com/ml/train:1.0", "args": ["--steps", "1000"],
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"},
                      "limits": {"nvidia.com/gpu": "8"}}}]}}
    admission = {"clusterQueue": "team", "podSetAssignments": [{
        "name": "main", "count": HOSTS_PER_WORKLOAD, "flavors": {"cpu": "h100", "memory": "h100", "nvidia.com/gpu": "h100"},
        "resourceUsage": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "64"},
        "topologyAssignment": topology_assignment(hosts)}]}
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD,
        "metadata": {"name": f"job-train-{i}-abcde", "namespace": namespace, "uid": f"uid-{i}",
                     "resourceVersion": str(1000 + i), "labels": {c.LABEL_QUEUE_NAME: "lq"}},
        "spec": {"queueName": "lq", "priority": 100, "podSets": [{
            "name": "main", "count": HOSTS_PER_WORKLOAD, "template": template,
            "topologyRequest": {"required": "cloud.provider.com/topology-rack"}}]},
        "status": {"admission": admission, "conditions": [
            {"type": c.CONDITION_QUOTA_RESERVED, "status": "True", "reason": c.REASON_QUOTA_RESERVED,
             "message": "Quota reserved in ClusterQueue team", "lastTransitionTime": "2026-11-27T00:00:00Z"},
            {"type": c.CONDITION_ADMITTED, "status": "True", "reason": "Admitted",
             "message": "The workload is admitted", "lastTransitionTime": "2026-11-27T00:00:00Z"}]},
    }


def topology_assignment(hosts: list[str]) -> dict[str, Any]:
    """One pod per host, encoded as tasq's admission writes it (Kueue's compact v1beta2 form)."""
    levels = ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", c.LABEL_HOSTNAME]
    domains = [AssignedDomain((h.split("-")[1], h.split("-")[2], h), 1) for h in hosts]
    return encode(levels, domains).to_dict()


def review(objects: list[dict[str, Any]], desired: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "bench", "desiredAPIVersion": desired, "objects": objects}}


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered), p99, ordered[-1]


def row(name: str, samples_ms: list[float], extra: str = "") -> str:
    p50, p99, worst = percentiles(samples_ms)
    return f"{name:<34} {len(samples_ms):>5} {p50:>9.1f} {p99:>9.1f} {worst:>9.1f}  {extra}"


def in_process(objects: list[dict[str, Any]], repeat: int) -> list[float]:
    body = review(objects, c.API_VERSION_V1BETA1)
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        status, answer = answer_conversion(body, convert)
        samples.append((time.perf_counter() - started) * 1000)
        assert status == 200 and answer["response"]["result"]["status"] == "Success", answer["response"]["result"]
    return samples


class Counting:
    """The real converter, counting the objects it converted (a counter shared with the parent)."""

    def __init__(self, objects: Any) -> None:
        self.objects = objects

    def __call__(self, obj: Mapping[str, Any], desired: str) -> Any:
        with self.objects.get_lock():
            self.objects.value += 1
        return convert(obj, desired)


def serve(cert_dir: str, port: Any, objects: Any, ready: Any) -> None:
    """The child process: an AdmissionServer with /convert on 127.0.0.1, logging at INFO into /dev/null."""
    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))  # noqa: SIM115
    tls = TlsFiles(Path(cert_dir) / c.WEBHOOK_CERT_FILE, Path(cert_dir) / c.WEBHOOK_KEY_FILE,
                   Path(cert_dir) / c.WEBHOOK_CA_FILE)
    server = AdmissionServer(tls, converter=Counting(objects), reload_interval=60.0)

    async def main() -> None:
        serving = server(lambda *a, **k: None)  # type: ignore[arg-type]  # no admission webhook is called here
        await anext(serving)
        port.value = server.port
        ready.set()
        await anext(serving)  # serves until the parent terminates it
    asyncio.run(main())


async def over_https(url: str, ca_pem: str, objects: list[dict[str, Any]], repeat: int) -> list[float]:
    body = json.dumps(review(objects, c.API_VERSION_V1BETA1)).encode()
    context = ssl.create_default_context(cadata=ca_pem)
    samples = []
    async with aiohttp.ClientSession() as session:
        for _ in range(repeat):
            started = time.perf_counter()
            async with session.post(url, data=body, ssl=context, headers={"Content-Type": "application/json"}) as resp:
                answer = json.loads(await resp.read())
            samples.append((time.perf_counter() - started) * 1000)
            assert answer["response"]["result"]["status"] == "Success", answer["response"]["result"]
    return samples


def _point_conversion(extensions: Any, url: str, ca_bundle: str) -> None:
    from kubernetes import client

    name = f"{c.PLURAL_WORKLOADS}.{c.GROUP}"
    crd = extensions.read_custom_resource_definition(name)
    crd.spec.conversion = client.V1CustomResourceConversion(strategy="Webhook", webhook=client.V1WebhookConversion(
        conversion_review_versions=["v1"],
        client_config=client.ApiextensionsV1WebhookClientConfig(url=url, ca_bundle=ca_bundle)))
    extensions.replace_custom_resource_definition(name, crd)


def _create_workloads(custom: Any, core: Any) -> None:
    from kubernetes import client

    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    except client.ApiException as e:
        if e.status != 409:
            raise
    have = len(cast(dict[str, Any], custom.list_namespaced_custom_object(
        c.GROUP, c.VERSION_V1BETA2, NAMESPACE, c.PLURAL_WORKLOADS))["items"])
    for i in range(have, WORKLOADS):
        body = workload(i)
        status = body.pop("status")
        for key in ("uid", "resourceVersion"):
            body["metadata"].pop(key)
        created = cast(dict[str, Any], custom.create_namespaced_custom_object(
            c.GROUP, c.VERSION_V1BETA2, NAMESPACE, c.PLURAL_WORKLOADS, body))
        custom.patch_namespaced_custom_object_status(c.GROUP, c.VERSION_V1BETA2, NAMESPACE, c.PLURAL_WORKLOADS,
                                                     created["metadata"]["name"], {"status": status})


def _listed_in(custom: Any, version: str) -> bool:
    from kubernetes import client

    try:
        listed = cast(dict[str, Any], custom.list_namespaced_custom_object(
            c.GROUP, version, NAMESPACE, c.PLURAL_WORKLOADS))
    except client.ApiException:
        return False
    return len(listed["items"]) == WORKLOADS and listed["items"][0]["apiVersion"] == f"{c.GROUP}/{version}"


def through_apiserver(kubeconfig: Path, port: int, ca_bundle: str, objects_counter: Any,
                      repeat: int) -> list[str]:
    """Rows of a real kube-apiserver: lists in v1beta2 (stored form) and v1beta1 (converted)."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
    extensions, custom, core = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api), client.CoreV1Api(api)
    _point_conversion(extensions, f"https://127.0.0.1:{port}/{CONVERSION_PATH}", ca_bundle)
    _create_workloads(custom, core)
    rows = []
    for version in (c.VERSION_V1BETA2, c.VERSION_V1BETA1):
        samples, converted = [], []
        for _ in range(repeat):
            before = objects_counter.value
            started = time.perf_counter()
            assert _listed_in(custom, version)
            samples.append((time.perf_counter() - started) * 1000)
            converted.append(objects_counter.value - before)
        rows.append(row(f"apiserver list {version}", samples,
                        f"objects converted per list: {statistics.median(converted):.0f}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="lists converted per row")
    parser.add_argument("--kubeconfig", type=Path, help="a real control plane with tasq's CRDs (apiserver rows)")
    args = parser.parse_args()
    objects = [workload(i) for i in range(WORKLOADS)]
    size = len(json.dumps(review(objects, c.API_VERSION_V1BETA1)))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{WORKLOADS} Workloads v1beta2 -> v1beta1, one review of {size / 1e6:.2f} MB")
    print(f"{'row':<34} {'lists':>5} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    print(row("in-process", in_process(objects, args.repeat)))
    with tempfile.TemporaryDirectory() as certs:
        ca = write_serving_files(Path(certs), datetime.now(UTC))
        context = multiprocessing.get_context("spawn")
        port, converted, ready = context.Value("i", 0), context.Value("l", 0), context.Event()
        child = context.Process(target=serve, args=(certs, port, converted, ready), daemon=True)
        child.start()
        try:
            assert ready.wait(60), "the server did not start"
            url = f"https://127.0.0.1:{port.value}/{CONVERSION_PATH}"
            print(row("https (one review, other process)", asyncio.run(
                over_https(url, ca.cert_pem.decode(), objects, args.repeat))))
            if args.kubeconfig is not None:
                tls = TlsFiles(Path(certs) / c.WEBHOOK_CERT_FILE, Path(certs) / c.WEBHOOK_KEY_FILE,
                               Path(certs) / c.WEBHOOK_CA_FILE)
                for line in through_apiserver(args.kubeconfig, port.value, tls.ca_bundle(), converted, args.repeat):
                    print(line)
        finally:
            child.terminate()
            child.join(10)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
