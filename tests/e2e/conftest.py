"""Shared e2e fixtures: one cluster per test module, a kubeconfig for it, a kubectl runner.

The cluster is the devcluster, or with `--cluster=real` the real control plane (tests/conftest.py).
Tests isolate themselves with the `namespace` fixture (a fresh namespace each) so a module can
share one server. `DevCluster.call` runs in-process API coroutines on the server's own loop; a test
that asks for the `devcluster` fixture runs on the devcluster only. `install_operator_cluster`
gives the operator's tests the same CRDs, nodes and queues on either cluster, `tasq` runs the
operator on what a module's `installed` fixture set up and `jobs_removed` clears a test's Jobs;
`restart_apiserver` restarts either cluster's API server.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from controller.commands.crds import DEFAULT_DIR
from devcluster.cluster import DevCluster
from devcluster.simulated.components import Components
from tests.conftest import RealCluster

if TYPE_CHECKING:
    from tests.e2e.test_operator_clusters import Process

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


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition",
             logs: Callable[[], str] = str) -> Any:
    """Poll `predicate` every 0.1 s until it returns something truthy, and return that; on timeout
    fail naming `what`, with `logs()` (e.g. the output of the processes under test) attached."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached in {timeout:.0f}s\n{logs()}".rstrip())


@pytest.fixture(scope="module")
def devcluster() -> Iterator[DevCluster]:
    cluster = DevCluster(bookmark_interval=0.5).start_in_thread()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kubeconfig(request: pytest.FixtureRequest, cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The admin kubeconfig of this module's cluster: the devcluster's, or the real control plane's."""
    if cluster == "real":
        path: Path = request.getfixturevalue("realcluster_kubeconfig")
        return path
    dev: DevCluster = request.getfixturevalue("devcluster")
    return dev.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")


@pytest.fixture(scope="module")
def restart_apiserver(request: pytest.FixtureRequest, cluster: str, kubeconfig: Path) -> Callable[..., float]:
    """`restart_apiserver(component="kube-apiserver", kill=False, down_seconds=0.0)`: restart this
    module's API server (on the real control plane kube-apiserver, or with component="etcd" etcd,
    with the same flags; on the devcluster its HTTP front) and return once it serves again, with the
    seconds it took."""
    if cluster == "real":
        real: RealCluster = request.getfixturevalue("realcluster")
        return real.restart
    dev: DevCluster = request.getfixturevalue("devcluster")

    def restart(component: str = "kube-apiserver", *, kill: bool = False, down_seconds: float = 0.0) -> float:
        del component, kill  # one process holds both; a restart drops its connections either way
        started = time.monotonic()
        dev.call(dev.restart(down_seconds))
        return time.monotonic() - started
    return restart


@pytest.fixture(scope="module")
def kubectl(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))


@pytest.fixture
def namespace(request: pytest.FixtureRequest, cluster: str) -> str:
    """A fresh namespace for one test; on a real cluster, once its default ServiceAccount exists (the
    ServiceAccount admission plugin refuses pods until the controller manager has made it)."""
    name = f"t{next(_names)}"
    if cluster == "real":
        kubectl: Kubectl = request.getfixturevalue("kubectl")
        kubectl("create", "namespace", name)
        deadline = time.monotonic() + 30
        while kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"namespace {name}: no default ServiceAccount after 30s")
            time.sleep(0.1)
        return name
    dev: DevCluster = request.getfixturevalue("devcluster")
    api = dev.api
    dev.call(lambda: api.create(api.resource("v1", "namespaces"), "",
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


def install_operator_cluster(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl,
                             nodes: list[dict[str, Any]], setup_yaml: str) -> Callable[[], None]:
    """tasq's CRDs and `nodes` on this module's cluster (besides the sample nodes the real control
    plane starts with), then `setup_yaml` (queues, flavors...) once the CRDs are served, all with
    kubectl. On the devcluster it also starts the simulated Job controller, scheduler and kubelet
    (the real control plane and kwok have their own).
    Returns the teardown. For module-scoped fixtures: it asks for `devcluster` only on the
    devcluster, so the tests that use it run on both clusters."""
    kubectl("apply", "-f", str(DEFAULT_DIR))
    if nodes:  # the API server keeps a created Node's status: allocatable and Ready as given
        kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(nodes))
    close: Callable[[], None] = lambda: None  # noqa: E731
    if cluster == "dev":
        dev: DevCluster = request.getfixturevalue("devcluster")

        async def start() -> Components:
            started = Components(dev.api).start()
            started.run_in_background(0.05)
            return started
        components = dev.call(start)

        async def stop() -> None:
            components.close()
        close = lambda: dev.call(stop)  # noqa: E731
    try:
        wait_for(lambda: kubectl("apply", "-f", "-", stdin=setup_yaml, check=False).returncode == 0,
                 what="the setup applied (CRDs served)")
    except AssertionError:
        close()
        raise
    return close


@pytest.fixture(scope="module")
def tasq(installed: None, kubeconfig: Path, kubectl: Kubectl,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """One `tasq run --local-webhooks` for the module, leading, its webhooks registered, once the
    module's own `installed` fixture set its cluster up; a module that runs tasq otherwise (other flags,
    more checks) defines its own `tasq`."""
    from tests.e2e.test_operator_clusters import leading_tasq  # that module imports this one
    with leading_tasq(kubeconfig, kubectl, tmp_path_factory.mktemp("tasq")) as proc:
        yield proc


@pytest.fixture
def jobs_removed(tasq: Process, kubectl: Kubectl, namespace: str) -> Iterator[None]:
    """After the test its Jobs are deleted and their pods gone, so that the module's next test has the
    nodes free (`pytest.mark.usefixtures("jobs_removed")`)."""
    yield
    kubectl("delete", "jobs", "--all", "-n", namespace, "--cascade=foreground", "--wait=false")
    wait_for(lambda: not kubectl("get", "pods", "-n", namespace, "-o", "name").stdout.strip(), 90,
             f"the pods of {namespace} gone")
