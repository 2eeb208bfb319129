"""documents: raw text -> documents or error lines, with limits checked before any parser builds objects."""

from __future__ import annotations

import json

import pytest

from controller.manifests.documents import MAX_DEPTH, Document, decode, parse_documents

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def parsed(text: str) -> tuple[list[tuple[str, str, object]], list[str]]:
    docs, errors = [], []
    for doc in parse_documents("f", text):
        if isinstance(doc, Document):
            docs.append((doc.origin, doc.item, doc.obj))
        else:
            errors.append(doc)
    return docs, errors


@pytest.mark.parametrize("text", [
    json.dumps({"apiVersion": "v1", "items": [NODE, NODE], "kind": "List", "metadata": {}}, indent=4),
    json.dumps({"kind": "NodeList", "apiVersion": "v1", "items": [NODE, NODE]}),
    "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n"
    "- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n",
    "apiVersion: v1\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n"
    "- {apiVersion: v1, kind: Node, metadata: {name: n1}}\nkind: List\n",
], ids=["kubectl's JSON (items before kind)", "compact JSON NodeList", "YAML List", "YAML List, items before kind"])
def test_a_list_becomes_its_items_with_their_paths(text: str) -> None:
    assert parsed(text) == ([("f:1", "items[0]", NODE), ("f:1", "items[1]", NODE)], [])


def test_lists_in_lists_flatten_and_yaml_documents_count_from_one() -> None:
    inner = {"apiVersion": "v1", "kind": "List", "items": [NODE]}
    text = "---\n" + json.dumps(NODE) + "\n---\n" + json.dumps({"apiVersion": "v1", "kind": "List", "items": [inner]})
    assert parsed(text) == ([("f:1", "", NODE), ("f:2", "items[0].items[0]", NODE)], [])


@pytest.mark.parametrize(("text", "error"), [
    ('{"apiVersion": "v1", "kind": "Node", "items": []}',
     "f:1: items: Invalid value: only a kind: List has items (kind is 'Node')"),
    ('{"apiVersion": "v1", "kind": "List", "items": [], "items": []}', "f: not JSON: duplicate key 'items'"),
    ("apiVersion: v1\nkind: Node\nitems: []\n", "f:1: items: Invalid value: only a kind: List has items"),
    ('{"apiVersion": "v1", "kind": "List", "items": []} {}', "f: not JSON: extra data at char 50"),
    ('{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node"} 2]}',
     "f: not JSON: expected ',' or ']' at char 84"),
    ('{"apiVersion": "v1", "items": [], "kind": ["List"]}',
     "f:1: kind: Required value: must be a non-empty string (is a list)"),
    ('[{"apiVersion": "v1"}]', "f:1: Invalid value: list: must be an object with apiVersion and kind"),
    ("a: [" * 60 + "]" * 60, f"f: line 1: nested deeper than {MAX_DEPTH} levels"),
    ("a: &x {b: 1}\nc: *x\n", "f: line 2: YAML aliases (*x) are not accepted"),
    ("a: !!set {b}\n", "f: line 1: YAML type 'tag:yaml.org,2002:set' has no JSON equivalent"),
    ("a: {1: x}\n", "f: line 1: mapping key 1 is not a string (quote it)"),
    ("a: 1\nb: 2\na: 3\n", "f: line 3: duplicate key 'a'"),
    ("a: [1,\n", "f: not YAML or JSON: while parsing a flow"),
], ids=["items on a kind that is not a List", "items twice", "YAML items on a kind that is not a List", "trailing data", "bad item separator",
        "a List whose kind is a list", "a top-level array", "YAML nested past the limit", "an alias",
        "a set", "an integer key", "a duplicate key", "YAML cut short"])
def test_bad_documents_are_error_lines(text: str, error: str) -> None:
    _, errors = parsed(text)
    assert len(errors) == 1 and errors[0].startswith(error), errors


def test_unquoted_timestamps_stay_strings_as_kubernetes_reads_them() -> None:
    [(_, _, obj)] = parsed("apiVersion: v1\nkind: Node\nmetadata: {creationTimestamp: 2026-01-01T00:00:00Z}\n")[0]
    assert isinstance(obj, dict)
    assert obj["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(("data", "text", "problem"), [
    (b"\xef\xbb\xbfa: 1", "a: 1", None),
    (b"a: \xc3", None, "not UTF-8 text: byte 3 (0xc3) is invalid"),
], ids=["a BOM is dropped", "a truncated UTF-8 sequence"])
def test_decode(data: bytes, text: str | None, problem: str | None) -> None:
    assert decode(data) == (text, problem)
