"""Picks the control plane the e2e and conformance tests run against: `--cluster=dev` (default, the
embedded devcluster) or `--cluster=real` (`hack/realcluster/up`: kube-apiserver, etcd, controller
manager, scheduler and kwok). A test that only makes sense on one of them carries the `devcluster` or
`real` marker and is deselected on the other; a test that needs the in-process `devcluster` fixture is
devcluster-only by nature and gets the marker here, as does an e2e test that uses no cluster
fixture (it starts its own devcluster, e.g. through `tasq dev`). `known_difference("why")` deselects a test on
devcluster only: a real-Kubernetes behaviour devcluster leaves out of scope (devcluster/README.md lists
each). The `realcluster` fixture starts one real control plane per test module (`realcluster_kubeconfig`
is its admin kubeconfig); `RealCluster.restart` restarts its kube-apiserver or etcd. A module marked
`jobset` gets JobSet's CRD and controller on it too (`up --jobset`). It also loads the hypothesis
profile every property test runs with (no per-example deadline).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests assert results, never speed: hypothesis's default 200 ms deadline per example (and
# its too-slow health check) fail pure tests when the shared machine is loaded.
settings.register_profile("tasq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tasq")

REPO = Path(__file__).resolve().parents[1]
UP = REPO / "hack" / "realcluster" / "up"
CLUSTERS = ("dev", "real")
# The first start may build the binaries (a cold build takes minutes); later starts take seconds.
REAL_START_TIMEOUT = float(os.environ.get("TASQ_REALCLUSTER_START_TIMEOUT", "3600"))
_DESELECTED_AS_KNOWN: list[tuple[str, str]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cluster", choices=CLUSTERS, default="dev",
                     help="control plane for e2e/conformance tests: dev (embedded devcluster, default) or "
                          "real (hack/realcluster/up, built from pinned Kubernetes modules)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cluster = config.getoption("cluster")
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        on_a_cluster = "kubeconfig" in fixtures or "realcluster_kubeconfig" in fixtures or "realcluster" in fixtures
        if "devcluster" in fixtures or (_talks_to_clusters(item) and not on_a_cluster):
            # in-process devcluster access, or an e2e test that starts its own (`tasq dev`, `tasq demo`):
            # it would run the same on --cluster=real
            item.add_marker(pytest.mark.devcluster)
        known = item.get_closest_marker("known_difference")
        other = "devcluster" if cluster == "real" else "real"
        if item.get_closest_marker(other) is not None:
            dropped.append(item)
        elif cluster == "dev" and known is not None:
            dropped.append(item)
            _DESELECTED_AS_KNOWN.append((item.nodeid, str(known.args[0] if known.args else "")))
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _talks_to_clusters(item: pytest.Item) -> bool:
    parts = Path(str(item.path)).relative_to(REPO).parts
    return parts[:2] in (("tests", "e2e"), ("tests", "conformance"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _DESELECTED_AS_KNOWN:
        terminalreporter.section("known devcluster differences (deselected)")
        for nodeid, reason in _DESELECTED_AS_KNOWN:
            terminalreporter.line(f"{nodeid}: {reason}")


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> str:
    """`dev` or `real`: the control plane this run tests against."""
    return str(pytestconfig.getoption("cluster"))


class RealCluster:
    """One `hack/realcluster/up` process; `ready` once it printed `ready`."""

    def __init__(self, kubeconfig: Path, log_path: Path, *, jobset: bool = False) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.control = kubeconfig.with_name("control-url")
        self.front_proxy = kubeconfig.with_name("front-proxy")
        """front-proxy-client.crt/.key: the client certificate kube-apiserver calls APIServices with."""
        self._log = log_path.open("wb")
        extra = ["--jobset"] if jobset else []
        self.proc = subprocess.Popen([str(UP), "--kubeconfig", str(kubeconfig), "--control", str(self.control),
                                      "--front-proxy-dir", str(self.front_proxy), *extra],
                                     stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL)
        self._ready = threading.Event()
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == b"ready":
                self._ready.set()

    def wait_ready(self, timeout: float) -> None:
        if not self._ready.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-40:])
            raise RuntimeError(f"hack/realcluster/up did not become ready within {timeout:.0f}s "
                               f"(exit code {self.proc.returncode}):\n{tail}")

    def restart(self, component: str = "kube-apiserver", *, kill: bool = False, down_seconds: float = 0.0) -> float:
        """Restart kube-apiserver or etcd with the same flags (SIGTERM, or SIGKILL with `kill`; down for
        `down_seconds`) through `up`'s control endpoint; returns once kube-apiserver is ready again,
        with the seconds it took."""
        url = self.control.read_text().strip()
        query = f"component={component}&signal={'KILL' if kill else 'TERM'}&down={down_seconds}"
        request = urllib.request.Request(f"{url}/restart?{query}", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=180) as response:
                return float(json.loads(response.read())["seconds"])
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"restarting {component}: HTTP {e.code}: {e.read().decode(errors='replace')}") from e

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="module")
def realcluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """A real control plane for one test module (as the devcluster fixture gives each module its own
    server, so cluster-scoped objects of one module never meet another's); with JobSet's controller
    when the module is marked `jobset` (`pytestmark = pytest.mark.jobset`)."""
    work = tmp_path_factory.mktemp("realcluster")
    real = RealCluster(work / "kubeconfig", work / "up.log",
                       jobset=request.node.get_closest_marker("jobset") is not None)
    try:
        real.wait_ready(REAL_START_TIMEOUT)
        yield real
    finally:
        real.stop()


@pytest.fixture(scope="module")
def realcluster_kubeconfig(realcluster: RealCluster) -> Path:
    """The admin kubeconfig of this module's real control plane."""
    return realcluster.kubeconfig
