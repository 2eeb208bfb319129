"""Validation of Cohort and WorkloadPriorityClass objects. Called by `webhooks.validation.dispatching`.

Kueue's rules: a Cohort's parentName is a DNS subdomain, its resource groups are checked as a
ClusterQueue's (webhooks.validation.queues) except that limits need a parent instead of a cohort and
a lendingLimit may exceed the Cohort's own nominalQuota; a fairSharing weight is a non-negative
quantity, 0 or above 10^-9. A WorkloadPriorityClass needs an int32 `value`; its description is at
most 2048 characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from controller.api.priority_class import MAX_DESCRIPTION_LENGTH
from controller.api.quantity import parse_quantity
from webhooks.validation import formats, meta, shapes, workload_status
from webhooks.validation.errors import ROOT, SPEC, FieldError, invalid, required
from webhooks.validation.queues import LimitRules, resource_groups

SMALLEST_WEIGHT: Final = Decimal("1e-9")
"""Kueue: a fairSharing weight that is not 0 must be greater than this (1n)."""


def _fair_sharing(spec: Mapping[str, Any], errs: list[FieldError]) -> None:
    path = SPEC.child("fairSharing")
    fair = shapes.mapping(spec, "fairSharing", path, errs)
    if fair is None or fair.get("weight") is None:
        return
    weight_path = path.child("weight")
    weight_errs = formats.quantity(weight_path, fair["weight"])
    errs.extend(weight_errs)
    if not weight_errs and Decimal(0) < parse_quantity(fair["weight"]) <= SMALLEST_WEIGHT:
        errs.append(invalid(weight_path, fair["weight"], "must be 0 or greater than 10e-9 (1n)"))


def validate_cohort(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a Cohort object."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    spec = shapes.mapping(obj, "spec", SPEC, errs) or {}
    parent = shapes.string(spec, "parentName", SPEC.child("parentName"), errs)
    if parent:
        errs.extend(formats.dns_subdomain(SPEC.child("parentName"), parent))
    resource_groups(spec, LimitRules(parent or None, "must be empty when the Cohort has no parentName",
                                     lending_within_nominal=False), errs)
    _fair_sharing(spec, errs)
    status = shapes.mapping(obj, "status", workload_status.STATUS, errs)
    if status is not None:
        workload_status.conditions(status, errs)
    return errs


def validate_workload_priority_class(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every error in a WorkloadPriorityClass object (no spec: value and description are top-level)."""
    errs: list[FieldError] = []
    meta.modelled_meta(meta.object_meta(obj, errs), errs)
    if obj.get("value") is None:
        errs.append(required(ROOT.child("value"), "the priority Workloads of this class get (an int32)"))
    else:
        shapes.integer(obj, "value", ROOT.child("value"), errs, bits=32)
    description = shapes.string(obj, "description", ROOT.child("description"), errs)
    if description is not None and len(description) > MAX_DESCRIPTION_LENGTH:
        errs.append(invalid(ROOT.child("description"), f"{len(description)} characters",
                            f"must be at most {MAX_DESCRIPTION_LENGTH} characters"))
    return errs
