"""yaml_stream: YAML built from libyaml's events, strictly, with a top-level items list streamed."""

from __future__ import annotations

import pytest

from controller.manifests.yaml_stream import STREAMED, YamlProblem, read_yaml


def test_scalars_resolve_as_the_safe_loader_does_but_timestamps_stay_strings() -> None:
    text = "a: 1\nb: 1.5\nc: true\nd: null\ne: '1'\nf: 2026-01-01T00:00:00Z\ng: 2026-01-01\nh: 0x10\n"
    assert list(read_yaml(text, 10)) == [(1, "", {"a": 1, "b": 1.5, "c": True, "d": None, "e": "1",
                                                  "f": "2026-01-01T00:00:00Z", "g": "2026-01-01", "h": 16})]


def test_documents_are_numbered_from_one_and_empty_ones_skipped() -> None:
    assert list(read_yaml("---\na: 1\n---\n---\n- 2\n", 10)) == [(1, "", {"a": 1}), (3, "", [2])]


def test_a_top_level_items_list_is_handed_out_item_by_item_before_the_rest() -> None:
    text = "apiVersion: v1\nitems:\n- {a: 1}\n- [b]\nkind: List\n"
    assert list(read_yaml(text, 10)) == [(1, "items[0]", {"a": 1}), (1, "items[1]", ["b"]),
                                         (1, "", {"apiVersion": "v1", "items": STREAMED, "kind": "List"})]


def test_only_the_top_level_items_are_streamed() -> None:
    assert list(read_yaml("spec:\n  items: [1]\n", 10)) == [(1, "", {"spec": {"items": [1]}})]


def test_an_anchor_without_alias_is_harmless() -> None:
    assert list(read_yaml("a: &x 1\n", 10)) == [(1, "", {"a": 1})]


@pytest.mark.parametrize(("text", "problem"), [
    ("- " * 11 + "x\n", "line 1: nested deeper than 10 levels"),
    ("a: &x [1]\nb: *x\n", "line 2: YAML aliases (*x) are not accepted"),
    ("a: {b: 1}\n<<: {c: 2}\n", "line 2: YAML merge keys (<<) are not accepted"),
    ("? [a]\n: 1\n", "line 1: mapping key ['a'] is not a string (quote it)"),
    ("a: 1\na: 2\n", "line 2: duplicate key 'a'"),
    ("a: !!binary aGk=\n", "line 1: YAML type 'tag:yaml.org,2002:binary' has no JSON equivalent"),
    ("a: !custom x\n", "line 1: YAML type '!custom' has no JSON equivalent"),
    ("a: [\n", "not YAML or JSON: while parsing a flow node"),
], ids=["too deep", "an alias", "a merge key", "a list as key", "a duplicate key", "binary", "a custom tag",
        "cut short"])
def test_problems(text: str, problem: str) -> None:
    with pytest.raises(YamlProblem) as err:
        list(read_yaml(text, 10))
    assert str(err.value).startswith(problem)
