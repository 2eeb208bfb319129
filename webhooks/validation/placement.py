"""Checks for the fields that steer pods to nodes: node labels, taints, tolerations, selectors.

Shared by ResourceFlavor (nodeLabels, nodeTaints, tolerations), ClusterQueue (namespaceSelector)
and pod templates (nodeSelector, tolerations). Rules follow core/v1 and metav1 validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from controller.api.selectors import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE
from webhooks.validation import formats, shapes
from webhooks.validation.errors import (
    FieldError,
    FieldPath,
    duplicate_detail,
    forbidden,
    invalid,
    required,
    too_many,
    unsupported,
)

TAINT_EFFECTS: Final = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
TOLERATION_OPERATORS: Final = ("Equal", "Exists")
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


def node_labels(path: FieldPath, labels: Mapping[str, str], limit: int | None = None) -> list[FieldError]:
    """A label map: keys qualified names, values label values, at most `limit` entries."""
    errs: list[FieldError] = []
    if limit is not None and len(labels) > limit:
        errs.append(too_many(path, len(labels), limit))
    for key in sorted(labels):
        errs.extend(formats.qualified_name(path, key))
        errs.extend(formats.label_value(path.key(key), labels[key]))
    return errs


def taint(path: FieldPath, item: Mapping[str, Any]) -> list[FieldError]:
    """One taint: key required and qualified, value a label value, effect one of the three."""
    errs: list[FieldError] = []
    key = shapes.string(item, "key", path.child("key"), errs)
    if not key:
        errs.append(required(path.child("key")))
    else:
        errs.extend(formats.qualified_name(path.child("key"), key))
    value = shapes.string(item, "value", path.child("value"), errs)
    if value:
        errs.extend(formats.label_value(path.child("value"), value))
    effect = shapes.string(item, "effect", path.child("effect"), errs)
    if not effect:
        errs.append(required(path.child("effect")))
    elif effect not in TAINT_EFFECTS:
        errs.append(unsupported(path.child("effect"), effect, TAINT_EFFECTS))
    return errs


def toleration(path: FieldPath, item: Mapping[str, Any]) -> list[FieldError]:
    """One toleration; an empty key needs Exists, Exists takes no value, seconds need NoExecute."""
    errs: list[FieldError] = []
    key = shapes.string(item, "key", path.child("key"), errs) or ""
    operator = shapes.string(item, "operator", path.child("operator"), errs) or "Equal"
    value = shapes.string(item, "value", path.child("value"), errs) or ""
    effect = shapes.string(item, "effect", path.child("effect"), errs) or ""
    if key:
        errs.extend(formats.qualified_name(path.child("key"), key))
    if operator not in TOLERATION_OPERATORS:
        errs.append(unsupported(path.child("operator"), operator, TOLERATION_OPERATORS))
    elif not key and operator != "Exists":
        errs.append(invalid(path.child("operator"), operator,
                            "operator must be Exists when `key` is empty, which means \"match all "
                            "values and all keys\""))
    if operator == "Exists" and value:
        errs.append(invalid(path.child("value"), value,
                            "value must be empty when `operator` is 'Exists'"))
    elif value:
        errs.extend(formats.label_value(path.child("value"), value))
    if effect and effect not in TAINT_EFFECTS:
        errs.append(unsupported(path.child("effect"), effect, TAINT_EFFECTS))
    seconds = shapes.integer(item, "tolerationSeconds", path.child("tolerationSeconds"), errs)
    if seconds is not None and effect != NO_EXECUTE:
        errs.append(invalid(path.child("effect"), effect,
                            "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    return errs


def taints(path: FieldPath, items: list[Any] | None, limit: int | None = None) -> list[FieldError]:
    """A taint list: each taint valid, and no two with the same key and effect (core/v1's rule)."""
    errs: list[FieldError] = []
    if limit is not None and items is not None and len(items) > limit:
        errs.append(too_many(path, len(items), limit))
    seen: set[tuple[str, str]] = set()
    for item_path, item in shapes.objects(items, path, errs):
        errs.extend(taint(item_path, item))
        key, effect = item.get("key"), item.get("effect")
        if not isinstance(key, str) or not isinstance(effect, str):
            continue  # a wrong type was reported by `taint`
        if (key, effect) in seen:
            errs.append(duplicate_detail(item_path, f"{key}:{effect}", "taints must be unique by key and effect pair"))
        seen.add((key, effect))
    return errs


def tolerations(path: FieldPath, items: list[Any] | None, limit: int | None = None) -> list[FieldError]:
    """A toleration list: at most `limit` items, each valid (duplicates are allowed, as in core/v1)."""
    errs: list[FieldError] = []
    if limit is not None and items is not None and len(items) > limit:
        errs.append(too_many(path, len(items), limit))
    for item_path, item in shapes.objects(items, path, errs):
        errs.extend(toleration(item_path, item))
    return errs


def label_selector(path: FieldPath, selector: Mapping[str, Any]) -> list[FieldError]:
    """A metav1.LabelSelector: valid matchLabels, and matchExpressions whose values fit the operator."""
    errs: list[FieldError] = []
    labels = shapes.string_map(selector, "matchLabels", path.child("matchLabels"), errs)
    errs.extend(node_labels(path.child("matchLabels"), labels))
    exprs = shapes.sequence(selector, "matchExpressions", path.child("matchExpressions"), errs)
    for expr_path, expr in shapes.objects(exprs, path.child("matchExpressions"), errs):
        key = shapes.string(expr, "key", expr_path.child("key"), errs)
        if key is not None or expr.get("key") is None:  # absent or null: required
            errs.extend(formats.qualified_name(expr_path.child("key"), key or ""))
        operator = shapes.string(expr, "operator", expr_path.child("operator"), errs)
        values = shapes.sequence(expr, "values", expr_path.child("values"), errs) or []
        if operator is None:
            errs.append(required(expr_path.child("operator")))
        elif operator not in SELECTOR_OPERATORS:
            errs.append(unsupported(expr_path.child("operator"), operator, SELECTOR_OPERATORS))
        elif operator in ("In", "NotIn") and not values:
            errs.append(required(expr_path.child("values"),
                                 "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist") and values:
            errs.append(forbidden(expr_path.child("values"),
                                  "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        for i, v in enumerate(values):
            errs.extend(formats.label_value(expr_path.child("values").index(i), v))
    return errs
