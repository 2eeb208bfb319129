"""Benchmark the devcluster's CRD rule (CEL) evaluation on tasq's own CRDs: a Workload created, its
status written (root rules with oldSelf), a Topology and a ClusterQueue created.

In-process, no HTTP: times `devcluster.server.celrules.rule_causes`, the step every custom-object write
now pays after its schema checks. Prints one table; results go to bench/RESULTS.md under
`## devcluster CEL rules`. Usage: `.venv/bin/python bench/celrules.py [--reps N]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)] if str(REPO) not in sys.path else []

from devcluster.server.celrules import rule_causes  # noqa: E402


def schema_of(kind_file: str) -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "crds" / kind_file).read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return dict(version["schema"]["openAPIV3Schema"])


def workload() -> dict[str, Any]:
    return dict(next(yaml.safe_load_all((REPO / "config" / "samples" / "20-workload.yaml").read_text())))


def reserved(wl: dict[str, Any]) -> dict[str, Any]:
    assignments = [{"name": ps["name"], "count": ps.get("count", 1)} for ps in wl["spec"]["podSets"]]
    return {**wl, "status": {"admission": {"clusterQueue": "team-a", "podSetAssignments": assignments},
                             "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                             "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def first_doc(path: str, kind: str) -> dict[str, Any]:
    for p in sorted((REPO / "config" / "samples").glob("*.yaml")):
        for doc in yaml.safe_load_all(p.read_text()):
            if doc and doc.get("kind") == kind:
                return dict(doc)
    raise SystemExit(f"no {kind} in config/samples ({path})")


def timed(reps: int, call: Callable[[], list[Any]]) -> tuple[float, float, int]:
    causes = len(call())  # warm: compiles and caches the programs
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e3, max(samples) * 1e3, causes


def machine() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration):
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    return (f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    wl_schema = schema_of("kueue.x-k8s.io_workloads.yaml")
    wl = workload()
    admitted = reserved(wl)
    bad = {**admitted, "status": {**admitted["status"], "admission": {"clusterQueue": "team-a",
                                                                      "podSetAssignments": []}}}
    topology, topology_schema = first_doc("topology", "Topology"), schema_of("kueue.x-k8s.io_topologies.yaml")
    cq, cq_schema = first_doc("cq", "ClusterQueue"), schema_of("kueue.x-k8s.io_clusterqueues.yaml")
    cases: list[tuple[str, Callable[[], list[Any]]]] = [
        ("Workload create", lambda: rule_causes(wl, None, wl_schema)),
        ("Workload status write (oldSelf)", lambda: rule_causes(admitted, wl, wl_schema)),
        ("Workload unchanged (ratcheted)", lambda: rule_causes(wl, wl, wl_schema)),
        ("Workload reserved, no assignments", lambda: rule_causes(bad, wl, wl_schema)),
        ("Topology create", lambda: rule_causes(topology, None, topology_schema)),
        ("ClusterQueue create", lambda: rule_causes(cq, None, cq_schema)),
    ]
    print(f"devcluster CEL rules (common-expression-language), {args.reps} reps; {machine()}")
    print(f"{'case':<34} {'p50 ms':>8} {'max ms':>8} {'causes':>7}")
    for name, call in cases:
        p50, worst, causes = timed(args.reps, call)
        print(f"{name:<34} {p50:>8.3f} {worst:>8.3f} {causes:>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
