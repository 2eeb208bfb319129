"""The `tasq` command: parses arguments and dispatches to a subcommand module.

Subcommands live in `controller.commands`; each registers its own parser and handler, so
`tasq --help` lists exactly what is implemented.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

# Modules under controller.commands, in the order `tasq --help` lists them.
COMMAND_MODULES: tuple[str, ...] = ("crds", "simulate", "dev")

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tasq",
        description="Topology-aware, all-or-nothing admission for batch Jobs (Kueue-compatible).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"controller.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
