"""config/default renders with the real kubectl, and every object it renders is valid.

Core kinds are checked with kubernetes-validate against Kubernetes 1.37's schemas in strict mode
(unknown fields refused); tasq's kinds against the generated CRDs; cert-manager's two kinds are
the only others allowed.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]  # the package ships no annotations
import pytest
import yaml

from controller.api import constants as c
from controller.api.crds import crd_json_schema
from controller.core.admission.pending_workloads import VISIBILITY_GROUP, VISIBILITY_VERSION
from controller.core.request_headers import CONFIG_MAP_NAMESPACE
from webhooks.configurations import CERT_MANAGER_INJECT_CA, CERTIFICATE_NAME, in_cluster_conversion

REPO = Path(__file__).resolve().parents[2]
KUBECTL = Path(sys.executable).parent / "kubectl"
KUBERNETES_VERSION = "1.37.0"
CERT_MANAGER = {("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")}


@functools.cache
def rendered(base: str) -> list[dict[str, Any]]:
    proc = subprocess.run([str(KUBECTL), "kustomize", str(REPO / "config" / base)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _crd_schemas() -> dict[str, dict[str, Any]]:
    crds = [d for p in sorted((REPO / "crds").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


def _ids(base: str) -> list[str]:
    return [f"{d['kind']}/{d['metadata']['name']}" for d in rendered(base)]


@pytest.mark.parametrize("base", ["default", "crd", "rbac", "manager", "webhook", "certmanager", "prometheus",
                                  "visibility"])
def test_every_base_renders(base: str) -> None:
    assert rendered(base)


def test_default_holds_the_whole_install() -> None:
    kinds = sorted({d["kind"] for d in rendered("default")})
    assert kinds == sorted({"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                            "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service",
                            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Issuer",
                            "Certificate", "PodDisruptionBudget", "ConfigMap", "APIService"})
    namespaced = [d for d in rendered("default") if d["kind"] not in {
        "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"}]
    elsewhere = {d["metadata"]["name"] for d in namespaced if d["metadata"]["namespace"] != c.TASQ_NAMESPACE}
    assert elsewhere == {"tasq-extension-apiserver-authentication-reader"}  # kube-system, as it must


@pytest.mark.parametrize("obj", rendered("default"), ids=_ids("default"))
def test_every_rendered_object_validates(obj: dict[str, Any]) -> None:
    if (obj["apiVersion"], obj["kind"]) in CERT_MANAGER:
        return  # not a Kubernetes or tasq kind: its schema ships with cert-manager
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_samples_validate_against_the_crds_and_kubernetes() -> None:
    schemas = _crd_schemas()
    for path in sorted((REPO / "config" / "samples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            group, _, version = doc["apiVersion"].rpartition("/")
            if group == c.GROUP:
                schema = crd_json_schema(schemas[doc["kind"]], version, reject_unknown=True)
                errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
                assert errors == [], f"{path.name}: {errors}"
            else:
                kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_manager_is_hardened() -> None:
    deployment = next(d for d in rendered("default") if d["kind"] == "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {"requests", "limits"} <= set(container["resources"])
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["serviceAccountName"] == "tasq-controller-manager"


def test_a_rollout_or_a_drain_always_leaves_a_ready_replica_on_another_node() -> None:
    """Two replicas; a rollout adds before it removes; a PDB keeps one through voluntary disruptions;
    anti-affinity spreads them over nodes; a stopping pod still answers while it leaves the Service."""
    objects = rendered("default")
    deployment = next(d for d in objects if d["kind"] == "Deployment")
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == c.LABEL_HOSTNAME
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (pdb,) = [d for d in objects if d["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (container,) = pod["containers"]
    assert 0 < container["lifecycle"]["preStop"]["sleep"]["seconds"] < pod["terminationGracePeriodSeconds"]


def test_the_manager_args_are_tasq_runs_flags() -> None:
    import argparse

    from controller.commands import run

    deployment = next(d for d in rendered("default") if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run", *container["args"]])
    assert args.webhook_cert_dir == Path("/tmp/k8s-webhook-server/serving-certs")
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[str(args.webhook_cert_dir)] == "webhook-cert"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"webhook": args.webhook_port, "metrics": args.metrics_port, "probes": args.probe_port}
    assert args.metrics_port != args.probe_port and not args.metrics_insecure
    assert container["livenessProbe"]["httpGet"]["port"] == container["readinessProbe"]["httpGet"]["port"] == "probes"
    assert "scheme" not in container["livenessProbe"]["httpGet"]  # the probes are plain HTTP
    metrics = next(d for d in rendered("default") if d["kind"] == "Service" and "metrics" in d["metadata"]["name"])
    assert metrics["spec"]["ports"] == [{"name": "https", "port": args.metrics_port, "targetPort": "metrics",
                                         "protocol": "TCP"}]
    service = next(d for d in rendered("default") if d["kind"] == "Service" and "webhook" in d["metadata"]["name"])
    assert service["spec"]["ports"][0]["targetPort"] == args.webhook_port


def test_the_manager_reads_the_configuration_its_configmap_mounts() -> None:
    import argparse

    from controller.api.configuration import parse_configuration
    from controller.commands import run

    deployment = next(d for d in rendered("default") if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    parser = argparse.ArgumentParser()
    run.register(parser.add_subparsers(dest="command"))
    config = parser.parse_args(["run", *container["args"]]).config
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(config.parent))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = next(d for d in rendered("default") if d["kind"] == "ConfigMap"
                     and d["metadata"]["name"] == volume["configMap"]["name"])
    parsed = parse_configuration(configmap["data"][config.name])
    assert parsed.wait_for_pods_ready is None  # off until the operator turns it on


def test_the_metrics_certificate_names_the_metrics_service_the_monitor_verifies() -> None:
    certificate = next(d for d in rendered("default") if d["kind"] == "Certificate")
    service = next(d for d in rendered("default") if d["kind"] == "Service" and "metrics" in d["metadata"]["name"])
    monitor = next(d for d in rendered("prometheus") if d["kind"] == "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["tlsConfig"]["serverName"] in certificate["spec"]["dnsNames"]
    assert endpoint["tlsConfig"]["serverName"] == f"{service['metadata']['name']}.{c.TASQ_NAMESPACE}.svc"
    assert endpoint["tlsConfig"]["ca"]["secret"]["name"] == certificate["spec"]["secretName"]


def test_every_crd_converts_through_the_webhook_service_with_the_injected_ca() -> None:
    """config/crd's patch is what webhooks.configurations says (one place builds the conversion), and
    the CA comes from the same cert-manager Certificate as the admission webhooks'."""
    crds = [d for d in rendered("default") if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == len(list((REPO / "crds").glob("*.yaml")))
    for crd in crds:
        assert crd["spec"]["conversion"] == in_cluster_conversion(), crd["metadata"]["name"]
        assert crd["metadata"]["annotations"][CERT_MANAGER_INJECT_CA] == f"{c.TASQ_NAMESPACE}/{CERTIFICATE_NAME}"
    service = next(d for d in rendered("default") if d["kind"] == "Service" and d["metadata"]["name"] == c.WEBHOOK_SERVICE)
    assert service["metadata"]["namespace"] == crds[0]["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"]


def test_the_apiservice_reaches_the_visibility_handlers_on_the_metrics_service() -> None:
    """The aggregator calls the APIService's Service and port, which must lead to the container port
    `--metrics-port` serves (where controller.kube.visibility answers), with the CA of the serving
    certificate, which must name that Service; tasq may read the request-header ConfigMap."""
    objects = rendered("default")
    (apiservice,) = [d for d in objects if d["kind"] == "APIService"]
    spec = apiservice["spec"]
    assert apiservice["metadata"]["name"] == f"{spec['version']}.{spec['group']}"
    assert (spec["group"], spec["version"]) == (VISIBILITY_GROUP, VISIBILITY_VERSION)
    assert apiservice["metadata"]["annotations"][CERT_MANAGER_INJECT_CA] == f"{c.TASQ_NAMESPACE}/{CERTIFICATE_NAME}"
    assert "insecureSkipTLSVerify" not in spec
    ref = spec["service"]
    service = next(d for d in objects if d["kind"] == "Service" and d["metadata"]["name"] == ref["name"])
    assert service["metadata"]["namespace"] == ref["namespace"]
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]]
    deployment = next(d for d in objects if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (target,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    assert f"--metrics-port={target['containerPort']}" in container["args"]
    certificate = next(d for d in objects if d["kind"] == "Certificate")
    assert f"{ref['name']}.{ref['namespace']}.svc" in certificate["spec"]["dnsNames"]
    binding = next(d for d in objects if d["metadata"]["name"] == "tasq-extension-apiserver-authentication-reader")
    assert binding["metadata"]["namespace"] == CONFIG_MAP_NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "extension-apiserver-authentication-reader"}
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": deployment["metadata"]["namespace"]}]
