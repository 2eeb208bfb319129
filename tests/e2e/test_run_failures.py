"""`tasq run` that cannot act says so: a missing Lease namespace, a forbidden Lease and a missing CRD
each give one log line with the fix at the default level (no -v) and /readyz 503 naming it; once the cause is
removed the same process becomes the leader and /readyz 200. `--create-namespace` makes the Lease's
namespace itself.

The 403 comes from the real RBAC authorizer on the real control plane (a ServiceAccount granted tasq's
ClusterRole but not its Lease Role), and from a fault hook on the devcluster, which authorizes nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from controller.api import constants as c
from controller.commands.crds import DEFAULT_DIR
from devcluster.cluster import DevCluster
from devcluster.server import faults
from tests.e2e.conftest import REPO, Kubectl, wait_for

pytestmark = pytest.mark.e2e

TASQ = Path(sys.executable).parent / "tasq"
_lease_namespaces = itertools.count(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Tasq:
    """One `tasq run` at the default log level, its probes on a free local port."""

    def __init__(self, kubeconfig: Path, log: Path, lease_namespace: str, *extra: str) -> None:
        self.log, self.port = log, free_port()
        self.proc = subprocess.Popen(
            [str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--lease-namespace", lease_namespace,
             "--identity", "solo", "--metrics-port", "-1", "--probe-host", "127.0.0.1", "--probe-port", str(self.port),
             "--retry-period", "0.5", "--renew-deadline", "4", "--lease-duration", "5", *extra],
            stdout=log.open("w"), stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def readyz(self) -> tuple[int, str] | None:
        """/readyz's HTTP status and text; None while nothing listens."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{c.PROBE_PATH_READYZ}", timeout=2) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def warnings(self) -> list[str]:
        return [line for line in self.output().splitlines() if " WARNING " in line]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


@pytest.fixture
def run(kubeconfig: Path, tmp_path: Path) -> Iterator[list[Tasq]]:
    started: list[Tasq] = []
    yield started
    for tasq in started:
        if tasq.proc.poll() is None:
            tasq.proc.kill()
            tasq.proc.wait(30)


@pytest.fixture
def crds(kubectl: Kubectl) -> None:
    """tasq's CRDs installed and served (a test before may have removed them)."""
    kubectl("apply", "-f", str(DEFAULT_DIR))
    wait_for(lambda: kubectl("get", "workloads", "-A", check=False).returncode == 0, 60, "the CRDs served")


def lease_holder(kubectl: Kubectl, namespace: str) -> str:
    proc = kubectl("get", "lease", c.LEADER_LEASE_NAME, "-n", namespace, "-o", "json", check=False)
    return str(json.loads(proc.stdout)["spec"].get("holderIdentity") or "") if proc.returncode == 0 else ""


def blocked_then_ready(tasq: Tasq, says: str, fix: Callable[[], object]) -> None:
    """`tasq` logs `says` once at WARNING and answers /readyz 503 saying it too; after `fix()` it
    answers 200."""
    wait_for(lambda: any(says in line for line in tasq.warnings()), 60, f"a WARNING saying {says!r}", tasq.output)
    answer = wait_for(lambda: (ready := tasq.readyz()) is not None and ready[0] == 503 and says in ready[1] and ready,
                      30, f"/readyz 503 saying {says!r}", lambda: f"{tasq.readyz()}\n{tasq.output()}")
    assert answer[1].startswith("not ready:\n- "), answer
    assert tasq.proc.poll() is None, tasq.output()
    assert sum(says in line for line in tasq.warnings()) == 1, tasq.output()
    fix()
    wait_for(lambda: tasq.readyz() == (200, "ok"), 60, "/readyz 200 once fixed", tasq.output)


def test_a_missing_lease_namespace_is_logged_with_the_fix_and_tasq_is_unready_until_it_exists(
        crds: None, kubeconfig: Path, kubectl: Kubectl, tmp_path: Path, run: list[Tasq]) -> None:
    lease_ns = f"lease-missing-{next(_lease_namespaces)}"
    tasq = Tasq(kubeconfig, tmp_path / "tasq.log", lease_ns)
    run.append(tasq)
    blocked_then_ready(tasq, f"namespace {lease_ns} of Lease {c.LEADER_LEASE_NAME} does not exist; create it with "
                             f"`kubectl create namespace {lease_ns}`, or run tasq run with --create-namespace",
                       lambda: kubectl("create", "namespace", lease_ns))
    assert lease_holder(kubectl, lease_ns) == "solo"
    assert any(f"solo can read Lease {lease_ns}/{c.LEADER_LEASE_NAME} again" in line for line in tasq.warnings())
    assert tasq.stop() == 0, tasq.output()


def test_create_namespace_makes_the_lease_namespace_and_leads(
        crds: None, kubeconfig: Path, kubectl: Kubectl, tmp_path: Path, run: list[Tasq]) -> None:
    lease_ns = f"lease-created-{next(_lease_namespaces)}"
    tasq = Tasq(kubeconfig, tmp_path / "tasq.log", lease_ns, "--create-namespace")
    run.append(tasq)
    wait_for(lambda: tasq.readyz() == (200, "ok"), 60, "/readyz 200", tasq.output)
    assert lease_holder(kubectl, lease_ns) == "solo"
    assert [line.split(": ", 1)[1] for line in tasq.warnings()] == [
        f"created namespace {lease_ns} for the leader-election Lease"]
    assert tasq.stop() == 0, tasq.output()


def test_a_missing_crd_is_logged_with_the_fix_and_tasq_is_unready_until_it_is_installed(
        kubeconfig: Path, kubectl: Kubectl, tmp_path: Path, run: list[Tasq]) -> None:
    kubectl("delete", "--ignore-not-found", "--wait", "-f", str(DEFAULT_DIR), timeout=120)
    tasq = Tasq(kubeconfig, tmp_path / "tasq.log", "default")
    run.append(tasq)
    # topologies: the first of tasq's kinds the priming read lists
    blocked_then_ready(tasq, "the API server does not serve topologies.kueue.x-k8s.io: tasq's CRDs are not "
                             "installed; install them with `kubectl apply --server-side -k config/crd`",
                       lambda: kubectl("apply", "-f", str(DEFAULT_DIR)))
    assert lease_holder(kubectl, "default") == "solo"
    assert tasq.stop() == 0, tasq.output()


FORBIDDEN_SAYS = f"forbidden to get Lease {{ns}}/{c.LEADER_LEASE_NAME} ("
GRANT_SAYS = ("); grant get, create and update on leases in namespace {ns} to tasq's identity "
              "(config/rbac/leader_election_role.yaml)")


@pytest.mark.real
def test_a_service_account_without_the_lease_role_is_logged_with_the_fix_and_unready_until_granted(
        crds: None, kubeconfig: Path, kubectl: Kubectl, tmp_path: Path, run: list[Tasq]) -> None:
    """tasq's ClusterRole (config/rbac/role.yaml) bound to a ServiceAccount, its Lease Role not."""
    lease_ns = f"lease-forbidden-{next(_lease_namespaces)}"
    kubectl("create", "namespace", lease_ns)
    kubectl("apply", "-f", str(REPO / "config" / "rbac" / "role.yaml"))
    kubectl("create", "serviceaccount", "limited", "-n", lease_ns)
    kubectl("create", "clusterrolebinding", f"{lease_ns}-manager", "--clusterrole=tasq-manager-role",
            f"--serviceaccount={lease_ns}:limited")
    token = kubectl("create", "token", "limited", "-n", lease_ns, "--duration", "1h").stdout.strip()
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"] = [{"name": "limited", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "limited"
    limited = tmp_path / "limited.kubeconfig"
    limited.write_text(yaml.safe_dump(config))

    def grant() -> None:
        kubectl("create", "role", "lease", "-n", lease_ns, "--verb=get,create,update",
                "--resource=leases.coordination.k8s.io")
        kubectl("create", "rolebinding", "lease", "-n", lease_ns, "--role=lease", f"--serviceaccount={lease_ns}:limited")

    tasq = Tasq(limited, tmp_path / "tasq.log", lease_ns)
    run.append(tasq)
    blocked_then_ready(tasq, FORBIDDEN_SAYS.format(ns=lease_ns), grant)
    line = next(line for line in tasq.warnings() if FORBIDDEN_SAYS.format(ns=lease_ns) in line)
    assert f'User "system:serviceaccount:{lease_ns}:limited" cannot get resource "leases"' in line
    assert line.endswith(GRANT_SAYS.format(ns=lease_ns))
    assert lease_holder(kubectl, lease_ns) == "solo"
    assert tasq.stop() == 0, tasq.output()


def test_a_forbidden_lease_is_logged_with_the_fix_and_unready_until_allowed(
        crds: None, devcluster: DevCluster, kubeconfig: Path, kubectl: Kubectl, tmp_path: Path,
        run: list[Tasq]) -> None:
    """The devcluster authorizes nothing: a fault hook answers the Lease's reads with 403."""
    lease_ns = f"lease-forbidden-{next(_lease_namespaces)}"
    kubectl("create", "namespace", lease_ns)
    rule = devcluster.faults.inject(faults.FORBIDDEN, "get", "leases", namespace=lease_ns, count=None)
    tasq = Tasq(kubeconfig, tmp_path / "tasq.log", lease_ns)
    run.append(tasq)
    try:
        blocked_then_ready(tasq, FORBIDDEN_SAYS.format(ns=lease_ns), lambda: devcluster.faults.rules.remove(rule))
    finally:
        if rule in devcluster.faults.rules:
            devcluster.faults.rules.remove(rule)
    line = next(line for line in tasq.warnings() if FORBIDDEN_SAYS.format(ns=lease_ns) in line)
    assert line.endswith(GRANT_SAYS.format(ns=lease_ns))
    assert lease_holder(kubectl, lease_ns) == "solo"
    assert tasq.stop() == 0, tasq.output()
