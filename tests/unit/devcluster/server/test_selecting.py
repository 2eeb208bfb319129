"""labelSelector / fieldSelector query strings: parsing and matching as apimachinery does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster.server.selecting import (
    SelectorError,
    field_value,
    fields_match,
    label_selector_matches,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)


@dataclass(frozen=True)
class LabelCase:
    name: str
    selector: str
    labels: dict[str, str]
    want_match: bool


LABEL_CASES = [
    LabelCase("equality matches", "app=web", {"app": "web"}, True),
    LabelCase("double equals is equality", "app==web", {"app": "db"}, False),
    LabelCase("inequality matches a missing label", "app!=web", {}, True),
    LabelCase("inequality refuses the value", "app!=web", {"app": "web"}, False),
    LabelCase("in", "tier in (gold, silver)", {"tier": "silver"}, True),
    LabelCase("in needs the label", "tier in (gold)", {}, False),
    LabelCase("notin matches a missing label", "tier notin (gold)", {}, True),
    LabelCase("exists", "tier", {"tier": ""}, True),
    LabelCase("does not exist", "!tier", {"tier": "x"}, False),
    LabelCase("requirements are ANDed", "a=1,b in (2,3),!c", {"a": "1", "b": "3"}, True),
    LabelCase("prefixed keys", "kueue.x-k8s.io/queue-name=team", {"kueue.x-k8s.io/queue-name": "team"}, True),
    LabelCase("empty selector matches everything", "", {"x": "y"}, True),
]


@pytest.mark.parametrize("case", LABEL_CASES, ids=lambda c: c.name)
def test_label_selector(case: LabelCase) -> None:
    assert labels_match(parse_label_selector(case.selector), case.labels) is case.want_match


@pytest.mark.parametrize("text", ["a=b=c", "in (x)", "a in x", "=b", "a b"])
def test_unparsable_label_selector_is_an_error(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.sampled_from(["1", "2"])


@given(st.dictionaries(KEYS, VALUES), st.lists(st.tuples(KEYS, st.sampled_from(["=", "!=", "in", "notin", "", "!"]),
                                                          st.lists(VALUES, min_size=1, max_size=2)), max_size=3))
def test_label_selector_matches_a_brute_force_oracle(labels: dict[str, str],
                                                     reqs: list[tuple[str, str, list[str]]]) -> None:
    parts, oracle = [], True
    for key, op, values in reqs:
        if op in ("=", "!="):
            parts.append(f"{key}{op}{values[0]}")
            oracle &= (labels.get(key) == values[0]) if op == "=" else (labels.get(key) != values[0])
        elif op in ("in", "notin"):
            parts.append(f"{key} {op} ({','.join(values)})")
            inside = key in labels and labels[key] in values
            oracle &= inside if op == "in" else not inside
        else:
            parts.append(f"{op}{key}")
            oracle &= (key in labels) if op == "" else (key not in labels)
    assert labels_match(parse_label_selector(",".join(parts)), labels) is oracle


POD = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
ALLOWED = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")


@pytest.mark.parametrize("selector, want_match", [
    ("spec.nodeName=n1", True),
    ("spec.nodeName==n1,status.phase=Running", True),
    ("spec.nodeName!=n1", False),
    ("status.phase!=Succeeded,status.phase!=Failed", True),
    ("metadata.namespace=other", False),
], ids=["equal", "two terms", "not equal", "not terminal", "namespace"])
def test_field_selector(selector: str, want_match: bool) -> None:
    assert fields_match(parse_field_selector(selector, ALLOWED), POD) is want_match


def test_empty_field_value_selects_unbound_pods() -> None:
    unbound = {"metadata": {"name": "q"}, "spec": {}}
    assert fields_match(parse_field_selector("spec.nodeName=", ALLOWED), unbound)


def test_unsupported_field_is_refused_with_its_name() -> None:
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.hostname"):
        parse_field_selector("spec.hostname=x", ALLOWED)


def test_event_source_matches_its_component() -> None:
    assert field_value({"source": {"component": "kubelet"}}, "source") == "kubelet"


@pytest.mark.parametrize("obj, path, want", [
    ({"spec": {}}, "spec.unschedulable", "false"),
    ({"spec": {"unschedulable": True}}, "spec.unschedulable", "true"),
    ({"status": {}}, "status.successful", "0"),
    ({}, "spec.nodeName", ""),
], ids=["absent bool", "set bool", "absent count", "absent string"])
def test_absent_fields_read_as_go_zero_values(obj: dict[str, object], path: str, want: str) -> None:
    assert field_value(obj, path) == want


@pytest.mark.parametrize(("_name", "selector", "matches"), [
    ("absent selects all", None, True),
    ("empty selects all", {}, True),
    ("matchLabels pair present", {"matchLabels": {"team": "a"}}, True),
    ("matchLabels pair differs", {"matchLabels": {"team": "b"}}, False),
    ("NotIn with the label absent", {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]},
     True),
    ("labels and expressions ANDed", {"matchLabels": {"team": "a"},
                                      "matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
])
def test_label_selector_object(_name: str, selector: dict[str, Any] | None, matches: bool) -> None:
    assert label_selector_matches(selector, {"team": "a"}) is matches


@pytest.mark.parametrize(("_name", "allowed", "message"), [
    ("a kind with field labels of its own", ("metadata.name", "metadata.namespace", "spec.nodeName"),
     "field label not supported: data.k"),
    ("a kind with only the metadata fields lists them", ("metadata.name", "metadata.namespace"),
     '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'),
])
def test_an_unknown_field_is_refused_as_the_kind_answers(_name: str, allowed: tuple[str, ...], message: str) -> None:
    with pytest.raises(SelectorError) as refused:
        parse_field_selector("data.k=v", allowed)
    assert str(refused.value) == message
