"""Patch semantics: strategic merge (the list fields kubectl apply touches), JSON merge, JSON patch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster.server.patching import PatchError, json_patch, merge_patch, strategic_merge_patch


@dataclass(frozen=True)
class SMPCase:
    name: str
    original: dict[str, Any]
    patch: dict[str, Any]
    want: dict[str, Any]


def containers(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "image": i} for n, i in pairs]


SMP_CASES = [
    SMPCase("containers merge by name and keep the ones the patch does not mention",
            {"containers": containers(("a", "1"), ("b", "1"))},
            {"containers": [{"name": "b", "image": "2"}]},
            {"containers": containers(("a", "1"), ("b", "2"))}),
    SMPCase("a new container is appended",
            {"containers": containers(("a", "1"))},
            {"containers": [{"name": "c", "image": "1"}]},
            {"containers": containers(("a", "1"), ("c", "1"))}),
    SMPCase("$patch: delete removes the item with that merge key",
            {"containers": containers(("a", "1"), ("b", "1"))},
            {"containers": [{"name": "a", "$patch": "delete"}]},
            {"containers": containers(("b", "1"))}),
    SMPCase("env merges by name inside a container",
            {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]},
            {"containers": [{"name": "a", "env": [{"name": "Y", "value": "3"}, {"name": "Z", "value": "4"}]}]},
            {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"},
                                                  {"name": "Z", "value": "4"}]}]}),
    SMPCase("$setElementOrder puts the listed items in that order",
            {"containers": containers(("a", "1"), ("b", "1"))},
            {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}], "containers": [{"name": "a", "image": "2"}]},
            {"containers": containers(("b", "1"), ("a", "2"))}),
    SMPCase("scheduling gates merge by name and can be deleted one by one",
            {"schedulingGates": [{"name": "g1"}, {"name": "g2"}]},
            {"schedulingGates": [{"name": "g1", "$patch": "delete"}]},
            {"schedulingGates": [{"name": "g2"}]}),
    SMPCase("tolerations have no merge strategy: the list is replaced",
            {"tolerations": [{"key": "a", "operator": "Exists"}]},
            {"tolerations": [{"key": "b", "operator": "Exists"}]},
            {"tolerations": [{"key": "b", "operator": "Exists"}]}),
    SMPCase("node taints are atomic too",
            {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]},
            {"taints": [{"key": "b", "effect": "NoExecute"}]},
            {"taints": [{"key": "b", "effect": "NoExecute"}]}),
    SMPCase("pod conditions merge by type",
            {"conditions": [{"type": "PodScheduled", "status": "False"}, {"type": "Ready", "status": "False"}]},
            {"conditions": [{"type": "PodScheduled", "status": "True"}]},
            {"conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}),
    SMPCase("finalizers merge as a set",
            {"metadata": {"finalizers": ["x", "y"]}},
            {"metadata": {"finalizers": ["y", "z"]}},
            {"metadata": {"finalizers": ["x", "y", "z"]}}),
    SMPCase("$deleteFromPrimitiveList removes finalizers",
            {"metadata": {"finalizers": ["x", "y"]}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}},
            {"metadata": {"finalizers": ["y"]}}),
    SMPCase("ownerReferences merge by uid",
            {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}},
            {"metadata": {"ownerReferences": [{"uid": "2", "name": "b2"}]}},
            {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b2"}]}}),
    SMPCase("volume mounts merge by mountPath",
            {"volumeMounts": [{"name": "v", "mountPath": "/a"}]},
            {"volumeMounts": [{"name": "w", "mountPath": "/a"}]},
            {"volumeMounts": [{"name": "w", "mountPath": "/a"}]}),
    SMPCase("container ports merge by containerPort",
            {"ports": [{"containerPort": 80, "name": "http"}]},
            {"ports": [{"containerPort": 80, "name": "web"}, {"containerPort": 443}]},
            {"ports": [{"containerPort": 80, "name": "web"}, {"containerPort": 443}]}),
    SMPCase("a null deletes a key; maps merge",
            {"metadata": {"labels": {"a": "1", "b": "2"}}},
            {"metadata": {"labels": {"a": None, "c": "3"}}},
            {"metadata": {"labels": {"b": "2", "c": "3"}}}),
    SMPCase("$patch: replace on a map replaces it whole",
            {"nodeSelector": {"a": "1", "b": "2"}},
            {"nodeSelector": {"$patch": "replace", "c": "3"}},
            {"nodeSelector": {"c": "3"}}),
    SMPCase("$patch: replace inside a keyed list replaces the list",
            {"containers": containers(("a", "1"), ("b", "1"))},
            {"containers": [{"$patch": "replace"}, {"name": "c", "image": "9"}]},
            {"containers": containers(("c", "9"))}),
    SMPCase("$retainKeys drops keys not listed",
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
            {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
            {"strategy": {"type": "Recreate"}}),
]


@pytest.mark.parametrize("case", SMP_CASES, ids=lambda c: c.name)
def test_strategic_merge_patch(case: SMPCase) -> None:
    assert strategic_merge_patch(case.original, case.patch) == case.want


def test_strategic_merge_patch_does_not_mutate_its_inputs() -> None:
    original = {"containers": containers(("a", "1"))}
    patch = {"containers": [{"name": "a", "image": "2"}]}
    strategic_merge_patch(original, patch)
    assert original == {"containers": containers(("a", "1"))}
    assert patch == {"containers": [{"name": "a", "image": "2"}]}


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3), max_size=6),
       st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 3), max_size=6))
def test_keyed_list_merge_matches_a_dict_update_oracle(before: dict[str, int], patch: dict[str, int]) -> None:
    """Merging by name equals updating a name -> value dict (order: existing first, then new)."""
    original = {"env": [{"name": k, "value": v} for k, v in before.items()]}
    merged = strategic_merge_patch(original, {"env": [{"name": k, "value": v} for k, v in patch.items()]})
    oracle = {**before, **patch}
    assert [(e["name"], e["value"]) for e in merged["env"]] == list(oracle.items())


@dataclass(frozen=True)
class MergeCase:
    name: str
    target: Any
    patch: Any
    want: Any


# RFC 7386 appendix A examples.
MERGE_CASES = [
    MergeCase("replaces a value", {"a": "b"}, {"a": "c"}, {"a": "c"}),
    MergeCase("adds a key", {"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    MergeCase("null removes", {"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    MergeCase("lists are replaced", {"a": ["b"]}, {"a": ["c", "d"]}, {"a": ["c", "d"]}),
    MergeCase("nested null removes deep", {"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    MergeCase("a non-object patch replaces all", {"a": "foo"}, ["c"], ["c"]),
    MergeCase("patching a scalar with an object", {"e": None}, {"a": 1}, {"e": None, "a": 1}),
]


@pytest.mark.parametrize("case", MERGE_CASES, ids=lambda c: c.name)
def test_json_merge_patch_rfc7386(case: MergeCase) -> None:
    assert merge_patch(case.target, case.patch) == case.want


@dataclass(frozen=True)
class JsonPatchCase:
    name: str
    doc: Any
    ops: list[dict[str, Any]]
    want: Any


JSON_PATCH_CASES = [
    JsonPatchCase("add to a map", {"a": 1}, [{"op": "add", "path": "/b", "value": 2}], {"a": 1, "b": 2}),
    JsonPatchCase("append with -", {"l": [1]}, [{"op": "add", "path": "/l/-", "value": 2}], {"l": [1, 2]}),
    JsonPatchCase("insert at an index", {"l": [1, 3]}, [{"op": "add", "path": "/l/1", "value": 2}], {"l": [1, 2, 3]}),
    JsonPatchCase("remove a list item", {"l": [1, 2]}, [{"op": "remove", "path": "/l/0"}], {"l": [2]}),
    JsonPatchCase("replace", {"a": 1}, [{"op": "replace", "path": "/a", "value": 5}], {"a": 5}),
    JsonPatchCase("move", {"a": 1}, [{"op": "move", "from": "/a", "path": "/b"}], {"b": 1}),
    JsonPatchCase("copy", {"a": {"x": 1}}, [{"op": "copy", "from": "/a", "path": "/b"}],
                  {"a": {"x": 1}, "b": {"x": 1}}),
    JsonPatchCase("escaped key ~1 is a slash", {"metadata": {"labels": {}}},
                  [{"op": "add", "path": "/metadata/labels/a~1b", "value": "v"}],
                  {"metadata": {"labels": {"a/b": "v"}}}),
    JsonPatchCase("a passing test op", {"a": 1}, [{"op": "test", "path": "/a", "value": 1}], {"a": 1}),
]


@pytest.mark.parametrize("case", JSON_PATCH_CASES, ids=lambda c: c.name)
def test_json_patch_rfc6902(case: JsonPatchCase) -> None:
    assert json_patch(case.doc, case.ops) == case.want


@pytest.mark.parametrize("ops, want_message", [
    ([{"op": "test", "path": "/a", "value": 2}], "testing value /a failed"),
    ([{"op": "remove", "path": "/missing"}], "unable to remove nonexistent key: missing"),
    ([{"op": "replace", "path": "/x/y", "value": 1}], "doc is missing path"),
    ([{"op": "frobnicate", "path": "/a"}], "unexpected kind: frobnicate"),
], ids=["failed test", "remove missing", "replace missing parent", "unknown op"])
def test_json_patch_errors(ops: list[dict[str, Any]], want_message: str) -> None:
    with pytest.raises(PatchError, match=want_message):
        json_patch({"a": 1}, ops)
