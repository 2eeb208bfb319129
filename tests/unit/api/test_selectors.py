"""Matching rules: label selectors, node selector terms with every operator, taints and tolerations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.api.meta import LabelSelector
from controller.api.selectors import (
    NodeSelectorTerm,
    Taint,
    Toleration,
    label_selector_matches,
    node_matches_pod,
    required_node_affinity_terms,
    requirement_matches,
    untolerated_taint,
)

NODE_LABELS = {"gpu": "h100", "rack": "r3", "slots": "8"}


@dataclass(frozen=True)
class RequirementCase:
    name: str
    operator: str
    key: str
    values: tuple[str, ...] = ()
    want_match: bool = True


REQUIREMENTS = [
    RequirementCase("In with the node's value", "In", "gpu", ("a100", "h100")),
    RequirementCase("In without the node's value", "In", "gpu", ("a100",), want_match=False),
    RequirementCase("In on an absent key", "In", "zone", ("a",), want_match=False),
    RequirementCase("NotIn without the node's value", "NotIn", "gpu", ("a100",)),
    RequirementCase("NotIn with the node's value", "NotIn", "gpu", ("h100",), want_match=False),
    RequirementCase("NotIn on an absent key matches", "NotIn", "zone", ("a",)),
    RequirementCase("Exists on a present key", "Exists", "rack"),
    RequirementCase("Exists on an absent key", "Exists", "zone", want_match=False),
    RequirementCase("DoesNotExist on an absent key", "DoesNotExist", "zone"),
    RequirementCase("DoesNotExist on a present key", "DoesNotExist", "rack", want_match=False),
    RequirementCase("Gt below the value", "Gt", "slots", ("7",)),
    RequirementCase("Gt at the value", "Gt", "slots", ("8",), want_match=False),
    RequirementCase("Lt above the value", "Lt", "slots", ("9",)),
    RequirementCase("Lt at the value", "Lt", "slots", ("8",), want_match=False),
    RequirementCase("Gt with a signed bound", "Gt", "slots", ("+7",)),
    RequirementCase("Gt on a non-numeric label", "Gt", "rack", ("1",), want_match=False),
    RequirementCase("Gt with a spaced bound (Go's ParseInt refuses it)", "Gt", "slots", (" 7",),
                    want_match=False),
    RequirementCase("Lt with digit separators (Go's ParseInt refuses them)", "Lt", "slots", ("1_0",),
                    want_match=False),
    RequirementCase("Gt with two values", "Gt", "slots", ("1", "2"), want_match=False),
    RequirementCase("Gt on an absent key", "Gt", "zone", ("1",), want_match=False),
    RequirementCase("an unknown operator never matches", "Like", "gpu", ("h100",), want_match=False),
]


@pytest.mark.parametrize("case", REQUIREMENTS, ids=[c.name for c in REQUIREMENTS])
def test_requirement(case: RequirementCase) -> None:
    assert requirement_matches(NODE_LABELS, case.key, case.operator, case.values) == case.want_match


@pytest.mark.parametrize(("selector", "want_match"), [
    pytest.param(None, True, id="no selector matches everything"),
    pytest.param({}, True, id="an empty selector matches everything"),
    pytest.param({"matchLabels": {"gpu": "h100"}}, True, id="matchLabels equal"),
    pytest.param({"matchLabels": {"gpu": "h100", "rack": "r4"}}, False, id="every matchLabel must match"),
    pytest.param({"matchLabels": {"gpu": "h100"},
                  "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r3"]}]},
                 True, id="labels and expressions together"),
    pytest.param({"matchExpressions": [{"key": "rack", "operator": "Exists"},
                                       {"key": "gpu", "operator": "NotIn", "values": ["h100"]}]},
                 False, id="expressions are ANDed"),
])
def test_label_selector(selector: dict[str, Any] | None, want_match: bool) -> None:
    assert label_selector_matches(selector, NODE_LABELS) == want_match
    if selector is not None:  # the parsed form (a ClusterQueue's namespaceSelector) agrees
        assert LabelSelector.model_validate(selector).matches(NODE_LABELS) == want_match


@dataclass(frozen=True)
class TermCase:
    name: str
    term: dict[str, Any]
    want_match: bool
    node: str = "node-1"


TERMS = [
    TermCase("an empty term matches nothing", {}, False),
    TermCase("expressions on labels", {"matchExpressions": [
        {"key": "gpu", "operator": "In", "values": ["h100"]},
        {"key": "slots", "operator": "Gt", "values": ["4"]}]}, True),
    TermCase("one failing expression fails the term", {"matchExpressions": [
        {"key": "gpu", "operator": "In", "values": ["h100"]},
        {"key": "slots", "operator": "Lt", "values": ["4"]}]}, False),
    TermCase("matchFields on the node name", {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}, True),
    TermCase("matchFields excluding the node", {"matchFields": [
        {"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}, False),
    TermCase("fields and expressions are ANDed", {
        "matchExpressions": [{"key": "gpu", "operator": "Exists"}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}, False),
]


@pytest.mark.parametrize("case", TERMS, ids=[c.name for c in TERMS])
def test_node_selector_term(case: TermCase) -> None:
    assert NodeSelectorTerm.from_dict(case.term).matches(case.node, NODE_LABELS) == case.want_match


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


@pytest.mark.parametrize(("pod_spec", "want_match"), [
    pytest.param({}, True, id="no constraints"),
    pytest.param({"nodeSelector": {"gpu": "h100"}}, True, id="nodeSelector matches"),
    pytest.param({"nodeSelector": {"gpu": "h100", "rack": "r1"}}, False, id="every nodeSelector pair must match"),
    pytest.param(_affinity({"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
                           {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r3"]}]}),
                 True, id="affinity terms are ORed"),
    pytest.param({"nodeSelector": {"gpu": "a100"}, **_affinity({"matchExpressions": [
        {"key": "rack", "operator": "Exists"}]})}, False, id="nodeSelector and affinity are ANDed"),
])
def test_node_matches_pod(pod_spec: dict[str, Any], want_match: bool) -> None:
    terms = required_node_affinity_terms(pod_spec)
    assert node_matches_pod("node-1", NODE_LABELS, pod_spec.get("nodeSelector") or {}, terms) == want_match


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@dataclass(frozen=True)
class TolerationCase:
    name: str
    toleration: dict[str, Any]
    want_tolerates: bool
    taint: Taint = field(default=GPU_TAINT)


TOLERATIONS = [
    TolerationCase("Equal with key, value and effect", {"key": "nvidia.com/gpu", "value": "present",
                                                        "effect": "NoSchedule"}, True),
    TolerationCase("Equal with a different value", {"key": "nvidia.com/gpu", "value": "absent"}, False),
    TolerationCase("Equal with no value against a valued taint", {"key": "nvidia.com/gpu"}, False),
    TolerationCase("Equal with no value against a valueless taint", {"key": "k"}, True,
                   Taint("k", "", "NoSchedule")),
    TolerationCase("an empty operator means Equal", {"key": "nvidia.com/gpu", "operator": "",
                                                     "value": "present"}, True),
    TolerationCase("Exists ignores the value", {"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    TolerationCase("Exists on another key", {"key": "other", "operator": "Exists"}, False),
    TolerationCase("empty key with Exists tolerates every taint", {"operator": "Exists"}, True),
    TolerationCase("empty key with Exists and an effect only that effect",
                   {"operator": "Exists", "effect": "NoExecute"}, False),
    TolerationCase("an empty effect matches every effect", {"key": "nvidia.com/gpu", "operator": "Exists"},
                   True, Taint("nvidia.com/gpu", "", "NoExecute")),
    TolerationCase("a different effect does not match", {"key": "nvidia.com/gpu", "operator": "Exists",
                                                         "effect": "PreferNoSchedule"}, False),
    TolerationCase("an unknown operator tolerates nothing", {"key": "nvidia.com/gpu", "operator": "Like",
                                                             "value": "present"}, False),
    TolerationCase("empty key with Equal compares values as the API does", {"value": "present"}, True),
]


@pytest.mark.parametrize("case", TOLERATIONS, ids=[c.name for c in TOLERATIONS])
def test_toleration(case: TolerationCase) -> None:
    assert Toleration.from_dict(case.toleration).tolerates(case.taint) == case.want_tolerates


@pytest.mark.parametrize(("taints", "tolerations", "want"), [
    pytest.param([GPU_TAINT], [], GPU_TAINT, id="an untolerated NoSchedule taint"),
    pytest.param([Taint("soft", "", "PreferNoSchedule")], [], None, id="PreferNoSchedule never excludes"),
    pytest.param([GPU_TAINT, Taint("maint", "", "NoExecute")], [Toleration("nvidia.com/gpu", "Exists")],
                 Taint("maint", "", "NoExecute"), id="the first taint nobody tolerates"),
    pytest.param([GPU_TAINT], [Toleration("", "Exists")], None, id="tolerate everything"),
])
def test_untolerated_taint(taints: list[Taint], tolerations: list[Toleration], want: Taint | None) -> None:
    assert untolerated_taint(taints, tolerations) == want


def test_taint_renders_as_kubectl_does() -> None:
    assert [str(GPU_TAINT), str(Taint("maint", "", "NoExecute"))] == [
        "nvidia.com/gpu=present:NoSchedule", "maint:NoExecute"]
