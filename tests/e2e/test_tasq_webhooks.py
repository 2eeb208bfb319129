"""tasq's webhooks end to end: the real kubectl, the API server calling them over HTTPS, and kopf
serving only tasq's handlers (`controller.kube.webhooking.serve_admission`) in a thread.

The configurations are the ones `tasq dev` registers (a 127.0.0.1 URL, a fresh CA in caBundle). On
the devcluster its simulated Job controller creates the pods; with `--cluster=real`, kube-apiserver
calls the webhooks and kube-controller-manager creates them. Each test works in its own namespace.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes.aio import client as aclient
from kubernetes.aio import config as aconfig

from controller.api import constants as c
from controller.commands.crds import DEFAULT_DIR
from controller.kube.webhooking import serve_admission, serving_files
from devcluster.cluster import DevCluster
from devcluster.simulated.components import Components
from devcluster.simulated.seeding import apply_crds
from tests.e2e.conftest import Kubectl, wait_for
from webhooks.certificates import write_serving_files
from webhooks.serving import AdmissionServer

pytestmark = pytest.mark.e2e

RACK = "example.com/rack"


async def api_client(kubeconfig: Path) -> aclient.ApiClient:
    configuration = aclient.Configuration()
    await aconfig.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration,  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
                                   persist_config=False)
    return aclient.ApiClient(configuration)


class RunningWebhooks:
    """`serve_admission` on its own loop in a thread; `stop()` ends it (and, when it registered
    them, deletes the configurations)."""

    def __init__(self, kubeconfig: Path, certs: Path, register_local: bool = True) -> None:
        self.kubeconfig = kubeconfig
        self.certs = certs
        self.register_local = register_local
        self.ca = write_serving_files(certs, datetime.now(UTC))  # what local_tls does, keeping the CA
        self.server = AdmissionServer(serving_files(certs), reload_interval=0.1)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        ready = asyncio.Event()
        client = await api_client(self.kubeconfig)

        async def signal() -> None:
            await ready.wait()
            self._ready.set()
        watcher = asyncio.create_task(signal())
        try:
            await serve_admission(client, self.server, self._stop, register_local=self.register_local, ready=ready)
        finally:
            watcher.cancel()
            await client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated

    def start(self) -> RunningWebhooks:
        self._thread.start()
        assert self._ready.wait(30), "webhooks did not start"
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "webhooks did not stop"

    def served_serial(self) -> int:
        """The serial of the certificate a new TLS handshake gets (trusting the CA on disk)."""
        context = ssl.create_default_context(cafile=str(self.server.tls.ca))
        with context.wrap_socket(socket.create_connection(("127.0.0.1", self.server.port)),
                                  server_hostname="127.0.0.1") as tls:
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, cluster: str, kubectl: Kubectl) -> Iterator[None]:
    """tasq's CRDs, and on the devcluster its simulated Job controller, scheduler and kubelet (the real
    control plane has its own controller manager, scheduler and kwok)."""
    if cluster == "real":
        kubectl("apply", "-f", str(DEFAULT_DIR))
        yield
        return
    dev: DevCluster = request.getfixturevalue("devcluster")

    async def seed() -> Components:
        await apply_crds(dev.api, DEFAULT_DIR)
        components = Components(dev.api).start()
        components.run_in_background(0.05)
        return components
    components = dev.call(seed)
    yield

    async def close() -> None:
        components.close()
    dev.call(close)


@pytest.fixture(scope="module")
def webhooks(installed: None, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWebhooks]:
    running = RunningWebhooks(kubeconfig, tmp_path_factory.mktemp("certs")).start()
    yield running
    running.stop()


def job_yaml(name: str, namespace: str, *, queue: str | None = "training", annotations: dict[str, str] | None = None,
             template_labels: dict[str, str] | None = None, template_annotations: dict[str, str] | None = None,
             parallelism: int = 1) -> str:
    job: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {c.LABEL_QUEUE_NAME: queue} if queue else {},
                     "annotations": annotations or {}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
            "metadata": {"labels": template_labels or {}, "annotations": template_annotations or {}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}},
    }
    return json.dumps(job)


def get_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def test_a_queued_job_comes_back_suspended(webhooks: RunningWebhooks, kubectl: Kubectl, apply_yaml: Any,
                                           namespace: str) -> None:
    apply_yaml(job_yaml("train", namespace))
    assert get_json(kubectl, "job", "train", "-n", namespace)["spec"]["suspend"] is True


def test_a_job_without_the_queue_label_is_not_touched(webhooks: RunningWebhooks, kubectl: Kubectl, apply_yaml: Any,
                                                      namespace: str) -> None:
    apply_yaml(job_yaml("plain", namespace, queue=None))
    assert get_json(kubectl, "job", "plain", "-n", namespace)["spec"].get("suspend") is not True


def test_server_dry_run_returns_the_patch_and_stores_nothing(webhooks: RunningWebhooks, kubectl: Kubectl,
                                                              apply_yaml: Any, namespace: str) -> None:
    out = apply_yaml(job_yaml("dry", namespace), "--dry-run=server", "-o", "json")
    assert json.loads(out.stdout)["spec"]["suspend"] is True
    assert kubectl("get", "job", "dry", "-n", namespace, check=False).returncode != 0


def test_a_bad_annotation_is_refused_with_its_message(webhooks: RunningWebhooks, apply_yaml: Any, namespace: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="webhooks.serving")
    out = apply_yaml(job_yaml("bad", namespace, annotations={c.ANNOTATION_REQUIRE_TOPOLOGY: "auto"}), check=False)
    assert out.returncode != 0
    assert f'admission webhook "{c.WEBHOOK_VALIDATE_JOB}.{c.WEBHOOK_NAME_DOMAIN}" denied the request' in out.stderr
    assert f'Job.batch "bad" is invalid: metadata.annotations[{c.ANNOTATION_REQUIRE_TOPOLOGY}]' in out.stderr
    assert "is only allowed for" in out.stderr
    assert f"CREATE Job {namespace}/bad uid=" in caplog.text  # the server's log names the object


def test_the_queue_label_cannot_change_while_the_job_runs(webhooks: RunningWebhooks, kubectl: Kubectl,
                                                          apply_yaml: Any, namespace: str) -> None:
    apply_yaml(job_yaml("moving", namespace))
    kubectl("patch", "job", "moving", "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": false}}')
    out = kubectl("label", "job", "moving", "-n", namespace, "--overwrite", f"{c.LABEL_QUEUE_NAME}=other",
                  check=False)
    assert out.returncode != 0 and f"metadata.labels[{c.LABEL_QUEUE_NAME}]" in out.stderr
    assert "immutable while the Job is not suspended" in out.stderr


def test_pods_created_by_the_job_controller_carry_the_gate(webhooks: RunningWebhooks, kubectl: Kubectl,
                                                           apply_yaml: Any, namespace: str) -> None:
    """An admitted pod template (as the job reconciler writes it) yields gated pods; the same
    annotation without tasq's label does not reach the webhook at all."""
    admitted = {c.ANNOTATION_TOPOLOGY_PODSET: "main", c.ANNOTATION_TOPOLOGY_WORKLOAD: "job-admitted"}
    apply_yaml(job_yaml("admitted", namespace, queue=None, parallelism=3,
                        template_labels={c.LABEL_TAS: c.LABEL_TAS_VALUE}, template_annotations=admitted))
    apply_yaml(job_yaml("unlabelled", namespace, queue=None, parallelism=1, template_annotations=admitted))

    def pods(job: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = get_json(kubectl, "pods", "-n", namespace, "-l",
                                               f"{c.LABEL_JOB_NAME}={job}")["items"]
        return items
    gated = wait_for(lambda: len(pods("admitted")) == 3 and pods("admitted"), what="3 pods")
    for pod in gated:
        assert pod["spec"]["schedulingGates"] == [{"name": c.SCHEDULING_GATE_TOPOLOGY}]
        assert pod["status"].get("phase", "Pending") == "Pending"
    other = wait_for(lambda: pods("unlabelled"), what="the unlabelled Job's pod")
    assert not other[0]["spec"].get("schedulingGates")


@pytest.mark.parametrize(("manifest", "message"), [
    # A duplicate level is refused by the CRD's CEL rule before any webhook is called; a name part
    # of 64 characters passes the CRD's pattern and only the webhook refuses it.
    pytest.param({"apiVersion": f"{c.GROUP}/v1beta1", "kind": "Topology", "metadata": {"name": "long"},
                  "spec": {"levels": [{"nodeLabel": "example.com/" + "a" * 64}]}},
                 "spec.levels[0].nodeLabel: Invalid value", id="a Topology level with a 64-character name"),
    pytest.param({"apiVersion": c.API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "bad-taint"},
                  "spec": {"nodeTaints": [{"key": "gpu", "value": "bad value!", "effect": "NoSchedule"}]}},
                 "spec.nodeTaints[0].value", id="a ResourceFlavor with a bad taint value"),
    # The CRD has no rule for limits on a root Cohort: only the webhook refuses it (Kueue's rule).
    pytest.param({"apiVersion": f"{c.GROUP}/{c.VERSION_V1BETA2}", "kind": "Cohort", "metadata": {"name": "rooted"},
                  "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [
                      {"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]}]}]}},
                 "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: Forbidden: must be empty when "
                 "the Cohort has no parentName", id="a root Cohort with a borrowingLimit"),
])
def test_bad_tasq_objects_are_refused(webhooks: RunningWebhooks, apply_yaml: Any, manifest: dict[str, Any],
                                      message: str) -> None:
    out = apply_yaml(json.dumps(manifest), check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_a_topologys_levels_are_immutable(webhooks: RunningWebhooks, apply_yaml: Any) -> None:
    topology: dict[str, Any] = {"apiVersion": c.API_VERSION, "kind": "Topology", "metadata": {"name": "fixed"},
                                "spec": {"levels": [{"nodeLabel": RACK}]}}
    apply_yaml(json.dumps(topology))
    topology["spec"]["levels"].insert(0, {"nodeLabel": "example.com/block"})
    out = apply_yaml(json.dumps(topology), check=False)
    assert out.returncode != 0 and "spec.levels" in out.stderr and "immutable" in out.stderr


def test_new_certificate_files_are_served_without_a_restart(webhooks: RunningWebhooks, kubectl: Kubectl,
                                                            apply_yaml: Any, namespace: str) -> None:
    """A renewal by the same CA (as cert-manager does): the next handshake gets the new certificate
    and the API server keeps calling the webhooks with the caBundle it has."""
    before, reloads = webhooks.served_serial(), webhooks.server.reloads
    ca_pem = webhooks.server.tls.ca.read_bytes() if webhooks.server.tls.ca else b""
    write_serving_files(webhooks.certs, datetime.now(UTC), ca=webhooks.ca)
    wait_for(lambda: webhooks.server.reloads > reloads, what="the certificate reload")
    assert webhooks.served_serial() != before
    assert webhooks.server.tls.ca is not None and webhooks.server.tls.ca.read_bytes() == ca_pem
    apply_yaml(job_yaml("after-rotation", namespace))
    assert get_json(kubectl, "job", "after-rotation", "-n", namespace)["spec"]["suspend"] is True
