"""`tasq version` (and `tasq --version`): the package version, the commit it was built from, the API
versions served, the Kueue followed.

Reads the installed distribution's metadata, the commit baked in at build time (an image) or else the
checkout's git HEAD, and the CRD kinds' served versions.
"""

from __future__ import annotations

import argparse
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


def describe() -> str:
    """The lines `tasq version` prints: deterministic for one installation."""
    lines = [f"tasq {package_version()}",
             f"commit {commit()}",
             f"follows the API of Kueue {c.KUEUE_VERSION_FOLLOWED} ({c.API_VERSION})",
             "serves:"]
    for spec in KINDS:
        versions = ", ".join(f"{c.GROUP}/{v}" for v in spec.served_versions)
        lines.append(f"  {spec.kind}: {versions} (stored as {spec.storage_version})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    print(describe())
    return 0
