"""The install bundle on a real control plane, and a Job run by `tasq run` with only its permissions.

`kubectl kustomize config/default` is applied with the real kubectl (cert-manager's kinds left out:
this cluster has no cert-manager; the test writes the serving certificate itself). `tasq run` then
runs on this machine with a token of the bundle's ServiceAccount, so every call it makes is checked
by the real RBAC authorizer against config/rbac. The webhook configurations and the CRDs' conversion
are pointed at it (the Service in the bundle has no real pod behind it here). A require-rack Job must be suspended by the
webhook, admitted, ungated into one rack and completed, with no request refused for permissions;
then a scrape of /metrics with a token bound to the bundle's tasq-metrics-reader succeeds (tasq's
own TokenReview and SubjectAccessReview allowed by the bundle's RBAC).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
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
from webhooks.certificates import write_serving_files

pytestmark = [pytest.mark.e2e, pytest.mark.real]
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: racks}
spec:
  levels:
  - nodeLabel: cloud.provider.com/topology-block
  - nodeLabel: cloud.provider.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {cloud.provider.com/topology-block: b1}
  topologyName: racks
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: install}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources:
      - {name: cpu, nominalQuota: "64"}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: "32"}
---
apiVersion: v1
kind: Namespace
metadata: {name: install-test}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: install-test}
spec: {clusterQueue: install}
"""

JOB = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "rack-job", "namespace": "install-test", "labels": {c.LABEL_QUEUE_NAME: "q"},
                 "annotations": {c.ANNOTATION_REQUIRE_TOPOLOGY: "cloud.provider.com/topology-rack"}},
    "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed", "template": {
        "metadata": {"annotations": {c.ANNOTATION_DEVCLUSTER_RUN_SECONDS: "2"}},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "registry.example/trainer:1",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"},
                          "limits": {"nvidia.com/gpu": "8"}}}]}}},
}


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                              capture_output=True, text=True, input=stdin, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json"))


def rendered_bundle() -> list[dict[str, Any]]:
    out = subprocess.run([str(BIN / "kubectl"), "kustomize", str(REPO / "config" / "default")],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return [d for d in yaml.safe_load_all(out) if d and not d["apiVersion"].startswith("cert-manager.io/")]


def service_account_kubeconfig(kubectl: Kubectl, admin: Path, target: Path) -> Path:
    token = kubectl("create", "token", "tasq-controller-manager", "-n", c.TASQ_NAMESPACE,
                    "--duration", "2h").strip()
    config = yaml.safe_load(admin.read_text())
    config["users"] = [{"name": "tasq-sa", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "tasq-sa"
    target.write_text(yaml.safe_dump(config))
    return target


def point_webhooks_at(kubectl: Kubectl, port: int, ca_pem: bytes) -> None:
    """Replace each webhook's Service clientConfig by this machine's URL with the same path."""
    bundle = base64.b64encode(ca_pem).decode()
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for item in kubectl.json("get", kind)["items"]:
            for hook in item["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            for key in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
                item["metadata"].pop(key, None)
            item["metadata"].get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
            kubectl("replace", "-f", "-", stdin=json.dumps(item))


def convert_through(kubectl: Kubectl, crds: list[str], port: int, ca_pem: bytes) -> None:
    """Point each CRD's conversion webhook at this machine's tasq (the Service has no pod here)."""
    client = {"url": f"https://127.0.0.1:{port}/convert", "caBundle": base64.b64encode(ca_pem).decode(),
              "service": None}  # a merge patch: the Service reference is removed, not kept beside the URL
    for name in crds:
        patch = {"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": client, "conversionReviewVersions": ["v1"]}}}}
        kubectl("patch", "crd", name, "--type=merge", "-p", json.dumps(patch))


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def refusals(text: str) -> list[str]:
    """The lines of a log that say the API refused tasq something.

    A refusal reads "403: ... is forbidden ..." (ApiError) or names the status alone; a bare "403"
    would also match a port, a timestamp's milliseconds or a uid.
    """
    return [line for line in text.splitlines()
            if re.search(r"(^|[\s'\"])403[:\s]", line) or "forbidden" in line.lower()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def installed(realcluster_kubeconfig: Path,
              tmp_path: Path) -> Iterator[tuple[Kubectl, subprocess.Popen[str], Path, int, int]]:
    kubectl = Kubectl(realcluster_kubeconfig)
    bundle = tmp_path / "bundle.yaml"
    objects = rendered_bundle()
    bundle.write_text(yaml.safe_dump_all(objects))
    kubectl("apply", "--server-side", "-f", str(bundle))
    certs = tmp_path / "certs"
    ca = write_serving_files(certs, datetime.now(UTC))
    port, metrics_port = free_port(), free_port()
    point_webhooks_at(kubectl, port, ca.cert_pem)
    convert_through(kubectl, [d["metadata"]["name"] for d in objects if d["kind"] == "CustomResourceDefinition"],
                    port, ca.cert_pem)
    sa_config = service_account_kubeconfig(kubectl, realcluster_kubeconfig, tmp_path / "sa.kubeconfig")
    log = tmp_path / "tasq.log"
    proc = subprocess.Popen([str(BIN / "tasq"), "run", "--kubeconfig", str(sa_config), "--webhook-cert-dir",
                             str(certs), "--webhook-port", str(port), "--metrics-port", str(metrics_port),
                             "--metrics-host", "127.0.0.1", "--probe-port", "-1", "-v"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        yield kubectl, proc, log, port, metrics_port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_the_bundle_installs_and_tasq_run_with_its_service_account_runs_a_job_in_one_rack(
        installed: tuple[Kubectl, subprocess.Popen[str], Path, int, int]) -> None:
    kubectl, proc, log, port, metrics_port = installed
    # the bundle's objects are all there, the ServiceAccount may do what tasq needs and no more
    assert kubectl("auth", "can-i", "patch", "pods", "--as",
                   f"system:serviceaccount:{c.TASQ_NAMESPACE}:tasq-controller-manager").strip() == "yes"
    # deleting pods is the plain-pod integration's eviction; creating them is nothing tasq does
    assert kubectl("auth", "can-i", "delete", "pods", "--as",
                   f"system:serviceaccount:{c.TASQ_NAMESPACE}:tasq-controller-manager").strip() == "yes"
    assert kubectl("auth", "can-i", "create", "pods", "--as",
                   f"system:serviceaccount:{c.TASQ_NAMESPACE}:tasq-controller-manager", check=False).strip() == "no"
    try:
        wait_for(lambda: kubectl("get", "lease", c.LEADER_LEASE_NAME, "-n", c.TASQ_NAMESPACE, check=False), 60,
                 "tasq run to take the Lease")
        wait_for(lambda: listening(port), 60, "the webhook server to listen")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{log.read_text()[-4000:]}") from None
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
    assert len(pods) == 4
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kubectl.json("get", "nodes")["items"]}
    racks = {nodes[p["spec"]["nodeName"]]["cloud.provider.com/topology-rack"] for p in pods}
    assert len(racks) == 1
    assert all(not p["spec"].get("schedulingGates") for p in pods)
    assert proc.poll() is None
    kubectl("create", "serviceaccount", "scraper", "-n", "install-test")
    kubectl("create", "clusterrolebinding", "install-test-scraper", f"--clusterrole={c.METRICS_READER_ROLE}",
            "--serviceaccount=install-test:scraper")
    token = kubectl("create", "token", "scraper", "-n", "install-test").strip()
    request = urllib.request.Request(f"https://127.0.0.1:{metrics_port}/metrics",
                                     headers={"Authorization": f"Bearer {token}"})
    # /metrics is served with the webhook certificate (--metrics-cert-dir defaults to --webhook-cert-dir),
    # which the fixture wrote next to the log
    trusted = ssl.create_default_context(cadata=(log.parent / "certs" / c.WEBHOOK_CA_FILE).read_text())
    with urllib.request.urlopen(request, timeout=10, context=trusted) as answer:
        assert answer.status == 200 and f"# TYPE {c.METRIC_ADMISSION_ATTEMPTS} counter" in answer.read().decode()
    output = log.read_text()
    assert not refusals(output), output[-4000:]
