"""The quota ledger over a tree of cohorts: build once, then reserve, release and availability.

`depth` levels of cohorts under one root (each cohort below the root with quota of its own and both
limits), ClusterQueues spread evenly over the lowest level (each queue with a borrowingLimit and a
lendingLimit; with depth 1, all of them in the root). Times building the ledger (once per configuration change in the operator), one reserve +
release pair and one availability query (each walks the queue's path to the root only), and one
clone (per admission cycle). Prints a table; µs per operation.
Run: `.venv/bin/python bench/quota.py [--sizes 100,1000,10000] [--depths 1,3,6]`.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.core.admission.quota import (  # noqa: E402
    ClusterQueueQuota,
    CohortQuota,
    FlavorQuotas,
    QuotaLedger,
    ResourceGroup,
    ResourceQuota,
)

GPU = "nvidia.com/gpu"
FLAVORS = ("h100", "a100")
OPS = 20_000


def _groups(nominal: int, borrowing: int | None, lending: int | None) -> tuple[ResourceGroup, ...]:
    quotas = {res: ResourceQuota(nominal * 1000, borrowing, lending) for res in ("cpu", GPU)}
    return (ResourceGroup(("cpu", GPU), tuple(FlavorQuotas(f, quotas) for f in FLAVORS)),)


def tree(queues: int, depth: int) -> tuple[dict[str, ClusterQueueQuota], dict[str, CohortQuota]]:
    """`depth` levels of cohorts with one fan-out, at most `queues / 4` of them on the lowest level,
    the queues spread over that level."""
    lowest = max(1, queues // 4)
    fanout = max(2, round(lowest ** (1 / depth))) if depth > 1 else lowest
    cohorts: dict[str, CohortQuota] = {"c0": CohortQuota("c0", None, _groups(8, None, None))}
    level = ["c0"]
    for _level in range(1, depth):
        nxt = []
        for parent in level:
            for i in range(fanout):
                name = f"{parent}.{i}"
                cohorts[name] = CohortQuota(name, parent, _groups(2, 4_000, 6_000))
                nxt.append(name)
                if len(nxt) >= lowest:
                    break
            if len(nxt) >= lowest:
                break
        level = nxt
    out: dict[str, ClusterQueueQuota] = {}
    for i in range(queues):
        name = f"q{i}"
        out[name] = ClusterQueueQuota(name, level[i % len(level)], _groups(4, 2_000, 3_000))
    return out, cohorts


def per_op(fn: object, n: int) -> float:
    assert callable(fn)
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - start) / n * 1e6


def row(queues: int, depth: int) -> str:
    qs, cohorts = tree(queues, depth)
    start = time.perf_counter()
    ledger = QuotaLedger.build(qs, cohorts)
    build_ms = (time.perf_counter() - start) * 1000
    names = sorted(qs)
    for i, name in enumerate(names):  # every queue holds something, so usage reaches every level
        ledger.reserve(f"ns/base{i}", name, {(FLAVORS[0], GPU): 3_000, (FLAVORS[0], "cpu"): 3_000})
    usage = {(FLAVORS[0], GPU): 1_000, (FLAVORS[0], "cpu"): 500}

    def reserve_release(i: int) -> None:
        ledger.reserve("ns/w", names[i % len(names)], usage)
        ledger.release("ns/w")

    def available(i: int) -> None:
        ledger.availability(names[i % len(names)], FLAVORS[0], GPU)

    path = 1
    node = (False, names[0])
    while node in ledger.tree.parent:
        node, path = (True, ledger.tree.parent[node]), path + 1
    rr = per_op(reserve_release, OPS)
    av = per_op(available, OPS)
    start = time.perf_counter()
    ledger.clone()
    clone_ms = (time.perf_counter() - start) * 1000
    return (f"| {queues:,} | {len(cohorts):,} | {path} | {build_ms:.1f} | {rr:.1f} | {av:.1f} | {clone_ms:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--depths", default="1,3,6")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, CPython "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    print("| queues | cohorts | path length | build ms | reserve+release µs | availability µs | clone ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for depth in (int(d) for d in args.depths.split(",")):
        for size in (int(s) for s in args.sizes.split(",")):
            print(row(size, depth))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
