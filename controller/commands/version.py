"""`tasq version` (and `tasq --version`): the package version, the Kueue release whose API tasq follows,
and per kind the API versions served and the one stored (`-o json` for scripts).

Reads the installed distribution's metadata and the CRD kinds' versions; imports nothing else.
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from controller.api import constants as c
from controller.api.crds import KINDS

DISTRIBUTION = "tasq"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("version", help="print the tasq version and the API versions it serves")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text",
                        help="text (default) or one JSON object")
    parser.set_defaults(handler=run)


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a tree that was never installed
        return "unknown"


def versions() -> dict[str, Any]:
    """What `tasq version -o json` prints: deterministic for one installation."""
    return {"tasq": package_version(), "kueueAPI": c.KUEUE_VERSION_FOLLOWED, "group": c.GROUP,
            "kinds": [{"kind": spec.kind, "served": list(spec.served_versions), "storage": spec.storage_version}
                      for spec in KINDS]}


def describe() -> str:
    """The lines `tasq version` prints: deterministic for one installation."""
    lines = [f"tasq {package_version()}",
             f"follows the API of Kueue {c.KUEUE_VERSION_FOLLOWED} ({c.API_VERSION}; the older versions are still "
             "served)",
             "serves (after an upgrade from an earlier tasq, `tasq migrate-storage` moves stored objects to the "
             "stored version):"]
    for spec in KINDS:
        served = ", ".join(f"{c.GROUP}/{v}" for v in spec.served_versions)
        lines.append(f"  {spec.kind}: {served} (stored as {spec.storage_version})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "output", "text") == "json":
        print(json.dumps(versions(), indent=2))
    else:
        print(describe())
    return 0
