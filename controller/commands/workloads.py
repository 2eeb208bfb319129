"""`tasq list workloads`, `tasq stop` and `tasq resume` (also `kubectl tasq ...`): queues from the terminal.

`list workloads` reads the cluster once and prints every Workload with its queue, state and, while it
waits, its positions in its ClusterQueue and LocalQueue, numbered by the same pure code the operator's
visibility API answers with (controller.core.admission.pending_workloads). `stop`/`resume` set a
Workload's `spec.active` to false/true, as Kueue's kueuectl does. Exit 0 when done, 1 when the
Workload does not exist, 2 for unusable arguments or an unreachable API. Loaded by controller.cli.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from controller.api import constants as c
from controller.api.workload import Workload
from controller.commands.explain import kubeconfig_path
from controller.core.admission.pending_workloads import pending_positions, queued_objects

HEADER = ("NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATE", "PRIORITY", "POS-CQ", "POS-LQ")


def register(subparsers: Any) -> None:
    listing = subparsers.add_parser("list", help="list Workloads with their pending positions")
    listing.add_argument("kind", choices=("workloads", "workload", "wl"), help="what to list: Workloads")
    listing.add_argument("-n", "--namespace", default=None, help="only this namespace (default: all)")
    listing.add_argument("--clusterqueue", default=None, help="only Workloads of this ClusterQueue")
    _kubeconfig(listing)
    listing.set_defaults(handler=run_list)
    for verb, active in (("stop", False), ("resume", True)):
        parser = subparsers.add_parser(verb, help=f"set a Workload's spec.active to {str(active).lower()}")
        parser.add_argument("kind", choices=("workload", "workloads", "wl"), help="what to act on: a Workload")
        parser.add_argument("name", help="the Workload's name")
        parser.add_argument("-n", "--namespace", default="default", help="its namespace (default: default)")
        _kubeconfig(parser)
        parser.set_defaults(handler=run_activation, active=active, verb=verb)


def _kubeconfig(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")


def workload_rows(objects: Iterable[Mapping[str, Any]], namespace: str | None = None,
                  cluster_queue: str | None = None) -> list[tuple[str, ...]]:
    """The table `list workloads` prints, pure: pending Workloads first in queue order (by
    ClusterQueue), then the others by namespace and name."""
    objects = list(objects)
    rows: list[tuple[str, ...]] = []
    placed = set()
    for row in pending_positions(queued_objects(objects)):
        placed.add((row.namespace, row.name))
        rows.append((row.namespace, row.name, row.local_queue, row.cluster_queue, "Pending", str(row.priority),
                     str(row.position_in_cluster_queue), str(row.position_in_local_queue)))
    others = sorted((o for o in objects if o.get("kind") == c.KIND_WORKLOAD),
                    key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    for obj in others:
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if key in placed:
            continue
        wl = Workload.from_dict(dict(obj))
        admission = wl.reserved_admission
        state = ("Finished" if wl.is_finished else "Admitted" if admission is not None
                 else "Stopped" if not wl.active else "NoQueue")
        rows.append((key[0], key[1], wl.spec.queue_name or "", admission.cluster_queue if admission else "",
                     state, str(wl.spec.priority if wl.spec.priority is not None else ""), "", ""))
    return [r for r in rows if (namespace is None or r[0] == namespace)
            and (cluster_queue is None or r[3] == cluster_queue)]


def table(rows: list[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns as kubectl prints them, "-" for an empty cell."""
    cells = [HEADER, *((cell or "-" for cell in row) for row in rows)]
    grid = [tuple(row) for row in cells]
    widths = [max(len(row[i]) for row in grid) for i in range(len(HEADER))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in grid]


def _connect_path(args: argparse.Namespace, command: str) -> tuple[Path | None, int]:
    path = kubeconfig_path(args.kubeconfig)
    if path is not None and not path.is_file():
        print(f"tasq {command}: kubeconfig {str(path)!r} is not a file", file=sys.stderr)
        return path, 2
    return path, 0


def run_list(args: argparse.Namespace) -> int:
    from controller.kube.api import ApiError
    from controller.kube.reading import read_cluster_at

    path, code = _connect_path(args, "list")
    if code:
        return code
    try:
        objects = asyncio.run(read_cluster_at(path))
    except (ApiError, OSError) as e:
        detail = e.message if isinstance(e, ApiError) and e.status == 0 else f"cannot read the cluster: {e}"
        print(f"tasq list: {detail}", file=sys.stderr)
        return 2
    try:
        rows = workload_rows(objects, args.namespace, args.clusterqueue)
    except (ValueError, TypeError) as e:
        print(f"tasq list: a Workload does not parse: {e}", file=sys.stderr)
        return 2
    for line in table(rows):
        print(line)
    return 0


async def _set_active(path: Path | None, namespace: str, name: str, active: bool) -> None:
    from controller.kube.api import WORKLOADS, KubeApi, connect

    api_client = await connect(path)
    try:
        await KubeApi(api_client).merge_patch(WORKLOADS, namespace, name, {"spec": {"active": active}})
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated


def run_activation(args: argparse.Namespace) -> int:
    from controller.kube.api import ApiError

    path, code = _connect_path(args, args.verb)
    if code:
        return code
    try:
        asyncio.run(_set_active(path, args.namespace, args.name, args.active))
    except ApiError as e:
        if e.not_found:
            print(f'tasq {args.verb}: workload "{args.name}" not found in namespace "{args.namespace}"',
                  file=sys.stderr)
            return 1
        print(f"tasq {args.verb}: {e.message if e.status == 0 else e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tasq {args.verb}: cannot reach the cluster: {e}", file=sys.stderr)
        return 2
    print(f"workload {args.namespace}/{args.name} {'resumed' if args.active else 'stopped'}"
          f" (spec.active={str(args.active).lower()})")
    return 0
