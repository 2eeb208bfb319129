"""A webhook outage end to end: tasq's configurations left behind by a server that went away (a crash),
failurePolicy Fail, nothing listening. Queued Jobs and tasq-labelled pods are refused; kube-system, tasq's
own namespace and objects tasq does not manage are never touched; the CRDs' CEL rules still refuse bad
tasq objects. Runs on the devcluster and, with `--cluster=real`, on the real control plane.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from controller.kube.api import KubeApi
from controller.kube.webhooking import register_configurations
from tests.e2e.conftest import Kubectl
from tests.e2e.test_tasq_webhooks import (  # noqa: F401 (`installed` is a fixture)
    RACK,
    RunningWebhooks,
    api_client,
    get_json,
    installed,
    job_yaml,
)

pytestmark = pytest.mark.e2e

CEL_MESSAGES = {
    "dup": "must be unique",
    "host-high": "the kubernetes.io/hostname label can only be used at the lowest level of topology",
}
CONFIGURATIONS = (("mutatingwebhookconfigurations", c.MUTATING_WEBHOOK_CONFIGURATION),
                  ("validatingwebhookconfigurations", c.VALIDATING_WEBHOOK_CONFIGURATION))


def _namespace(kubectl: Kubectl, name: str, cluster: str) -> None:
    """A namespace pods can be created in (on a real cluster once its default ServiceAccount exists)."""
    kubectl("create", "namespace", name)
    if cluster != "real":
        return
    deadline = time.monotonic() + 30
    while kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"namespace {name}: no default ServiceAccount"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def outage(installed: None,  # noqa: F811 (the imported fixture)
           cluster: str, kubeconfig: Path, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """tasq's webhooks registered and then gone without cleaning up. On the way, two `register_local`
    replicas are checked to share the configurations: the first to stop hands them to the other,
    which still serves; the last one's clean stop deletes them."""
    path = tmp_path_factory.mktemp("outage")
    _namespace(kubectl, "team", cluster)
    first = RunningWebhooks(kubeconfig, path / "first").start()
    second = RunningWebhooks(kubeconfig, path / "second").start()
    assert _served_by(kubectl) == {second.server.url}  # the newest registered serves
    second.stop()
    assert _served_by(kubectl) == {first.server.url}, "a stopping replica took them from one still serving"
    (path / "handed.json").write_text(job_yaml("handed", "team"))
    kubectl("apply", "-f", str(path / "handed.json"))
    assert get_json(kubectl, "job", "handed", "-n", "team")["spec"]["suspend"] is True  # served by the first
    first.stop()
    for kind, name in CONFIGURATIONS:
        assert kubectl("get", kind, name, check=False).returncode != 0, f"{kind} {name} left after a clean stop"

    crashed = RunningWebhooks(kubeconfig, path / "crashed", register_local=False).start()

    async def register() -> None:
        client = await api_client(kubeconfig)
        try:
            await register_configurations(KubeApi(client), crashed.server.url, crashed.server.tls.ca_bundle())
        finally:
            await client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated
    asyncio.run(register())
    (path / "live.json").write_text(job_yaml("live", "team"))
    # The server may still be coming up when the API server first calls it (seen on the real
    # control plane under load): apply until it answers, for at most 30 s.
    deadline = time.monotonic() + 30
    while kubectl("apply", "-f", str(path / "live.json"), check=False).returncode != 0:
        assert time.monotonic() < deadline, "the webhook server never answered"
        time.sleep(0.5)
    assert get_json(kubectl, "job", "live", "-n", "team")["spec"]["suspend"] is True  # served while up
    crashed.stop()
    return kubectl


def _served_by(kubectl: Kubectl) -> set[str]:
    """The servers (scheme://host:port) every webhook of both configurations calls."""
    urls = set()
    for kind, name in CONFIGURATIONS:
        for hook in get_json(kubectl, kind, name)["webhooks"]:
            urls.add(hook["clientConfig"]["url"].rsplit("/", 1)[0])
    return urls


def _apply(kubectl: Kubectl, text: str, tmp_path: Path) -> Any:
    path = tmp_path / "manifest.json"
    path.write_text(text)
    return kubectl("apply", "-f", str(path), check=False)


def pod_json(name: str, namespace: str, labels: dict[str, str]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                                      "labels": labels},
                       "spec": {"containers": [{"name": "main", "image": "busybox"}]}})


def test_an_outage_refuses_queued_jobs(outage: Kubectl, tmp_path: Path) -> None:
    out = _apply(outage, job_yaml("refused", "team"), tmp_path)
    assert out.returncode != 0
    assert f'failed calling webhook "{c.WEBHOOK_MUTATE_JOB}.{c.WEBHOOK_NAME_DOMAIN}"' in out.stderr


def test_an_outage_refuses_pods_of_admitted_templates(outage: Kubectl, tmp_path: Path) -> None:
    out = _apply(outage, pod_json("tasq-pod", "team", {c.LABEL_TAS: c.LABEL_TAS_VALUE}), tmp_path)
    assert out.returncode != 0 and f"{c.WEBHOOK_MUTATE_POD}.{c.WEBHOOK_NAME_DOMAIN}" in out.stderr


@pytest.mark.parametrize(("name", "manifest"), [
    pytest.param("plain-pod", pod_json("plain-pod", "team", {"app": "web"}), id="an unlabelled pod"),
    pytest.param("system-pod", pod_json("system-pod", "kube-system", {c.LABEL_TAS: c.LABEL_TAS_VALUE}),
                 id="a tasq-labelled pod in kube-system"),
    pytest.param("system-job", job_yaml("system-job", "kube-system"), id="a queued Job in kube-system"),
    pytest.param("plain-job", job_yaml("plain-job", "team", queue=None), id="a Job without the queue label"),
])
def test_an_outage_never_touches_what_tasq_does_not_manage(outage: Kubectl, tmp_path: Path, name: str,
                                                           manifest: str) -> None:
    out = _apply(outage, manifest, tmp_path)
    assert out.returncode == 0, out.stderr
    kind = "pod" if "Pod" in manifest.split('"kind": ')[1][:6] else "job"
    namespace = json.loads(manifest)["metadata"]["namespace"]
    assert get_json(outage, kind, name, "-n", namespace)["metadata"]["name"] == name


@pytest.mark.parametrize(("name", "levels"), [
    pytest.param("dup", [RACK, RACK], id="duplicate levels"),
    pytest.param("host-high", [c.LABEL_HOSTNAME, RACK], id="hostname above the lowest level"),
])
def test_a_bad_topology_is_refused_by_cel_with_the_webhook_stopped(outage: Kubectl, tmp_path: Path, name: str,
                                                                   levels: list[str]) -> None:
    """The CRD's own x-kubernetes-validations refuse it before any webhook is called."""
    topology = {"apiVersion": c.API_VERSION, "kind": "Topology", "metadata": {"name": name},
                "spec": {"levels": [{"nodeLabel": level} for level in levels]}}
    out = _apply(outage, json.dumps(topology), tmp_path)
    assert out.returncode != 0
    assert CEL_MESSAGES[name] in out.stderr, out.stderr


def test_a_flavor_with_a_topology_and_no_node_label_is_refused_by_cel_with_the_webhook_stopped(
        outage: Kubectl, tmp_path: Path) -> None:
    flavor = {"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "no-labels"},
              "spec": {"topologyName": "dc"}}
    out = _apply(outage, json.dumps(flavor), tmp_path)
    assert out.returncode != 0
    assert "at least one nodeLabel is required when topology is set" in out.stderr, out.stderr
