"""changes(obj, patch): a merge patch is a no-op exactly when applying it (RFC 7386) leaves the object
as it was; resourceVersion in a patch is a precondition only."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.merge_patch import changes


def apply(target: Any, patch: Any) -> Any:
    """RFC 7386's MergePatch, as its text writes it (the oracle)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply(result.get(key), value)
    return result


QUEUE = {"metadata": {"name": "cq", "resourceVersion": "7"},
         "status": {"pendingWorkloads": 0, "admittedWorkloads": 2, "conditions": [{"type": "Active", "status": "True"}]}}


@pytest.mark.parametrize(("patch", "expected"), [
    ({"status": {"admittedWorkloads": 2}}, False),
    ({"status": {"admittedWorkloads": 3}}, True),
    ({"metadata": {"resourceVersion": "6"}, "status": {"pendingWorkloads": 0}}, False),
    ({"status": {"conditions": [{"type": "Active", "status": "True"}]}}, False),
    ({"status": {"conditions": [{"type": "Active", "status": "False"}]}}, True),
    ({"status": {"flavorsUsage": None}}, False),
    ({"status": {"pendingWorkloads": None}}, True),
    ({"status": {"flavorsUsage": {}}}, True),
    ({"spec": {"x": None}}, True),
], ids=["the-same-count", "another-count", "a-resource-version-alone-is-no-change",
        "the-same-list", "a-list-is-replaced-whole", "removing-what-is-absent", "removing-what-is-there",
        "an-empty-object-where-none-was", "nulls-into-nothing-still-add-an-object"])
def test_a_patch_is_a_no_op_only_when_every_value_is_there_already(patch: dict[str, Any], expected: bool) -> None:
    assert changes(QUEUE, patch) is expected


values = st.recursive(st.none() | st.booleans() | st.integers(0, 2) | st.sampled_from(["a", "b"]),
                      lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
                      max_leaves=8)
objects = st.dictionaries(st.sampled_from("xyz"), values.filter(lambda v: v is not None), max_size=3)
patches = st.dictionaries(st.sampled_from("xyz"), values, max_size=3)


@given(objects, patches)
def test_changes_agrees_with_applying_the_patch(obj: dict[str, Any], patch: dict[str, Any]) -> None:
    assert changes(obj, patch) == (apply(obj, patch) != obj)
