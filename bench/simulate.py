"""Benchmark of `tasq simulate` on large cluster dumps: time and peak memory.

Writes `kubectl get nodes,pods -o json`-shaped dumps (realistic Nodes from
tests/data/simulate/realistic_nodes.py; 1.4 bound Pods per node as kubectl prints them: a DaemonSet
pod on every node, Job pods on 40%, with volumes and container statuses; no managedFields, which
kubectl hides) as JSON and YAML, plus a small TAS queue setup and two Jobs. Each figure is one
fresh process: bare `json.load` (or libyaml `CSafeLoader`) of the dump, then `tasq simulate -f dump
-f queues.yaml`; peak = the process's VmHWM. Run: `.venv/bin/python bench/simulate.py [--nodes 10000,50000] [--no-yaml]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.data.simulate.realistic_nodes import make_node  # noqa: E402

PODS_PER_NODE = 1.4
STAMP = "2026-01-01T00:00:00Z"


def make_pod(index: int, node: str, job: bool) -> dict[str, Any]:
    """A bound Running pod as `kubectl get pods -o json` prints it (a DaemonSet's or a Job's)."""
    owner = ("batch/v1", "Job", f"train-{index // 8}") if job else ("apps/v1", "DaemonSet", "node-exporter")
    name = f"{owner[2]}-{index:06d}"
    requests = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"} if job else {"cpu": "100m", "memory": "64Mi"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "ml" if job else "monitoring", "uid": f"7a1e{index:08x}-0000-4000-8000-{index:012x}",
            "resourceVersion": str(200000 + index), "creationTimestamp": STAMP, "generateName": f"{owner[2]}-",
            "labels": {"app": owner[2], "controller-revision-hash": "6d9f8b7c5"},
            "annotations": {"kubectl.kubernetes.io/default-container": "main"},
            "ownerReferences": [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "uid": f"0wn{index // 8:09d}",
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "nodeName": node, "restartPolicy": "Never" if job else "Always", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "containers": [{
                "name": "main", "image": "registry.example.com/ml/trainer:1.4" if job else "prom/node-exporter:v1.8.2",
                "args": ["--epochs", "3"] if job else ["--path.rootfs=/host"], "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "RANK", "value": str(index % 8)}],
                "resources": {"requests": requests, "limits": dict(requests)},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "name": "kube-api-access", "readOnly": True}],
            }],
            "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "tolerationSeconds": 300},
                            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        },
        "status": {
            "phase": "Running", "hostIP": "10.128.0.1", "podIP": f"10.{index % 250}.{index // 250 % 250}.9",
            "qosClass": "Guaranteed" if job else "Burstable", "startTime": STAMP,
            "conditions": [{"type": t, "status": "True", "lastTransitionTime": STAMP}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "started": True,
                                   "image": "registry.example.com/ml/trainer:1.4", "imageID": "sha256:ab12",
                                   "containerID": f"containerd://{index:064x}",
                                   "state": {"running": {"startedAt": STAMP}}}],
        },
    }


def dump(nodes: int) -> dict[str, Any]:
    rng = random.Random(14)
    items: list[dict[str, Any]] = [make_node(i, rng) for i in range(nodes)]
    pods = int(nodes * PODS_PER_NODE)
    for i in range(pods):
        node = f"gke-ml-pool-{i % nodes:05d}"
        items.append(make_pod(i, node, job=i >= nodes))
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


QUEUES = """\
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata: {name: dc}
spec:
  levels: [{nodeLabel: cloud.provider.com/topology-block}, {nodeLabel: cloud.provider.com/topology-rack},
           {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {cloud.provider.com/gpu: h100}
  topologyName: dc
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: "100000"}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: cq}
""" + "".join(f"""\
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: ml
  labels: {{kueue.x-k8s.io/queue-name: lq}}
  annotations: {{kueue.x-k8s.io/require-topology: {level}}}
spec:
  parallelism: {count}
  completions: {count}
  template:
    spec:
      restartPolicy: Never
      tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
      containers: [{{name: c, image: x, resources: {{requests: {{nvidia.com/gpu: "8"}}, limits: {{nvidia.com/gpu: "8"}}}}}}]
""" for name, count, level in (("rack-job", 4, "cloud.provider.com/topology-rack"),
                               ("block-job", 32, "cloud.provider.com/topology-block")))

_MEASURE = """
import json, sys, time
t = time.perf_counter()
{body}
seconds = time.perf_counter() - t
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"seconds": seconds, "peak_mib": int(hwm.split()[1]) / 1024}}))
"""
"""Peak = VmHWM, this process's own high-water mark: getrusage's ru_maxrss also counts the forked
parent's resident size at exec (Linux keeps the larger), which here holds the generated dump."""
_BARE_JSON = "json.load(open(sys.argv[1], 'rb'))"
_BARE_YAML = "import yaml; list(yaml.load_all(open(sys.argv[1]).read(), Loader=yaml.CSafeLoader))"
_SIMULATE = ("import contextlib, io\nfrom controller.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()): code = main(['simulate', '-f', sys.argv[1], '-f', sys.argv[2]])\n"
             "assert code == 0, code")


def measure(body: str, *args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _MEASURE.format(body=body), *args], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"measurement failed: {out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10000,50000")
    parser.add_argument("--no-yaml", action="store_true", help="JSON dumps only")
    parser.add_argument("--indent", type=int, default=4, help="JSON indentation (kubectl: 4; 0: compact)")
    parser.add_argument("--bare-yaml-max", type=int, default=10000,
                        help="largest node count whose YAML gets the bare CSafeLoader baseline (it peaks at "
                             "~35x the file size: 2.4 GiB for 10,000 nodes)")
    args = parser.parse_args()
    print(f"# {platform.python_version()} {platform.machine()} {os.cpu_count()} cpus; libyaml "
          f"{'yes' if hasattr(yaml, 'CSafeLoader') else 'no'}; uptime: {os.getloadavg()}")
    print("| nodes | pods | format | MB | bare load s | bare peak MiB | simulate s | simulate peak MiB | ratio |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        queues = Path(tmp) / "queues.yaml"
        queues.write_text(QUEUES, encoding="utf-8")
        for n in (int(x) for x in args.nodes.split(",")):
            listing = dump(n)
            formats = ["json"] if args.no_yaml else ["json", "yaml"]
            paths = {fmt: Path(tmp) / f"dump-{n}.{fmt}" for fmt in formats}
            for fmt, path in paths.items():
                with path.open("w", encoding="utf-8") as f:
                    if fmt == "json":
                        json.dump(listing, f, indent=args.indent or None)
                    else:
                        yaml.dump(listing, f, Dumper=yaml.CSafeDumper, sort_keys=False)
            del listing
            for fmt, path in paths.items():
                skip_bare = fmt == "yaml" and n > args.bare_yaml_max
                bare = None if skip_bare else measure(_BARE_JSON if fmt == "json" else _BARE_YAML, str(path))
                sim = measure(_SIMULATE, str(path), str(queues))
                baseline = "- | -" if bare is None else f"{bare['seconds']:.2f} | {bare['peak_mib']:.0f}"
                ratio = "-" if bare is None else f"{sim['seconds'] / bare['seconds']:.1f}x"
                print(f"| {n} | {int(n * PODS_PER_NODE)} | {fmt} | {path.stat().st_size / 1e6:.1f} | "
                      f"{baseline} | {sim['seconds']:.2f} | {sim['peak_mib']:.0f} | {ratio} |", flush=True)
                path.unlink()
    print(f"# after: uptime {os.getloadavg()} at {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main()
