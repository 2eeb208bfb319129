"""Leader failover: two `tasq run` processes on one cluster (either control plane); only the Lease
holder admits.

Killing the leader (SIGKILL: no release) hands the Lease to the other replica within the lease
duration (5 s here: the standby wakes when the holder's lease runs out); a clean stop (SIGTERM)
releases it so the successor takes over at its next retry (1 s). Nothing is admitted twice (one Admitted Event per Workload) and the queue's
usage is the sum of the admissions.

Nodes: b1: r1 [n1 n2]  r2 [n1 n2]   (8 GPUs each); ClusterQueue `team`: 64 GPUs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from tests.builders.kueue import label_slices, make_job
from tests.builders.operator import GPU, gpu_nodes, local_queue, make_queue_setup
from tests.e2e.conftest import REPO, Kubectl, install_operator_cluster, wait_for

pytestmark = pytest.mark.e2e

LEASE_NS = "tasq-failover"
LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S = 5, 3, 1
TIMINGS = ("--lease-duration", str(LEASE_DURATION_S), "--renew-deadline", str(RENEW_DEADLINE_S),
           "--retry-period", str(RETRY_PERIOD_S))
BLOCK, RACK = "example.com/block", "example.com/rack"
NODES = gpu_nodes(BLOCK, RACK, blocks=1, racks=2, hosts=2, labels={"gpu": "h100"})
SETUP = (make_queue_setup("dc", BLOCK, RACK, c.LABEL_HOSTNAME).namespace(LEASE_NS).flavor("h100", {"gpu": "h100"})
         .cluster_queue("team", {"cpu": 1000, GPU: 64}).yaml())


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    close = install_operator_cluster(request, cluster, kubectl, NODES, SETUP)
    yield
    close()


class Replicas:
    """`tasq run` processes started by a test, each with its own identity; all ended at teardown."""

    def __init__(self, kubeconfig: Path, logs: Path) -> None:
        self.kubeconfig, self.logs = kubeconfig, logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.probe_ports: dict[str, int] = {}

    def start(self, identity: str) -> None:
        log = (self.logs / f"{identity}.log").open("wb")
        self.probe_ports[identity] = port = free_port()
        self.procs[identity] = subprocess.Popen(
            [sys.executable, "-m", "controller.cli", "run", "--kubeconfig", str(self.kubeconfig),
             "--lease-namespace", LEASE_NS, "--identity", identity, "--metrics-port", "-1",
             "--probe-host", "127.0.0.1", "--probe-port", str(port), "-v", *TIMINGS],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def ready(self, identity: str) -> bool:
        """/readyz answers 200: leading, or standing by with a warm cache."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_ports[identity]}{c.PROBE_PATH_READYZ}",
                                        timeout=2) as answer:
                return int(answer.status) == 200
        except OSError:  # 503 (an HTTPError) or nothing listening yet
            return False

    def signal(self, identity: str, sig: int) -> None:
        self.procs[identity].send_signal(sig)
        self.procs[identity].wait(30)

    def log(self, identity: str) -> str:
        return (self.logs / f"{identity}.log").read_text(errors="replace")

    def tails(self) -> str:
        """The last lines each replica logged (for failure messages)."""
        return "\n".join(f"--- {name}\n" + "\n".join(self.log(name).splitlines()[-25:]) for name in self.procs)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


@pytest.fixture
def replicas(installed: None, kubeconfig: Path, tmp_path: Path) -> Iterator[Replicas]:
    running = Replicas(kubeconfig, tmp_path)
    yield running
    running.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def holder(kubectl: Kubectl) -> str:
    proc = kubectl("get", "lease", c.LEADER_LEASE_NAME, "-n", LEASE_NS, "-o", "json", check=False)
    return str(json.loads(proc.stdout)["spec"].get("holderIdentity") or "") if proc.returncode == 0 else ""


def submit(kubectl: Kubectl, namespace: str, name: str, pods: int) -> None:
    """A suspended require-rack Job of `pods` 8-GPU pods that run for 10 minutes."""
    job = (make_job(name, namespace).queue("lq").parallelism(pods).requests({"cpu": "1", GPU: "8"}).limits({GPU: "8"})
           .annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK).run_seconds(600).suspended())
    kubectl("apply", "-f", "-", stdin=json.dumps(job.obj()))


def admitted_events(kubectl: Kubectl, namespace: str, workload: dict[str, Any]) -> int:
    """How many Admitted Events the Workload got: one per admission written."""
    return sum(1 for e in get(kubectl, "events", "-n", namespace)["items"]
               if e["reason"] == c.REASON_ADMITTED and e["involvedObject"]["name"] == workload["metadata"]["name"])


def admitted(kubectl: Kubectl, namespace: str) -> dict[str, dict[str, Any]]:
    """Job name -> its Workload, for every admitted Workload in the namespace."""
    out = {}
    for wl in get(kubectl, "workloads", "-n", namespace)["items"]:
        conds = {x["type"]: x for x in (wl.get("status") or {}).get("conditions") or []}
        if conds.get("Admitted", {}).get("status") == "True":
            out[wl["metadata"]["ownerReferences"][0]["name"]] = wl
    return out


def test_killing_the_leader_hands_over_within_the_lease_duration_with_no_double_admission(
        replicas: Replicas, kubectl: Kubectl, namespace: str) -> None:
    kubectl("apply", "-f", "-", stdin=local_queue(namespace, "team"))
    replicas.start("alpha")
    wait_for(lambda: holder(kubectl) == "alpha", what="alpha leading", logs=replicas.tails)
    replicas.start("beta")
    submit(kubectl, namespace, "first", 2)
    first = wait_for(lambda: admitted(kubectl, namespace).get("first"), what="first admitted", logs=replicas.tails)
    # Events are posted in the background: let alpha's land before killing it, so a second one can
    # only come from beta admitting "first" again.
    wait_for(lambda: admitted_events(kubectl, namespace, first) == 1, what="alpha's Admitted Event",
             logs=replicas.tails)
    wait_for(lambda: replicas.ready("beta"), 60, "beta standing by", replicas.tails)
    time.sleep(2 * RETRY_PERIOD_S)  # beta stays a follower
    assert holder(kubectl) == "alpha"

    replicas.signal("alpha", signal.SIGKILL)
    killed = time.monotonic()
    submit(kubectl, namespace, "second", 2)
    time.sleep(1)
    assert "second" not in admitted(kubectl, namespace)  # the follower does not admit
    wait_for(lambda: holder(kubectl) == "beta", LEASE_DURATION_S + 8, "beta leading", replicas.tails)
    takeover = time.monotonic() - killed
    # the Lease runs out 5 s after alpha's last renewal and beta tries then, not at its next retry;
    # 3 s more for the submit above and polling the Lease with kubectl on a loaded machine
    assert takeover <= LEASE_DURATION_S + 3, f"took {takeover:.1f}s"
    second = wait_for(lambda: admitted(kubectl, namespace).get("second"), what="second admitted by beta",
                      logs=replicas.tails)

    workloads = get(kubectl, "workloads", "-n", namespace)["items"]
    assert sorted(w["metadata"]["ownerReferences"][0]["name"] for w in workloads) == ["first", "second"]
    now_first = admitted(kubectl, namespace)["first"]
    assert now_first["status"]["admission"] == first["status"]["admission"]  # not re-admitted by beta
    slices = [s for w in (now_first, second) for a in w["status"]["admission"]["podSetAssignments"]
              for s in label_slices(a["topologyAssignment"])]
    assert {s["nodeLabels"][RACK] for s in slices} == {"b1-r1", "b1-r2"}  # one rack each, never the same
    cq = wait_for(lambda: (q := get(kubectl, "clusterqueue", "team")) and
                  (q.get("status") or {}).get("admittedWorkloads") == 2 and q, what="queue status")
    gpu = [r for f in cq["status"]["flavorsUsage"] for r in f["resources"] if r["name"] == GPU]
    assert gpu[0]["total"] == "32"  # 16 + 16: "first" restored by beta, not admitted again
    assert admitted_events(kubectl, namespace, first) == 1
    wait_for(lambda: admitted_events(kubectl, namespace, second) == 1, what="beta's Admitted Event")
    for name in ("first", "second"):
        kubectl("delete", "job", name, "-n", namespace)


def test_a_clean_stop_releases_the_lease_so_the_successor_takes_over_at_its_next_retry(
        replicas: Replicas, kubectl: Kubectl) -> None:
    replicas.start("gamma")
    wait_for(lambda: holder(kubectl) == "gamma", LEASE_DURATION_S + RETRY_PERIOD_S + 5, "gamma leading",
             replicas.tails)
    replicas.start("delta")
    wait_for(lambda: replicas.ready("delta"), 60, "delta standing by", replicas.tails)
    assert holder(kubectl) == "gamma"
    replicas.signal("gamma", signal.SIGTERM)
    stopped = time.monotonic()
    assert replicas.procs["gamma"].returncode == 0, replicas.log("gamma")
    wait_for(lambda: holder(kubectl) == "delta", RETRY_PERIOD_S + 5, "delta leading", replicas.tails)
    assert time.monotonic() - stopped <= RETRY_PERIOD_S + 2
