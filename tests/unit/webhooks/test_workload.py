"""Workload validation: pod sets, counts, templates, topology requests, and update immutability."""

from __future__ import annotations

import pytest

from tests.unit.webhooks.manifests import RACK, Case, cases, make_workload, pod_template
from webhooks.validation import validate, validate_update

PS0 = "spec.podSets[0]"
PS1 = "spec.podSets[1]"
SET_PS0 = "spec.podSets.0"


@cases(
    Case("one pod set", make_workload()),
    Case("launcher and workers with a required rack",
         make_workload().pod_set("worker", 4, topologyRequest={"required": RACK})),
    Case("preferred auto", make_workload(pod_sets=False).pod_set("w", 2, topologyRequest={"preferred": "auto"})),
    Case("unconstrained", make_workload(pod_sets=False).pod_set("w", 2, topologyRequest={"unconstrained": True})),
    Case("a zero count (Kueue allows it)", make_workload(pod_sets=False).pod_set("w", 0)),
    Case("minCount equal to count", make_workload(pod_sets=False).pod_set("w", 3, minCount=3)),
    Case("eight pod sets", make_workload(pod_sets=False).set(
        "spec.podSets", [{"name": f"p{i}", "count": 1, "template": pod_template()} for i in range(8)])),
    Case("no pod sets", make_workload(pod_sets=False), want_errors=("spec.podSets",)),
    Case("nine pod sets", make_workload(pod_sets=False).set(
        "spec.podSets", [{"name": f"p{i}", "count": 1, "template": pod_template()} for i in range(9)]),
         want_errors=("spec.podSets",)),
    Case("two pod sets named alike", make_workload().pod_set("main"), want_errors=(f"{PS1}.name",)),
    Case("a pod set name with uppercase", make_workload(pod_sets=False).pod_set("Main"),
         want_errors=(f"{PS0}.name",)),
    Case("a pod set name with a dot (a label, not a subdomain)", make_workload(pod_sets=False).pod_set("a.b"),
         want_errors=(f"{PS0}.name",)),
    Case("a negative count", make_workload().set(f"{SET_PS0}.count", -1), want_errors=(f"{PS0}.count",)),
    Case("a count that is a string", make_workload().set(f"{SET_PS0}.count", "2"),
         want_errors=(f"{PS0}.count",)),
    Case("a missing count", make_workload().drop(f"{SET_PS0}.count"), want_errors=(f"{PS0}.count",)),
    Case("minCount above count", make_workload(pod_sets=False).pod_set("w", 2, minCount=3),
         want_errors=(f"{PS0}.minCount",)),
    Case("minCount zero", make_workload(pod_sets=False).pod_set("w", 2, minCount=0),
         want_errors=(f"{PS0}.minCount",)),
    Case("required and preferred together", make_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"required": RACK, "preferred": RACK}), want_errors=(f"{PS0}.topologyRequest",)),
    Case("required and unconstrained together", make_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"required": RACK, "unconstrained": True}),
         want_errors=(f"{PS0}.topologyRequest",)),
    Case("a required level that is not a label name", make_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"required": "rack!"}), want_errors=(f"{PS0}.topologyRequest.required",)),
    Case("required auto", make_workload(pod_sets=False).pod_set("w", 2, topologyRequest={"required": "auto"}),
         want_errors=(f"{PS0}.topologyRequest.required",)),
    Case("unconstrained as a string", make_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"unconstrained": "yes"}), want_errors=(f"{PS0}.topologyRequest.unconstrained",)),
    Case("a bad podIndexLabel", make_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"podIndexLabel": "a//b"}), want_errors=(f"{PS0}.topologyRequest.podIndexLabel",)),
    Case("a template without containers", make_workload().set(f"{SET_PS0}.template.spec.containers", []),
         want_errors=(f"{PS0}.template.spec.containers",)),
    Case("a template without spec", make_workload().set(f"{SET_PS0}.template", {}),
         want_errors=(f"{PS0}.template.spec",)),
    Case("no template", make_workload().drop(f"{SET_PS0}.template"), want_errors=(f"{PS0}.template",)),
    Case("two containers named alike", make_workload().set(f"{SET_PS0}.template.spec.initContainers",
                                                           [{"name": "main", "image": "x"}]),
         want_errors=(f"{PS0}.template.spec.containers[0].name",)),
    Case("a negative cpu request", make_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.requests", {"cpu": "-1"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.requests[cpu]",)),
    Case("a malformed memory limit", make_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.limits", {"memory": "1ki"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.limits[memory]",)),
    Case("a nodeSelector value with a space", make_workload().set(
        f"{SET_PS0}.template.spec.nodeSelector", {"gpu": "h 100"}),
         want_errors=(f"{PS0}.template.spec.nodeSelector[gpu]",)),
    Case("a queue name with uppercase", make_workload().set("spec.queueName", "Training"),
         want_errors=("spec.queueName",)),
    Case("a priority that is not an integer", make_workload().set("spec.priority", "high"),
         want_errors=("spec.priority",)),
    Case("no spec", make_workload().drop("spec"), want_errors=("spec",)),
    Case("no name", make_workload().drop("metadata.name"), want_errors=("metadata.name",)),
    Case("a generateName is enough", make_workload().drop("metadata.name").set("metadata.generateName", "wl-")),
)
def test_workload(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_every_error_is_reported_at_once() -> None:
    wl = make_workload(pod_sets=False).pod_set("A", -1).pod_set("b", 2, minCount=5, topologyRequest={
        "required": RACK, "preferred": RACK})
    assert [str(e) for e in validate(wl.build())] == [
        'spec.podSets[0].name: Invalid value: "A": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. 'my-name' or '123-abc')",
        "spec.podSets[0].count: Invalid value: -1: must be greater than or equal to 0",
        "spec.podSets[1].minCount: Invalid value: 5: must be less than or equal to count (2)",
        'spec.podSets[1].topologyRequest: Invalid value: {"preferred": "cloud.provider.com/topology-rack", '
        '"required": "cloud.provider.com/topology-rack"}: must specify at most one of "preferred", '
        '"required", "unconstrained"',
    ]


@pytest.mark.parametrize(("reserved", "change", "want_errors"), [
    pytest.param(False, ("spec.podSets.0.count", 5), [], id="pending pod sets may change"),
    pytest.param(True, ("spec.podSets.0.count", 5), ["spec.podSets"], id="admitted pod sets are frozen"),
    pytest.param(True, ("spec.queueName", "other"), ["spec.queueName"], id="admitted queue name is frozen"),
    pytest.param(True, ("spec.priority", 7), [], id="admitted priority may change"),
    pytest.param(True, ("status.admission", {"clusterQueue": "team-a"}), [],
                 id="status changes are not spec changes"),
])
def test_workload_update(reserved: bool, change: tuple[str, object], want_errors: list[str]) -> None:
    old = make_workload().admitted() if reserved else make_workload()
    new = (make_workload().admitted() if reserved else make_workload()).set(*change)
    assert [e.path for e in validate_update(old.build(), new.build())] == want_errors


def test_an_admission_in_status_also_freezes_pod_sets() -> None:
    old = make_workload().set("status.admission", {"clusterQueue": "team-a"})
    new = make_workload().set("spec.podSets.0.count", 9)
    assert [e.path for e in validate_update(old.build(), new.build())] == ["spec.podSets"]
