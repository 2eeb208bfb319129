"""Injected faults as clients see them: latency, 409, 500, 410 Gone, dropped watches, webhook timeouts.

Each test injects one fault kind through `DevCluster.faults`, checks its effect with kubectl or the
official client, and that a refused write left the stored object untouched. Faults are cleared
after every test, so the module's shared server stays healthy.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from devcluster.cluster import DevCluster
from devcluster.server import faults
from devcluster.webhooking.certificates import CertificateAuthority
from tests.builders.webhooks import WebhookServer, allow, make_webhook_config
from tests.client_models import present
from tests.e2e.conftest import Kubectl


@pytest.fixture(autouse=True)
def clean_faults(devcluster: DevCluster) -> Iterator[None]:
    yield
    devcluster.faults.clear()


@pytest.fixture(scope="module")
def core(kubeconfig: Path) -> Iterator[client.CoreV1Api]:
    with config.new_client_from_config(config_file=str(kubeconfig)) as api:  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
        yield client.CoreV1Api(api)


def configmap_yaml(name: str, namespace: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}}}\ndata: {{a: '1'}}\n"


def stored(devcluster: DevCluster, namespace: str, name: str) -> dict[str, Any] | None:
    return devcluster.api.store.get(("", "configmaps"), (namespace, name))


def test_latency_delays_the_request_past_the_clients_timeout(
        kubectl: Kubectl, devcluster: DevCluster, namespace: str) -> None:
    devcluster.faults.inject(faults.LATENCY, "list", "configmaps", namespace=namespace, seconds=2.0)

    slow = kubectl("get", "configmaps", "-n", namespace, "--request-timeout=1s", check=False)
    fast = kubectl("get", "configmaps", "-n", namespace, "--request-timeout=1s", check=False)

    assert slow.returncode != 0
    # client-go words its own timeout either way, depending on where the deadline caught it
    assert re.search(r"Unable to connect to the server: .*(Client\.Timeout exceeded|context deadline exceeded)",
                     slow.stderr), slow.stderr
    assert fast.returncode == 0  # the fault hit the next request only


def test_conflict_refuses_the_create_and_stores_nothing(
        kubectl: Kubectl, devcluster: DevCluster, namespace: str) -> None:
    devcluster.faults.inject(faults.CONFLICT, "create", "configmaps", name="cm")

    proc = kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace), check=False)

    assert ('Error from server (Conflict): error when creating "STDIN": Operation cannot be fulfilled on '
            'configmaps "cm": the object has been modified') in proc.stderr
    assert stored(devcluster, namespace, "cm") is None
    kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace))  # count=1: the retry succeeds
    assert stored(devcluster, namespace, "cm") is not None


def test_internal_error_on_patch_leaves_the_object_untouched(
        kubectl: Kubectl, devcluster: DevCluster, namespace: str) -> None:
    kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace))
    before = stored(devcluster, namespace, "cm")
    devcluster.faults.inject(faults.ERROR, "patch", "configmaps", name="cm", count=None)

    first = kubectl("label", "configmap", "cm", "-n", namespace, "x=y", check=False)
    second = kubectl("label", "configmap", "cm", "-n", namespace, "x=y", check=False)

    for proc in (first, second):  # count=None: every matching request fails until cleared
        assert "Error from server (InternalError): Internal error occurred: injected fault" in proc.stderr
    assert stored(devcluster, namespace, "cm") is before
    devcluster.faults.clear()
    kubectl("label", "configmap", "cm", "-n", namespace, "x=y")
    assert present(stored(devcluster, namespace, "cm"))["metadata"]["labels"] == {"x": "y"}


def test_gone_on_list(kubectl: Kubectl, devcluster: DevCluster, namespace: str) -> None:
    devcluster.faults.inject(faults.GONE, "list", "configmaps", message="too old resource version: 5 (90)")

    proc = kubectl("get", "configmaps", "-n", namespace, check=False)

    assert "Error from server (Expired): too old resource version: 5 (90)" in proc.stderr


def test_gone_on_watch_reaches_the_official_client(
        core: client.CoreV1Api, devcluster: DevCluster, namespace: str) -> None:
    devcluster.faults.inject(faults.GONE, "watch", "configmaps", namespace=namespace)

    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version="1",  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
                                      timeout_seconds=5):
            pass

    assert err.value.status == 410


def test_dropped_watch_breaks_the_clients_stream(
        core: client.CoreV1Api, kubectl: Kubectl, devcluster: DevCluster, namespace: str) -> None:
    kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace))
    seen: list[str] = []
    outcome: list[BaseException | None] = []
    first_event = threading.Event()

    def consume() -> None:
        try:
            for event in watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=30):  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
                seen.append(event["type"])
                first_event.set()
            outcome.append(None)
        except ProtocolError as e:  # the chunked stream was cut
            outcome.append(e)
            first_event.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    assert first_event.wait(10)
    dropped = devcluster.call(_drop(devcluster))
    thread.join(10)

    assert dropped == 1
    assert not thread.is_alive()  # without the drop the watch would run for its 30 s
    assert seen == ["ADDED"]
    assert outcome and outcome[0] is not None


async def _drop(devcluster: DevCluster) -> int:
    return devcluster.faults.drop_watches("configmaps")


def test_drop_watch_rule_cuts_the_next_watch(core: client.CoreV1Api, devcluster: DevCluster, namespace: str) -> None:
    devcluster.faults.inject(faults.DROP_WATCH, "watch", "configmaps", namespace=namespace)

    with pytest.raises(ProtocolError):  # "Response ended prematurely": no final chunk
        list(watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=30))  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated


@pytest.fixture
def timing_out_webhook(devcluster: DevCluster, namespace: str) -> Iterator[Callable[[str, float, int], None]]:
    """Registers a validating webhook on pods of the test namespace; its server answers after `delay`."""
    ca = CertificateAuthority()
    keys = ca.issue(["127.0.0.1"])
    servers: list[WebhookServer] = []
    names: list[str] = []
    api = devcluster.api
    r = api.resource("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")

    def register(policy: str, delay: float, timeout: int) -> None:
        server = devcluster.call(WebhookServer(keys, allow(), delay).start())
        servers.append(server)
        name = f"slow-{namespace}-{policy.lower()}"
        config_obj = (make_webhook_config(name).webhook("slow.tasq.test", server.url, ca.ca_bundle).rule()
                      .only_namespace(namespace).failure_policy(policy).timeout(timeout).build())
        devcluster.call(api.create(r, "", config_obj))
        names.append(name)
    yield register
    for name in names:
        devcluster.call(api.delete(r, "", name))
    for server in servers:
        devcluster.call(server.stop())


def pod_yaml(name: str, namespace: str) -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}}}\n"
            "spec: {containers: [{name: main, image: busybox}]}\n")


@pytest.mark.parametrize(("policy", "want_created"), [("Fail", False), ("Ignore", True)])
def test_injected_webhook_timeout_follows_the_failure_policy(
        kubectl: Kubectl, devcluster: DevCluster, namespace: str,
        timing_out_webhook: Callable[[str, float, int], None], policy: str, want_created: bool) -> None:
    timing_out_webhook(policy, 0.0, 10)
    devcluster.faults.inject(faults.WEBHOOK_TIMEOUT, name="slow.tasq.test")

    proc = kubectl("create", "-f", "-", stdin=pod_yaml("p1", namespace), check=False)

    assert (proc.returncode == 0) == want_created
    if not want_created:
        assert 'failed calling webhook "slow.tasq.test"' in proc.stderr
        assert "?timeout=10s\": context deadline exceeded" in proc.stderr


def test_a_webhook_slower_than_its_timeout_fails_the_request(
        kubectl: Kubectl, namespace: str, timing_out_webhook: Callable[[str, float, int], None]) -> None:
    timing_out_webhook("Fail", 2.0, 1)

    proc = kubectl("create", "-f", "-", stdin=pod_yaml("p1", namespace), check=False)

    assert "?timeout=1s\": context deadline exceeded" in proc.stderr
    assert kubectl("get", "pods", "-n", namespace, "-o", "name").stdout == ""


def debug_faults(devcluster: DevCluster, method: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{devcluster.url}/debug/faults", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_faults_over_the_debug_endpoint(kubectl: Kubectl, devcluster: DevCluster, namespace: str) -> None:
    status, listed = debug_faults(devcluster, "POST", {"kind": "error", "verb": "create", "resource": "configmaps",
                                                       "namespace": namespace, "message": "disk full"})
    assert status == 200 and [(f["kind"], f["count"], f["hits"]) for f in listed["faults"]] == [("error", 1, 0)]

    proc = kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace), check=False)
    assert "Internal error occurred: disk full" in proc.stderr
    assert debug_faults(devcluster, "GET")[1]["faults"][0]["hits"] == 1

    bad_status, bad = debug_faults(devcluster, "POST", {"kind": "meteor"})
    assert (bad_status, bad["reason"]) == (400, "BadRequest") and "fault kind 'meteor'" in bad["message"]
    assert debug_faults(devcluster, "DELETE") == (200, {"faults": []})


def _send(devcluster: DevCluster, method: str, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """One request over a fresh aiohttp connection (the operator's client library): the status and
    answer, or (0, the error's type) when the connection went without an answer."""
    async def send() -> tuple[int, str]:
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        async with aiohttp.ClientSession() as session:
            try:
                async with session.request(method, devcluster.url + path, data=json.dumps(body),
                                           headers={"Content-Type": content_type,
                                                    "Authorization": "Bearer devcluster"}) as response:
                    return response.status, await response.text()
            except aiohttp.ClientError as e:
                return 0, type(e).__name__
    return asyncio.run(send())


@pytest.mark.parametrize(("kind", "applied"), [(faults.DISCONNECT, False), (faults.DISCONNECT_AFTER, True)])
def test_a_dropped_connection_loses_the_answer_before_or_after_the_write(
        kubectl: Kubectl, devcluster: DevCluster, namespace: str, kind: str, applied: bool) -> None:
    kubectl("create", "-f", "-", stdin=configmap_yaml("cm", namespace))
    devcluster.faults.inject(kind, "patch", "configmaps", name="cm")
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"

    dropped = _send(devcluster, "PATCH", path, {"data": {"a": "2"}})
    answered = _send(devcluster, "PATCH", path, {"data": {"b": "3"}})

    assert dropped == (0, "ServerDisconnectedError")  # as a restarting kube-apiserver drops it
    assert present(stored(devcluster, namespace, "cm"))["data"] == {"a": "2" if applied else "1", "b": "3"}
    assert answered[0] == 200  # count=1: the next request is served


def test_a_dropped_connection_spares_the_in_process_api(devcluster: DevCluster, namespace: str) -> None:
    devcluster.faults.inject(faults.DISCONNECT, "create", "configmaps")
    api = devcluster.api
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": namespace}}

    devcluster.call(lambda: api.create(api.resource("v1", "configmaps"), namespace, body))

    assert stored(devcluster, namespace, "cm") is not None
    assert devcluster.faults.rules[0].hits == 0  # left for the next HTTP request
