"""Webhook configurations: the static YAML equals what the code builds, and every webhook is scoped
so an outage cannot block kube-system, tasq's own namespace or pods tasq does not manage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from controller.api.crds import KINDS
from controller.api.selectors import label_selector_matches
from controller.core.jobs.framework import ComposableJob, GenericJob
from controller.core.jobs.integrations import ALL_INTEGRATIONS
from webhooks.configurations import (
    EXCLUDED_NAMESPACES,
    MUTATING_ROUTES,
    VALIDATING_ROUTES,
    Route,
    in_cluster_configurations,
    local_client,
    webhook_configurations,
)
from webhooks.handlers import handler_table

REPO = Path(__file__).resolve().parents[3]
STATIC = REPO / "config" / "webhook" / "manifests.yaml"


def all_webhooks(configurations: tuple[dict[str, Any], dict[str, Any]]) -> list[dict[str, Any]]:
    return [w for cfg in configurations for w in cfg["webhooks"]]


def test_static_yaml_matches_the_code() -> None:
    """config/webhook/manifests.yaml is generated from webhooks/configurations.py; regenerate it with
    yaml.safe_dump_all(in_cluster_configurations(), sort_keys=False) when this fails."""
    assert list(yaml.safe_load_all(STATIC.read_text())) == list(in_cluster_configurations())


def test_the_static_service_is_the_one_the_configurations_call() -> None:
    service = yaml.safe_load((REPO / "config" / "webhook" / "service.yaml").read_text())
    assert (service["metadata"]["namespace"], service["metadata"]["name"]) == (c.TASQ_NAMESPACE, c.WEBHOOK_SERVICE)
    assert service["spec"]["ports"] == [{"name": "webhook", "port": c.WEBHOOK_SERVICE_PORT,
                                         "targetPort": c.WEBHOOK_CONTAINER_PORT, "protocol": "TCP"}]
    for hook in all_webhooks(in_cluster_configurations()):
        ref = hook["clientConfig"]["service"]
        assert (ref["namespace"], ref["name"], ref["port"]) == (c.TASQ_NAMESPACE, c.WEBHOOK_SERVICE,
                                                                c.WEBHOOK_SERVICE_PORT)


def test_certmanager_certificate_names_the_service_and_the_injected_ca() -> None:
    cert = yaml.safe_load((REPO / "config" / "certmanager" / "certificate.yaml").read_text())
    assert f"{c.WEBHOOK_SERVICE}.{c.TASQ_NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["secretName"] == c.WEBHOOK_CERT_SECRET
    for cfg in in_cluster_configurations():
        assert cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == \
            f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"


@pytest.mark.parametrize("directory", ["webhook", "certmanager"])
def test_kustomizations_list_every_file(directory: str) -> None:
    folder = REPO / "config" / directory
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in folder.glob("*.yaml")
                                                        if p.name != "kustomization.yaml")


def test_a_local_url_config_carries_the_ca_and_one_path_per_handler() -> None:
    hooks = all_webhooks(webhook_configurations(local_client("https://127.0.0.1:9443/", "Q0E=")))
    for hook in hooks:
        handler_id = hook["name"].removesuffix(f".{c.WEBHOOK_NAME_DOMAIN}")
        assert hook["clientConfig"] == {"url": f"https://127.0.0.1:9443/{handler_id}", "caBundle": "Q0E="}
    assert len({h["name"] for h in hooks}) == len(hooks) == 13


@pytest.mark.parametrize("configurations", [
    in_cluster_configurations(), webhook_configurations(local_client("https://127.0.0.1:1", "x"))],
    ids=["service", "local"])
def test_every_webhook_fails_closed_quickly_without_side_effects(configurations: Any) -> None:
    for hook in all_webhooks(configurations):
        assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"],
                hook["admissionReviewVersions"]) == ("Fail", "None", 10, ["v1"])


@pytest.mark.parametrize(("namespace", "called"), [
    ("kube-system", False), (c.TASQ_NAMESPACE, False), ("team-a", True), ("default", True)])
def test_namespace_selector_spares_system_namespaces(namespace: str, called: bool) -> None:
    assert set(EXCLUDED_NAMESPACES) == {"kube-system", c.TASQ_NAMESPACE}
    labels = {c.LABEL_NAMESPACE_NAME: namespace}
    for hook in all_webhooks(in_cluster_configurations()):
        assert label_selector_matches(hook["namespaceSelector"], labels) is called


def _hook(handler_id: str) -> dict[str, Any]:
    return next(h for h in all_webhooks(in_cluster_configurations()) if h["name"].startswith(handler_id + "."))


@pytest.mark.parametrize(("labels", "called"), [
    ({c.LABEL_TAS: c.LABEL_TAS_VALUE}, True),
    ({c.LABEL_TAS: "false"}, False),
    ({}, False),
    ({c.LABEL_QUEUE_NAME: "q"}, False),  # a queued pod that admission did not write into stays untouched
])
def test_the_pod_webhook_sees_only_pods_labelled_by_tasq(labels: dict[str, str], called: bool) -> None:
    hook = _hook(c.WEBHOOK_MUTATE_POD)
    assert label_selector_matches(hook["objectSelector"], labels) is called
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                              "operations": ["CREATE"], "scope": "*"}]


@pytest.mark.parametrize("handler_id", [c.WEBHOOK_MUTATE_QUEUED_POD, c.WEBHOOK_VALIDATE_QUEUED_POD])
@pytest.mark.parametrize(("labels", "called"), [
    ({c.LABEL_QUEUE_NAME: "q"}, True),
    ({c.LABEL_QUEUE_NAME: "q", c.LABEL_POD_GROUP_NAME: "g"}, True),
    ({c.LABEL_POD_GROUP_NAME: "g"}, False),  # a group label alone does not ask for tasq
    ({c.LABEL_COSCHEDULING_NAME: "g", c.LABEL_COSCHEDULING_MIN_AVAILABLE: "2"}, False),  # the plugin's pods alone
    ({}, False),
])
def test_queued_pod_webhooks_see_only_pods_naming_a_queue(handler_id: str, labels: dict[str, str],
                                                         called: bool) -> None:
    # an outage of tasq never blocks a pod that does not ask for it
    hook = _hook(handler_id)
    assert label_selector_matches(hook["objectSelector"], labels) is called
    assert hook["rules"][0]["resources"] == ["pods"]  # never pods/status: kubelets' writes never wait on tasq


@pytest.mark.parametrize("handler_id", [c.WEBHOOK_MUTATE_JOB, c.WEBHOOK_VALIDATE_JOB])
@pytest.mark.parametrize(("labels", "called"), [({c.LABEL_QUEUE_NAME: "q"}, True), ({c.LABEL_QUEUE_NAME: ""}, True),
                                                ({}, False), ({"app": "x"}, False)])
def test_job_webhooks_see_only_queued_jobs(handler_id: str, labels: dict[str, str], called: bool) -> None:
    assert label_selector_matches(_hook(handler_id)["objectSelector"], labels) is called


def test_tasq_kinds_are_validated_on_create_and_update_in_every_served_version() -> None:
    rules = {r["resources"][0]: r for h in in_cluster_configurations()[1]["webhooks"] for r in h["rules"]}
    for spec in KINDS:  # every version the CRD serves reaches the validator (v1beta2 first)
        if spec.kind == c.KIND_WORKLOAD_PRIORITY_CLASS:
            assert spec.plural not in rules  # as in Kueue, its CRD schema alone validates it
            continue
        assert rules[spec.plural]["apiVersions"] == list(spec.served_versions)
    for plural in (c.PLURAL_TOPOLOGIES, c.PLURAL_RESOURCE_FLAVORS, c.PLURAL_CLUSTER_QUEUES,
                   c.PLURAL_LOCAL_QUEUES, c.PLURAL_WORKLOADS, "jobs"):
        assert rules[plural]["operations"] == ["CREATE", "UPDATE"]
    assert rules[c.PLURAL_WORKLOADS]["resources"] == [c.PLURAL_WORKLOADS, f"{c.PLURAL_WORKLOADS}/status"]


@pytest.mark.parametrize("job", ALL_INTEGRATIONS, ids=lambda job: job.gvk.kind)
def test_every_integrated_kind_has_a_mutating_and_a_validating_route(job: GenericJob | ComposableJob[Any]) -> None:
    """Adding a kind to the registry without its webhook routes would let its objects run unsuspended
    and unchecked: each integrated kind is defaulted on CREATE and validated on CREATE and UPDATE."""
    def served(routes: tuple[Route, ...], operations: set[str]) -> bool:
        return any((r.group, r.plural) == (job.gvk.group, job.gvk.plural) and job.gvk.version in r.versions
                   and operations <= set(r.operations) for r in routes)
    assert served(MUTATING_ROUTES, {"CREATE"})
    assert served(VALIDATING_ROUTES, {"CREATE", "UPDATE"})


def test_every_route_has_its_handler_registered_and_every_handler_its_route() -> None:
    """The configurations and the handler registrations are both built from the registry's
    webhook rules (plus the topology gate and tasq's kinds): kube-apiserver never calls a path
    nothing answers, and no handler waits for a call that never comes."""
    registered = {h.path for h in handler_table()}
    routed = {r.handler_id for r in (*MUTATING_ROUTES, *VALIDATING_ROUTES)}
    assert registered == routed
    for job in ALL_INTEGRATIONS:
        assert {rule.handler_id for rule in job.webhooks} <= routed, job.gvk.kind
