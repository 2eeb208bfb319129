"""The Mutating/ValidatingWebhookConfigurations that route API requests to tasq's handlers.

Pure: `webhook_configurations(client)` builds both objects for a local URL with its caBundle
(`local_client`, `tasq dev` / `tasq run --local-webhooks`) or for the in-cluster Service
(`service_client`, the static config/webhook/ YAML a unit test keeps equal to this). Every webhook
fails closed but is scoped tightly: never kube-system or tasq's own namespace, pods only with
tasq's label or the queue label, an integrated kind's objects only with the queue label. The
integrated kinds' routes come from the registry (controller.core.jobs.integrations: each adapter's
webhook rules); the topology gate on admitted pods and tasq's own kinds are listed here. `crd_conversion(client)` is the CRDs'
`spec.conversion` pointing at the same server's /convert (config/crd's patch is kept equal to
`in_cluster_conversion`). Called by controller.kube.webhooking and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.api import constants as c
from controller.core.jobs.integrations import ALL_INTEGRATIONS

ADMISSION_API_VERSION: Final = "admissionregistration.k8s.io/v1"
TIMEOUT_SECONDS: Final = 10
EXCLUDED_NAMESPACES: Final = ("kube-system", c.TASQ_NAMESPACE)
CERT_MANAGER_INJECT_CA: Final = "cert-manager.io/inject-ca-from"
CERTIFICATE_NAME: Final = "tasq-serving-cert"
CONVERSION_PATH: Final = "convert"
"""The path of the CRD conversion webhook on the same server (ConversionReview v1)."""
CONVERSION_REVIEW_VERSIONS: Final = ("v1",)


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How kube-apiserver reaches the server: a base URL, or a Service; plus the CA bundle."""

    url: str = ""
    service: tuple[str, str, int] | None = None  # (namespace, name, port)
    ca_bundle: str = ""

    def for_path(self, handler_id: str) -> dict[str, Any]:
        """The clientConfig of the webhook served at /<handler_id>."""
        out: dict[str, Any]
        if self.service is not None:
            namespace, name, port = self.service
            out = {"service": {"namespace": namespace, "name": name, "port": port, "path": f"/{handler_id}"}}
        else:
            out = {"url": f"{self.url.rstrip('/')}/{handler_id}"}
        if self.ca_bundle:
            out["caBundle"] = self.ca_bundle
        return out


def local_client(url: str, ca_bundle: str) -> ClientConfig:
    """A server on this machine (https://127.0.0.1:PORT), trusted through `ca_bundle` (base64 PEM)."""
    return ClientConfig(url=url, ca_bundle=ca_bundle)


def service_client(namespace: str = c.TASQ_NAMESPACE, name: str = c.WEBHOOK_SERVICE,
                   port: int = c.WEBHOOK_SERVICE_PORT, ca_bundle: str = "") -> ClientConfig:
    """The in-cluster Service in front of the operator (cert-manager injects the caBundle)."""
    return ClientConfig(service=(namespace, name, port), ca_bundle=ca_bundle)


@dataclass(frozen=True, slots=True)
class Route:
    """One webhook: its handler id (= URL path), what it matches, and its object selector."""

    handler_id: str
    group: str
    versions: tuple[str, ...]
    plural: str
    operations: tuple[str, ...]
    object_selector: Mapping[str, Any] | None = None
    with_status: bool = False  # the status subresource too (Kueue validates Workload status writes)

    @property
    def resources(self) -> list[str]:
        return [self.plural, f"{self.plural}/status"] if self.with_status else [self.plural]


_QUEUED: Final = {"matchExpressions": [{"key": c.LABEL_QUEUE_NAME, "operator": "Exists"}]}
_TASQ_PODS: Final = {"matchLabels": {c.LABEL_TAS: c.LABEL_TAS_VALUE}}
_CREATE: Final = ("CREATE",)
_CREATE_UPDATE: Final = ("CREATE", "UPDATE")
# Every served version, v1beta2 first: the validators convert what they are sent to v1beta2, so a
# v1beta1 request is checked whether or not the API server converted it (matchPolicy Equivalent).
_KUEUE_VERSIONS: Final = (c.VERSION_V1BETA2, c.VERSION_V1BETA1)



def integration_routes(mutating: bool) -> tuple[Route, ...]:
    """The routes of every integrated kind's mutating (or validating) webhook rules, for its
    queued objects only, in the registry's order."""
    return tuple(Route(rule.handler_id, job.gvk.group, (job.gvk.version,), job.gvk.plural, rule.operations, _QUEUED)
                 for job in ALL_INTEGRATIONS for rule in job.webhooks if rule.action.mutating == mutating)


TOPOLOGY_GATE_ROUTE: Final = Route(c.WEBHOOK_MUTATE_POD, "", ("v1",), "pods", _CREATE, _TASQ_PODS)
"""The pods of a pod set admitted with a topology assignment (any integration's, by tasq's label)
get the topology gate if their template did not carry it."""
MUTATING_ROUTES: Final = (*integration_routes(True), TOPOLOGY_GATE_ROUTE)
VALIDATING_ROUTES: Final = (
    *integration_routes(False),
    Route(c.WEBHOOK_VALIDATE_TOPOLOGY, c.GROUP, (*_KUEUE_VERSIONS, c.VERSION_V1ALPHA1), c.PLURAL_TOPOLOGIES,
          _CREATE_UPDATE),
    Route(c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, c.GROUP, _KUEUE_VERSIONS, c.PLURAL_RESOURCE_FLAVORS, _CREATE_UPDATE),
    Route(c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, c.GROUP, _KUEUE_VERSIONS, c.PLURAL_CLUSTER_QUEUES, _CREATE_UPDATE),
    Route(c.WEBHOOK_VALIDATE_LOCAL_QUEUE, c.GROUP, _KUEUE_VERSIONS, c.PLURAL_LOCAL_QUEUES, _CREATE_UPDATE),
    Route(c.WEBHOOK_VALIDATE_WORKLOAD, c.GROUP, _KUEUE_VERSIONS, c.PLURAL_WORKLOADS, _CREATE_UPDATE, with_status=True),
    # Kueue validates Cohorts in a webhook; a WorkloadPriorityClass only by its CRD schema.
    Route(c.WEBHOOK_VALIDATE_COHORT, c.GROUP, (c.VERSION_V1BETA2,), c.PLURAL_COHORTS, _CREATE_UPDATE),
)


def namespace_selector(excluded: tuple[str, ...] = EXCLUDED_NAMESPACES) -> dict[str, Any]:
    """Every namespace but these, by the name label kube-apiserver puts on each Namespace."""
    return {"matchExpressions": [{"key": c.LABEL_NAMESPACE_NAME, "operator": "NotIn", "values": list(excluded)}]}


def webhook(route: Route, client: ClientConfig, excluded: tuple[str, ...] = EXCLUDED_NAMESPACES) -> dict[str, Any]:
    """One webhook entry: fail closed, no side effects, 10 s, AdmissionReview v1 only."""
    out: dict[str, Any] = {
        "name": f"{route.handler_id}.{c.WEBHOOK_NAME_DOMAIN}",
        "admissionReviewVersions": ["v1"],
        "clientConfig": client.for_path(route.handler_id),
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "matchPolicy": "Equivalent",
        "namespaceSelector": namespace_selector(excluded),
        "rules": [{"apiGroups": [route.group], "apiVersions": list(route.versions), "resources": route.resources,
                   "operations": list(route.operations), "scope": "*"}],
    }
    if route.object_selector is not None:
        out["objectSelector"] = dict(route.object_selector)
    return out


def webhook_configurations(client: ClientConfig, excluded: tuple[str, ...] = EXCLUDED_NAMESPACES,
                           inject_ca_from: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """(MutatingWebhookConfiguration, ValidatingWebhookConfiguration) for this client config;
    `inject_ca_from` (namespace/certificate) asks cert-manager to fill in the caBundle."""
    def configuration(kind: str, name: str, routes: tuple[Route, ...]) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name}
        if inject_ca_from:
            metadata["annotations"] = {CERT_MANAGER_INJECT_CA: inject_ca_from}
        return {"apiVersion": ADMISSION_API_VERSION, "kind": kind, "metadata": metadata,
                "webhooks": [webhook(r, client, excluded) for r in routes]}
    return (configuration("MutatingWebhookConfiguration", c.MUTATING_WEBHOOK_CONFIGURATION, MUTATING_ROUTES),
            configuration("ValidatingWebhookConfiguration", c.VALIDATING_WEBHOOK_CONFIGURATION, VALIDATING_ROUTES))


def in_cluster_configurations() -> tuple[dict[str, Any], dict[str, Any]]:
    """What config/webhook/manifests.yaml holds: the Service client, caBundle from cert-manager."""
    return webhook_configurations(service_client(), inject_ca_from=f"{c.TASQ_NAMESPACE}/{CERTIFICATE_NAME}")


def crd_conversion(client: ClientConfig) -> dict[str, Any]:
    """A CRD's `spec.conversion` sending every conversion of tasq's kinds to the server's /convert
    (the one place it is built: local registration and config/crd's patch both use it)."""
    return {"strategy": "Webhook", "webhook": {"clientConfig": client.for_path(CONVERSION_PATH),
                                               "conversionReviewVersions": list(CONVERSION_REVIEW_VERSIONS)}}


def in_cluster_conversion() -> dict[str, Any]:
    """What config/crd's patch sets on every CRD: the Service client, caBundle from cert-manager."""
    return crd_conversion(service_client())
