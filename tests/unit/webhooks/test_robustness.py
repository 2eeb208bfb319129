"""Validators never raise: any field of a valid manifest replaced by arbitrary JSON yields errors,
not exceptions (webhooks must answer every request), and unchanged manifests stay valid."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhooks.validation import FieldError, validate, validate_update

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
DOCS = [d for p in sorted(SAMPLES.glob("[0-9]*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `node` (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        out.extend(_paths(child, (*prefix, key)))
    return out


def _replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    holder: Any = out
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return out


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a valid sample, the same sample with one field replaced by arbitrary JSON)."""
    doc = draw(st.sampled_from(DOCS))
    path = draw(st.sampled_from(_paths(doc)))
    return doc, _replaced(doc, path, draw(json_values))


@settings(max_examples=300, deadline=None)
@given(corrupted())
def test_corrupted_manifests_give_errors_not_exceptions(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    valid, broken = pair
    for errs in (validate(broken), validate_update(valid, broken), validate_update(broken, valid)):
        assert all(isinstance(e, FieldError) and isinstance(e.path, str) for e in errs)


def test_unchanged_samples_update_cleanly() -> None:
    for doc in DOCS:
        assert validate_update(doc, copy.deepcopy(doc)) == []
