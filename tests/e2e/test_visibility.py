"""Kueue's visibility API (pendingworkloads) served by `tasq run` over HTTPS, on either control plane.

tasq runs on this machine as in test_metrics (its fixture): the aggregator cannot reach a loopback
endpoint, so the test asks tasq's HTTPS server directly with ServiceAccount tokens. A ClusterQueue with
no quota keeps every Workload pending; the answers list them in Kueue's order with their positions in
the ClusterQueue and in each LocalQueue, paged by limit/offset, and refuse an account without the
shipped viewer role (config/rbac/pending_workloads_viewer_role.yaml). The kubectl plugin
(`kubectl tasq`, found by the real kubectl on PATH) lists the same positions, and stops and resumes a
Workload. On the real cluster, a request made as kube-apiserver's aggregator makes it (its front-proxy
client certificate and X-Remote-User) gets the list for that user; the headers alone get a 401.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RealCluster
from tests.e2e.conftest import KUBECTL, Kubectl, wait_for
from tests.e2e.test_metrics import REPO, Tasq, tasq  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e

VIEWER_ROLES = REPO / "config" / "rbac" / "pending_workloads_viewer_role.yaml"
API = "/apis/visibility.kueue.x-k8s.io/v1beta1"

QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {{name: {cq}-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {cq}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: {cq}-flavor
      resources:
      - {{name: cpu, nominalQuota: "0"}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: red, namespace: {ns}}}
spec: {{clusterQueue: {cq}}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: blue, namespace: {ns}}}
spec: {{clusterQueue: {cq}}}
"""

WORKLOAD = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: {ns}}}
spec:
  queueName: {queue}
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: c
          image: busybox
          resources: {{requests: {{cpu: "1"}}}}
"""

# (name, LocalQueue, priority): admission order is priority descending
WORKLOADS = [("w-low", "red", 1), ("w-top", "blue", 30), ("w-mid", "red", 20), ("w-blue-low", "blue", 10)]


def get(server: Tasq, path: str, token: str | None) -> tuple[int, Any]:
    """GET `path` from tasq's HTTPS server, its certificate verified against the test's CA."""
    status, text = server.get(f"https://127.0.0.1:{server.metrics_port}{path}", token,
                              ssl.create_default_context(cadata=server.ca_pem.decode()))
    return status, json.loads(text) if text.startswith("{") else text


def account(kubectl: Kubectl, namespace: str, name: str, role: str | None) -> str:
    kubectl("create", "serviceaccount", name, "-n", namespace)
    if role is not None:
        kubectl("create", "clusterrolebinding", f"{role}-{namespace}-{name}", f"--clusterrole={role}",
                f"--serviceaccount={namespace}:{name}")
    return kubectl("create", "token", name, "-n", namespace).stdout.strip()


def apply(kubectl: Kubectl, tmp_path: Path, text: str) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(text)
    kubectl("apply", "-f", str(path))


def test_pending_workloads_of_a_cluster_queue_and_a_local_queue_in_kueues_order(
        tasq: Tasq, kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    cq = f"vis-{namespace}"
    kubectl("apply", "-f", str(VIEWER_ROLES))
    apply(kubectl, tmp_path, QUEUES.format(cq=cq, ns=namespace) + "---\n" + "---\n".join(
        WORKLOAD.format(name=n, ns=namespace, queue=q, priority=p) for n, q, p in WORKLOADS))
    admin = account(kubectl, namespace, "admin", "tasq-pending-workloads-cq-viewer")
    user = account(kubectl, namespace, "user", "tasq-pending-workloads-lq-viewer")
    stranger = account(kubectl, namespace, "stranger", None)

    def listed() -> Any:
        status, body = get(tasq, f"{API}/clusterqueues/{cq}/pendingworkloads", admin)
        return body if status == 200 and len(body["items"]) == len(WORKLOADS) else None
    body = wait_for(listed, 60, "all four workloads listed as pending", logs=tasq.output)
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    rows = [(i["metadata"]["name"], i["localQueueName"], i["priority"], i["positionInClusterQueue"],
             i["positionInLocalQueue"]) for i in body["items"]]
    assert rows == [("w-top", "blue", 30, 0, 0), ("w-mid", "red", 20, 1, 0), ("w-blue-low", "blue", 10, 2, 1),
                    ("w-low", "red", 1, 3, 1)]
    assert all(i["metadata"]["namespace"] == namespace and i["metadata"]["creationTimestamp"].endswith("Z")
               for i in body["items"])

    status, body = get(tasq, f"{API}/clusterqueues/{cq}/pendingworkloads?limit=2&offset=1", admin)
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["w-mid", "w-blue-low"]

    path = f"{API}/namespaces/{namespace}/localqueues/red/pendingworkloads"
    status, body = wait_for(lambda: (r := get(tasq, path, user))[0] == 200 and r, 30, "the user's LocalQueue")
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in body["items"]] == [("w-mid", 1, 0), ("w-low", 3, 1)]

    status, body = get(tasq, f"{API}/clusterqueues/{cq}/pendingworkloads", user)
    assert status == 403 and "may not get clusterqueues" in body["message"], body
    status, body = get(tasq, path, stranger)
    assert status == 403 and f"system:serviceaccount:{namespace}:stranger" in body["message"], body
    status, body = get(tasq, path, None)
    assert status == 401 and body["kind"] == "Status"
    status, body = get(tasq, f"{API}/clusterqueues/{cq}/pendingworkloads?limit=-3", admin)
    assert status == 400 and body["message"] == "limit: -3 is negative; a count of 0 or more is allowed"
    status, body = get(tasq, f"{API}/clusterqueues/no-such-queue/pendingworkloads", admin)
    assert status == 404 and "no-such-queue" in body["message"]
    assert "Traceback" not in tasq.output()


def kubectl_tasq(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl tasq ARGS`: the real kubectl finds the installed kubectl-tasq on PATH."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(KUBECTL), "tasq", *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, f"kubectl tasq {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def plugin_positions(kubeconfig: Path, namespace: str) -> dict[str, tuple[str, str, str]]:
    """Name -> (STATE, POS-CQ, POS-LQ) from `kubectl tasq list workloads -n NS`."""
    lines = kubectl_tasq(kubeconfig, "list", "workloads", "-n", namespace).stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATE", "PRIORITY",
                                "POS-CQ", "POS-LQ"], lines
    return {cols[1]: (cols[4], cols[6], cols[7]) for cols in (line.split() for line in lines[1:])}


def test_the_plugin_lists_the_positions_the_api_serves_and_stops_and_resumes(
        tasq: Tasq, kubectl: Kubectl, kubeconfig: Path, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    cq = f"vis-{namespace}"
    kubectl("apply", "-f", str(VIEWER_ROLES))
    apply(kubectl, tmp_path, QUEUES.format(cq=cq, ns=namespace) + "---\n" + "---\n".join(
        WORKLOAD.format(name=n, ns=namespace, queue=q, priority=p) for n, q, p in WORKLOADS))
    admin = account(kubectl, namespace, "admin", "tasq-pending-workloads-cq-viewer")

    def served(count: int) -> dict[str, tuple[str, str, str]] | None:
        status, body = get(tasq, f"{API}/clusterqueues/{cq}/pendingworkloads", admin)
        if status != 200 or len(body["items"]) != count:
            return None
        return {i["metadata"]["name"]: ("Pending", str(i["positionInClusterQueue"]), str(i["positionInLocalQueue"]))
                for i in body["items"]}

    answer = wait_for(lambda: served(4), 60, "four pending workloads served", logs=tasq.output)
    assert plugin_positions(kubeconfig, namespace) == answer
    assert answer["w-top"] == ("Pending", "0", "0")

    assert "stopped" in kubectl_tasq(kubeconfig, "stop", "workload", "w-top", "-n", namespace).stdout
    assert kubectl("get", "workload", "w-top", "-n", namespace, "-o", "jsonpath={.spec.active}").stdout == "false"
    answer = wait_for(lambda: served(3), 30, "the stopped workload leaves the queue", logs=tasq.output)
    assert answer["w-mid"] == ("Pending", "0", "0") and answer["w-blue-low"] == ("Pending", "1", "0")
    listed = plugin_positions(kubeconfig, namespace)
    assert listed.pop("w-top") == ("Stopped", "-", "-")
    assert listed == answer

    kubectl_tasq(kubeconfig, "resume", "workload", "w-top", "-n", namespace)
    answer = wait_for(lambda: served(4), 30, "the resumed workload back in the queue", logs=tasq.output)
    assert answer["w-top"] == ("Pending", "0", "0")
    assert plugin_positions(kubeconfig, namespace) == answer


def test_the_plugin_names_a_workload_that_does_not_exist(kubeconfig: Path, namespace: str) -> None:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(KUBECTL), "tasq", "stop", "workload", "ghost", "-n", namespace],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert f'workload "ghost" not found in namespace "{namespace}"' in proc.stderr
    assert "Traceback" not in proc.stderr


def get_as_aggregator(server: Tasq, path: str, headers: dict[str, str],
                      client_cert: tuple[Path, Path] | None) -> tuple[int, Any]:
    """GET `path` as kube-apiserver's aggregator does: its client certificate (when given) and the
    user in X-Remote-* headers, no token."""
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    if client_cert is not None:
        context.load_cert_chain(*client_cert)
    request = urllib.request.Request(f"https://127.0.0.1:{server.metrics_port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            status, text = int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    return status, json.loads(text) if text.startswith("{") else text


# Real cluster only: the devcluster has no aggregator, hence no extension-apiserver-authentication
# ConfigMap nor front-proxy CA; hack/realcluster/up gives kube-apiserver both, as kubeadm does.
@pytest.mark.real
def test_the_aggregators_client_certificate_and_remote_user_get_the_pending_list(
        tasq: Tasq, kubectl: Kubectl, namespace: str, tmp_path: Path,  # noqa: F811
        realcluster: RealCluster) -> None:
    cq = f"vis-{namespace}"
    kubectl("apply", "-f", str(VIEWER_ROLES))
    apply(kubectl, tmp_path, QUEUES.format(cq=cq, ns=namespace) + "---\n" + "---\n".join(
        WORKLOAD.format(name=n, ns=namespace, queue=q, priority=p) for n, q, p in WORKLOADS))
    viewer = f"aggregated-viewer-{namespace}"
    kubectl("create", "clusterrolebinding", f"{viewer}-binding", "--clusterrole=tasq-pending-workloads-cq-viewer",
            f"--user={viewer}")
    cert = (realcluster.front_proxy / "front-proxy-client.crt", realcluster.front_proxy / "front-proxy-client.key")
    path = f"{API}/clusterqueues/{cq}/pendingworkloads"
    as_viewer = {"X-Remote-User": viewer, "X-Remote-Group": "system:authenticated"}
    assert "Accepting aggregator client certificates (allowed names: front-proxy-client" in tasq.log.read_text()

    def listed() -> Any:
        status, body = get_as_aggregator(tasq, path, as_viewer, cert)
        return body if status == 200 and len(body["items"]) == len(WORKLOADS) else None
    body = wait_for(listed, 60, "the pending list for the user the aggregator names", logs=tasq.output)
    assert [i["metadata"]["name"] for i in body["items"]] == ["w-top", "w-mid", "w-blue-low", "w-low"]

    status, body = get_as_aggregator(tasq, path, as_viewer, None)
    assert (status, body["reason"]) == (401, "Unauthorized"), body
    status, body = get_as_aggregator(tasq, path, {"X-Remote-User": f"nobody-{namespace}"}, cert)
    assert status == 403 and f'user "nobody-{namespace}" may not get' in body["message"], body
    assert "Traceback" not in tasq.output()
