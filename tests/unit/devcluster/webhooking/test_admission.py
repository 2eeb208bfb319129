"""The webhook chain's pure parts: rule matching, the AdmissionReview sent, denial wording, defaults;
and its selection against an in-process API server (no webhook is reachable: calls are counted)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from devcluster.server.apiserver import AdmissionRequest, ApiServer
from devcluster.server.errors import ApiError
from devcluster.server.resources import BUILTIN_RESOURCES, ResourceType
from devcluster.webhooking.admission import (
    Webhook,
    WebhookChain,
    configuration_causes,
    denial,
    review,
    rule_matches,
)
from tests.builders.webhooks import make_webhook_config

RESOURCES = {(r.group, r.plural): r for r in BUILTIN_RESOURCES}
PODS, NODES, NAMESPACES = RESOURCES[("", "pods")], RESOURCES[("", "nodes")], RESOURCES[("", "namespaces")]
JOBS = RESOURCES[("batch", "jobs")]


def request(resource: ResourceType, operation: str = "CREATE", subresource: str = "") -> AdmissionRequest:
    obj = {"metadata": {"name": "x", "namespace": "ns"}}
    return AdmissionRequest(operation, resource, subresource, "ns", "x", obj, None, False, "uid-1")


@dataclass
class RuleCase:
    name: str
    rule: dict[str, Any]
    req: AdmissionRequest
    want: bool


def rule(resources: list[str], operations: list[str] | None = None, groups: list[str] | None = None,
         versions: list[str] | None = None, scope: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiGroups": groups or [""], "apiVersions": versions or ["v1"], "resources": resources,
                           "operations": operations or ["CREATE"]}
    if scope:
        out["scope"] = scope
    return out


RULE_CASES = [
    RuleCase("exact resource and operation", rule(["pods"]), request(PODS), True),
    RuleCase("another operation", rule(["pods"]), request(PODS, "UPDATE"), False),
    RuleCase("operation wildcard", rule(["pods"], ["*"]), request(PODS, "DELETE"), True),
    RuleCase("a main resource rule skips its subresources", rule(["pods"], ["*"]), request(PODS, "UPDATE", "status"),
             False),
    RuleCase("the subresource itself", rule(["pods/status"], ["UPDATE"]), request(PODS, "UPDATE", "status"), True),
    RuleCase("resource/* covers main and subresources", rule(["pods/*"], ["UPDATE"]),
             request(PODS, "UPDATE", "status"), True),
    RuleCase("* covers main resources only", rule(["*"], ["UPDATE"]), request(PODS, "UPDATE", "status"), False),
    RuleCase("*/* covers everything", rule(["*/*"], ["UPDATE"]), request(PODS, "UPDATE", "status"), True),
    RuleCase("*/status", rule(["*/status"], ["UPDATE"]), request(PODS, "UPDATE", "status"), True),
    RuleCase("another group", rule(["jobs"]), request(JOBS), False),
    RuleCase("the group named", rule(["jobs"], groups=["batch"]), request(JOBS), True),
    RuleCase("another version", rule(["pods"], versions=["v2"]), request(PODS), False),
    RuleCase("Namespaced scope skips nodes", rule(["*"], scope="Namespaced"), request(NODES), False),
    RuleCase("Cluster scope takes nodes", rule(["*"], scope="Cluster"), request(NODES), True),
    RuleCase("Namespaces count as cluster-scoped", rule(["*"], scope="Cluster"), request(NAMESPACES), True),
    RuleCase("Cluster scope skips pods", rule(["*"], scope="Cluster"), request(PODS), False),
]


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda c: c.name)
def test_rule_matches(case: RuleCase) -> None:
    assert rule_matches(case.rule, case.req) is case.want


@dataclass
class DenialCase:
    name: str
    status: dict[str, Any]
    want_code: int
    want_reason: str
    want_message: str
    want_causes: list[str] = field(default_factory=list)


@pytest.mark.parametrize("case", [
    DenialCase("message only", {"message": "no"}, 403, "", 'admission webhook "w" denied the request: no'),
    DenialCase("reason stands in for the message", {"reason": "Forbidden"}, 403, "Forbidden",
               'admission webhook "w" denied the request: Forbidden'),
    DenialCase("nothing", {}, 403, "", 'admission webhook "w" denied the request without explanation'),
    DenialCase("a code below 400 becomes 403", {"code": 201, "message": "m"}, 403, "",
               'admission webhook "w" denied the request: m'),
    DenialCase("code, reason and causes kept",
               {"code": 422, "reason": "Invalid", "message": "bad",
                "details": {"causes": [{"field": "spec.x", "reason": "FieldValueInvalid", "message": "too big"}]}},
               422, "Invalid", 'admission webhook "w" denied the request: bad', ["spec.x: too big"]),
], ids=lambda c: c.name)
def test_denial(case: DenialCase) -> None:
    error = denial("w", case.status)
    assert (error.code, error.reason, error.message) == (case.want_code, case.want_reason, case.want_message)
    assert [str(c) for c in error.causes] == case.want_causes


def test_review_is_an_admission_review_v1_request() -> None:
    sent = review(request(PODS, "UPDATE", "status"))
    assert (sent["apiVersion"], sent["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    req = sent["request"]
    assert req["uid"] == "uid-1"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (req["subResource"], req["namespace"], req["operation"], req["dryRun"]) == ("status", "ns", "UPDATE", False)
    assert req["options"]["kind"] == "UpdateOptions"
    assert "namespace" not in review(request(NODES))["request"]


@pytest.mark.parametrize(("given", "want_timeout", "want_policy"), [
    ({}, 10, "Fail"), ({"timeoutSeconds": 45}, 30, "Fail"), ({"timeoutSeconds": 0, "failurePolicy": "Ignore"}, 1,
                                                             "Ignore"),
])
def test_webhook_defaults(given: dict[str, Any], want_timeout: int, want_policy: str) -> None:
    hook = Webhook.from_dict("cfg", {"name": "w", **given})
    assert (hook.timeout, hook.failure_policy, hook.side_effects) == (want_timeout, want_policy, "Unknown")


@dataclass
class ConfigCase:
    name: str
    webhooks: list[dict[str, Any]]
    want: list[str]
    mutating: bool = False


def hook(**fields: Any) -> dict[str, Any]:
    """A valid v1 webhook, with `fields` replacing (None: removing) its defaults."""
    out: dict[str, Any] = {"name": "w.tasq.test", "clientConfig": {"url": "https://127.0.0.1:9443/"},
                           "sideEffects": "None", "admissionReviewVersions": ["v1"],
                           "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                                      "operations": ["CREATE"]}]}
    out.update(fields)
    return {k: v for k, v in out.items() if v is not None}


CONFIG_CASES = [
    ConfigCase("a valid webhook has no errors", [hook()], []),
    ConfigCase("sideEffects is required and only None/NoneOnDryRun exist in v1",
               [hook(sideEffects=None), hook(name="x.tasq.test", sideEffects="Some")],
               ["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                'webhooks[1].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"']),
    ConfigCase("admissionReviewVersions is required",
               [hook(admissionReviewVersions=None)],
               ["webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"]),
    ConfigCase("names: three segments, unique within the configuration",
               [hook(name="short"), hook(name="w.tasq.test"), hook(name="w.tasq.test")],
               ['webhooks[0].name: Invalid value: "short": should be a domain with at least three segments '
                "separated by dots", 'webhooks[2].name: Duplicate value: "w.tasq.test"']),
    ConfigCase("policies and timeout out of range",
               [hook(failurePolicy="Sometimes", timeoutSeconds=31, matchPolicy="Fuzzy")],
               ['webhooks[0].failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"',
                'webhooks[0].matchPolicy: Unsupported value: "Fuzzy": supported values: "Exact", "Equivalent"',
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"]),
    ConfigCase("reinvocationPolicy is checked on mutating webhooks only",
               [hook(reinvocationPolicy="Always")],
               ['webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"'],
               mutating=True),
    ConfigCase("client config: exactly one of url and service, https only",
               [hook(clientConfig={}), hook(name="b.tasq.test", clientConfig={"url": "http://127.0.0.1/"}),
                hook(name="c.tasq.test", clientConfig={"service": {"name": "s"}})],
               ["webhooks[0].clientConfig: Required value: exactly one of url or service is required",
                'webhooks[1].clientConfig.url: Invalid value: "http": '
                "'https' is the only allowed URL scheme; desired format: https://host[/path]",
                "webhooks[2].clientConfig.service.namespace: Required value"]),
    ConfigCase("rules: required lists, known operations and scope",
               [hook(rules=[{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "PATCH"],
                             "scope": "Everywhere"}])],
               ["webhooks[0].rules[0].resources: Required value",
                'webhooks[0].rules[0].operations[1]: Unsupported value: "PATCH": supported values: "*", '
                '"CONNECT", "CREATE", "DELETE", "UPDATE"',
                'webhooks[0].rules[0].scope: Unsupported value: "Everywhere": supported values: "*", "Cluster", '
                '"Namespaced"']),
]


@pytest.mark.parametrize("case", CONFIG_CASES, ids=lambda c: c.name)
def test_configuration_causes(case: ConfigCase) -> None:
    causes = configuration_causes({"webhooks": case.webhooks}, case.mutating)
    assert [str(cause) for cause in causes] == case.want


DOWN = "https://127.0.0.1:1/admit"


async def test_selection_by_namespace_labels_and_exemption_of_webhook_configurations() -> None:
    api = ApiServer()
    chain = WebhookChain(api).install()
    namespaces = api.resource("v1", "namespaces")
    await api.create(namespaces, "", {"metadata": {"name": "on", "labels": {"hooks": "on"}}})
    await api.create(namespaces, "", {"metadata": {"name": "off"}})
    validating = api.resource("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations")
    # Fail policy on everything, webhook down: a matching request is refused.
    await api.create(validating, "", make_webhook_config("all").webhook("down.tasq.test", DOWN).rule(
        ["*/*"], ["*"], ["*"], ["*"]).namespace_selector({"matchLabels": {"hooks": "on"}}).build())
    configmaps = api.resource("v1", "configmaps")

    await api.create(configmaps, "off", {"metadata": {"name": "c"}})
    with pytest.raises(ApiError) as err:
        await api.create(configmaps, "on", {"metadata": {"name": "c"}})
    assert err.value.code == 500 and 'failed calling webhook "down.tasq.test"' in err.value.message
    # cluster-scoped objects ignore namespaceSelector; webhook configurations are never sent to webhooks
    with pytest.raises(ApiError):
        await api.create(api.resource("v1", "nodes"), "", {"metadata": {"name": "n"}})
    await api.delete(validating, "", "all")
    assert chain.calls == 2
    await chain.aclose()
