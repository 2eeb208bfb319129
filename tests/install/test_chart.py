"""charts/tasq: `helm lint --strict`, and what `helm template` renders for a matrix of values: every
object valid against Kubernetes 1.37's schemas (strict: unknown fields refused), the same CRDs (each
converting through the webhook Service), RBAC rules, webhooks and manager flags as config/default, the flags `tasq run` accepts, a PDB and anti-affinity
only with more than one replica, a rollout that never leaves the webhooks without a ready replica.

The tests that run helm need the real helm (hack/helm builds it from its Go module), so they are in
the real-cluster suite (`--cluster=real`); the ones that read the chart's files run everywhere.
The server-side dry-run and `helm install` are in tests/e2e/test_helm_chart.py.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import subprocess
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # the package ships no annotations
import pytest
import yaml

from controller.api import constants as c
from controller.api.configuration import RequeuingStrategy, WaitForPodsReady, parse_configuration
from controller.api.features import DEFAULTS, parse_feature_gates
from controller.commands import run
from controller.core.admission.pending_workloads import VISIBILITY_GROUP, VISIBILITY_VERSION
from tests.install.test_config import CERT_MANAGER, KUBERNETES_VERSION, rendered
from webhooks.certificates import write_serving_files

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "tasq"
HELM_SCRIPT = REPO / "hack" / "helm"
MONITORING = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
NAMESPACE = "tasq-system"


def _ca_bundle() -> str:
    """A real CA certificate, base64 PEM: kube-apiserver parses a CRD conversion's caBundle."""
    with tempfile.TemporaryDirectory() as directory:
        return base64.b64encode(write_serving_files(Path(directory), datetime.now(UTC)).cert_pem).decode()


CA_BUNDLE = _ca_bundle()

real = pytest.mark.real


@functools.cache
def helm_binary() -> str:
    """The real helm, built by hack/helm into the realcluster cache on first use."""
    proc = subprocess.run([str(HELM_SCRIPT), "--path"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stderr}"
    return proc


def values_flags(values: dict[str, Any]) -> list[str]:
    return ["--set-json", json.dumps(values)] if values else []


def render(values: dict[str, Any] | None = None, *, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The chart's objects for `values` (a JSON merge over values.yaml), as `helm template` renders
    them (the CRDs included: they are templates)."""
    proc = helm("template", "tasq", str(CHART), "-n", namespace, *values_flags(values or {}))
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in objects if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return found


def manager(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(container)


SELF_PROVIDED = {"certificates": {"certManager": {"enabled": False}, "caBundle": CA_BUNDLE}}
MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "a self-provided certificate": SELF_PROVIDED,
    "without webhooks": {"webhooks": {"enabled": False}},
    "without metrics": {"metrics": {"enabled": False}, "visibility": {"apiService": {"enabled": False}}},
    "one replica": {"replicaCount": 1},
    "three replicas, a digest, json logs, gates": {
        "replicaCount": 3, "image": {"repository": "registry.example/tasq", "digest": "sha256:" + "a" * 64},
        "logging": {"level": "debug", "format": "json"},
        "featureGates": {"TASBalancedPlacement": True, "TASMultiLayerTopology": False}},
    "monitoring and a ClusterIssuer": {
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
                    "dashboard": {"enabled": True}},
        "certificates": {"certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "corp-ca"}}}},
}


# ---------------------------------------------------------------- without helm


def test_the_chart_version_follows_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["version"] == chart["appVersion"] == version


def test_the_values_schema_offers_exactly_the_feature_gates_tasq_knows() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    gates = schema["properties"]["featureGates"]["propertyNames"]["enum"]
    assert sorted(gates) == sorted(DEFAULTS)


def test_the_values_schema_offers_the_log_flags_tasq_run_has() -> None:
    logging = json.loads((CHART / "values.schema.json").read_text())["properties"]["logging"]["properties"]
    assert tuple(logging["level"]["enum"]) == run.LOG_LEVELS and tuple(logging["format"]["enum"]) == run.LOG_FORMATS


def test_the_chart_reads_the_crds_the_rbac_rules_and_the_webhooks_from_the_repository() -> None:
    files = CHART / "files"
    assert (files / "crds").resolve() == (REPO / "crds").resolve()
    assert not (CHART / "crds").exists()  # helm would install those raw, without their conversion
    assert (files / "manager-role.yaml").resolve() == (REPO / "config" / "rbac" / "role.yaml").resolve()
    assert (files / "webhook-configurations.yaml").resolve() == (REPO / "config" / "webhook" / "manifests.yaml").resolve()


# ---------------------------------------------------------------- with helm


@real
def test_helm_lint_passes_strictly() -> None:
    out = helm("lint", "--strict", str(CHART), *values_flags(SELF_PROVIDED)).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    assert "[ERROR]" not in out and "[WARNING]" not in out


@real
@pytest.mark.parametrize("values", list(MATRIX.values()), ids=list(MATRIX))
def test_every_rendered_object_validates_against_kubernetes_1_37(values: dict[str, Any]) -> None:
    objects = render(values)
    assert objects
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CERT_MANAGER | MONITORING:
            continue  # their schemas ship with cert-manager and the Prometheus Operator
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@real
@pytest.mark.parametrize("values", list(MATRIX.values()), ids=list(MATRIX))
def test_the_manager_args_are_tasq_runs_flags_and_match_the_mounts_and_ports(values: dict[str, Any]) -> None:
    objects = render(values)
    container = manager(objects)
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run", *container["args"]])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    # the webhook server always runs: the CRDs convert their versions through it
    assert ports["webhook"] == args.webhook_port and str(args.webhook_cert_dir) in mounts
    one(objects, "Service", "tasq-webhook-service")
    crds = [d for d in objects if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == len(list((REPO / "crds").glob("*.yaml")))
    assert all(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"] == "/convert" for crd in crds)
    configs = [d for d in objects if "WebhookConfiguration" in d["kind"]]
    assert len(configs) == (2 if values.get("webhooks", {}).get("enabled", True) else 0)
    if values.get("metrics", {}).get("enabled", True):
        assert ports["metrics"] == args.metrics_port and str(args.metrics_cert_dir) in mounts
    else:
        assert args.metrics_port == -1 and "metrics" not in ports
    assert ports["probes"] == args.probe_port
    gates = values.get("featureGates", {})
    assert parse_feature_gates(args.feature_gates).overrides == gates
    assert 0 < args.retry_period < args.renew_deadline < args.lease_duration


@real
def test_the_defaults_install_what_config_default_installs() -> None:
    chart, bundle = render(), rendered("default")

    def ids(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in objects if d["kind"] != "Namespace"}
    assert ids(chart) == ids(bundle)
    for kind in ("ClusterRole", "Role"):
        for obj in (d for d in bundle if d["kind"] == kind):
            assert one(chart, kind, obj["metadata"]["name"])["rules"] == obj["rules"]
    for crd in (d for d in bundle if d["kind"] == "CustomResourceDefinition"):
        ours_crd = one(chart, "CustomResourceDefinition", crd["metadata"]["name"])
        assert ours_crd["spec"] == crd["spec"]  # conversion through the webhook Service included
        assert crd["metadata"]["annotations"].items() <= ours_crd["metadata"]["annotations"].items()
        assert ours_crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        theirs = one(bundle, kind)
        ours = one(chart, kind, theirs["metadata"]["name"])
        assert ours["webhooks"] == theirs["webhooks"]
        assert ours["metadata"]["annotations"] == theirs["metadata"]["annotations"]
    ours, theirs = manager(chart), manager(bundle)
    assert set(theirs["args"]) <= set(ours["args"])
    for key in ("ports", "livenessProbe", "readinessProbe", "securityContext", "resources", "lifecycle"):
        assert ours[key] == theirs[key], key
    assert one(chart, "Deployment")["spec"]["strategy"] == one(bundle, "Deployment")["spec"]["strategy"]
    assert one(chart, "Certificate")["spec"]["dnsNames"] == one(bundle, "Certificate")["spec"]["dnsNames"]


@real
@pytest.mark.parametrize(("values", "want"), [
    pytest.param({}, None, id="off by default"),
    pytest.param({"waitForPodsReady": {"enable": True, "timeout": "90s", "blockAdmission": False,
                                       "requeuingStrategy": {"backoffLimitCount": 3, "timestamp": "Creation"}}},
                 WaitForPodsReady(timeout_s=90.0, recovery_timeout_s=90.0, block_admission=False,
                                  requeuing_strategy=RequeuingStrategy(timestamp="Creation", backoff_limit_count=3)),
                 id="on, with Kueue's defaults for the rest"),
])
def test_wait_for_pods_ready_reaches_tasq_through_the_mounted_configmap(values: dict[str, Any],
                                                                        want: WaitForPodsReady | None) -> None:
    objects = render(values)
    container = manager(objects)
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers(dest="command"))
    config = parser.parse_args(["run", *container["args"]]).config
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(config.parent))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = one(objects, "ConfigMap", volume["configMap"]["name"])
    assert parse_configuration(configmap["data"][config.name]).wait_for_pods_ready == want
    # a changed Configuration rolls the pods (tasq reads it at start)
    checksum = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    assert checksum != one(render({"waitForPodsReady": {"enable": not values}}), "Deployment")[
        "spec"]["template"]["metadata"]["annotations"]["checksum/config"]


@real
@pytest.mark.parametrize(("replicas", "spread"), [(1, False), (2, True), (3, True)])
def test_a_pdb_and_anti_affinity_come_with_more_than_one_replica(replicas: int, spread: bool) -> None:
    objects = render({"replicaCount": replicas})
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == replicas
    # every rollout adds the new pod before an old one goes: the webhooks always have a ready replica
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = deployment["spec"]["template"]["spec"]
    assert ("affinity" in pod) is spread
    assert any(d["kind"] == "PodDisruptionBudget" for d in objects) is spread


@real
def test_a_release_in_another_namespace_names_it_everywhere() -> None:
    objects = render(namespace="batch-admission")
    for obj in objects:
        if "namespace" in obj["metadata"] and obj["metadata"]["name"] != AUTH_READER_BINDING:
            assert obj["metadata"]["namespace"] == "batch-admission"
    assert one(objects, "RoleBinding", AUTH_READER_BINDING)["metadata"]["namespace"] == "kube-system"
    assert one(objects, "APIService")["spec"]["service"]["namespace"] == "batch-admission"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in one(objects, kind)["webhooks"]:
            assert hook["clientConfig"]["service"]["namespace"] == "batch-admission"
            (expression,) = hook["namespaceSelector"]["matchExpressions"]
            assert expression["values"] == ["kube-system", "batch-admission"]
    assert "tasq-webhook-service.batch-admission.svc" in one(objects, "Certificate")["spec"]["dnsNames"]
    for crd in (d for d in objects if d["kind"] == "CustomResourceDefinition"):
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"] == "batch-admission"
        assert crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "batch-admission/tasq-serving-cert"
    for binding in (d for d in objects if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["subjects"][0]["namespace"] == "batch-admission"


@real
def test_a_self_provided_certificate_puts_its_ca_in_every_webhook_and_crd_and_asks_for_no_cert_manager() -> None:
    objects = render(SELF_PROVIDED)
    assert not [d for d in objects if (d["apiVersion"], d["kind"]) in CERT_MANAGER]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = one(objects, kind)
        assert "annotations" not in config["metadata"]
        assert {hook["clientConfig"]["caBundle"] for hook in config["webhooks"]} == {CA_BUNDLE}
    for crd in (d for d in objects if d["kind"] == "CustomResourceDefinition"):
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == CA_BUNDLE
        assert "cert-manager.io/inject-ca-from" not in crd["metadata"]["annotations"]
    apiservice = one(objects, "APIService")
    assert apiservice["spec"]["caBundle"] == CA_BUNDLE and "annotations" not in apiservice["metadata"]


@real
@pytest.mark.parametrize(("values", "words"), [
    pytest.param({"certificates": {"certManager": {"enabled": False}}}, "set certificates.caBundle",
                 id="no cert-manager and no CA"),
    pytest.param({"fairSharing": {"enable": True}}, "'fairSharing' not allowed",
                 id="a Kueue setting tasq does not have"),
    pytest.param({"waitForPodsReady": {"enable": True, "timeout": "5 minutes"}}, "timeout",
                 id="a timeout that is not a duration"),
    pytest.param({"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Admission"}}}, "timestamp",
                 id="an unknown requeuing timestamp"),
    pytest.param({"featureGates": {"ElasticJobsViaWorkloadSlices": True}}, "ElasticJobsViaWorkloadSlices",
                 id="a gate tasq does not have"),
    pytest.param({"logging": {"format": "yaml"}}, "format", id="an unknown log format"),
    pytest.param({"metrics": {"enabled": False}}, "visibility.apiService.enabled needs metrics.enabled",
                 id="the APIService without the metrics port it is served on"),
    pytest.param({"visibility": {"apiService": {"enable": True}}}, "'enable' not allowed",
                 id="a misspelt APIService flag"),
])
def test_values_that_cannot_work_are_refused_naming_the_value(values: dict[str, Any], words: str) -> None:
    proc = helm("template", "tasq", str(CHART), *values_flags(values), check=False)
    assert proc.returncode != 0 and words in proc.stderr, proc.stderr


@real
def test_monitoring_renders_the_rules_and_dashboard_of_config_prometheus() -> None:
    objects = render(MATRIX["monitoring and a ClusterIssuer"])
    rules = yaml.safe_load((REPO / "config" / "prometheus" / "rules.yaml").read_text())
    assert one(objects, "PrometheusRule")["spec"] == rules["spec"]
    dashboard = one(objects, "ConfigMap", "tasq-grafana-dashboard")
    assert json.loads(dashboard["data"]["tasq.json"]) == json.loads(
        (REPO / "config" / "prometheus" / "dashboard.json").read_text())
    monitor = one(objects, "ServiceMonitor")
    service = one(objects, "Service", "tasq-controller-manager-metrics")
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert one(objects, "Certificate")["spec"]["issuerRef"] == {"kind": "ClusterIssuer", "name": "corp-ca"}
    assert not [d for d in objects if d["kind"] == "Issuer"]
    assert c.METRICS_READER_ROLE in {d["metadata"]["name"] for d in objects if d["kind"] == "ClusterRole"}


AUTH_READER_BINDING = "tasq-extension-apiserver-authentication-reader"


@real
@pytest.mark.parametrize(("values", "port"), [
    pytest.param({}, 8443, id="defaults"),
    pytest.param({"metrics": {"port": 9444}}, 9444, id="another metrics port"),
])
def test_the_apiservice_points_at_the_port_the_visibility_api_is_served_on(values: dict[str, Any],
                                                                          port: int) -> None:
    """The aggregator calls the Service and port the APIService names: that port must lead to the
    container port `--metrics-port` serves, with the CA cert-manager injects; tasq may read the
    request-header ConfigMap in kube-system."""
    objects = render(values)
    apiservice = one(objects, "APIService", "v1beta1.visibility.kueue.x-k8s.io")
    spec = apiservice["spec"]
    assert (spec["group"], spec["version"]) == (VISIBILITY_GROUP, VISIBILITY_VERSION)
    assert apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/tasq-serving-cert"
    service = one(objects, "Service", spec["service"]["name"])
    assert spec["service"]["namespace"] == service["metadata"]["namespace"] == NAMESPACE
    (service_port,) = [p for p in service["spec"]["ports"] if p["port"] == spec["service"]["port"] == port]
    container = manager(objects)
    (target,) = [p for p in container["ports"] if p["name"] == service_port["targetPort"]]
    assert f"--metrics-port={target['containerPort']}" in container["args"]
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in one(objects, "Certificate")["spec"]["dnsNames"]
    binding = one(objects, "RoleBinding", AUTH_READER_BINDING)
    assert binding["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": container_account(objects),
                                    "namespace": NAMESPACE}]


def container_account(objects: list[dict[str, Any]]) -> str:
    return str(one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"])


@real
def test_without_the_apiservice_nothing_of_it_is_installed() -> None:
    objects = render({"visibility": {"apiService": {"enabled": False}}})
    assert not [d for d in objects if d["kind"] == "APIService" or d["metadata"]["name"] == AUTH_READER_BINDING]
