"""`tasq version` (and `tasq --version`): the package version, the API versions served, the Kueue followed.

Reads the installed distribution's metadata and the CRD kinds' served versions; imports nothing else.
"""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from controller.api import constants as c
from controller.api.crds import KINDS

DISTRIBUTION = "tasq"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("version", help="print the tasq version and the API versions it serves")
    parser.set_defaults(handler=run)


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a tree that was never installed
        return "unknown"


def describe() -> str:
    """The lines `tasq version` prints: deterministic for one installation."""
    lines = [f"tasq {package_version()}",
             f"follows the API of Kueue {c.KUEUE_VERSION_FOLLOWED} ({c.API_VERSION})",
             "serves:"]
    for spec in KINDS:
        versions = ", ".join(f"{c.GROUP}/{v}" for v in spec.served_versions)
        lines.append(f"  {spec.kind}: {versions} (stored as {spec.storage_version})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    print(describe())
    return 0
