"""Admission webhooks through real HTTPS: patches applied, denials reaching kubectl, policies, selectors.

Each test runs its own TLS webhook server (a throwaway CA signs its cert; the CA goes into the
configuration's caBundle) on the devcluster's loop, and scopes its configuration to its namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster.cluster import DevCluster
from devcluster.server.errors import ApiError
from devcluster.webhooking.certificates import CertificateAuthority, KeyPair
from tests.builders.webhooks import WebhookServer, allow, deny, make_webhook_config
from tests.e2e.conftest import Kubectl

MUTATING = ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations")
VALIDATING = ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture(scope="module")
def keys(ca: CertificateAuthority) -> KeyPair:
    return ca.issue(["127.0.0.1", "hook.webhooks.svc"])


@pytest.fixture
def serve(devcluster: DevCluster, keys: KeyPair) -> Iterator[Callable[..., WebhookServer]]:
    servers: list[WebhookServer] = []

    def start(respond: Any, delay: float = 0.0) -> WebhookServer:
        server = devcluster.call(WebhookServer(keys, respond, delay).start())
        servers.append(server)
        return server
    yield start
    for server in servers:
        devcluster.call(server.stop())


@pytest.fixture
def register(devcluster: DevCluster) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Create webhook configurations in-process; delete them after the test."""
    api = devcluster.api
    created: list[tuple[str, str, str]] = []

    def create(config: dict[str, Any]) -> None:
        api_version, plural = MUTATING if config["kind"].startswith("Mutating") else VALIDATING
        devcluster.call(lambda: api.create(api.resource(api_version, plural), "", config))
        created.append((api_version, plural, config["metadata"]["name"]))
    yield create
    for api_version, plural, name in created:
        devcluster.call(api.delete(api.resource(api_version, plural), "", name))


def pod_yaml(name: str, namespace: str, labels: str = "{}") -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}\n"
            "spec: {containers: [{name: main, image: busybox}]}\n")


def test_mutating_patch_appears_on_the_stored_object(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    first = serve(allow([{"op": "add", "path": "/metadata/labels/team", "value": "ml"}]))
    # The second webhook sees the first one's patch: it rewrites the label the first added.
    second = serve(allow([{"op": "replace", "path": "/metadata/labels/team", "value": "ml-infra"},
                          {"op": "add", "path": "/spec/priority", "value": 7}]))
    register(make_webhook_config("a-label", mutating=True).webhook("label.tasq.test", first.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())
    register(make_webhook_config("b-relabel", mutating=True).webhook("relabel.tasq.test", second.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())

    kubectl("apply", "-f", "-", stdin=pod_yaml("p1", namespace))

    out = kubectl("get", "pod", "p1", "-n", namespace, "-o", "jsonpath={.metadata.labels.team} {.spec.priority}")
    assert out.stdout == "ml-infra 7"
    assert second.reviews[0]["request"]["object"]["metadata"]["labels"]["team"] == "ml"
    request = first.reviews[0]["request"]
    assert (request["operation"], request["namespace"], request["kind"]["kind"]) == ("CREATE", namespace, "Pod")


def test_validating_denial_reaches_kubectl_with_its_message(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    server = serve(deny("pods need a queue label", reason="Forbidden"))
    register(make_webhook_config("deny-pods").webhook("deny.tasq.test", server.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())

    proc = kubectl("apply", "-f", "-", stdin=pod_yaml("p1", namespace), check=False)

    assert proc.returncode != 0
    assert ('Error from server (Forbidden): error when creating "STDIN": admission webhook "deny.tasq.test" '
            "denied the request: pods need a queue label") in proc.stderr
    assert kubectl("get", "pods", "-n", namespace, "-o", "name").stdout == ""


def test_webhook_warnings_reach_kubectl_as_warning_headers(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    mutating = serve(allow(warnings=['image "busybox" has no tag; "latest" is assumed', "repeated"]))
    validating = serve(allow(warnings=["repeated", 'a \\ backslash and "quotes"']))
    register(make_webhook_config("warn-mutating", mutating=True).webhook("warn.tasq.test", mutating.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())
    register(make_webhook_config("warn-validating").webhook("warn.tasq.test", validating.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())

    created = kubectl("create", "-f", "-", stdin=pod_yaml("p1", namespace))

    # kubectl prints each distinct warning once, in the order the API server recorded them
    assert [line for line in created.stderr.splitlines() if line.startswith("Warning: ")] == [
        'Warning: image "busybox" has no tag; "latest" is assumed', "Warning: repeated",
        'Warning: a \\ backslash and "quotes"']
    assert created.stdout.strip() == "pod/p1 created"


def test_a_denying_webhooks_warnings_still_reach_kubectl(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    server = serve(deny("pods need a queue label", warnings=["see https://tasq.test/queues"]))
    register(make_webhook_config("deny-warn").webhook("deny.tasq.test", server.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())

    proc = kubectl("create", "-f", "-", stdin=pod_yaml("p2", namespace), check=False)

    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == "Warning: see https://tasq.test/queues"
    assert "denied the request: pods need a queue label" in proc.stderr


@pytest.mark.parametrize(("code", "reason", "want_code"), [
    (422, "Invalid", 422),   # the webhook's own code and reason go back to the client
    (0, "", 403),            # no code: Forbidden, as kube-apiserver
    (200, "", 403),          # a success code cannot come with a rejection
])
def test_denial_keeps_the_webhooks_code(devcluster: DevCluster, namespace: str, serve: Callable[..., WebhookServer],
                                         register: Callable[[dict[str, Any]], None], ca: CertificateAuthority,
                                         code: int, reason: str, want_code: int) -> None:
    server = serve(deny("bad spec", code=code, reason=reason))
    register(make_webhook_config(f"deny-{code}").webhook("deny.tasq.test", server.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())
    api = devcluster.api
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "x"}]}}

    with pytest.raises(ApiError) as err:
        devcluster.call(lambda: api.create(api.resource("v1", "pods"), namespace, body))

    assert (err.value.code, err.value.reason) == (want_code, reason)
    assert err.value.message == 'admission webhook "deny.tasq.test" denied the request: bad spec'


@pytest.mark.parametrize(("policy", "want_created"), [("Fail", False), ("Ignore", True)])
def test_failure_policy_when_the_webhook_is_down(
        kubectl: Kubectl, namespace: str, register: Callable[[dict[str, Any]], None], ca: CertificateAuthority,
        policy: str, want_created: bool) -> None:
    down = "https://127.0.0.1:1/admit"  # nothing listens on port 1
    register(make_webhook_config(f"down-{policy.lower()}").webhook("down.tasq.test", down, ca.ca_bundle)
             .rule().only_namespace(namespace).failure_policy(policy).build())

    proc = kubectl("apply", "-f", "-", stdin=pod_yaml("p1", namespace), check=False)

    assert (proc.returncode == 0) == want_created
    if not want_created:
        assert ('Error from server (InternalError): error when creating "STDIN": Internal error occurred: '
                'failed calling webhook "down.tasq.test": failed to call webhook: '
                'Post "https://127.0.0.1:1/admit?timeout=10s"') in proc.stderr


def test_namespace_selector_excludes_a_namespace(
        kubectl: Kubectl, namespace: str, devcluster: DevCluster, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    kubectl("label", "namespace", namespace, "tasq.test/webhooks=off")
    server = serve(deny("everything is denied"))
    register(make_webhook_config("deny-unless-off").webhook("deny.tasq.test", server.url, ca.ca_bundle)
             .rule().namespace_selector({"matchExpressions": [
                 {"key": "tasq.test/webhooks", "operator": "NotIn", "values": ["off"]},
                 {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace, "default"]}]})
             .build())

    kubectl("apply", "-f", "-", stdin=pod_yaml("p1", namespace))
    denied = kubectl("apply", "-f", "-", stdin=pod_yaml("p-denied-webhook-test", "default"), check=False)

    assert [r["request"]["namespace"] for r in server.reviews] == ["default"]
    assert "everything is denied" in denied.stderr


def test_object_selector_and_operations_pick_the_requests(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    server = serve(deny("no updates of guarded pods"))
    register(make_webhook_config("guard-updates").webhook("guard.tasq.test", server.url, ca.ca_bundle)
             .rule(operations=["UPDATE"]).only_namespace(namespace)
             .object_selector({"matchLabels": {"guarded": "yes"}}).build())

    kubectl("apply", "-f", "-", stdin=pod_yaml("free", namespace))
    kubectl("apply", "-f", "-", stdin=pod_yaml("guarded", namespace, "{guarded: 'yes'}"))
    free = kubectl("annotate", "pod", "free", "-n", namespace, "a=b", check=False)
    guarded = kubectl("annotate", "pod", "guarded", "-n", namespace, "a=b", check=False)

    assert free.returncode == 0
    assert "no updates of guarded pods" in guarded.stderr
    assert [r["request"]["operation"] for r in server.reviews] == ["UPDATE"]


def test_status_subresource_rule_sees_only_status_writes(
        devcluster: DevCluster, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    server = serve(allow())
    register(make_webhook_config("status-only").webhook("status.tasq.test", server.url, ca.ca_bundle)
             .rule(resources=["pods/status"], operations=["*"]).only_namespace(namespace).build())
    api = devcluster.api
    pods = api.resource("v1", "pods")
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "m", "image": "x"}]}}
    devcluster.call(lambda: api.create(pods, namespace, body))
    devcluster.call(lambda: api.patch(pods, namespace, "p", "application/merge-patch+json",
                                      {"status": {"phase": "Running"}}, subresource="status"))

    assert [(r["request"]["operation"], r["request"].get("subResource")) for r in server.reviews] == [
        ("UPDATE", "status")]


@pytest.mark.parametrize("side_effects", ["None", "NoneOnDryRun"])
def test_dry_run_is_reviewed_with_dry_run_set_and_persists_nothing(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority, side_effects: str) -> None:
    server = serve(allow([{"op": "add", "path": "/metadata/labels/seen", "value": "yes"}]))
    register(make_webhook_config(f"dry-{side_effects.lower()}", mutating=True)
             .webhook("dry.tasq.test", server.url, ca.ca_bundle)
             .rule().only_namespace(namespace).side_effects(side_effects).build())

    out = kubectl("apply", "--dry-run=server", "-f", "-", "-o", "jsonpath={.metadata.labels.seen}",
                  stdin=pod_yaml("p1", namespace))

    assert out.stdout == "yes"  # the patch shows in the dry-run answer ...
    assert server.reviews[0]["request"]["dryRun"] is True
    assert kubectl("get", "pods", "-n", namespace, "-o", "name").stdout == ""  # ... and nothing is stored


def test_an_invalid_configuration_is_refused_with_every_field_error(kubectl: Kubectl) -> None:
    config = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: broken}
webhooks:
- name: broken.tasq.test
  clientConfig: {url: "http://127.0.0.1:9443/"}
  sideEffects: Some
  admissionReviewVersions: [v1]
  timeoutSeconds: 60
  rules: [{apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}]
"""
    proc = kubectl("apply", "-f", "-", stdin=config, check=False)

    assert proc.returncode != 0
    assert ('The ValidatingWebhookConfiguration "broken" is invalid: \n'
            '* webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"\n'
            "* webhooks[0].timeoutSeconds: Invalid value: 60: the timeout value must be between 1 and 30 seconds\n"
            "* webhooks[0].clientConfig.url: Invalid value: ") in proc.stderr
    # the rest of the url error (Kubernetes: `"http": 'https' is the only allowed URL scheme; desired
    # format: https://host[/path]`) is checked by tests/conformance
    assert "'https' is the only allowed URL scheme" in proc.stderr
    assert kubectl("get", "validatingwebhookconfigurations", "-o", "name").stdout.strip() == ""


def test_service_reference_is_verified_against_the_service_dns_name(
        devcluster: DevCluster, kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    server = serve(allow([{"op": "add", "path": "/metadata/labels/via", "value": "service"}]))
    devcluster.webhooks.services[("webhooks", "hook", 443)] = f"https://127.0.0.1:{server.port}"
    try:
        register(make_webhook_config("by-service", mutating=True)
                 .webhook("svc.tasq.test", ca_bundle=ca.ca_bundle,
                          service={"namespace": "webhooks", "name": "hook", "path": "/admit"})
                 .rule().only_namespace(namespace).build())
        kubectl("apply", "-f", "-", stdin=pod_yaml("p1", namespace))
    finally:
        del devcluster.webhooks.services[("webhooks", "hook", 443)]

    assert kubectl("get", "pod", "p1", "-n", namespace, "-o", "jsonpath={.metadata.labels.via}").stdout == "service"


def test_a_certificate_from_another_ca_is_refused(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None]) -> None:
    server = serve(allow())
    stranger = CertificateAuthority("someone-else")
    register(make_webhook_config("wrong-ca").webhook("tls.tasq.test", server.url, stranger.ca_bundle)
             .rule().only_namespace(namespace).build())

    proc = kubectl("apply", "-f", "-", stdin=pod_yaml("p1", namespace), check=False)

    assert 'failed calling webhook "tls.tasq.test"' in proc.stderr
    assert "certificate verify failed" in proc.stderr
    assert server.reviews == []


def test_delete_is_reviewed_with_the_old_object(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    kubectl("apply", "-f", "-", stdin=pod_yaml("keep", namespace))
    server = serve(deny("pods here are kept"))
    register(make_webhook_config("keep-pods").webhook("keep.tasq.test", server.url, ca.ca_bundle)
             .rule(operations=["DELETE"]).only_namespace(namespace).build())

    proc = kubectl("delete", "pod", "keep", "-n", namespace, check=False)

    assert 'admission webhook "keep.tasq.test" denied the request: pods here are kept' in proc.stderr
    assert kubectl("get", "pod", "keep", "-n", namespace, "-o", "name").stdout.strip() == "pod/keep"
    request = server.reviews[0]["request"]
    assert (request["operation"], request["object"], request["oldObject"]["metadata"]["name"]) == (
        "DELETE", None, "keep")
    assert request["options"]["kind"] == "DeleteOptions"


@pytest.mark.parametrize(("respond", "want_error"), [
    (deny("pods here are kept"), 'admission webhook "keep.tasq.test" denied the request: pods here are kept'),
    (allow([{"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
     'Internal error occurred: admission webhook "keep.tasq.test" attempted to modify the object, '
     "which is not supported for this operation"),
], ids=["mutating_webhook_denies_the_delete", "a_patch_on_delete_is_an_internal_error"])
def test_mutating_webhooks_review_deletes_with_the_old_object(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority, respond: Any, want_error: str) -> None:
    kubectl("apply", "-f", "-", stdin=pod_yaml("kept", namespace))
    server = serve(respond)
    register(make_webhook_config("keep-pods", mutating=True).webhook("keep.tasq.test", server.url, ca.ca_bundle)
             .rule(operations=["DELETE"]).only_namespace(namespace).build())

    proc = kubectl("delete", "pod", "kept", "-n", namespace, check=False)

    assert want_error in proc.stderr
    assert kubectl("get", "pod", "kept", "-n", namespace, "-o", "name").stdout.strip() == "pod/kept"
    request = server.reviews[0]["request"]
    assert (request["operation"], request["object"], request["oldObject"]["metadata"]["name"]) == (
        "DELETE", None, "kept")


def test_generate_name_is_resolved_after_mutating_and_before_validating_webhooks(
        kubectl: Kubectl, namespace: str, serve: Callable[..., WebhookServer],
        register: Callable[[dict[str, Any]], None], ca: CertificateAuthority) -> None:
    mutating, validating = serve(allow()), serve(allow())
    register(make_webhook_config("see-name-m", mutating=True).webhook("m.tasq.test", mutating.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())
    register(make_webhook_config("see-name-v").webhook("v.tasq.test", validating.url, ca.ca_bundle)
             .rule().only_namespace(namespace).build())

    created = kubectl("create", "-f", "-", "-o", "name", stdin=(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{generateName: gen-, namespace: {namespace}}}\n"
        "spec: {containers: [{name: main, image: busybox}]}\n")).stdout.strip()

    seen_by_mutating, seen_by_validating = mutating.reviews[0]["request"], validating.reviews[0]["request"]
    assert (seen_by_mutating["name"], seen_by_mutating["object"]["metadata"].get("name")) == ("", None)
    assert seen_by_mutating["object"]["metadata"]["generateName"] == "gen-"
    assert created == f"pod/{seen_by_validating['name']}" == f"pod/{seen_by_validating['object']['metadata']['name']}"
    assert seen_by_validating["name"].startswith("gen-")
