"""Admission webhooks as tasq's are called: on create, mutating webhooks run first and see the object
as the client sent it (no uid, no creationTimestamp yet); validating webhooks then see it mutated and
with server metadata; a `.status` a mutating webhook sets on create is reset; the AdmissionReview
request carries kind, resource, requestKind, name, namespace, operation, userInfo, options and dryRun."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from devcluster.webhooking.certificates import CertificateAuthority
from tests.builders.webhooks import WebhookServer, allow, make_webhook_config
from tests.client_models import as_body, present
from tests.conformance.conftest import eventually

PATCH = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
         {"op": "add", "path": "/status", "value": {"phase": "Running", "message": "set by a webhook"}}]


class Webhooks:
    """A mutating and a validating webhook server on a loop of their own thread."""

    def __init__(self) -> None:
        self.ca = CertificateAuthority("conformance-webhook-ca")
        keys = self.ca.issue(["127.0.0.1"])
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.mutating = self._run(WebhookServer(keys, allow(patch=PATCH)).start())
        self.validating = self._run(WebhookServer(keys, allow()).start())

    def _run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def stop(self) -> None:
        self._run(self.mutating.stop())
        self._run(self.validating.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture
def webhooks(api_client: client.ApiClient, namespace: str) -> Iterator[Webhooks]:
    hooks = Webhooks()
    admission = client.AdmissionregistrationV1Api(api_client)
    mutating = (make_webhook_config(f"{namespace}-mutating", mutating=True)
                .webhook("mutate.conformance.tasq.io", hooks.mutating.url, hooks.ca.ca_bundle)
                .rule(("pods",), ("CREATE",)).only_namespace(namespace).build())
    validating = (make_webhook_config(f"{namespace}-validating")
                  .webhook("validate.conformance.tasq.io", hooks.validating.url, hooks.ca.ca_bundle)
                  .rule(("pods",), ("CREATE",)).only_namespace(namespace).build())
    admission.create_mutating_webhook_configuration(as_body(mutating))
    admission.create_validating_webhook_configuration(as_body(validating))
    try:
        yield hooks
    finally:
        admission.delete_mutating_webhook_configuration(mutating["metadata"]["name"])
        admission.delete_validating_webhook_configuration(validating["metadata"]["name"])
        hooks.stop()


def gated_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulingGates": [{"name": "conformance.tasq.io/hold"}],
                     "containers": [{"name": "c", "image": "busybox"}]}}


def probe_pod(core: client.CoreV1Api, namespace: str, webhooks: Webhooks) -> client.V1Pod:
    """Creates pods until both webhooks have seen one (configurations take effect asynchronously)."""
    attempt = iter(range(1000))

    def created() -> client.V1Pod | None:
        pod = core.create_namespaced_pod(namespace, as_body(gated_pod(f"probe-{next(attempt)}")))
        ok = webhooks.mutating.reviews and webhooks.validating.reviews and present(pod.metadata).labels
        return pod if ok else None
    pod: client.V1Pod = eventually(created, "both webhooks are called", timeout=30, interval=0.5)
    return pod


def test_mutating_webhooks_run_before_server_metadata_and_validating_ones_after(
        core: client.CoreV1Api, namespace: str, webhooks: Webhooks) -> None:
    pod = probe_pod(core, namespace, webhooks)
    mutated = webhooks.mutating.reviews[-1]["request"]["object"]
    validated = webhooks.validating.reviews[-1]["request"]["object"]
    assert mutated["metadata"]["name"] == validated["metadata"]["name"] == present(pod.metadata).name
    assert "uid" not in mutated["metadata"] and "creationTimestamp" not in mutated["metadata"]
    assert validated["metadata"]["uid"] == present(pod.metadata).uid
    assert validated["metadata"]["labels"] == {"mutated": "yes"}
    assert present(pod.metadata).labels == {"mutated": "yes"}
    assert present(pod.status).phase == "Pending" and present(pod.status).message is None


def test_the_admission_review_request_fields(core: client.CoreV1Api, namespace: str, webhooks: Webhooks) -> None:
    pod = probe_pod(core, namespace, webhooks)
    request = webhooks.validating.reviews[-1]["request"]
    assert request["uid"] and request["uid"] != webhooks.mutating.reviews[-1]["request"]["uid"]
    assert request["kind"] == request["requestKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["resource"] == request["requestResource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (request["name"], request["namespace"], request["operation"]) == (present(pod.metadata).name, namespace, "CREATE")
    assert request["userInfo"]["username"]  # whoever the kubeconfig names
    assert "system:authenticated" in request["userInfo"]["groups"]
    assert request["dryRun"] is False
    assert request["options"]["kind"] == "CreateOptions"
    assert request.get("oldObject") is None


NEVER = {"matchLabels": {"conformance.tasq.io/never": "matches"}}


def _webhook_configuration(timeout: int) -> dict[str, Any]:
    def hook(name: str) -> dict[str, Any]:
        return {"name": f"{name}.conformance.tasq.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "timeoutSeconds": timeout, "objectSelector": NEVER,
                "clientConfig": {"service": {"name": "nowhere", "namespace": "default", "path": f"/{name}"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["configmaps"]}]}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "conformance-reapplied"}, "webhooks": [hook("first"), hook("second")]}


def test_reapplying_a_webhook_configuration_merges_its_webhooks_by_name(kubectl: Any) -> None:
    """kubectl apply (client-side, with --dry-run=server too) of a changed webhook configuration keeps
    what it never set, e.g. the caBundle cert-manager injects into one webhook, and the defaults."""
    kubectl("apply", "-f", "-", stdin=json.dumps(_webhook_configuration(10)))
    try:
        kubectl("patch", "mutatingwebhookconfiguration", "conformance-reapplied", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Y2E="}]))
        for dry_run in (["--dry-run=server"], []):
            out = kubectl("apply", *dry_run, "-o", "json", "-f", "-", stdin=json.dumps(_webhook_configuration(11)))
            hooks = json.loads(out.stdout)["webhooks"]
            assert [(h["name"], h["timeoutSeconds"], h["clientConfig"].get("caBundle")) for h in hooks] == [
                ("first.conformance.tasq.io", 11, "Y2E="), ("second.conformance.tasq.io", 11, None)]
            assert all(h["reinvocationPolicy"] == "Never" and h["namespaceSelector"] == {}
                       and h["failurePolicy"] == "Fail" and h["rules"][0]["scope"] == "*" for h in hooks)
    finally:
        kubectl("delete", "mutatingwebhookconfiguration", "conformance-reapplied", check=False)
