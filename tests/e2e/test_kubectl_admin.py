"""A platform admin's kubectl on the devcluster: the install bundle (RBAC, Deployment, webhooks, CRDs)
applies and reads back, `auth can-i` answers yes, `create token` issues a token that works, `logs`
answers as the apiserver does, and `cordon` taints the node."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from devcluster.cluster import DevCluster
from devcluster.simulated.components import Components
from tests.e2e.conftest import KUBECTL, REPO, Kubectl

Apply = Callable[..., subprocess.CompletedProcess[str]]


def test_the_install_bundle_applies_and_reads_back(kubectl: Kubectl, tmp_path: Path) -> None:
    rendered = kubectl("kustomize", str(REPO / "config" / "default")).stdout
    # cert-manager's kinds need cert-manager's CRDs, on any cluster; the rest is Kubernetes' own
    docs = [d for d in yaml.safe_load_all(rendered) if d and not d["apiVersion"].startswith("cert-manager.io/")]
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(yaml.safe_dump_all(docs))
    kubectl("apply", "-f", str(bundle))
    for doc in docs:
        meta = doc["metadata"]
        where = ["-n", meta["namespace"]] if meta.get("namespace") else []
        got = json.loads(kubectl("get", f"{doc['kind']}.{doc['apiVersion'].split('/')[0]}"
                                 if "/" in doc["apiVersion"] else doc["kind"], meta["name"], *where,
                                 "-o", "json").stdout)
        assert got["metadata"]["name"] == meta["name"]
    listed = kubectl("get", "clusterroles,clusterrolebindings,deployments", "-A", "-o", "name").stdout.split()
    assert any(n.startswith("clusterrole.rbac.authorization.k8s.io/") for n in listed)
    assert any(n.startswith("deployment.apps/") for n in listed)


def test_auth_can_i_answers_yes_for_the_admin(kubectl: Kubectl) -> None:
    out = kubectl("auth", "can-i", "create", "workloads.kueue.x-k8s.io", "-n", "default")
    assert out.stdout.strip() == "yes"
    assert "*.*" in kubectl("auth", "can-i", "--list").stdout


def test_a_created_token_works_as_a_bearer_token(devcluster: DevCluster, kubectl: Kubectl, namespace: str,
                                                 tmp_path: Path) -> None:
    kubectl("create", "serviceaccount", "tasq", "-n", namespace)
    token = kubectl("create", "token", "tasq", "-n", namespace).stdout.strip()
    assert token
    config = devcluster.kubeconfig()
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "sa-config"
    path.write_text(yaml.safe_dump(config))
    out = subprocess.run([str(KUBECTL), "--kubeconfig", str(path), "get", "serviceaccount", "tasq", "-n",
                          namespace, "-o", "name"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "serviceaccount/tasq"


def test_logs_are_empty_once_started_and_refused_before(devcluster: DevCluster, kubectl: Kubectl,
                                                        apply_yaml: Apply, namespace: str) -> None:
    apply_yaml(f"""
apiVersion: v1
kind: Pod
metadata: {{name: two, namespace: {namespace}}}
spec:
  containers: [{{name: a, image: busybox}}, {{name: b, image: busybox}}]
""")
    waiting = kubectl("logs", "two", "-n", namespace, check=False)  # kubectl picks the first container
    assert waiting.returncode != 0
    assert 'container "a" in pod "two" is waiting to start: ContainerCreating' in waiting.stderr
    running = {"containerStatuses": [{"name": n, "ready": True, "restartCount": 0, "image": "busybox",
                                      "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
                                     for n in ("a", "b")], "phase": "Running"}
    api = devcluster.api
    devcluster.call(lambda: api.patch(api.resource("v1", "pods"), namespace, "two",
                                      "application/merge-patch+json", {"status": running}, subresource="status"))
    assert kubectl("logs", "two", "-c", "b", "-n", namespace).stdout == ""
    unknown = kubectl("logs", "two", "-c", "zz", "-n", namespace, check=False)
    assert "container zz is not valid for pod two" in unknown.stderr


@pytest.fixture
def components(devcluster: DevCluster) -> Iterator[Components]:
    async def start() -> Components:
        comps = Components(devcluster.api).start()
        comps.run_in_background(0.05)
        return comps
    comps = devcluster.call(start)
    yield comps

    async def close() -> None:
        comps.close()
    devcluster.call(close)


def test_cordon_adds_the_unschedulable_taint_and_uncordon_removes_it(
        kubectl: Kubectl, apply_yaml: Apply, components: Components) -> None:
    apply_yaml("apiVersion: v1\nkind: Node\nmetadata: {name: cordoned}\n")

    def taints() -> list[dict[str, str]]:
        node = json.loads(kubectl("get", "node", "cordoned", "-o", "json").stdout)
        return list(node["spec"].get("taints") or [])

    def eventually(want: list[dict[str, str]]) -> None:
        deadline = time.monotonic() + 20
        while taints() != want:
            assert time.monotonic() < deadline, taints()
            time.sleep(0.1)

    kubectl("cordon", "cordoned")
    eventually([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    kubectl("uncordon", "cordoned")
    eventually([])
