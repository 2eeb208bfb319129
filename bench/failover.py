"""Benchmark leader failover and rollouts of two `tasq run` replicas on the real control plane.

Starts `hack/realcluster/up`, a queue (a flavor without topology, a ClusterQueue with ample quota) and
two `tasq run` processes with a 5 s lease (`--lease-duration 5 --renew-deadline 3 --retry-period 1`,
Kueue's 15/10/2 ratios scaled down). Failover: `--kills` times, at a random moment of the leader's
renewal cycle, the leader is stopped (SIGKILL: no release; or SIGTERM: the Lease released) and a
queue-labelled Job created at once; the time from the signal to that Job's Workload admitted by the
other replica is measured (polling every 20 ms), then a fresh standby is started for the next round.
Rollout: both replicas serve the webhooks behind a TCP proxy standing in for the webhook Service (a
backend is in rotation while its /readyz is 200, taken out before it is stopped, as the endpoints
controller does during a pod's preStop pause); the webhook configurations (failurePolicy Fail) point
at the proxy. Jobs are created every 0.1 s while the replicas are replaced one at a time (RollingUpdate:
the new one ready before an old one stops), then while one replica is replaced (Recreate); refused
creations are counted. Results in bench/RESULTS.md under `## failover`.
Usage: `.venv/bin/python bench/failover.py [--kills 10] [--modes kill,term,rollout]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.api import constants as c  # noqa: E402
from controller.kube.api import ApiError, KubeApi, connect, path  # noqa: E402
from controller.kube.webhooking import register_configurations, remove_configurations  # noqa: E402
from webhooks.certificates import write_serving_files  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TASQ = Path(sys.executable).parent / "tasq"
KUBECTL = Path(sys.executable).parent / "kubectl"
NS = "failover"
TIMINGS = ("--lease-duration", "5", "--renew-deadline", "3", "--retry-period", "1")
RETRY_PERIOD_S = 1.0
SETUP = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: plain}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: bench}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: plain
      resources: [{{name: cpu, nominalQuota: "100000"}}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: lq, namespace: {NS}}}
spec: {{clusterQueue: bench}}
"""
_ports = itertools.count(19100)
_names = itertools.count(1)


def job(name: str, suspend: bool) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {c.LABEL_QUEUE_NAME: "lq"}},
            "spec": {"suspend": suspend, "parallelism": 1, "completions": 1, "template": {
                "metadata": {"annotations": {c.ANNOTATION_DEVCLUSTER_RUN_SECONDS: "1"}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": "100m"}}}]}}}}


class Replica:
    """One `tasq run` process with its probes on its own port (and, for the rollout, its webhooks)."""

    def __init__(self, kubeconfig: Path, logs: Path, *extra: str) -> None:
        self.identity = f"r{next(_names)}"
        self.probe_port = next(_ports)
        self.log = logs / f"{self.identity}.log"
        self.proc = subprocess.Popen(
            [str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--lease-namespace", NS, "--identity",
             self.identity, "--metrics-port", "-1", "--probe-host", "127.0.0.1", "--probe-port", str(self.probe_port),
             *TIMINGS, *extra],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}{c.PROBE_PATH_READYZ}", timeout=1) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    async def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self.ready):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{self.identity} not ready:\n{self.log.read_text()[-3000:]}")
            await asyncio.sleep(0.1)

    def stop(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    async def wait(self) -> int:
        return await asyncio.to_thread(self.proc.wait, 60)


async def holder(api: KubeApi) -> str:
    try:
        lease = await api.request("GET", path(c.LEASE_API_VERSION, "leases", NS, c.LEADER_LEASE_NAME))
    except ApiError:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def admitted(api: KubeApi, job_name: str) -> bool:
    answer = await api.request("GET", path(c.API_VERSION, c.PLURAL_WORKLOADS, NS))
    for wl in answer.get("items") or []:
        owners = [o.get("name") for o in wl["metadata"].get("ownerReferences") or []]
        conditions = {x["type"]: x["status"] for x in (wl.get("status") or {}).get("conditions") or []}
        if job_name in owners and conditions.get("Admitted") == "True":
            return True
    return False


async def failover(api: KubeApi, kubeconfig: Path, logs: Path, sig: int,
                   kills: int) -> tuple[list[float], list[float]]:
    """Seconds from stopping the leader with `sig` to the other replica holding the Lease, and to a
    Job created right after being admitted (by whichever replica held the Lease then)."""
    replicas = {r.identity: r for r in (Replica(kubeconfig, logs), Replica(kubeconfig, logs))}
    for r in replicas.values():
        await r.wait_ready()
    times: list[float] = []
    handovers: list[float] = []
    try:
        for i in range(kills):
            lead = await holder(api)
            while lead not in replicas:
                await asyncio.sleep(0.1)
                lead = await holder(api)
            for r in replicas.values():
                await r.wait_ready()
            await asyncio.sleep(random.uniform(0, RETRY_PERIOD_S))  # any moment of the renewal cycle
            leader = replicas.pop(lead)
            started = time.monotonic()
            leader.stop(sig)
            name = f"{'kill' if sig == signal.SIGKILL else 'term'}-{i}"
            await api.request("POST", path("batch/v1", "jobs", NS), job(name, suspend=True))
            handed_over: float | None = None
            admitted_at: float | None = None
            while handed_over is None or admitted_at is None:
                if handed_over is None and (await holder(api)) in replicas:
                    handed_over = time.monotonic() - started
                if admitted_at is None and await admitted(api, name):
                    admitted_at = time.monotonic() - started
                await asyncio.sleep(0.02)
            handovers.append(handed_over)
            times.append(admitted_at)
            print(f"  {name}: Lease to {await holder(api)} after {handed_over:.2f} s, Job admitted after "
                  f"{admitted_at:.2f} s (stopped leader {lead})", flush=True)
            await leader.wait()
            fresh = Replica(kubeconfig, logs)
            replicas[fresh.identity] = fresh
    finally:
        for r in replicas.values():
            r.stop(signal.SIGTERM)
        for r in replicas.values():
            await r.wait()
    return handovers, times


class ServiceProxy:
    """A TCP proxy standing in for the webhook Service: each connection goes to the next backend in
    rotation; with none, the connection is closed (the API server's call fails, as with no endpoints)."""

    def __init__(self) -> None:
        self.backends: list[int] = []
        self._turn = itertools.count()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.backends:
            writer.close()
            return
        port = self.backends[next(self._turn) % len(self.backends)]
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def rollout(api: KubeApi, kubeconfig: Path, logs: Path, api_client: Any, rolling: bool,
                  pre_stop_s: float) -> dict[str, Any]:
    """Create Jobs every 0.1 s while replicas are replaced: RollingUpdate (two replicas, each replaced
    by a new one that is ready first) or Recreate (one replica, stopped before its successor starts)."""
    certs = logs / "certs"
    ca = write_serving_files(certs, datetime.now(UTC))
    proxy = ServiceProxy()
    await proxy.start()
    await register_configurations(api, f"https://127.0.0.1:{proxy.port}",
                                  base64.b64encode(ca.cert_pem).decode())

    def start() -> tuple[Replica, int]:
        port = next(_ports)
        return Replica(kubeconfig, logs, "--webhook-cert-dir", str(certs), "--webhook-port", str(port)), port

    async def replace(old: tuple[Replica, int] | None) -> tuple[Replica, int]:
        if old is not None and not rolling:
            await stop(old)
        new = start()
        await new[0].wait_ready()
        proxy.backends.append(new[1])
        if old is not None and rolling:
            await stop(old)
        return new

    async def stop(old: tuple[Replica, int]) -> None:
        proxy.backends.remove(old[1])  # the endpoints controller takes the terminating pod out...
        await asyncio.sleep(pre_stop_s)  # ...while its preStop pause keeps it serving
        old[0].stop(signal.SIGTERM)
        await old[0].wait()

    current = [await replace(None) for _ in range(2 if rolling else 1)]
    created: list[str] = []
    refused: list[str] = []
    not_suspended = 0
    done = asyncio.Event()

    async def create_jobs() -> None:
        nonlocal not_suspended
        prefix = "roll" if rolling else "recreate"
        for i in itertools.count():
            if done.is_set():
                return
            name = f"{prefix}-{i}"
            try:
                answer = await api.request("POST", path("batch/v1", "jobs", NS), job(name, suspend=False))
                created.append(name)
                not_suspended += answer["spec"].get("suspend") is not True
            except ApiError as e:
                refused.append(f"{name}: {e}")
            await asyncio.sleep(0.1)

    creating = asyncio.create_task(create_jobs())
    started = time.monotonic()
    await asyncio.sleep(2)
    for i, old in enumerate(list(current)):
        current[i] = await replace(old)
    await asyncio.sleep(2)
    done.set()
    await creating
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 120
    pending = list(created)
    while pending and time.monotonic() < deadline:
        pending = [n for n in pending if not await admitted(api, n)]
        await asyncio.sleep(0.5)
    for replica, _ in current:
        replica.stop(signal.SIGTERM)
        await replica.wait()
    await remove_configurations(api)
    assert proxy.server is not None
    proxy.server.close()
    return {"strategy": "RollingUpdate x2" if rolling else "Recreate x1", "seconds": elapsed,
            "created": len(created), "refused": len(refused), "not_suspended": not_suspended,
            "never_admitted": len(pending), "first_refusal": refused[0] if refused else ""}


def summary(label: str, times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (f"{label:<26} {len(times):>5} {statistics.median(times):>8.2f} {p99:>8.2f} {min(times):>8.2f} "
            f"{max(times):>8.2f}")


async def run(args: argparse.Namespace, kubeconfig: Path, logs: Path) -> None:
    subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), "apply", "-f", "-"], input=SETUP, text=True,
                   check=True, capture_output=True)
    api_client = await connect(kubeconfig)
    api = KubeApi(api_client)
    try:
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
              f"load average {os.getloadavg()[0]:.2f} at the start; lease 5 s, renew deadline 3 s, retry 1 s",
              flush=True)
        rows = []
        for mode, sig in (("kill", signal.SIGKILL), ("term", signal.SIGTERM)):
            if mode in args.modes:
                print(f"{mode}:", flush=True)
                handovers, times = await failover(api, kubeconfig, logs, sig, args.kills)
                rows.append(summary(f"{signal.Signals(sig).name} -> Lease taken", handovers))
                rows.append(summary(f"{signal.Signals(sig).name} -> Job admitted", times))
        print(f"{'failover':<26} {'kills':>5} {'p50 s':>8} {'p99 s':>8} {'min s':>8} {'max s':>8}")
        for row in rows:
            print(row)
        if "rollout" in args.modes:
            print(f"{'rollout':<20} {'seconds':>8} {'created':>8} {'refused':>8} {'unsusp.':>8} {'unadmitted':>10}")
            for rolling in (True, False):
                r = await rollout(api, kubeconfig, logs, api_client, rolling, args.pre_stop)
                print(f"{r['strategy']:<20} {r['seconds']:>8.1f} {r['created']:>8} {r['refused']:>8} "
                      f"{r['not_suspended']:>8} {r['never_admitted']:>10}", flush=True)
                if r["first_refusal"]:
                    print(f"  first refusal: {r['first_refusal'][:300]}")
        print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--modes", default="kill,term,rollout", type=lambda s: s.split(","))
    parser.add_argument("--pre-stop", type=float, default=2.0,
                        help="seconds a stopping replica serves after leaving the proxy's rotation (default 2)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tasq-failover-"))
    kubeconfig = work / "kubeconfig"
    up = subprocess.Popen([str(REPO / "hack" / "realcluster" / "up"), "--kubeconfig", str(kubeconfig)],
                          stdout=subprocess.PIPE, stderr=(work / "up.log").open("wb"), stdin=subprocess.DEVNULL)
    try:
        assert up.stdout is not None
        for line in up.stdout:
            if line.strip() == b"ready":
                break
        else:
            print(f"hack/realcluster/up ended: {(work / 'up.log').read_text()[-2000:]}", file=sys.stderr)
            return 1
        asyncio.run(run(args, kubeconfig, work))
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(60)
        print(f"replica logs in {work}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
