"""Validation of ClusterQueue and LocalQueue objects. Called by `webhooks.validation.dispatching`.

ClusterQueue rules are Kueue's: each resource covered by exactly one group, a group's flavors list its
resources in order, a flavor once per queue, at most 16 groups / 64 flavors / 64 resources, quotas
non-negative, borrowing/lending limits need a cohort, lendingLimit <= nominalQuota, fixed strategy.
`resource_groups` checks the groups for a Cohort too (webhooks.validation.cohort), as Kueue shares them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, get_args

from controller.api import constants as c
from controller.api.quantity import parse_quantity
from controller.api.queues import (
    MAX_GROUP_ITEMS,
    MAX_RESOURCE_GROUPS,
    BorrowWithinCohortPolicy,
    QueueingStrategy,
    StopPolicy,
    WhenCanBorrow,
    WhenCanPreempt,
)
from webhooks.validation import formats, meta, placement, shapes, workload_status
from webhooks.validation.errors import (
    SPEC,
    FieldError,
    FieldPath,
    duplicate,
    forbidden,
    invalid,
    quoted_list,
    render,
    required,
    too_many,
    unsupported,
)

# Kueue's limits, shared with the model (and so the CRD schema).
MAX_FLAVORS_PER_GROUP: Final = MAX_GROUP_ITEMS
MAX_RESOURCES: Final = MAX_GROUP_ITEMS
# The enums the model (and so the CRD schema) declares, in its order; the two preemption policies
# are narrower here than the model's shared PreemptionPolicy, as Kueue's webhook is.
QUEUEING_STRATEGIES: Final[tuple[str, ...]] = get_args(QueueingStrategy)
RECLAIM_POLICIES: Final = ("Never", "LowerPriority", "Any")
WITHIN_CQ_POLICIES: Final = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
BORROW_POLICIES: Final[tuple[str, ...]] = get_args(BorrowWithinCohortPolicy)
WHEN_CAN_BORROW: Final[tuple[str, ...]] = get_args(WhenCanBorrow)
WHEN_CAN_PREEMPT: Final[tuple[str, ...]] = get_args(WhenCanPreempt)
STOP_POLICIES: Final[tuple[str, ...]] = get_args(StopPolicy)


def _covered_resources(groups: list[tuple[FieldPath, Mapping[str, Any]]],
                       errs: list[FieldError]) -> list[list[str]]:
    """Phase 1: each group's covered resources; afterwards every name is reported once if reused."""
    seen: set[str] = set()
    covered: list[list[str]] = []
    for group_path, group in groups:
        path = group_path.child("coveredResources")
        names = shapes.sequence(group, "coveredResources", path, errs)
        if not names:
            errs.append(required(path, "a resource group covers at least 1 resource"))
        elif len(names) > MAX_RESOURCES:
            errs.append(too_many(path, len(names), MAX_RESOURCES))
        valid: list[str] = []
        for i, name in enumerate(names or []):
            name_errs = formats.qualified_name(path.index(i), name)
            errs.extend(name_errs)
            if name_errs:
                continue
            if name in seen:
                errs.append(duplicate(path.index(i), name))
            seen.add(name)
            valid.append(name)
        covered.append(valid)
    return covered


@dataclass(frozen=True, slots=True)
class LimitRules:
    """Where borrowing and lending limits may be set: a ClusterQueue needs a cohort, a Cohort a
    parent (`upstream`, its name or None); only a ClusterQueue's lendingLimit is bounded by its
    nominalQuota (a Cohort lends what its subtree holds too, Kueue's rule)."""

    upstream: str | None
    missing: str = "must be empty when the ClusterQueue has no cohort"
    lending_within_nominal: bool = True


def _quota(path: FieldPath, item: Mapping[str, Any], rules: LimitRules) -> list[FieldError]:
    """One resource quota: nominalQuota required; all quantities valid; limits only with a cohort
    (a parent); a lendingLimit no larger than the nominalQuota (nothing can lend more than it has)."""
    errs: list[FieldError] = []
    if item.get("nominalQuota") is None:
        errs.append(required(path.child("nominalQuota")))
    valid: dict[str, Any] = {}
    for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        if item.get(field) is None:
            continue
        field_errs = formats.quantity(path.child(field), item[field])
        errs.extend(field_errs)
        if not field_errs:
            valid[field] = item[field]
        if field != "nominalQuota" and not rules.upstream:
            errs.append(forbidden(path.child(field), rules.missing))
    if rules.lending_within_nominal and "lendingLimit" in valid and "nominalQuota" in valid and \
            parse_quantity(valid["lendingLimit"]) > parse_quantity(valid["nominalQuota"]):
        errs.append(invalid(path.child("lendingLimit"), valid["lendingLimit"],
                            f"must be less than or equal to the nominalQuota ({render(valid['nominalQuota'])})"))
    return errs


def _flavor_quotas(path: FieldPath, flavor: Mapping[str, Any], covered: list[str],
                   rules: LimitRules, errs: list[FieldError]) -> None:
    """Phase 2b: one flavor lists exactly `covered`, in order, each with a valid quota."""
    resources_path = path.child("resources")
    resources = shapes.sequence(flavor, "resources", resources_path, errs) or []
    if len(resources) > MAX_RESOURCES:
        errs.append(too_many(resources_path, len(resources), MAX_RESOURCES))
    if len(resources) != len(covered):
        errs.append(invalid(resources_path, f"{len(resources)} item(s)",
                            f"must list exactly the {len(covered)} covered resource(s) "
                            f"{quoted_list(covered)} in that order"))
    for i, (item_path, item) in enumerate(shapes.objects(resources, resources_path, errs)):
        name = item.get("name")
        if i < len(covered) and name != covered[i]:
            errs.append(invalid(item_path.child("name"), name,
                                f"must be {covered[i]!r}: a flavor lists the group's coveredResources "
                                "in the same order"))
        errs.extend(_quota(item_path, item, rules))


def _flavors(groups: list[tuple[FieldPath, Mapping[str, Any]]], covered: list[list[str]],
             rules: LimitRules, errs: list[FieldError]) -> None:
    """Phase 2: flavors of every group; names unique across the whole ClusterQueue."""
    seen: set[str] = set()
    for (group_path, group), group_covered in zip(groups, covered, strict=True):
        path = group_path.child("flavors")
        flavors = shapes.sequence(group, "flavors", path, errs)
        if not flavors:
            errs.append(required(path, "a resource group has at least 1 flavor"))
        elif len(flavors) > MAX_FLAVORS_PER_GROUP:
            errs.append(too_many(path, len(flavors), MAX_FLAVORS_PER_GROUP))
        for flavor_path, flavor in shapes.objects(flavors, path, errs):
            name = flavor.get("name")
            errs.extend(formats.dns_subdomain(flavor_path.child("name"), name if name is not None else ""))
            if isinstance(name, str) and name:
                if name in seen:
                    errs.append(duplicate(flavor_path.child("name"), name))
                seen.add(name)
            _flavor_quotas(flavor_path, flavor, group_covered, rules, errs)


def _preemption(spec: Mapping[str, Any], errs: list[FieldError]) -> None:
    """Phase 3b: the preemption policies are enums."""
    path = SPEC.child("preemption")
    preemption = shapes.mapping(spec, "preemption", path, errs)
    if preemption is None:
        return
    for field, allowed in (("reclaimWithinCohort", RECLAIM_POLICIES),
                           ("withinClusterQueue", WITHIN_CQ_POLICIES)):
        value = shapes.string(preemption, field, path.child(field), errs)
        if value is not None and value not in allowed:
            errs.append(unsupported(path.child(field), value, allowed))
    borrow = shapes.mapping(preemption, "borrowWithinCohort", path.child("borrowWithinCohort"), errs)
    policy_path = path.child("borrowWithinCohort").child("policy")
    shapes.integer(borrow, "maxPriorityThreshold", path.child("borrowWithinCohort").child("maxPriorityThreshold"),
                   errs, bits=32)
    policy = shapes.string(borrow, "policy", policy_path, errs)
    if policy is not None and policy not in BORROW_POLICIES:
        errs.append(unsupported(policy_path, policy, BORROW_POLICIES))
    # Kueue's rule, on defaulted values (reclaimWithinCohort defaults to Never): preempting to
    # borrow while never reclaiming nominal quota would let borrowers out-preempt owners.
    reclaim = preemption.get("reclaimWithinCohort") or "Never"
    if reclaim == "Never" and policy in BORROW_POLICIES and policy != "Never":
        errs.append(invalid(policy_path, policy, "must be \"Never\" when reclaimWithinCohort is \"Never\""))


def _enums(spec: Mapping[str, Any], errs: list[FieldError]) -> None:
    """Phase 3c: queueingStrategy, stopPolicy and flavorFungibility take Kueue's values only."""
    fungibility_path = SPEC.child("flavorFungibility")
    fungibility = shapes.mapping(spec, "flavorFungibility", fungibility_path, errs)
    for parent, path, allowed in (
            (spec, SPEC.child("queueingStrategy"), QUEUEING_STRATEGIES),
            (spec, SPEC.child("stopPolicy"), STOP_POLICIES),
            (fungibility, fungibility_path.child("whenCanBorrow"), WHEN_CAN_BORROW),
            (fungibility, fungibility_path.child("whenCanPreempt"), WHEN_CAN_PREEMPT)):
        field = path.text.rsplit(".", 1)[-1]
        value = shapes.string(parent, field, path, errs)
        if value is not None and value not in allowed:
            errs.append(unsupported(path, value, allowed))


def _queue_settings(spec: Mapping[str, Any], errs: list[FieldError]) -> str | None:
    """Phase 3: cohort, enums, namespaceSelector, preemption; returns the cohort."""
    cohort = shapes.string(spec, "cohortName", SPEC.child("cohortName"), errs)
    if cohort:
        errs.extend(formats.dns_subdomain(SPEC.child("cohortName"), cohort))
    _enums(spec, errs)
    selector = shapes.mapping(spec, "namespaceSelector", SPEC.child("namespaceSelector"), errs)
    if selector is not None:
        errs.extend(placement.label_selector(SPEC.child("namespaceSelector"), selector))
    _preemption(spec, errs)
    return cohort


def resource_groups(spec: Mapping[str, Any], rules: LimitRules, errs: list[FieldError]) -> None:
    """`spec.resourceGroups` of a ClusterQueue or a Cohort: at most 16 groups, each resource
    covered once, flavors unique and listing the covered resources in order, valid quotas."""
    groups_path = SPEC.child("resourceGroups")
    raw_groups = shapes.sequence(spec, "resourceGroups", groups_path, errs)
    if raw_groups is not None and len(raw_groups) > MAX_RESOURCE_GROUPS:
        errs.append(too_many(groups_path, len(raw_groups), MAX_RESOURCE_GROUPS))
    groups = shapes.objects(raw_groups, groups_path, errs)
    covered = _covered_resources(groups, errs)
    _flavors(groups, covered, rules, errs)


def validate_cluster_queue(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a ClusterQueue object."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    cohort = _queue_settings(spec, errs)
    resource_groups(spec, LimitRules(cohort), errs)
    _queue_status(obj, ("flavorsReservation", "flavorsUsage"), ("total", "borrowed"), errs)
    return errs


def validate_cluster_queue_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue: the queueing strategy is immutable (absent means the default, BestEffortFIFO)."""
    errs = validate_cluster_queue(new)
    errs.extend(shapes.unchanged(old, new, SPEC.child("queueingStrategy"), ("spec", "queueingStrategy"),
                                 default=c.QUEUEING_BEST_EFFORT_FIFO))
    return errs


def validate_local_queue(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a LocalQueue object: it must name a valid ClusterQueue."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    cq = shapes.string(spec, "clusterQueue", SPEC.child("clusterQueue"), errs)
    if spec.get("clusterQueue") is None:  # absent or null (the API server prunes a null)
        errs.append(required(SPEC.child("clusterQueue")))
    elif cq is not None:
        errs.extend(formats.dns_subdomain(SPEC.child("clusterQueue"), cq))
    shapes.enum(spec, "stopPolicy", SPEC.child("stopPolicy"), STOP_POLICIES, errs)
    _queue_status(obj, ("flavorsReservation", "flavorsUsage"), ("total",), errs)
    return errs


def _queue_status(obj: Mapping[str, Any], usage_lists: tuple[str, ...], amounts: tuple[str, ...],
                  errs: list[FieldError]) -> None:
    """A queue's status as the controller writes it: int32 workload counts, conditions, and the
    usage lists (flavor name, then resource name and quantities `amounts`)."""
    path = workload_status.STATUS
    status = shapes.mapping(obj, "status", path, errs)
    if status is None:
        return
    for field in ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads"):
        shapes.integer(status, field, path.child(field), errs, bits=32)
    workload_status.conditions(status, errs)
    for field in usage_lists:
        for flavor_path, flavor in shapes.objects(shapes.sequence(status, field, path.child(field), errs),
                                                  path.child(field), errs):
            _named(flavor, flavor_path, errs)
            resources_path = flavor_path.child("resources")
            for item_path, item in shapes.objects(shapes.sequence(flavor, "resources", resources_path, errs),
                                                  resources_path, errs):
                _named(item, item_path, errs)
                for amount in amounts:
                    if item.get(amount) is not None:
                        errs.extend(formats.quantity(item_path.child(amount), item[amount], non_negative=False))


def _named(item: Mapping[str, Any], path: FieldPath, errs: list[FieldError]) -> None:
    if not shapes.string(item, "name", path.child("name"), errs):
        errs.append(required(path.child("name")))


def validate_local_queue_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """A LocalQueue cannot be re-pointed at another ClusterQueue (Kueue: field is immutable)."""
    errs = validate_local_queue(new)
    errs.extend(shapes.unchanged(old, new, SPEC.child("clusterQueue"), ("spec", "clusterQueue")))
    return errs
