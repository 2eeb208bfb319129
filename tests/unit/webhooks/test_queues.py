"""ClusterQueue and LocalQueue validation: resource groups, flavors, quotas, cohort rules, enums."""

from __future__ import annotations

import pytest

from controller.api import constants as c
from tests.builders.kueue import ClusterQueueBuilder
from tests.unit.webhooks.manifests import (
    Case,
    UpdateCase,
    cases,
    valid_cluster_queue,
    valid_local_queue,
)
from webhooks.validation import validate, validate_update

RG0 = "spec.resourceGroups[0]"
RG1 = "spec.resourceGroups[1]"
F0 = f"{RG0}.flavors[0]"
# The same places as dotted paths for Manifest.set/drop.
SET_RG0 = "spec.resourceGroups.0"
SET_F0 = f"{SET_RG0}.flavors.0"


def gpu_group() -> ClusterQueueBuilder:
    """The default cpu/memory group plus a second group for GPUs with two flavors."""
    return (valid_cluster_queue().group("nvidia.com/gpu")
            .flavor("h100-gpu", {"nvidia.com/gpu": "64"}).flavor("a100-gpu", {"nvidia.com/gpu": "32"}))


@cases(
    Case("one group with one flavor", valid_cluster_queue()),
    Case("two groups with distinct resources and flavors", gpu_group()),
    Case("borrowing within a cohort", valid_cluster_queue().cohort("research").group("nvidia.com/gpu")
         .flavor("a100", {"nvidia.com/gpu": "8"}, borrowing={"nvidia.com/gpu": "4"})),
    Case("zero quota is allowed", valid_cluster_queue().set(f"{SET_F0}.resources.0.nominalQuota", "0")),
    Case("integer quotas are allowed", valid_cluster_queue().set(f"{SET_F0}.resources.0.nominalQuota", 8)),
    Case("StrictFIFO", valid_cluster_queue().set("spec.queueingStrategy", "StrictFIFO")),
    Case("a namespace selector with every operator", valid_cluster_queue().set("spec.namespaceSelector", {
        "matchLabels": {"team": "a"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]},
                             {"key": "tier", "operator": "NotIn", "values": ["x"]},
                             {"key": "ml", "operator": "Exists"},
                             {"key": "legacy", "operator": "DoesNotExist"}]})),
    Case("a resource covered by two groups", valid_cluster_queue().group("memory").flavor("m", {"memory": "1"}),
         want_errors=(f"{RG1}.coveredResources[0]",)),
    Case("a resource covered twice in one group", valid_cluster_queue()
         .set(f"{SET_RG0}.coveredResources", ["cpu", "cpu"]).set(f"{SET_F0}.resources.1.name", "cpu"),
         want_errors=(f"{RG0}.coveredResources[1]",)),
    Case("a flavor listed in two groups", valid_cluster_queue().group("nvidia.com/gpu")
         .flavor("h100", {"nvidia.com/gpu": "8"}), want_errors=(f"{RG1}.flavors[0].name",)),
    Case("a flavor with resources out of order", valid_cluster_queue().group("nvidia.com/gpu", "pods")
         .flavor("g", {"pods": "10", "nvidia.com/gpu": "8"}),
         want_errors=(f"{RG1}.flavors[0].resources[0].name", f"{RG1}.flavors[0].resources[1].name")),
    Case("a flavor missing a covered resource", valid_cluster_queue().drop(f"{SET_F0}.resources.1"),
         want_errors=(f"{F0}.resources",)),
    Case("a flavor with an extra resource", valid_cluster_queue().set(
        f"{SET_F0}.resources", [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1"},
                                  {"name": "pods", "nominalQuota": "1"}]),
         want_errors=(f"{F0}.resources",)),
    Case("a group without covered resources", valid_cluster_queue().set(f"{SET_RG0}.coveredResources", []),
         want_errors=(f"{RG0}.coveredResources", f"{F0}.resources")),
    Case("a group without flavors", valid_cluster_queue().set(f"{SET_RG0}.flavors", []),
         want_errors=(f"{RG0}.flavors",)),
    Case("sixty-four flavors in one group are Kueue's maximum", valid_cluster_queue().set(f"{SET_RG0}.flavors", [
        {"name": f"f{i}", "resources": [{"name": "cpu", "nominalQuota": "1"},
                                        {"name": "memory", "nominalQuota": "1"}]} for i in range(64)])),
    Case("sixty-five flavors in one group", valid_cluster_queue().set(f"{SET_RG0}.flavors", [
        {"name": f"f{i}", "resources": [{"name": "cpu", "nominalQuota": "1"},
                                        {"name": "memory", "nominalQuota": "1"}]} for i in range(65)]),
         want_errors=(f"{RG0}.flavors",)),
    Case("sixty-five covered resources", valid_cluster_queue().set(
        f"{SET_RG0}.coveredResources", [f"example.com/r{i}" for i in range(65)]).set(f"{SET_F0}.resources", [
            {"name": f"example.com/r{i}", "nominalQuota": "1"} for i in range(65)]),
         want_errors=(f"{RG0}.coveredResources", f"{F0}.resources")),
    Case("seventeen resource groups", valid_cluster_queue().set("spec.resourceGroups", [
        {"coveredResources": [f"r{i}"], "flavors": [{"name": f"f{i}", "resources": [
            {"name": f"r{i}", "nominalQuota": "1"}]}]} for i in range(17)]),
         want_errors=("spec.resourceGroups",)),
    Case("a negative quota", valid_cluster_queue().set(f"{SET_F0}.resources.0.nominalQuota", "-1"),
         want_errors=(f"{F0}.resources[0].nominalQuota",)),
    Case("a malformed quota", valid_cluster_queue().set(f"{SET_F0}.resources.1.nominalQuota", "64 Gi"),
         want_errors=(f"{F0}.resources[1].nominalQuota",)),
    Case("a missing quota", valid_cluster_queue().drop(f"{SET_F0}.resources.0.nominalQuota"),
         want_errors=(f"{F0}.resources[0].nominalQuota",)),
    Case("borrowing without a cohort", valid_cluster_queue().set(f"{SET_F0}.resources.0.borrowingLimit", "2"),
         want_errors=(f"{F0}.resources[0].borrowingLimit",)),
    Case("lending without a cohort", valid_cluster_queue().set(f"{SET_F0}.resources.0.lendingLimit", "2"),
         want_errors=(f"{F0}.resources[0].lendingLimit",)),
    Case("a negative borrowing limit", valid_cluster_queue().cohort("c").set(f"{SET_F0}.resources.0.borrowingLimit", "-2"), want_errors=(f"{F0}.resources[0].borrowingLimit",)),
    Case("a flavor name with uppercase", valid_cluster_queue().set(f"{SET_F0}.name", "H100"),
         want_errors=(f"{F0}.name",)),
    Case("a cohort name with underscores", valid_cluster_queue().cohort("my_cohort"),
         want_errors=("spec.cohortName",)),
    Case("an unknown queueing strategy", valid_cluster_queue().set("spec.queueingStrategy", "Foo"),
         want_errors=("spec.queueingStrategy",)),
    Case("a selector with an unknown operator", valid_cluster_queue().set(
        "spec.namespaceSelector", {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
         want_errors=("spec.namespaceSelector.matchExpressions[0].operator",)),
    Case("a selector In without values", valid_cluster_queue().set(
        "spec.namespaceSelector", {"matchExpressions": [{"key": "a", "operator": "In"}]}),
         want_errors=("spec.namespaceSelector.matchExpressions[0].values",)),
    Case("a selector Exists with values", valid_cluster_queue().set(
        "spec.namespaceSelector", {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
         want_errors=("spec.namespaceSelector.matchExpressions[0].values",)),
    Case("a selector with a bad label key and value", valid_cluster_queue().set(
        "spec.namespaceSelector", {"matchLabels": {"-team": "a b"}}),
         want_errors=("spec.namespaceSelector.matchLabels", "spec.namespaceSelector.matchLabels[-team]")),
    Case("lending up to the whole nominal quota", valid_cluster_queue().cohort("c")
         .set(f"{SET_F0}.resources.1.lendingLimit", "64Gi")),
    Case("lending more than the nominal quota, across units", valid_cluster_queue().cohort("c")
         .set(f"{SET_F0}.resources.1.lendingLimit", "65537Mi"),
         want_errors=(f"{F0}.resources[1].lendingLimit",)),
    Case("v1beta2's flavorFungibility names", valid_cluster_queue().set(
        "spec.flavorFungibility", {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"})),
    Case("v1beta1's deprecated names are no v1beta2 values", valid_cluster_queue().set(
        "spec.flavorFungibility", {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}),
         want_errors=("spec.flavorFungibility.whenCanBorrow", "spec.flavorFungibility.whenCanPreempt")),
    Case("a v1beta1 ClusterQueue with the deprecated names is converted, then valid", valid_cluster_queue()
         .set("apiVersion", c.API_VERSION_V1BETA1)
         .set("spec.flavorFungibility", {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"})),
    Case("a v1beta1 ClusterQueue's cohort is checked as cohortName", valid_cluster_queue()
         .set("apiVersion", c.API_VERSION_V1BETA1).set("spec.cohort", "Not_A_Name"),
         want_errors=("spec.cohortName",)),
    Case("every stop policy is known", valid_cluster_queue().set("spec.stopPolicy", "HoldAndDrain")),
    Case("an unknown stop policy", valid_cluster_queue().set("spec.stopPolicy", "Pause"),
         want_errors=("spec.stopPolicy",)),
    Case("borrowing preemption needs reclaiming preemption", valid_cluster_queue().set(
        "spec.preemption", {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
         want_errors=("spec.preemption.borrowWithinCohort.policy",)),
    Case("reclaimWithinCohort defaults to Never for that rule", valid_cluster_queue().set(
        "spec.preemption", {"borrowWithinCohort": {"policy": "LowerPriority"}}),
         want_errors=("spec.preemption.borrowWithinCohort.policy",)),
    Case("borrowing preemption with reclaiming preemption", valid_cluster_queue().set(
        "spec.preemption", {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}})),
    Case("an unknown preemption policy", valid_cluster_queue().set(
        "spec.preemption", {"withinClusterQueue": "Always", "borrowWithinCohort": {"policy": "Any"}}),
         want_errors=("spec.preemption.withinClusterQueue", "spec.preemption.borrowWithinCohort.policy")),
)
def test_cluster_queue(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_out_of_order_resources_name_the_expected_resource() -> None:
    cq = valid_cluster_queue().set(f"{SET_F0}.resources.0.name", "memory").set(f"{SET_F0}.resources.1.name", "cpu")
    assert [str(e) for e in validate(cq.build())] == [
        f"{F0}.resources[0].name: Invalid value: \"memory\": must be 'cpu': a flavor lists the group's "
        "coveredResources in the same order",
        f"{F0}.resources[1].name: Invalid value: \"cpu\": must be 'memory': a flavor lists the group's "
        "coveredResources in the same order",
    ]


def test_unknown_strategy_lists_the_supported_values() -> None:
    errs = validate(valid_cluster_queue().set("spec.queueingStrategy", "Foo").build())
    assert [str(e) for e in errs] == [
        'spec.queueingStrategy: Unsupported value: "Foo": supported values: "BestEffortFIFO", "StrictFIFO"']


def test_a_malformed_quota_names_the_offending_text() -> None:
    errs = validate(valid_cluster_queue().set(f"{SET_F0}.resources.1.nominalQuota", "64 Gi").build())
    assert len(errs) == 1 and '"64 Gi"' in errs[0].message


def test_lending_limit_error_quotes_the_nominal_quota() -> None:
    cq = valid_cluster_queue().cohort("c").set(f"{SET_F0}.resources.0.lendingLimit", "8500m")
    assert [str(e) for e in validate(cq.build())] == [
        f'{F0}.resources[0].lendingLimit: Invalid value: "8500m": must be less than or equal to the '
        'nominalQuota ("8")']


@cases(
    UpdateCase("quotas may change", valid_cluster_queue(), valid_cluster_queue().set(
        f"{SET_F0}.resources.0.nominalQuota", "16")),
    UpdateCase("the default strategy spelt out is no change", valid_cluster_queue(),
               valid_cluster_queue().set("spec.queueingStrategy", "BestEffortFIFO")),
    UpdateCase("the queueing strategy is immutable", valid_cluster_queue(),
               valid_cluster_queue().set("spec.queueingStrategy", "StrictFIFO"),
               want_errors=("spec.queueingStrategy",)),
)
def test_cluster_queue_update(case: UpdateCase) -> None:
    assert [e.path for e in validate_update(case.old.build(), case.new.build())] == list(case.want_errors)


@cases(
    Case("a queue pointing at a ClusterQueue", valid_local_queue()),
    Case("no clusterQueue", valid_local_queue().drop("spec.clusterQueue"), want_errors=("spec.clusterQueue",)),
    Case("an empty clusterQueue", valid_local_queue(cluster_queue=""), want_errors=("spec.clusterQueue",)),
    Case("a clusterQueue that is not a DNS name", valid_local_queue(cluster_queue="Team A"),
         want_errors=("spec.clusterQueue",)),
    Case("a namespace that is not a DNS label", valid_local_queue().set("metadata.namespace", "a.b"),
         want_errors=("metadata.namespace",)),
)
def test_local_queue(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


@pytest.mark.parametrize(("new_cq", "want_errors"), [
    pytest.param("team-a", [], id="same ClusterQueue"),
    pytest.param("team-b", ["spec.clusterQueue"], id="re-pointing a LocalQueue is refused"),
])
def test_local_queue_cluster_queue_is_immutable(new_cq: str, want_errors: list[str]) -> None:
    errs = validate_update(valid_local_queue().build(), valid_local_queue(cluster_queue=new_cq).build())
    assert [e.path for e in errs] == want_errors
