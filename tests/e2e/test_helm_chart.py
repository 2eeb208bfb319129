"""charts/tasq on a real Kubernetes 1.37 control plane: every object the chart renders for each set of
values in tests/install/test_chart.py is accepted by a server-side dry-run, then `helm install` puts
the chart in place and `tasq run` on this machine, with a token of the chart's ServiceAccount only,
admits a Job into one rack (every call checked by the real RBAC authorizer against the chart's roles)
and reports it under Kueue's metric names to a scraper bound to the chart's tasq-metrics-reader.

This cluster has no cert-manager and no Prometheus Operator: their kinds are left out of the dry-run
and the install uses a self-provided certificate; the webhook configurations are pointed at this
machine (no real pod runs the chart's image here), as tests/e2e/test_install.py does for config/, and
so is each CRD's conversion webhook.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from tests.e2e.conftest import wait_for
from tests.e2e.test_install import (
    JOB,
    SETUP,
    Kubectl,
    convert_through,
    free_port,
    listening,
    point_webhooks_at,
    refusals,
    service_account_kubeconfig,
)
from tests.install.test_chart import CHART, MATRIX, MONITORING, NAMESPACE, helm, render
from tests.install.test_config import CERT_MANAGER
from webhooks.certificates import write_serving_files

pytestmark = [pytest.mark.e2e, pytest.mark.real]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("values", list(MATRIX.values()), ids=list(MATRIX))
def test_the_api_server_accepts_every_object_the_chart_renders(values: dict[str, Any],
                                                                realcluster_kubeconfig: Path,
                                                                tmp_path: Path) -> None:
    kubectl = Kubectl(realcluster_kubeconfig)
    if NAMESPACE not in kubectl("get", "namespaces", "-o", "name"):
        kubectl("create", "namespace", NAMESPACE)
    objects = [d for d in render(values) if (d["apiVersion"], d["kind"]) not in CERT_MANAGER | MONITORING]
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    out = kubectl("apply", "--server-side", "--dry-run=server", "--force-conflicts", "-f", str(manifest))
    assert len(out.strip().splitlines()) == len(objects), out


@pytest.fixture
def installed(realcluster_kubeconfig: Path, tmp_path: Path) -> Iterator[tuple[Kubectl, Path, int]]:
    kubectl = Kubectl(realcluster_kubeconfig)
    certs = tmp_path / "certs"
    ca = write_serving_files(certs, datetime.now(UTC))
    values = {"certificates": {"certManager": {"enabled": False}, "caBundle": base64.b64encode(ca.cert_pem).decode()}}
    # hack/realcluster/up applied crds/ itself; the chart's CRDs are its own (Helm adopts nothing it
    # did not install), so they go first and come back from the chart
    crds = [d["metadata"]["name"] for d in render(values) if d["kind"] == "CustomResourceDefinition"]
    # Not waited for inside one kubectl call (bounded at 120 s): a CRD's deletion took longer than
    # that once, with the machine's two cores busy.
    kubectl("delete", "crd", *crds, "--ignore-not-found", "--wait=false")
    wait_for(lambda: not any(name in kubectl("get", "crd", "-o", "name") for name in crds), 300, "the CRDs deleted")
    helm("--kubeconfig", str(realcluster_kubeconfig), "install", "tasq", str(CHART), "-n", NAMESPACE,
         "--create-namespace", "--set-json", json.dumps(values))
    assert "deployed" in helm("--kubeconfig", str(realcluster_kubeconfig), "status", "tasq", "-n", NAMESPACE).stdout
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{name}" for name in crds])
    port, metrics_port = free_port(), free_port()
    point_webhooks_at(kubectl, port, ca.cert_pem)
    convert_through(kubectl, crds, port, ca.cert_pem)
    sa_config = service_account_kubeconfig(kubectl, realcluster_kubeconfig, tmp_path / "sa.kubeconfig")
    log = tmp_path / "tasq.log"
    proc = subprocess.Popen([str(BIN / "tasq"), "run", "--kubeconfig", str(sa_config), "--webhook-cert-dir",
                             str(certs), "--webhook-port", str(port), "--metrics-port", str(metrics_port),
                             "--metrics-host", "127.0.0.1", "--probe-port", "-1", "--log-format", "json"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        try:
            wait_for(lambda: kubectl("get", "lease", c.LEADER_LEASE_NAME, "-n", NAMESPACE, check=False), 60,
                     "tasq run to take the Lease")
            wait_for(lambda: listening(port), 60, "the webhook server to listen")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{log.read_text()[-4000:]}") from None
        yield kubectl, log, metrics_port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        helm("--kubeconfig", str(realcluster_kubeconfig), "uninstall", "tasq", "-n", NAMESPACE, check=False)


def test_helm_install_then_tasq_run_with_the_charts_service_account_admits_a_job_into_one_rack(
        installed: tuple[Kubectl, Path, int]) -> None:
    kubectl, log, metrics_port = installed
    account = f"system:serviceaccount:{NAMESPACE}:tasq-controller-manager"
    assert kubectl("auth", "can-i", "patch", "pods", "--as", account).strip() == "yes"
    # least privilege: pods are deleted (pod groups, failed nodes), nodes are only read
    assert kubectl("auth", "can-i", "delete", "pods", "--as", account).strip() == "yes"
    assert kubectl("auth", "can-i", "delete", "nodes", "--as", account, check=False).strip() == "no"
    kubectl("apply", "-f", "-", stdin=SETUP)
    created = json.loads(kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(JOB)))
    assert created["spec"]["suspend"] is True, "the Job webhook did not suspend the Job"

    def finished() -> bool:
        job = kubectl.json("get", "job", "rack-job", "-n", "install-test")
        return any(cond["type"] == "Complete" and cond["status"] == "True"
                   for cond in job.get("status", {}).get("conditions") or [])
    try:
        wait_for(finished, 120, "the Job to complete")
    except AssertionError:
        raise AssertionError(log.read_text()[-4000:]) from None
    pods = kubectl.json("get", "pods", "-n", "install-test")["items"]
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kubectl.json("get", "nodes")["items"]}
    assert len(pods) == 4 and len({nodes[p["spec"]["nodeName"]]["cloud.provider.com/topology-rack"] for p in pods}) == 1

    kubectl("create", "serviceaccount", "scraper", "-n", "install-test")
    kubectl("create", "clusterrolebinding", "helm-test-scraper", f"--clusterrole={c.METRICS_READER_ROLE}",
            "--serviceaccount=install-test:scraper")
    token = kubectl("create", "token", "scraper", "-n", "install-test").strip()
    trusted = ssl.create_default_context(cadata=(log.parent / "certs" / c.WEBHOOK_CA_FILE).read_text())

    def scraped() -> str | None:
        request = urllib.request.Request(f"https://127.0.0.1:{metrics_port}/metrics",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=10, context=trusted) as answer:
                return str(answer.read().decode())
        except OSError:
            return None  # a binding just made may take a moment to count
    text = wait_for(scraped, 30, "a scrape with the chart's tasq-metrics-reader")
    assert re.search(r'kueue_admitted_workloads_total\{cluster_queue="install",priority_class="",'
                     r'replica_role="leader"\} 1\.0', text), text
    assert re.search(r"^tasq_leader 1\.0$", text, re.M)

    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    messages = [line["msg"] for line in lines]
    assert any("is now the leader" in m for m in messages) and any(m.startswith("ready:") for m in messages)
    assert any(m.startswith("admitted install-test/") for m in messages), messages
    assert not refusals("\n".join(messages)), messages
    assert not [line for line in lines if line["logger"].startswith("kopf") and line["level"] == "info"]
