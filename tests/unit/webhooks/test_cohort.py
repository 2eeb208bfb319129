"""Cohort and WorkloadPriorityClass validation: Kueue's rules for a Cohort's parent, its resource
groups (limits need a parent; a lendingLimit may exceed the Cohort's own quota), fairSharing weight,
and a WorkloadPriorityClass's value and description."""

from __future__ import annotations

from tests.builders.kueue import make_cohort, make_priority_class
from tests.unit.webhooks.manifests import Case, cases
from webhooks.validation import validate

F0 = "spec.resourceGroups[0].flavors[0]"


@cases(
    Case("a root cohort with no quota", make_cohort("org")),
    Case("a child cohort with quota and both limits", make_cohort("team").parent("org")
         .flavor("h100", {"nvidia.com/gpu": 8}).limits("h100", "nvidia.com/gpu", borrowing=4, lending=2)),
    Case("a lendingLimit above the cohort's own quota (its subtree may hold more)", make_cohort("team")
         .parent("org").flavor("h100", {"nvidia.com/gpu": 0}).limits("h100", "nvidia.com/gpu", lending=16)),
    Case("a borrowingLimit on a root cohort", make_cohort("org").flavor("h100", {"nvidia.com/gpu": 8})
         .limits("h100", "nvidia.com/gpu", borrowing=4), want_errors=(f"{F0}.resources[0].borrowingLimit",)),
    Case("a lendingLimit on a root cohort", make_cohort("org").flavor("h100", {"nvidia.com/gpu": 8})
         .limits("h100", "nvidia.com/gpu", lending=4), want_errors=(f"{F0}.resources[0].lendingLimit",)),
    Case("a parentName that is not a DNS subdomain", make_cohort("team").parent("Org_1"),
         want_errors=("spec.parentName",)),
    Case("a negative nominalQuota", make_cohort("org").flavor("h100", {"nvidia.com/gpu": -1}),
         want_errors=(f"{F0}.resources[0].nominalQuota",)),
    Case("a resource covered by two groups", make_cohort("org").flavor("a", {"cpu": 1}).group("cpu")
         .flavor("b", {"cpu": 1}), want_errors=("spec.resourceGroups[1].coveredResources[0]",)),
    Case("a fairSharing weight of 0 (never borrows ahead)", make_cohort("org").set("spec.fairSharing.weight", "0")),
    Case("a fairSharing weight of 1n collapses to 0", make_cohort("org").set("spec.fairSharing.weight", "1n"),
         want_errors=("spec.fairSharing.weight",)),
    Case("a negative fairSharing weight", make_cohort("org").set("spec.fairSharing.weight", "-1"),
         want_errors=("spec.fairSharing.weight",)),
)
def test_cohort(case: Case) -> None:
    assert [e.path for e in validate(case.manifest())] == list(case.want_errors)


def test_a_limit_without_a_parent_says_what_is_missing() -> None:
    obj = make_cohort("org").flavor("h100", {"nvidia.com/gpu": 8}).limits("h100", "nvidia.com/gpu", borrowing=4)
    [error] = validate(obj.build())
    assert "must be empty when the Cohort has no parentName" in str(error)


@cases(
    Case("a v1beta2 class", make_priority_class("urgent", 1000).description("for on-call fixes")),
    Case("a v1beta1 class", make_priority_class("urgent", -5, version="v1beta1")),
    Case("no value", make_priority_class("urgent", 1).drop("value"), want_errors=("value",)),
    Case("a value beyond int32", make_priority_class("urgent", 2**31), want_errors=("value",)),
    Case("a value that is a string", make_priority_class("urgent", 1).set("value", "10"), want_errors=("value",)),
    Case("a description over 2048 characters", make_priority_class("urgent", 1).description("x" * 2049),
         want_errors=("description",)),
)
def test_workload_priority_class(case: Case) -> None:
    assert [e.path for e in validate(case.manifest())] == list(case.want_errors)
