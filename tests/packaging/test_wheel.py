"""A plain (non-editable) install works anywhere: the wheel carries the CRDs and samples it needs.

Builds the wheel from this checkout, installs it into a fresh venv outside the checkout and runs the
commands from an unrelated directory, as a user who ran `pip install tasq` would.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BAKED_COMMIT = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Build from a clean copy: setuptools reuses an in-tree build/ and would ship files deleted since.
    source = tmp_path_factory.mktemp("source") / "tasq"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".hypothesis", "tests"))
    (source / "controller" / "data" / "build-commit").write_text(f"{BAKED_COMMIT}\n")  # as the Dockerfile does
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
                   check=True, capture_output=True, timeout=600)
    return next(out.glob("tasq-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True,
                   timeout=900)
    yield venv


def test_the_wheel_carries_every_crd_and_sample(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for crd in (REPO / "crds").glob("*.yaml"):
        assert f"controller/data/crds/{crd.name}" in names
    for sample in (REPO / "config" / "samples").glob("*.yaml"):
        assert f"controller/data/samples/{sample.name}" in names
    assert "controller/data/simulate/gpu-nodes.yaml" in names


def _run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "tasq"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _bundled(venv: Path, cwd: Path, expr: str) -> str:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", f"from controller import bundled; print({expr})"],
                          cwd=cwd, capture_output=True, text=True, check=True, timeout=60)
    return proc.stdout.strip()


def test_simulate_admits_the_packaged_samples_from_any_directory(installed: Path, tmp_path: Path) -> None:
    nodes = _bundled(installed, tmp_path, "bundled.sample_nodes_file()")
    samples = _bundled(installed, tmp_path, "bundled.samples_dir()")
    assert str(REPO) not in nodes and str(REPO) not in samples
    proc = _run(installed, tmp_path, "simulate", "-f", nodes, "-f", samples)
    assert proc.returncode == 0, proc.stderr
    assert "True" in proc.stdout  # at least one Workload admitted


def test_crds_check_passes_and_writing_needs_output(installed: Path, tmp_path: Path) -> None:
    assert _run(installed, tmp_path, "crds", "--check").returncode == 0
    refused = _run(installed, tmp_path, "crds")
    assert refused.returncode == 2 and "--output" in refused.stderr
    assert _run(installed, tmp_path, "crds", "--output", str(tmp_path / "crds")).returncode == 0
    assert len(list((tmp_path / "crds").glob("*.yaml"))) == len(list((REPO / "crds").glob("*.yaml")))


def test_version_names_the_release(installed: Path, tmp_path: Path) -> None:
    proc = _run(installed, tmp_path, "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("tasq ")
    assert proc.stdout.splitlines()[1] == f"commit {BAKED_COMMIT}"  # baked in at build time, as in the image


def test_demo_runs_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    proc = _run(installed, tmp_path, "demo")
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "gang-b: admitted" in proc.stdout


def test_the_dockerfile_runs_tasq_run_from_a_wheel_holding_every_module_it_imports(wheel: Path) -> None:
    # `docker build` cannot run here: check what the image would run and that the wheel it installs
    # carries every module `tasq run` can import (function-level imports included).
    import json

    import grimp

    dockerfile = (REPO / "Dockerfile").read_text()
    entrypoint = next(line for line in dockerfile.splitlines() if line.startswith("ENTRYPOINT"))
    assert json.loads(entrypoint.removeprefix("ENTRYPOINT").strip()) == ["tasq", "run"]
    assert "pip install --no-cache-dir --no-deps /tmp/dist/*.whl" in dockerfile and "USER 65532" in dockerfile
    assert 'tasq = "controller.cli:main"' in (REPO / "pyproject.toml").read_text()
    graph = grimp.build_graph("controller", "webhooks", "devcluster")
    needed = {"controller.cli", "controller.commands.run",
              *graph.find_upstream_modules("controller.commands.run")}
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(m for m in needed if f"{m.replace('.', '/')}.py" not in names
                     and f"{m.replace('.', '/')}/__init__.py" not in names)
    assert not missing
    assert len(needed) > 20  # the operator, its webhooks and the pure core they use
