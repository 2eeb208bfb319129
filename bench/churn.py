"""Whether the operator's memory stays flat while Jobs come and go: rounds of a burst, then its namespace deleted.

Runs bench/operator.py's set-up (a bare devcluster subprocess with `--nodes` GPU nodes, the operator
on its own thread in this process) and `--rounds` rounds: `--jobs` Jobs created at once into a fresh
namespace, all admitted, then the namespace deleted and waited for until the operator's cache holds
none of its Workloads or Jobs. After each round it prints the process's RSS and peak (VmHWM), the
objects the collector tracks and those frozen out of it (`gc.get_freeze_count`: what
controller.kube.collecting froze), and how many entries the cache and the admission loop still
hold. A leak shows as a column that grows round after round. Results in bench/RESULTS.md under
`## operator`. Usage: `.venv/bin/python bench/churn.py [--nodes N] [--jobs N] [--rounds N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import sys
import tempfile
import time
from collections import Counter, deque
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_operator", HERE / "operator.py")
assert _spec is not None and _spec.loader is not None
bench_operator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_operator)

from controller.kube.api import KubeApi, connect  # noqa: E402  (bench/operator.py put the repository on the path)


def client_process(*args: object) -> None:
    """bench/operator.py's Job-creating client, importable by the spawned process (from this file)."""
    _create_jobs(*args)


_create_jobs = bench_operator.__dict__["client_process"]
bench_operator.__dict__["client_process"] = client_process


status_mib = bench_operator.status_mib


async def delete_namespace(kubeconfig: Path, namespace: str) -> None:
    api_client = await connect(kubeconfig)
    try:
        await KubeApi(api_client).request("DELETE", f"/api/v1/namespaces/{namespace}")
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]


def held_in(running: object, namespace: str) -> int:
    """Workloads, Jobs and pods of `namespace` the operator's cache still holds."""
    cache = running.operator.cache  # type: ignore[attr-defined]
    prefix = namespace + "/"
    return sum(1 for table in (cache.workloads, cache.pods, *cache.owners.values())
               for key in list(table) if str(key).startswith(prefix))


def tables(running: object) -> dict[str, int]:
    """Entries held per table of the operator's parts: each dict, set, list or deque attribute of the
    operator and of the objects it holds (cache, loops, recorder...), one level down, nested dicts
    of dicts summed (what must not grow as Jobs come and go)."""
    operator = running.operator  # type: ignore[attr-defined]
    held: dict[str, int] = {}
    for part_name, part in vars(operator).items():
        attrs = vars(part) if hasattr(part, "__dict__") else {}
        for name, value in [("", part), *attrs.items()]:
            if isinstance(value, dict | set | list | deque):
                inner = list(value.values()) if isinstance(value, dict) else []
                nested = sum(len(v) for v in inner if isinstance(v, dict | set))
                held[f"{part_name}.{name}".rstrip(".")] = len(value) + nested
    return held


def census() -> Counter[str]:
    """Live objects the collector tracks, frozen ones included, by type name. Unfreezing and freezing
    again leaves the operator's collector as it found it (its freezes only move objects out of the
    full passes' way)."""
    gc.unfreeze()
    counts = Counter(type(obj).__qualname__ for obj in gc.get_objects())
    gc.freeze()
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if args.jobs * bench_operator.PODS_PER_JOB > args.nodes:
        parser.error(f"--jobs {args.jobs} x {bench_operator.PODS_PER_JOB} nodes per Job do not fit on --nodes {args.nodes}")
    print(f"churn, {args.nodes} nodes, {args.rounds} rounds of {args.jobs} Jobs; {bench_operator.machine()}")
    with tempfile.TemporaryDirectory() as tmp, bench_operator.bare_devcluster(args.nodes, Path(tmp)) as kubeconfig:
        namespaces = [f"r{i}" for i in range(args.rounds)]
        asyncio.run(bench_operator.setup(kubeconfig, namespaces))
        running = bench_operator.OperatorThread(kubeconfig).start()
        at_ready = census()
        print(f"ready: RSS {status_mib('VmRSS'):.0f} MiB, peak {status_mib('VmHWM'):.0f} MiB, "
              f"tracked {len(gc.get_objects())}, frozen {gc.get_freeze_count()}", flush=True)
        print(f"{'round':>5} {'p99 ms':>8} {'cpu ms/job':>10} {'RSS MiB':>8} {'peak MiB':>9} {'tracked':>9} "
              f"{'frozen':>9} {'entries':>9} {'wall s':>7}")
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        try:
            for i, namespace in enumerate(namespaces):
                begin = time.monotonic()
                row = bench_operator.scenario(running, kubeconfig, namespace, args.jobs, 0).split()
                asyncio.run(delete_namespace(kubeconfig, namespace))
                gone = time.monotonic() + 300
                while held_in(running, namespace) and time.monotonic() < gone:
                    time.sleep(0.2)
                if held_in(running, namespace):
                    raise RuntimeError(f"namespace {namespace}: the cache still holds its objects after 300 s")
                time.sleep(1.0)  # the trailing queue statuses and Events
                last = tables(running)
                first = first or last
                print(f"{i + 1:>5} {row[4]:>8} {row[8]:>10} {status_mib('VmRSS'):>8.0f} {status_mib('VmHWM'):>9.0f} "
                      f"{len(gc.get_objects()):>9} {gc.get_freeze_count():>9} {sum(last.values()):>9} "
                      f"{time.monotonic() - begin:>7.1f}", flush=True)
            grown_types = census() - at_ready
            print("live objects by type, grown since ready: " + ", ".join(
                f"{name} +{n}" for name, n in grown_types.most_common(12)), flush=True)
            # Garbage the freezes kept: objects frozen while alive that are unreachable cycles now.
            frozen = gc.get_freeze_count()
            gc.unfreeze()
            found = gc.collect()
            print(f"frozen {frozen} objects; unfrozen, a full collection found {found} unreachable "
                  f"(garbage the freezes kept), RSS {status_mib('VmRSS'):.0f} MiB after it", flush=True)
        finally:
            running.stop()
        grown = {name: (first.get(name, 0), n) for name, n in last.items() if n > first.get(name, 0)}
        print("tables grown since round 1: " + (", ".join(
            f"{name} {was} -> {n}" for name, (was, n) in sorted(grown.items())) or "none"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        sys.exit(f"bench/churn.py: {e}")
