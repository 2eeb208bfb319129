"""Kueue and tasq side by side on the same real control plane: one table of ratios tasq / Kueue.

Builds Kueue (`sigs.k8s.io/kueue/cmd/kueue`, the version below) from the Go module proxy into
~/.cache/tasq/kueue-<version>/ once, then for each operator in turn starts a fresh
`hack/realcluster/up` (256 kwok nodes, 4 blocks x 8 racks x 8 nodes x 8 GPUs), runs the operator out
of cluster as a ServiceAccount bound to cluster-admin (webhooks on 127.0.0.1 with a generated
certificate; Kueue with its own CRDs, conversion webhooks (its shipped CRD patches) and webhook
configurations from the module, batch/job only, TAS
on by default, its visibility server off as it wants certificates under /visibility; tasq with `--local-webhooks`), both at their shipped log levels (Kueue
`--zap-log-level=2` as its manager.yaml, tasq `info`), and runs the same scenarios: bursts of Jobs
created 32 at a time, and a paced run (run first); `--held` bursts go into a LocalQueue on hold, so
they time the webhooks and Workload creation with no admission competing for the CPU. Each Job: 2
pods x 1 GPU requiring one rack.
Per scenario: creates/s through the webhooks, Jobs/s (created to admitted), p50/p99 Job create ->
Workload Admitted (seen on a watch), operator CPU ms per Job (its processes' utime+stime), its peak
RSS (VmHWM, summed over its processes), and API requests per Job (kube-apiserver's flow-control counter for the
`service-accounts` FlowSchema, which only the operator's ServiceAccount uses here, counted once they
have settled after the last admission: `settled_requests`); then every
client's writes per Job by verb and resource (`apiserver_request_total`), which say where the two
operators' requests differ (the other clients do the same work for both); the CPU ms per Job of each
process while the Jobs were being created (kube-apiserver, etcd, the other control-plane components,
the operator's main process and its children: tasq's webhook child) and every client's writes in
that time, which say whose work competed with the creates; and kube-apiserver's admission
webhook calls per Job by webhook and operation with their mean duration
(`apiserver_admission_webhook_admission_duration_seconds`), which say what bounds creates/s.
With `--profile DIR` tasq's operator process runs under cProfile (stats written to DIR/tasq-operator.prof
when it stops; its webhook child is not profiled) and each row also gives the CPU of tasq's main process
alone, so the webhook child's share is the difference.
Usage: `.venv/bin/python bench/vs_kueue.py [--bursts 200,1000] [--paced 4:200] [--held 1000]
[--only kueue|tasq] [--profile DIR]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, cast

import yaml
from kubernetes.aio import client
from kubernetes.aio import watch as watch_module

# Run as a script, this file's folder comes first on sys.path, where bench/webhooks.py would shadow
# the webhooks package: tasq's own packages are imported from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.kube.api import KubeApi, connect  # noqa: E402
from webhooks.certificates import write_serving_files  # noqa: E402

KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_VERSION = "v0.17.0"
CACHE = Path(os.environ.get("TASQ_KUEUE_CACHE", Path.home() / ".cache" / "tasq" / f"kueue-{KUEUE_VERSION}"))
UP = ROOT / "hack" / "realcluster" / "up"
TOPOLOGY = "4x8x8x8"
RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
OPERATOR_NAMESPACE = "bench-system"
FLOW_SCHEMA = "service-accounts"
POOL = "bench.tasq.io/pool"  # Kueue's rules want a TAS flavor to select nodes by a label
KEPT_WEBHOOKS = re.compile(r"^[mv](job|workload|clusterqueue|resourceflavor|cohort|localqueue)\.kb\.io$")
CREATE_CONCURRENCY = 32
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def log(message: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubectl_binary() -> str:
    return shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run([kubectl_binary(), "--kubeconfig", str(kubeconfig), *args], input=stdin, text=True,
                          capture_output=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


# -- Kueue: build and configuration ------------------------------------------------------------

def kueue_binary() -> Path:
    """The kueue binary, built once from the module proxy (`go install`) into the cache."""
    binary = CACHE / "kueue"
    if not binary.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        log(f"building {KUEUE_MODULE}/cmd/kueue@{KUEUE_VERSION} (once; a few minutes)")
        subprocess.run(["go", "install", f"{KUEUE_MODULE}/cmd/kueue@{KUEUE_VERSION}"], check=True,
                       env={**os.environ, "GOBIN": str(CACHE)})
    return binary


def kueue_module() -> Path:
    done = subprocess.run(["go", "mod", "download", "-json", f"{KUEUE_MODULE}@{KUEUE_VERSION}"],
                          capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return Path(json.loads(done.stdout)["Dir"])


def kueue_webhook_configurations(module: Path, port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations for the kinds this bench uses, pointed at 127.0.0.1:port."""
    out = []
    text = (module / "config" / "components" / "webhook" / "manifests.yaml").read_text()
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
        hooks = [h for h in doc["webhooks"] if KEPT_WEBHOOKS.match(h["name"])]
        for hook in hooks:
            hook_path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{hook_path}",
                                    "caBundle": base64.b64encode(ca_bundle).decode()}
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def kueue_conversion_patches(module: Path, port: int, ca_bundle: bytes) -> dict[str, dict[str, Any]]:
    """CRD name -> the merge patch that turns on Kueue's conversion webhook for it, as its shipped
    install does (the `patches/webhook_in_*.yaml` its CRD kustomization lists), pointed at
    127.0.0.1:port: every CRD serving two versions then pays for the conversions, as tasq's do."""
    crd = module / "config" / "components" / "crd"
    listed = yaml.safe_load((crd / "kustomization.yaml").read_text()).get("patches") or []
    out = {}
    for entry in listed:
        doc = yaml.safe_load((crd / entry["path"]).read_text())
        webhook = doc["spec"]["conversion"]["webhook"]
        hook_path = webhook["clientConfig"]["service"].get("path", "/convert")
        webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{hook_path}",
                                   "caBundle": base64.b64encode(ca_bundle).decode()}
        out[doc["metadata"]["name"]] = {"spec": {"conversion": doc["spec"]["conversion"]}}
    return out


def kueue_configuration(port: int, cert_dir: Path) -> dict[str, Any]:
    """Kueue's shipped controller_manager_config.yaml, with loopback ports, no internal cert
    management and the batch/job integration only."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io",
                           "resourceNamespace": "kueue-system"},
        "internalCertManagement": {"enable": False},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
            "Cohort.kueue.x-k8s.io": 1, "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": ["batch/job"]},
    }


# -- the cluster and the operators ---------------------------------------------------------------

@contextlib.contextmanager
def real_cluster(work: Path, crds: bool, profiling: bool = False) -> Iterator[tuple[Path, int]]:
    """A fresh `hack/realcluster/up`; yields its admin kubeconfig and the pid of `up` (the control
    plane's processes are its children). `profiling`: kube-apiserver serves /debug/pprof."""
    kubeconfig = work / "admin.kubeconfig"
    logfile = (work / "realcluster.log").open("wb")
    args = [str(UP), "--kubeconfig", str(kubeconfig), "--topology", TOPOLOGY] + ([] if crds else ["--no-crds"]) \
        + (["--profiling"] if profiling else [])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=logfile, stdin=subprocess.DEVNULL)
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == b"ready":
                ready.set()
    threading.Thread(target=read, daemon=True).start()
    try:
        if not ready.wait(300) or proc.poll() is not None:
            raise RuntimeError(f"hack/realcluster/up did not become ready; see {work / 'realcluster.log'}")
        yield kubeconfig, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        logfile.close()


def service_account_kubeconfig(admin: Path, work: Path) -> Path:
    """A kubeconfig for the ServiceAccount bench-system/operator, bound to cluster-admin."""
    kubectl(admin, "create", "namespace", OPERATOR_NAMESPACE)
    kubectl(admin, "create", "serviceaccount", "operator", "-n", OPERATOR_NAMESPACE)
    kubectl(admin, "create", "clusterrolebinding", "bench-operator", "--clusterrole=cluster-admin",
            f"--serviceaccount={OPERATOR_NAMESPACE}:operator")
    token = kubectl(admin, "create", "token", "operator", "-n", OPERATOR_NAMESPACE, "--duration=24h").strip()
    config = yaml.safe_load(admin.read_text())
    config["users"] = [{"name": "operator", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "operator"
    out = work / "operator.kubeconfig"
    out.write_text(yaml.safe_dump(config))
    return out


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        out += frontier
    return out


def process_cpu_seconds(pid: int) -> float:
    """utime+stime of one process (0 once it is gone)."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def control_plane_cpu(up_pid: int) -> dict[str, float]:
    """CPU seconds so far of each control-plane process under `hack/realcluster/up`, by component
    (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok: the realcluster binary's
    first argument, or the program's name)."""
    out: dict[str, float] = {}
    for pid in descendants(up_pid)[1:]:
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            program = Path(argv[0].decode()).name
            name = argv[1].decode() if program == "realcluster" and len(argv) > 1 else program
            out[name] = out.get(name, 0.0) + process_cpu_seconds(pid)
    return out


WEBHOOK_DURATION = "apiserver_admission_webhook_admission_duration_seconds"
CONVERSION_DURATION = "apiserver_crd_conversion_webhook_duration_seconds"


def webhook_calls(admin: Path) -> dict[str, tuple[float, float]]:
    """kube-apiserver's webhook calls so far: "<webhook> <operation>" (admission) or "convert <crd>
    <from>-><to>" (CRD conversion) -> (calls, seconds spent in them), from its histograms' count and
    sum (rejected or not)."""
    out: dict[str, tuple[float, float]] = {}
    for line in kubectl(admin, "get", "--raw", "/metrics").splitlines():
        for metric, suffix, slot in ((m, suffix, slot) for m in (WEBHOOK_DURATION, CONVERSION_DURATION)
                                     for suffix, slot in (("_count{", 0), ("_sum{", 1))):
            if line.startswith(metric + suffix):
                labels = dict(LABEL.findall(line))
                key = (f"{labels.get('name', '?')} {labels.get('operation', '?')}" if metric == WEBHOOK_DURATION else
                       f"convert {labels.get('crd_name', '?')} {labels.get('from_version')}->{labels.get('to_version')}")
                pair = list(out.get(key, (0.0, 0.0)))
                pair[slot] += float(line.rsplit(" ", 1)[1])
                out[key] = (pair[0], pair[1])
    return out


def webhook_ports(admin: Path) -> set[int]:
    """The ports of the webhook URLs in the cluster's admission webhook configurations (both
    operators' webhooks are served on 127.0.0.1 here)."""
    ports = set()
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for item in json.loads(kubectl(admin, "get", kind, "-o", "json"))["items"]:
            for hook in item.get("webhooks") or []:
                found = re.match(r"https://[^/]*:(\d+)/", hook["clientConfig"].get("url", ""))
                if found:
                    ports.add(int(found[1]))
    return ports


class ConnectionSampler:
    """Samples /proc/net/tcp every `period` s in a thread while running: the established
    connections kube-apiserver holds to the webhook server's ports, to tell connection reuse from
    churn (every new connection is a TLS handshake on both sides). A connection that lives less than
    a period can be missed, so `seen` is a lower bound."""

    def __init__(self, ports: set[int], period: float = 0.1) -> None:
        self.ports, self.period = ports, period
        self.seen: set[tuple[str, str]] = set()
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        now = set()
        with contextlib.suppress(OSError):
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) in self.ports:
                    now.add((fields[1], fields[2]))
        self.seen |= now
        self.most = max(self.most, len(now))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@dataclass
class Operator:
    name: str
    proc: subprocess.Popen[bytes]
    logfile: Any

    def pids(self) -> list[int]:
        """The operator's process and its descendants."""
        return descendants(self.proc.pid)

    def cpu_seconds(self, main_only: bool = False) -> float:
        """utime+stime of the operator's processes (of its main process alone with `main_only`)."""
        return sum(process_cpu_seconds(pid) for pid in ([self.proc.pid] if main_only else self.pids()))

    def peak_rss_mib(self, children_only: bool = False) -> float:
        """The sum of its processes' peaks (tasq serves its webhooks from a child process; with
        `children_only`, that child's alone)."""
        peak = 0
        for pid in self.pids()[1 if children_only else 0:]:
            with contextlib.suppress(OSError, StopIteration):
                line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:"))
                peak += int(line.split()[1])
        return peak / 1024

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.logfile.close()


def start_kueue(admin: Path, operator_config: Path, work: Path) -> Operator:
    module = kueue_module()
    bases = module / "config" / "components" / "crd" / "bases"
    for crd in sorted(bases.glob("*.yaml")):
        kubectl(admin, "apply", "--server-side", "-f", str(crd))
    kubectl(admin, "wait", "--for=condition=Established", "--timeout=120s", "crd", "--all")
    kubectl(admin, "create", "namespace", "kueue-system")
    cert_dir = work / "kueue-certs"
    ca = write_serving_files(cert_dir, datetime.now(UTC), ("127.0.0.1", "localhost"))
    # Without its internal certificate management, Kueue reads the metrics server's certificate from
    # a fixed path (cmd/kueue/main.go), not from its configuration.
    try:
        write_serving_files(KUEUE_METRICS_CERTS, datetime.now(UTC), ("127.0.0.1", "localhost"), ca)
    except OSError as e:
        raise SystemExit(f"Kueue needs its metrics certificate in {KUEUE_METRICS_CERTS}: {e}") from e
    port = free_port()
    for doc in kueue_webhook_configurations(module, port, ca.cert_pem):
        kubectl(admin, "apply", "-f", "-", stdin=json.dumps(doc))
    for name, patch in kueue_conversion_patches(module, port, ca.cert_pem).items():
        kubectl(admin, "patch", "crd", name, "--type=merge", "-p", json.dumps(patch))
    config = work / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(kueue_configuration(port, cert_dir)))
    logfile = (work / "kueue.log").open("wb")
    # Its visibility (pending workloads) server reads its certificate from /visibility, a fixed path:
    # it is left off here (the one departure from Kueue's shipped defaults; it serves no request here).
    proc = subprocess.Popen([str(kueue_binary()), f"--config={config}", "--zap-log-level=2",
                             "--feature-gates=VisibilityOnDemand=false"],
                            env={**os.environ, "KUBECONFIG": str(operator_config)},
                            stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Operator("kueue", proc, logfile)


def start_tasq(admin: Path, operator_config: Path, work: Path, profile: Path | None = None) -> Operator:
    logfile = (work / "tasq.log").open("wb")
    tasq = Path(sys.executable).parent / "tasq"
    # cProfile writes its stats when the script ends, which `tasq run` does on SIGTERM (`stop`).
    profiled = [] if profile is None else [sys.executable, "-m", "cProfile", "-o", str(profile / "tasq-operator.prof")]
    proc = subprocess.Popen([*profiled, str(tasq), "run", "--kubeconfig", str(operator_config), "--local-webhooks",
                             "--create-namespace", "--metrics-port", str(free_port()), "--metrics-host",
                             "127.0.0.1", "--probe-port", str(free_port()), "--probe-host", "127.0.0.1"],
                            stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Operator("tasq", proc, logfile)


SETUP = f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: dc}}
spec:
  levels: [{{nodeLabel: {BLOCK}}}, {{nodeLabel: {RACK}}}, {{nodeLabel: kubernetes.io/hostname}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: gpu}}
spec: {{nodeLabels: {{{POOL}: gpu}}, topologyName: dc}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors: [{{name: gpu, resources: [{{name: cpu, nominalQuota: "100000"}}, {{name: nvidia.com/gpu, nominalQuota: "100000"}}]}}]
"""


def local_queue(namespace: str, held: bool = False) -> str:
    """The scenario's LocalQueue; `held`: stopPolicy Hold, so that nothing is admitted from it."""
    hold = ", stopPolicy: Hold" if held else ""
    return f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: {namespace}}}
spec: {{clusterQueue: cq{hold}}}
"""


def wait_until_serving(admin: Path, operator: Operator, timeout: float = 300) -> float:
    """Apply the queues (through the operator's webhooks) until it works and the ClusterQueue is Active."""
    start = time.monotonic()
    why = ""
    while time.monotonic() - start < timeout:
        if operator.proc.poll() is not None:
            raise RuntimeError(f"{operator.name} exited with {operator.proc.returncode}; see its log")
        applied = subprocess.run([shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl",
                                  "--kubeconfig", str(admin), "apply", "-f", "-"], input=SETUP, text=True,
                                 capture_output=True, check=False)
        if applied.returncode == 0:
            active = kubectl(admin, "get", "clusterqueue", "cq", "-o",
                             "jsonpath={.status.conditions[?(@.type=='Active')].status}", check=False)
            if active.strip() == "True":
                return time.monotonic() - start
            why = "ClusterQueue cq: " + kubectl(admin, "get", "clusterqueue", "cq", "-o",
                                                "jsonpath={.status.conditions}", check=False)
        else:
            why = applied.stderr.strip()
        time.sleep(1)
    raise RuntimeError(f"{operator.name} did not serve within {timeout:.0f}s: {why}")


# -- the scenarios ---------------------------------------------------------------------------------

class Scenario(NamedTuple):
    """What one scenario creates: `jobs` Jobs at `rate` a second (0: CREATE_CONCURRENCY at a time)
    into a LocalQueue that admits them, or is `held`."""

    label: str
    jobs: int
    rate: float
    held: bool


def job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"parallelism": 2, "completions": 2, "template": {
            "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}}}]}}},
    }


LABEL = re.compile(r'(\w+)="([^"]*)"')


def flow_control_requests(admin: Path) -> tuple[float, dict[str, float]]:
    total, by_kind, _ = api_requests(admin)
    return total, by_kind


def api_requests(admin: Path) -> tuple[float, dict[str, float], dict[str, float]]:
    """kube-apiserver's dispatched requests of the operator's FlowSchema so far, and every client's
    requests by verb and resource (`apiserver_request_total`: the operator's and the Job
    controller's, scheduler's and kwok's together, which do the same work for either operator):
    writes, then reads with the watch events sent by kind."""
    text = kubectl(admin, "get", "--raw", "/metrics")
    total = 0.0
    by_kind: dict[str, float] = {}
    reads: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_flowcontrol_dispatched_requests_total{") and \
                f'flow_schema="{FLOW_SCHEMA}"' in line:
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("apiserver_request_total{"):
            labels = dict(LABEL.findall(line))
            resource = labels.get("resource", "?") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            kind = f"{labels.get('verb', '?')} {resource}"
            # reads (informers and probes) apart from the per-Job writes compared between operators
            into = reads if labels.get("verb") in ("WATCH", "LIST", "GET") else by_kind
            into[kind] = into.get(kind, 0.0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("apiserver_watch_events_total{"):
            kind = f"watch events {dict(LABEL.findall(line)).get('kind', '?')}"
            reads[kind] = reads.get(kind, 0.0) + float(line.rsplit(" ", 1)[1])
    return total, by_kind, reads


SETTLE_POLL_S = 3.0
SETTLED_REQUESTS = 3
"""The operator's requests have settled when no more than this many came in one poll beyond its
idle rate (lease renewals and watch requests go on while idle)."""
SETTLE_LIMIT_S = 180.0
IDLE_SAMPLE_S = 6.0


def idle_rate(admin: Path) -> float:
    """The operator's requests per second with nothing to do (lease renewals, watch requests)."""
    before = flow_control_requests(admin)[0]
    time.sleep(IDLE_SAMPLE_S)
    return (flow_control_requests(admin)[0] - before) / IDLE_SAMPLE_S


def settled_requests(admin: Path, idle_per_s: float) -> tuple[float, dict[str, float]]:
    """`flow_control_requests` once the trailing writes are done: the Events, pod ungates and
    statuses that follow the last admission are part of each Job's cost, and an operator that
    posts its Events one at a time behind a queue (client-go's recorder) can trail by many
    seconds, so a fixed wait would count one operator's trailing writes and not the other's.
    Settled: a poll saw no more than the idle rate's requests and `SETTLED_REQUESTS`."""
    deadline = time.monotonic() + SETTLE_LIMIT_S
    time.sleep(SETTLE_POLL_S)
    last = flow_control_requests(admin)
    while time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
        now = flow_control_requests(admin)
        if now[0] - last[0] <= idle_per_s * SETTLE_POLL_S + SETTLED_REQUESTS:
            return now
        last = now
    log(f"requests still coming {SETTLE_LIMIT_S:.0f} s after the last admission; counted so far")
    return last


@dataclass
class Row:
    scenario: str
    jobs: int
    creates_per_s: float
    jobs_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_job: float
    peak_rss_mib: float
    requests_per_job: float
    admitted: int
    main_cpu_ms_per_job: float = 0.0
    """The operator's main process alone (tasq: without its webhook child)."""
    idle_requests_per_s: float = 0.0
    """The operator's requests per second before the scenario, with nothing to do."""
    writes_by_kind: dict[str, float] = field(default_factory=dict)
    """Every client's writes per Job by verb and resource (see `flow_control_requests`)."""
    creation_cpu_ms_per_job: dict[str, float] = field(default_factory=dict)
    """CPU ms per Job of each process while the Jobs were being created (the first create to the
    last answer): the control plane's components, the operator's main process and its webhook child."""
    webhook_calls_per_job: dict[str, tuple[float, float]] = field(default_factory=dict)
    """kube-apiserver's admission webhook calls per Job over the scenario (until its requests
    settled), by webhook and operation: (calls per Job, mean ms per call)."""
    child_peak_rss_mib: float = 0.0
    """The peak RSS of the operator's child processes alone (tasq's webhook child)."""
    webhook_connections: tuple[int, int] = (0, 0)
    """While creating: the connections to the webhook server seen (at least), and the most open at once."""
    reads_per_job: dict[str, float] = field(default_factory=dict)
    """Every client's reads per Job over the scenario (GET, LIST, WATCH requests by resource) and the
    watch events kube-apiserver sent per Job by kind (`watch events <kind>`)."""
    creation_writes_per_job: dict[str, float] = field(default_factory=dict)
    """Every client's writes per Job while the Jobs were being created (as `writes_by_kind`)."""
    load: float = field(default_factory=lambda: os.getloadavg()[0])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def drive(admin: Path, namespace: str, count: int, rate: float, held: bool = False,
                created: Callable[[], None] = lambda: None) -> tuple[float, dict[str, float], dict[str, float]]:
    """Create the Jobs (rate 0: CREATE_CONCURRENCY at a time) while watching the Workloads, call
    `created` once the last create is answered, then wait for their admissions (`held`: none come, so not);
    (create seconds, job -> send time, job -> admitted time), monotonic clock."""
    api_client = await connect(admin)
    api = KubeApi(api_client)
    sent: dict[str, float] = {}
    admitted: dict[str, float] = {}
    all_admitted = asyncio.Event()

    def seen(obj: dict[str, Any]) -> None:
        conditions = (obj.get("status") or {}).get("conditions") or []
        if any(cond.get("type") == "Admitted" and cond.get("status") == "True" for cond in conditions):
            owners = (obj.get("metadata") or {}).get("ownerReferences") or [{}]
            admitted.setdefault(owners[0].get("name", ""), time.monotonic())
            if len(admitted) >= count:
                all_admitted.set()

    async def watch() -> None:
        """List, then watch from the list's version; when a watch ends or fails, again."""
        custom = client.CustomObjectsApi(api_client)
        while not all_admitted.is_set():
            try:
                listed = cast(dict[str, Any], await custom.list_namespaced_custom_object(  # a dict for custom objects
                    "kueue.x-k8s.io", "v1beta2", namespace, "workloads"))
                for obj in listed.get("items") or []:
                    seen(obj)
                stream = watch_module.Watch().stream(  # type: ignore[no-untyped-call]
                    custom.list_namespaced_custom_object, "kueue.x-k8s.io", "v1beta2", namespace, "workloads",
                    resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=300)
                async for event in stream:
                    seen(event.get("object") or {})
                    if all_admitted.is_set():
                        return
            except Exception as e:
                log(f"watching Workloads in {namespace}: {type(e).__name__}: {e}")
                await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0.5)  # the watch is open before the first create
    slots = asyncio.Semaphore(CREATE_CONCURRENCY)
    start = time.monotonic()

    async def one(i: int) -> None:
        name = f"j{i:05d}"
        if rate > 0:
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        async with slots:
            sent[name] = time.monotonic()
            for attempt in range(5):
                try:
                    await api.create(("batch/v1", "jobs"), namespace, job(name, namespace))
                    break
                except Exception as e:  # a webhook timeout under load: count it and retry, as a client would
                    log(f"create {name} attempt {attempt + 1}: {e}")
                    await asyncio.sleep(1)

    await asyncio.gather(*(one(i) for i in range(count)))
    create_s = time.monotonic() - start
    created()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_admitted.wait(), 0 if held else 900)
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await watcher
    await api_client.close()  # type: ignore[no-untyped-call]
    return create_s, sent, admitted


def creation_cpu(up_pid: int, operator: Operator) -> dict[str, float]:
    """CPU seconds so far of the control plane's components and the operator's main process and
    children (`<name> main`, `<name> child`)."""
    main = operator.cpu_seconds(main_only=True)
    return {**control_plane_cpu(up_pid), f"{operator.name} main": main,
            f"{operator.name} child": operator.cpu_seconds() - main}


def apiserver_profile(admin: Path, seconds: int, into: Path) -> threading.Thread:
    """Starts a CPU profile of kube-apiserver over the next `seconds` (its /debug/pprof, written to
    `into`, read with `go tool pprof -top FILE`); the thread ends when it is written."""
    def take() -> None:
        with into.open("wb") as out:
            subprocess.run([kubectl_binary(), "--kubeconfig", str(admin), "get", "--raw",
                            f"/debug/pprof/profile?seconds={seconds}"], stdout=out, check=False,
                           timeout=seconds + 60)
    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def scenario(admin: Path, up_pid: int, operator: Operator, plan: Scenario, index: int, final: bool = False,
             profiles: tuple[Path, int] | None = None) -> Row:
    """One scenario in a namespace of its own, deleted after (but for the last: its cluster goes).
    `profiles`: (folder, seconds) of a kube-apiserver CPU profile taken from the first create on."""
    label, count, rate, held = plan
    namespace = f"s{index}"
    kubectl(admin, "create", "namespace", namespace)
    kubectl(admin, "apply", "-f", "-", stdin=local_queue(namespace, held))
    time.sleep(2)
    idle_per_s = idle_rate(admin)
    (requests_before, by_kind_before), cpu_before = flow_control_requests(admin), operator.cpu_seconds()
    main_cpu_before = operator.cpu_seconds(main_only=True)
    calls_before, reads_before = webhook_calls(admin), api_requests(admin)[2]
    connections = ConnectionSampler(webhook_ports(admin))
    phase_cpu = [creation_cpu(up_pid, operator)]
    phase_writes = [by_kind_before]
    # read off the event loop: the loop's watch stamps each admission as it sees it
    writes_read = threading.Thread(target=lambda: phase_writes.append(api_requests(admin)[1]))

    def created() -> None:
        phase_cpu.append(creation_cpu(up_pid, operator))
        writes_read.start()
        connections.stop()
    connections.start()
    profiling = profiles and apiserver_profile(
        admin, profiles[1], profiles[0] / f"{operator.name}-{label.replace(' ', '-').replace('/', '')}.pprof")
    create_s, sent, admitted = asyncio.run(drive(admin, namespace, count, rate, held, created))
    requests_after, by_kind_after = settled_requests(admin, idle_per_s)
    writes_read.join()
    if profiling:
        profiling.join()
    reads_after = api_requests(admin)[2]
    calls_after = webhook_calls(admin)
    calls = {key: (n - calls_before.get(key, (0.0, 0.0))[0], s - calls_before.get(key, (0.0, 0.0))[1])
             for key, (n, s) in calls_after.items()}
    requests = requests_after - requests_before
    cpu = operator.cpu_seconds() - cpu_before
    main_cpu = operator.cpu_seconds(main_only=True) - main_cpu_before
    latencies = [admitted[name] - sent[name] for name in sent if name in admitted]
    last = max(admitted.values(), default=time.monotonic())
    row = Row(label, count, count / create_s if rate == 0 else rate,
              len(latencies) / max(1e-9, last - min(sent.values())),
              statistics.median(latencies) * 1000 if latencies else float("nan"),
              percentile(latencies, 0.99) * 1000 if latencies else float("nan"),
              cpu * 1000 / count, operator.peak_rss_mib(), requests / count, len(latencies),
              main_cpu * 1000 / count, idle_per_s, {kind: (n - by_kind_before.get(kind, 0.0)) / count for kind, n in by_kind_after.items()
                           if n > by_kind_before.get(kind, 0.0)},
              {name: (seconds - phase_cpu[0].get(name, 0.0)) * 1000 / count for name, seconds in phase_cpu[1].items()},
              {key: (n / count, s * 1000 / n) for key, (n, s) in calls.items() if n > 0},
              operator.peak_rss_mib(children_only=True), (len(connections.seen), connections.most),
              {kind: (n - reads_before.get(kind, 0.0)) / count for kind, n in reads_after.items()
               if n > reads_before.get(kind, 0.0)},
              {kind: (n - by_kind_before.get(kind, 0.0)) / count for kind, n in phase_writes[-1].items()
               if n > by_kind_before.get(kind, 0.0)})
    log(f"{operator.name} {label}: {row}")
    if not final:  # the next scenario starts once the cluster has deleted this one's Jobs and pods
        kubectl(admin, "delete", "namespace", namespace, "--wait=true", "--timeout=600s")
    return row


def run_operator(name: str, scenarios: list[Scenario], profile: Path | None = None,
                 profiles: tuple[Path, int] | None = None) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix=f"vs-kueue-{name}-") as tmp:
        work = Path(tmp)
        with real_cluster(work, crds=(name == "tasq"), profiling=profiles is not None) as (admin, up_pid):
            kubectl(admin, "label", "nodes", "--all", f"{POOL}=gpu")
            operator_config = service_account_kubeconfig(admin, work)
            operator = (start_kueue(admin, operator_config, work) if name == "kueue"
                        else start_tasq(admin, operator_config, work, profile))
            try:
                log(f"{name}: serving after {wait_until_serving(admin, operator):.1f} s")
                return [scenario(admin, up_pid, operator, plan, i, final=i == len(scenarios) - 1, profiles=profiles)
                        for i, plan in enumerate(scenarios)]
            finally:
                operator.stop()
                shutil.copy(work / f"{name}.log", Path(tempfile.gettempdir()) / f"vs-kueue-{name}.log")


COLUMNS = (("creates/s", "creates_per_s", "{:.1f}"), ("Jobs/s", "jobs_per_s", "{:.1f}"),
           ("p50 ms", "p50_ms", "{:.0f}"), ("p99 ms", "p99_ms", "{:.0f}"),
           ("CPU ms/Job", "cpu_ms_per_job", "{:.1f}"), ("peak RSS MiB", "peak_rss_mib", "{:.0f}"),
           ("requests/Job", "requests_per_job", "{:.2f}"))


def report(results: dict[str, list[Row]]) -> None:
    print(f"machine: {os.uname().machine}, {os.cpu_count()} cores; Kueue {KUEUE_VERSION} (--zap-log-level=2), "
          f"tasq (log level info); {TOPOLOGY} kwok nodes")
    for name, rows in results.items():
        print(f"\n{name}\n| scenario | Jobs | admitted | " + " | ".join(c[0] for c in COLUMNS) + " | load |")
        print("|---|---:|---:|" + "---:|" * len(COLUMNS) + "---:|")
        for row in rows:
            cells = " | ".join(fmt.format(getattr(row, attr)) for _, attr, fmt in COLUMNS)
            print(f"| {row.scenario} | {row.jobs} | {row.admitted} | {cells} | {row.load:.1f} |")
    for name, rows in results.items():
        for row in rows:
            print(f"{name} {row.scenario}, main process {row.main_cpu_ms_per_job:.1f} CPU ms/Job, "
                  f"idle {row.idle_requests_per_s:.2f} requests/s; every client's writes per Job: " + ", ".join(
                f"{kind} {n:.2f}" for kind, n in sorted(row.writes_by_kind.items(), key=lambda kv: -kv[1])))
            print(f"{name} {row.scenario}, CPU ms per Job while creating ({row.creates_per_s:.1f} creates/s, load "
                  f"{row.load:.1f}): " + ", ".join(f"{proc} {ms:.2f}" for proc, ms in sorted(
                      row.creation_cpu_ms_per_job.items(), key=lambda kv: -kv[1])))
            print(f"{name} {row.scenario}, every client's writes per Job while creating: " + ", ".join(
                f"{kind} {n:.2f}" for kind, n in sorted(row.creation_writes_per_job.items(), key=lambda kv: -kv[1])))
            print(f"{name} {row.scenario}, webhook calls per Job (mean ms): " + ", ".join(
                f"{key} {n:.2f} ({ms:.1f})" for key, (n, ms) in sorted(row.webhook_calls_per_job.items())))
            print(f"{name} {row.scenario}, connections to the webhook server while creating: at least "
                  f"{row.webhook_connections[0]}, at most {row.webhook_connections[1]} open at once; every client's "
                  "reads and watch events per Job: " + ", ".join(f"{kind} {n:.2f}" for kind, n in sorted(
                      row.reads_per_job.items(), key=lambda kv: -kv[1])))
            if row.child_peak_rss_mib:
                print(f"{name} {row.scenario}, webhook child's peak RSS {row.child_peak_rss_mib:.0f} MiB")
    if {"kueue", "tasq"} <= results.keys():
        print("\ntasq / Kueue\n| scenario | " + " | ".join(c[0] for c in COLUMNS) + " |")
        print("|---|" + "---:|" * len(COLUMNS))
        for k, t in zip(results["kueue"], results["tasq"], strict=True):
            ratios = " | ".join(f"{getattr(t, attr) / getattr(k, attr):.2f}" if getattr(k, attr) else "-"
                                for _, attr, _ in COLUMNS)
            print(f"| {t.scenario} | {ratios} |")


def main() -> int:
    # SIGTERM unwinds like Ctrl-C, so the clusters and operators this started are stopped too.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bursts", default="200,1000", help="burst sizes (Jobs created 32 at a time)")
    parser.add_argument("--paced", default="4:200", help="RATE:JOBS of the paced run ('' for none)")
    parser.add_argument("--held", default="", help="burst sizes into a held LocalQueue (stopPolicy Hold): "
                        "the webhooks and Workload creation alone, nothing admitted")
    parser.add_argument("--only", choices=("kueue", "tasq"), default=None, help="run one operator only")
    parser.add_argument("--profile", type=Path, default=None,
                        help="run tasq's operator process under cProfile; stats into this folder")
    parser.add_argument("--apiserver-profile", type=Path, default=None, metavar="DIR",
                        help="take a CPU profile of kube-apiserver in each scenario from its first create "
                             "(DIR/<operator>-<scenario>.pprof; `go tool pprof -top FILE`)")
    parser.add_argument("--apiserver-profile-s", type=int, default=10, metavar="S",
                        help="how long each kube-apiserver profile lasts (default 10 s)")
    args = parser.parse_args()
    if args.apiserver_profile is not None:
        args.apiserver_profile.mkdir(parents=True, exist_ok=True)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    # The held bursts and the paced run first, then the bursts by size: the largest namespace,
    # slowest to delete, is last and never waited for.
    scenarios = [Scenario(f"{n} held", int(n), 0.0, True) for n in args.held.split(",") if n]
    if args.paced:
        rate, count = args.paced.split(":")
        scenarios.append(Scenario(f"paced {rate}/s", int(count), float(rate), False))
    scenarios += sorted((Scenario(f"{n} burst", int(n), 0.0, False) for n in args.bursts.split(",") if n),
                        key=lambda s: s.jobs)
    if args.only != "tasq":
        kueue_binary()
    profiles = None if args.apiserver_profile is None else (args.apiserver_profile, args.apiserver_profile_s)
    results = {name: run_operator(name, scenarios, args.profile, profiles)
               for name in ("kueue", "tasq") if args.only in (None, name)}
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
