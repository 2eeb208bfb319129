"""Shared e2e fixtures: one devcluster per test module, a kubeconfig for it, a kubectl runner.

Tests isolate themselves with the `namespace` fixture (a fresh namespace each) so a module can
share one server. `DevCluster.call` runs in-process API coroutines on the server's own loop.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devcluster.cluster import DevCluster

REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"
_names = itertools.count(1)


@dataclass
class Kubectl:
    """Runs the real kubectl against the devcluster; returns the finished process."""

    kubeconfig: Path
    cache_dir: Path

    def __call__(self, *args: str, check: bool = True, timeout: float = 60,
                 stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin, cwd=REPO)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc


@pytest.fixture(scope="module")
def devcluster() -> Iterator[DevCluster]:
    cluster = DevCluster(bookmark_interval=0.5).start_in_thread()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kubeconfig(devcluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return devcluster.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")


@pytest.fixture(scope="module")
def kubectl(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))


@pytest.fixture
def namespace(devcluster: DevCluster) -> str:
    """A fresh namespace for one test."""
    name = f"t{next(_names)}"
    api = devcluster.api
    devcluster.call(lambda: api.create(api.resource("v1", "namespaces"), "",
                                       {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    return name


@pytest.fixture
def apply_yaml(kubectl: Kubectl, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`kubectl apply -f` of a YAML text written to a temporary file."""
    counter = itertools.count()

    def apply(text: str, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        path = tmp_path / f"manifest-{next(counter)}.yaml"
        path.write_text(text)
        return kubectl("apply", "-f", str(path), *extra, check=check)
    return apply
