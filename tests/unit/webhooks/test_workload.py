"""Workload validation: pod sets, counts, templates, topology requests, and update immutability."""

from __future__ import annotations

import pytest

from tests.builders.kueue import WorkloadBuilder, pod_template
from tests.unit.webhooks.manifests import RACK, Case, cases, valid_workload
from webhooks.validation import validate, validate_update

PS0 = "spec.podSets[0]"
PS1 = "spec.podSets[1]"
SET_PS0 = "spec.podSets.0"


@cases(
    Case("one pod set", valid_workload()),
    Case("launcher and workers with a required rack",
         valid_workload().pod_set("worker", 4, topologyRequest={"required": RACK})),
    Case("preferred auto", valid_workload(pod_sets=False).pod_set("w", 2, topologyRequest={"preferred": "auto"})),
    Case("unconstrained", valid_workload(pod_sets=False).pod_set("w", 2, topologyRequest={"unconstrained": True})),
    Case("a zero count (Kueue allows it)", valid_workload(pod_sets=False).pod_set("w", 0)),
    Case("minCount equal to count", valid_workload(pod_sets=False).pod_set("w", 3, minCount=3)),
    Case("eight pod sets", valid_workload(pod_sets=False).set(
        "spec.podSets", [{"name": f"p{i}", "count": 1, "template": pod_template()} for i in range(8)])),
    Case("no pod sets", valid_workload(pod_sets=False), want_errors=("spec.podSets",)),
    Case("nine pod sets", valid_workload(pod_sets=False).set(
        "spec.podSets", [{"name": f"p{i}", "count": 1, "template": pod_template()} for i in range(9)]),
         want_errors=("spec.podSets",)),
    Case("two pod sets named alike", valid_workload().pod_set("main"), want_errors=(f"{PS1}.name",)),
    Case("a pod set name with uppercase", valid_workload(pod_sets=False).pod_set("Main"),
         want_errors=(f"{PS0}.name",)),
    Case("a pod set name with a dot (a label, not a subdomain)", valid_workload(pod_sets=False).pod_set("a.b"),
         want_errors=(f"{PS0}.name",)),
    Case("a negative count", valid_workload().set(f"{SET_PS0}.count", -1), want_errors=(f"{PS0}.count",)),
    Case("a count that is a string", valid_workload().set(f"{SET_PS0}.count", "2"),
         want_errors=(f"{PS0}.count",)),
    Case("a missing count is the CRD default 1", valid_workload().drop(f"{SET_PS0}.count")),
    Case("a missing name is the CRD default main", valid_workload().drop(f"{SET_PS0}.name")),
    Case("a defaulted name still clashes with an explicit main",
         valid_workload().drop(f"{SET_PS0}.name").pod_set("main"), want_errors=(f"{PS1}.name",)),
    Case("two pod sets with minCount", valid_workload(pod_sets=False).pod_set("a", 2, minCount=1)
         .pod_set("b", 2, minCount=1), want_errors=("spec.podSets",)),
    Case("a request for the reserved pods resource", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.requests", {"pods": "1"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.requests[pods]",)),
    Case("a gpu request without its vendor domain", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.limits", {"gpu": "1"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.limits[gpu]",)),
    Case("an extended resource in the kubernetes.io domain", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.requests", {"kubernetes.io/gpu": "1"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.requests[kubernetes.io/gpu]",)),
    Case("hugepages and ephemeral storage are standard", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.requests",
        {"hugepages-2Mi": "1Gi", "ephemeral-storage": "10Gi", "example.com/fpga": "1"})),
    Case("a request above its limit", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources", {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1"}}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.requests[cpu]",)),
    Case("a request equal to its limit in other units", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources", {"requests": {"memory": "1024Mi"},
                                                            "limits": {"memory": "1Gi"}})),
    Case("minCount above count", valid_workload(pod_sets=False).pod_set("w", 2, minCount=3),
         want_errors=(f"{PS0}.minCount",)),
    Case("minCount zero", valid_workload(pod_sets=False).pod_set("w", 2, minCount=0),
         want_errors=(f"{PS0}.minCount",)),
    Case("required and preferred together", valid_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"required": RACK, "preferred": RACK}), want_errors=(f"{PS0}.topologyRequest",)),
    Case("required and unconstrained together", valid_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"required": RACK, "unconstrained": True}),
         want_errors=(f"{PS0}.topologyRequest",)),
    Case("a required level that is not a label name", valid_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"required": "rack!"}), want_errors=(f"{PS0}.topologyRequest.required",)),
    Case("required auto", valid_workload(pod_sets=False).pod_set("w", 2, topologyRequest={"required": "auto"}),
         want_errors=(f"{PS0}.topologyRequest.required",)),
    Case("unconstrained as a string", valid_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"unconstrained": "yes"}), want_errors=(f"{PS0}.topologyRequest.unconstrained",)),
    Case("a bad podIndexLabel", valid_workload(pod_sets=False).pod_set(
        "w", 2, topologyRequest={"podIndexLabel": "a//b"}), want_errors=(f"{PS0}.topologyRequest.podIndexLabel",)),
    Case("a template without containers", valid_workload().set(f"{SET_PS0}.template.spec.containers", []),
         want_errors=(f"{PS0}.template.spec.containers",)),
    Case("a template without spec", valid_workload().set(f"{SET_PS0}.template", {}),
         want_errors=(f"{PS0}.template.spec",)),
    Case("no template", valid_workload().drop(f"{SET_PS0}.template"), want_errors=(f"{PS0}.template",)),
    Case("two containers named alike", valid_workload().set(f"{SET_PS0}.template.spec.initContainers",
                                                           [{"name": "main", "image": "x"}]),
         want_errors=(f"{PS0}.template.spec.containers[0].name",)),
    Case("a negative cpu request", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.requests", {"cpu": "-1"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.requests[cpu]",)),
    Case("a malformed memory limit", valid_workload().set(
        f"{SET_PS0}.template.spec.containers.0.resources.limits", {"memory": "1ki"}),
         want_errors=(f"{PS0}.template.spec.containers[0].resources.limits[memory]",)),
    Case("a nodeSelector value with a space", valid_workload().set(
        f"{SET_PS0}.template.spec.nodeSelector", {"gpu": "h 100"}),
         want_errors=(f"{PS0}.template.spec.nodeSelector[gpu]",)),
    Case("a queue name with uppercase", valid_workload().set("spec.queueName", "Training"),
         want_errors=("spec.queueName",)),
    Case("a priority that is not an integer", valid_workload().set("spec.priority", "high"),
         want_errors=("spec.priority",)),
    Case("no spec", valid_workload().drop("spec"), want_errors=("spec",)),
    Case("no name", valid_workload().drop("metadata.name"), want_errors=("metadata.name",)),
    Case("a generateName is enough", valid_workload().drop("metadata.name").set("metadata.generateName", "wl-")),
)
def test_workload(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_every_error_is_reported_at_once() -> None:
    wl = valid_workload(pod_sets=False).pod_set("A", -1).pod_set("b", 2, minCount=5, topologyRequest={
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


def test_request_above_limit_names_the_limit() -> None:
    wl = valid_workload().set(f"{SET_PS0}.template.spec.containers.0.resources",
                             {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1"}})
    assert [str(e) for e in validate(wl.build())] == [
        f'{PS0}.template.spec.containers[0].resources.requests[cpu]: Invalid value: "1500m": must be less '
        'than or equal to cpu limit of "1"']


# -- status ------------------------------------------------------------------------------------
# The admissions below place pods in this topology (block > rack > host):
#
#   b1 ─┬─ r1 ─┬─ n1
#       │      └─ n2
#       └─ r2 ─── n3
BLOCK_KEY, RACK_KEY, HOST_KEY = "cloud.provider.com/topology-block", RACK, "kubernetes.io/hostname"
R1 = {BLOCK_KEY: "b1", RACK_KEY: "r1"}
R2 = {BLOCK_KEY: "b1", RACK_KEY: "r2"}
ADM = "status.admission"
PSA0 = f"{ADM}.podSetAssignments[0]"
PSA1 = f"{ADM}.podSetAssignments[1]"
SLICES0 = f"{PSA0}.topologyAssignment.slices"
PSA0_DOTTED = f"{ADM}.podSetAssignments.0"


@cases(
    Case("an admission split over two racks", valid_workload().admitted().assignment(
        "main", 2, (R1, 1), (R2, 1), flavors={"cpu": "h100"}, resourceUsage={"cpu": "2"})),
    Case("slices down to single hosts", valid_workload().assignment(
        "main", 2, ({**R1, HOST_KEY: "n1"}, 1), ({**R1, HOST_KEY: "n2"}, 1))),
    Case("without a count the slices hold the pod set's count", valid_workload().assignment("main", None, (R1, 2))),
    Case("a partial admission of minCount pods", valid_workload(pod_sets=False).pod_set("w", 4, minCount=2)
         .assignment("w", 2, (R1, 2))),
    Case("an assignment for a pod set the workload lacks", valid_workload().assignment("workers", 2, (R1, 2)),
         want_errors=(f"{PSA0}.name",)),
    Case("one pod set assigned twice", valid_workload().assignment("main", 2).assignment("main", 2),
         want_errors=(f"{PSA1}.name",)),
    Case("more pods assigned than the pod set has", valid_workload().assignment("main", 3),
         want_errors=(f"{PSA0}.count",)),
    Case("slices holding fewer pods than assigned", valid_workload().assignment("main", 2, (R1, 1)),
         want_errors=(SLICES0,)),
    Case("slices holding more pods than assigned", valid_workload().assignment("main", 2, (R1, 2), (R2, 1)),
         want_errors=(SLICES0,)),
    Case("the KEP's form: slices naming different levels", valid_workload().assignment(
        "main", 2, (R1, 1), ({**R2, HOST_KEY: "n3"}, 1), legacy=True), want_errors=(f"{SLICES0}[1].nodeLabels",)),
    Case("the KEP's form: one domain in two slices", valid_workload().assignment(
        "main", 2, (R1, 1), (R1, 1), legacy=True), want_errors=(f"{SLICES0}[1].nodeLabels",)),
    Case("the KEP's form: a slice without labels", valid_workload().assignment("main", 2, ({}, 2), legacy=True),
         want_errors=(f"{SLICES0}[0].nodeLabels",)),
    Case("the KEP's form: an empty slice", valid_workload().assignment("main", 2, (R1, 2), (R2, 0), legacy=True),
         want_errors=(f"{SLICES0}[1].count",)),
    Case("the KEP's form is still read", valid_workload().assignment("main", 2, (R1, 1), (R2, 1), legacy=True)),
    Case("one domain twice", valid_workload().assignment("main", 2, (R1, 1), (R1, 1)),
         want_errors=(SLICES0,)),
    Case("a domain of no pod", valid_workload().assignment("main", 2, (R1, 2), (R2, 0)),
         want_errors=(f"{SLICES0}[0].podCounts.individual[1]",)),
    Case("a level value that is not a label value", valid_workload().assignment(
        "main", 2, ({BLOCK_KEY: "b 1"}, 2)), want_errors=(f"{SLICES0}[0].valuesPerLevel[0].universal",)),
    Case("a root that makes no label value", valid_workload().assignment(
        "main", 2, ({BLOCK_KEY: "b1"}, 1), ({BLOCK_KEY: "b-"}, 1)),
         want_errors=(f"{SLICES0}[0].valuesPerLevel[0].individual.roots[1]",)),
    Case("roots fewer than the slice's domains", valid_workload().assignment(
        "main", 2, (R1, 1), (R2, 1)).set(f"{PSA0_DOTTED}.topologyAssignment.slices.0.domainCount", 3),
         want_errors=(f"{PSA0}.topologyAssignment",)),
    Case("a level named twice", valid_workload().assignment("main", 2, (R1, 2)).set(
        f"{PSA0_DOTTED}.topologyAssignment.levels", [BLOCK_KEY, BLOCK_KEY]),
         want_errors=(f"{PSA0}.topologyAssignment.levels[1]",)),
    Case("a flavor name that is not a DNS name", valid_workload().assignment("main", 2, flavors={"cpu": "H100"}),
         want_errors=(f"{PSA0}.flavors[cpu]",)),
    Case("a usage that is not a multiple of the count", valid_workload().assignment(
        "main", 2, resourceUsage={"cpu": "3m", "memory": "1Gi"}), want_errors=(f"{PSA0}.resourceUsage[cpu]",)),
    Case("an admission without a ClusterQueue", valid_workload().set(ADM, {"podSetAssignments": []}),
         want_errors=(f"{ADM}.clusterQueue",)),
    Case("a condition missing its reason and time", valid_workload().set(
        "status.conditions", [{"type": "Admitted", "status": "True", "message": ""}]),
         want_errors=("status.conditions[0].reason", "status.conditions[0].lastTransitionTime")),
    Case("a condition status outside True/False/Unknown", valid_workload().admitted().set(
        "status.conditions.0.status", "Yes"), want_errors=("status.conditions[0].status",)),
    Case("a condition reason that is not PascalCase-like", valid_workload().admitted().set(
        "status.conditions.0.reason", "quota reserved"), want_errors=("status.conditions[0].reason",)),
    Case("a condition type twice", valid_workload().set("status.conditions", [
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}] * 2), want_errors=("status.conditions[1].type",)),
)
def test_workload_status(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_slice_count_mismatch_is_quantitative() -> None:
    errs = validate(valid_workload().assignment("main", 2, (R1, 1)).build())
    assert [str(e) for e in errs] == [
        f'{SLICES0}: Invalid value: "1 pod(s)": the slices must hold exactly the 2 assigned pod(s)']


def test_the_admission_cycle_output_validates() -> None:
    """A status as tasq writes it (sorted slices, canonical usage, both conditions) passes."""
    wl = valid_workload(pod_sets=False).pod_set("main", 8).admitted().assignment(
        "main", 8, (R1, 6), (R2, 2), flavors={"nvidia.com/gpu": "h100"}, resourceUsage={"nvidia.com/gpu": "64"})
    assert validate(wl.build()) == []


@pytest.mark.parametrize(("old_count", "new_count", "want_errors"), [
    pytest.param(None, 2, [], id="setting an admission"),
    pytest.param(2, None, [], id="clearing an admission"),
    pytest.param(2, 2, [], id="an unchanged admission"),
    pytest.param(2, 1, [ADM], id="editing an admission in place is refused"),
])
def test_admission_is_set_or_cleared_never_edited(old_count: int | None, new_count: int | None,
                                                  want_errors: list[str]) -> None:
    def workload(count: int | None) -> WorkloadBuilder:
        wl = valid_workload()
        return wl if count is None else wl.assignment("main", count)
    assert [e.path for e in validate_update(workload(old_count).build(),
                                            workload(new_count).build())] == want_errors


def test_a_replacement_may_rewrite_only_the_topology_assignments_of_an_admission() -> None:
    # A failed node's replacement (Kueue's TASFailedNodeReplacement) rewrites where the pods go.
    def admitted(*slices: tuple[dict[str, str], int], flavor: str = "h100") -> WorkloadBuilder:
        return valid_workload(pod_sets=False).pod_set("main", 8).admitted().assignment(
            "main", 8, *slices, flavors={"nvidia.com/gpu": flavor}, resourceUsage={"nvidia.com/gpu": "64"})
    assert validate_update(admitted((R1, 6), (R2, 2)).build(), admitted((R1, 8)).build()) == []
    assert [e.path for e in validate_update(admitted((R1, 8)).build(),
                                            admitted((R1, 8), flavor="a100").build())] == [ADM]


@pytest.mark.parametrize(("reserved", "change", "want_errors"), [
    pytest.param(False, ("spec.podSets.0.count", 5), [], id="pending pod sets may change"),
    pytest.param(True, ("spec.podSets.0.count", 5), ["spec.podSets"], id="admitted pod sets are frozen"),
    pytest.param(True, ("spec.queueName", "other"), ["spec.queueName"], id="admitted queue name is frozen"),
    pytest.param(True, ("spec.priority", 7), [], id="admitted priority may change"),
    pytest.param(True, ("status.admission", {"clusterQueue": "team-a", "podSetAssignments": [
        {"name": "main", "count": 2}]}), [], id="status changes are not spec changes"),
])
def test_workload_update(reserved: bool, change: tuple[str, object], want_errors: list[str]) -> None:
    old = valid_workload().admitted() if reserved else valid_workload()
    new = (valid_workload().admitted() if reserved else valid_workload()).set(*change)
    assert [e.path for e in validate_update(old.build(), new.build())] == want_errors


def test_an_admission_in_status_also_freezes_pod_sets() -> None:
    old = valid_workload().set("status.admission", {"clusterQueue": "team-a"})
    new = valid_workload().set("spec.podSets.0.count", 9)
    assert [e.path for e in validate_update(old.build(), new.build())] == ["spec.podSets"]
