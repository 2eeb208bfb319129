"""`tasq crds`: write the generated CRDs to `crds/`, or check that the checked-in files are current.

The YAML comes from `controller.api.crds` (byte-stable), one file per kind. Without `--output` it
writes only into a source checkout: `crds/` and its copy `config/crd/bases/` for kustomize (never
into site-packages). `--check` writes nothing and exits 1 naming every file that differs, is
missing or should not be there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from controller.api.crds import all_crds, render_yaml
from controller.bundled import checkout_root, crd_dir

# The CRDs this installation carries (the checkout's crds/ in an editable install).
DEFAULT_DIR = crd_dir()
# The copy config/crd's kustomize base lists, relative to the checkout.
KUSTOMIZE_COPY = Path("config") / "crd" / "bases"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("crds", help="regenerate crds/ from the API models (or --check it)")
    parser.add_argument("--output", "--dir", dest="dir", type=Path, default=None, metavar="DIR",
                        help="directory of the CRD YAML files (default: the checkout's crds/; "
                             "--check defaults to the CRDs this installation carries)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and name the files that are out of date")
    parser.set_defaults(handler=run)


def rendered() -> dict[str, str]:
    """File name -> exact file content, for every CRD."""
    return {name: render_yaml(obj) for name, obj in all_crds().items()}


def stale_files(directory: Path, wanted: dict[str, str]) -> list[tuple[str, str]]:
    """(file name, why) for each file that differs from `wanted`, is missing, or is unexpected."""
    problems: list[tuple[str, str]] = []
    for name, content in wanted.items():
        path = directory / name
        if not path.is_file():
            problems.append((name, "missing"))
        elif path.read_text(encoding="utf-8") != content:
            problems.append((name, "differs"))
    if directory.is_dir():
        for path in sorted(directory.glob("*.yaml")):
            if path.name not in wanted:
                problems.append((path.name, "not generated, remove it"))
    return sorted(problems)


def _targets(args: argparse.Namespace) -> list[Path]:
    """Where to write or check: `--output`, else the checkout's crds/ and its kustomize copy
    config/crd/bases/ (kustomize reads no file outside a base), else (`--check` only) the CRDs this
    installation carries. Empty: nowhere to write."""
    if args.dir is not None:
        return [Path(args.dir)]
    root = checkout_root()
    if root is not None:
        return [root / "crds", root / KUSTOMIZE_COPY]
    return [DEFAULT_DIR] if args.check else []


def _check(directory: Path, wanted: dict[str, str]) -> int:
    problems = stale_files(directory, wanted)
    if problems:
        listing = ", ".join(f"{name} ({why})" for name, why in problems)
        print(f"crds out of date in {directory}: {listing}; run `tasq crds` to regenerate", file=sys.stderr)
        return 1
    print(f"crds OK: {len(wanted)} file(s) in {directory} match the models")
    return 0


def _write(directory: Path, wanted: dict[str, str]) -> int:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        print(f"tasq crds: cannot create {directory}: {err.strerror}", file=sys.stderr)
        return 2
    if not directory.is_dir():
        print(f"tasq crds: --output {directory} is not a directory", file=sys.stderr)
        return 2
    written = 0
    for name, content in wanted.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
            written += 1
    print(f"crds: wrote {written} of {len(wanted)} file(s) to {directory}")
    return 0


def run(args: argparse.Namespace) -> int:
    targets = _targets(args)
    if not targets:
        print("tasq crds: not running from a source checkout; pass --output DIR to write the CRDs there "
              "(the installed package is never modified)", file=sys.stderr)
        return 2
    wanted = rendered()
    step = _check if args.check else _write
    return max(step(directory, wanted) for directory in targets)
