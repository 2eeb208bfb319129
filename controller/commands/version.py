"""`tasq version` (and `tasq --version`): the package version, the commit it was built from, the Kueue
release whose API tasq follows, and per kind the API versions served and the one stored (`-o json`).

Reads the installed distribution's metadata, the commit baked in at build time (an image) or else the
checkout's git HEAD, and the CRD kinds' versions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from controller.api import constants as c
from controller.api.crds import KINDS
from controller.bundled import build_commit, checkout_root

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


def git_commit(root: Path) -> str | None:
    """HEAD of the checkout at `root`, with `-dirty` when the work tree differs from it; None when git
    cannot say (not installed, not a repository)."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def commit() -> str:
    """The commit this installation was built from: baked in at build time (the image's build arg
    TASQ_COMMIT), else the checkout's git HEAD (an editable install), else "unknown"."""
    baked = build_commit()
    if baked is not None:
        return baked
    root = checkout_root()
    found = git_commit(root) if root is not None else None
    return found or "unknown"


def versions() -> dict[str, Any]:
    """What `tasq version -o json` prints: deterministic for one installation."""
    return {"tasq": package_version(), "commit": commit(), "kueueAPI": c.KUEUE_VERSION_FOLLOWED, "group": c.GROUP,
            "kinds": [{"kind": spec.kind, "served": list(spec.served_versions), "storage": spec.storage_version}
                      for spec in KINDS]}


def describe() -> str:
    """The lines `tasq version` prints: deterministic for one installation."""
    lines = [f"tasq {package_version()}",
             f"commit {commit()}",
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
