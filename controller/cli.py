"""The `tasq` command: parses arguments and dispatches to a subcommand module.

Each subcommand lives in its own `controller.commands` module with `register(subparsers)`. Only the
chosen command's module is imported (`tasq --help` lists the others from `COMMANDS` without loading
them), so `tasq simulate` never pays for the dev server. The imports are explicit, one loader per
command, so the layering linter sees every one. `kubectl-tasq` (the kubectl plugin) is this same
`main`: `kubectl tasq list workloads` runs `tasq list workloads`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

Handler = Callable[[argparse.Namespace], int]


def _demo() -> ModuleType:
    from controller.commands import demo
    return demo


def _explain() -> ModuleType:
    from controller.commands import explain
    return explain


def _top() -> ModuleType:
    from controller.commands import top
    return top


def _simulate() -> ModuleType:
    from controller.commands import simulate
    return simulate


def _dev() -> ModuleType:
    from controller.commands import dev
    return dev


def _run() -> ModuleType:
    from controller.commands import run
    return run


def _crds() -> ModuleType:
    from controller.commands import crds
    return crds


def _workloads() -> ModuleType:
    from controller.commands import workloads
    return workloads


def _migrate_storage() -> ModuleType:
    from controller.commands import migrate_storage
    return migrate_storage


def _version() -> ModuleType:
    from controller.commands import version
    return version


# name -> (one-line summary, loader), in the order `tasq --help` lists them. A command is listed
# only once its module exists.
COMMANDS: dict[str, tuple[str, Callable[[], ModuleType]]] = {
    "demo": ("run a local cluster with tasq and sample Jobs; show where their pods land and why", _demo),
    "run": ("run the tasq operator against a cluster", _run),
    "dev": ("run a local cluster (sample GPU nodes) with tasq, for kubectl", _dev),
    "simulate": ("what-if admission on manifests, no cluster needed", _simulate),
    "explain": ("explain why a Workload waits, on a live cluster", _explain),
    "describe": ("the same as explain (kubectl's verb): `describe workload NAME`", _explain),
    "list": ("list Workloads with their positions in their ClusterQueue and LocalQueue", _workloads),
    "top": ("topology occupancy: GPUs used/free per block, rack and node, and the Workloads there", _top),
    "stop": ("stop a Workload (spec.active=false): it gives back its quota and waits", _workloads),
    "resume": ("resume a stopped Workload (spec.active=true)", _workloads),
    "crds": ("regenerate crds/ from the API models (or --check it)", _crds),
    "migrate-storage": ("after an upgrade, rewrite every stored tasq object in the storage version", _migrate_storage),
    "version": ("print the tasq version, the API versions it serves and the Kueue it follows", _version),
}


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    plugin = Path(sys.argv[0]).name.startswith("kubectl-")
    parser = argparse.ArgumentParser(
        prog="kubectl tasq" if plugin else "tasq",
        description="Topology-aware, all-or-nothing admission for batch Jobs (Kueue-compatible).",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen(argv)
    chosen_loader = COMMANDS[chosen][1] if chosen in COMMANDS else None
    if chosen_loader is not None:  # one module may register several commands (list, stop, resume)
        chosen_loader().register(subparsers)
    for name, (summary, load) in COMMANDS.items():
        if load is not chosen_loader:
            subparsers.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    if args.version and args.command is None:
        return int(_version().run(args))
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
