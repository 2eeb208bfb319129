"""`tasq migrate-storage [--dry-run]`: after upgrading tasq on a cluster, rewrite every stored tasq
object in its kind's storage version (v1beta2) and leave only that version in each CRD's
`status.storedVersions`, so a later tasq can stop serving v1beta1 (docs/operations.md, upgrading).

Prints its progress per kind as it goes, then a line per kind and the totals. Exit 0 when every kind
is migrated (or, with --dry-run, could be), 1 when a kind could not be (its problem named: no CRD,
no permission, an API server out of reach...), 2 for an unusable kubeconfig. The work is
`controller.kube.storage_migrating`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from controller.commands.explain import kubeconfig_path
from controller.kube.api import ApiError, KubeApi, connect
from controller.kube.storage_migrating import KindMigration, migrate_storage


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "migrate-storage", help="after an upgrade, rewrite every stored tasq object in the storage version",
        description="For each tasq kind: check its CRD stores this tasq's storage version, rewrite every "
                    "object with a no-op update (the API server stores it anew in that version; conflicts "
                    "are retried), then set the CRD's status.storedVersions to that version alone. Needs "
                    "get/list/update on every tasq kind and update on customresourcedefinitions/status; "
                    "tasq must be running (its conversion webhook converts what is stored in v1beta1).")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the objects that would be rewritten; change nothing")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
    parser.set_defaults(handler=run)


def _say(line: str) -> None:
    print(line, flush=True)


def _line(r: KindMigration, dry_run: bool) -> str:
    """One kind's outcome (its problem, or what was or would be done)."""
    before = ", ".join(r.stored_before)
    if r.problem is not None:
        return f"{r.kind}: not migrated: {r.problem.reason}: {r.problem.message}"
    if r.stored_before == [r.storage]:
        return f"{r.kind}: stored as {r.storage} only: nothing to rewrite"
    if dry_run:
        return f"{r.kind}: would rewrite {len(r.names)} object(s), then set storedVersions [{before}] -> [{r.storage}]"
    return (f"{r.kind}: {r.rewritten} rewritten, {r.gone} deleted meanwhile, {r.conflicts} conflict(s) retried; "
            f"storedVersions [{before}] -> [{', '.join(r.stored_after)}]")


def report(results: list[KindMigration], dry_run: bool) -> tuple[int, list[str]]:
    """(exit code, summary lines): a line per kind (in a dry run followed by the objects it would
    rewrite), then the totals."""
    lines: list[str] = []
    for r in results:
        lines.append(_line(r, dry_run))
        if dry_run and r.problem is None:
            lines += [f"  {r.kind} {name}" for name in r.names]
    failed = sum(1 for r in results if r.problem is not None)
    objects = sum(len(r.names) if dry_run else r.rewritten for r in results)
    lines.append(f"{len(results) - failed} of {len(results)} kind(s) " + (
        f"can be migrated, {objects} object(s) would be rewritten" if dry_run
        else f"migrated, {objects} object(s) rewritten") + (f"; {failed} not migrated" if failed else ""))
    return (1 if failed else 0), lines


def run(args: argparse.Namespace) -> int:
    path = kubeconfig_path(args.kubeconfig)
    if path is not None and not path.is_file():
        print(f"tasq migrate-storage: kubeconfig {str(path)!r} is not a file", file=sys.stderr)
        return 2

    async def main() -> list[KindMigration]:
        api_client = await connect(path)
        try:
            return await migrate_storage(KubeApi(api_client), args.dry_run, _say)
        finally:
            await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated

    if args.dry_run:
        _say("dry run: nothing is changed")
    try:
        results = asyncio.run(main())
    except (ApiError, OSError) as e:
        print(f"tasq migrate-storage: cannot reach the cluster: {e}", file=sys.stderr)
        return 2
    code, lines = report(results, args.dry_run)
    for line in lines:
        print(line, file=sys.stderr if ": not migrated: " in line else sys.stdout)
    return code
