"""Kubernetes matching rules: label selectors, node selector terms, taints and tolerations.

Pure predicates shared by the topology engine (node candidacy), the admission cycle
(namespaceSelector), the webhooks and the devcluster (list selectors, its scheduler).
Semantics follow the Kubernetes API reference for LabelSelector, NodeSelector and Toleration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Taint:
        return cls(str(d.get("key", "")), str(d.get("value") or ""), str(d.get("effect", "")))

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Toleration:
        return cls(str(d.get("key") or ""), str(d.get("operator") or "Equal"),
                   str(d.get("value") or ""), str(d.get("effect") or ""))

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 ToleratesTaint: an empty effect or key matches any; Equal ("" too) compares values.

        Validation only allows an empty key with Exists (= tolerate everything); matching follows
        the API's own rule for the other combinations so both agree on any object.
        """
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint that no toleration tolerates, or None."""
    for taint in taints:
        if taint.effect not in (NO_SCHEDULE, NO_EXECUTE):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int_or_none(s: str) -> int | None:
    """A base-10 int64 as Go's strconv.ParseInt reads it (Python's int() also takes " 5", "1_0")."""
    if not _INT64_RE.fullmatch(s):
        return None
    n = int(s)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def requirement_matches(labels: Mapping[str, str], key: str, operator: str,
                        values: Sequence[str]) -> bool:
    """One match expression (In, NotIn, Exists, DoesNotExist, Gt, Lt) against a label set."""
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        have, want = _int_or_none(labels[key]), _int_or_none(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels AND every matchExpression. None/{} matches everything."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        if not requirement_matches(labels, expr.get("key", ""), expr.get("operator", ""),
                                   expr.get("values") or []):
            return False
    return True


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """matchExpressions over labels and matchFields over `metadata.name`, ANDed."""

    expressions: tuple[tuple[str, str, tuple[str, ...]], ...]
    fields: tuple[tuple[str, str, tuple[str, ...]], ...]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeSelectorTerm:
        def reqs(key: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
            return tuple((str(e.get("key", "")), str(e.get("operator", "")),
                          tuple(str(v) for v in e.get("values") or [])) for e in d.get(key) or []
                         if isinstance(e, Mapping))
        return cls(reqs("matchExpressions"), reqs("matchFields"))

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        # An empty term matches no objects (NodeSelectorTerm API doc).
        if not self.expressions and not self.fields:
            return False
        for key, op, values in self.expressions:
            if not requirement_matches(labels, key, op, values):
                return False
        fields = {"metadata.name": node_name}
        return all(requirement_matches(fields, key, op, values) for key, op, values in self.fields)


def required_node_affinity_terms(pod_spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """requiredDuringSchedulingIgnoredDuringExecution terms of a pod spec (ORed)."""
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    # A null term is an empty one (it matches no node), as the API server decodes it.
    return tuple(NodeSelectorTerm.from_dict(t if isinstance(t, Mapping) else {})
                 for t in required.get("nodeSelectorTerms") or [])


def node_matches_pod(node_name: str, node_labels: Mapping[str, str], node_selector: Mapping[str, str],
                     affinity_terms: Sequence[NodeSelectorTerm]) -> bool:
    """nodeSelector (all pairs) AND required node affinity (any term), as kube-scheduler filters."""
    for k, v in node_selector.items():
        if node_labels.get(k) != v:
            return False
    if affinity_terms and not any(t.matches(node_name, node_labels) for t in affinity_terms):
        return False
    return True
