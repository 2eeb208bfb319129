"""fieldsV1 encoding, decoding, path text and set order (devcluster.server.fieldsets)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster.server import fieldsets
from devcluster.server.fieldsets import Path, field, key, value

SPEC = field("spec")
PORT_A = key({"proto": "TCP", "name": "a"})


@pytest.mark.parametrize(("paths", "encoded"), [
    pytest.param({(field("data"), field("a"))}, {"f:data": {"f:a": {}}}, id="a leaf is an empty object"),
    pytest.param({(field("data"),), (field("data"), field("a"))}, {"f:data": {".": {}, "f:a": {}}},
                 id="a member with children is marked with a dot"),
    pytest.param({(SPEC, field("ports"), PORT_A), (SPEC, field("ports"), PORT_A, field("name"))},
                 {"f:spec": {"f:ports": {'k:{"name":"a","proto":"TCP"}': {".": {}, "f:name": {}}}}},
                 id="item keys are a compact object with sorted fields"),
    pytest.param({(SPEC, field("tags"), value("x"))}, {"f:spec": {"f:tags": {'v:"x"': {}}}},
                 id="set members are their JSON value"),
])
def test_encoding_as_kube_apiserver_writes_it(paths: set[Path], encoded: dict[str, object]) -> None:
    assert fieldsets.encode(paths) == encoded
    assert fieldsets.decode(encoded) == frozenset(paths)


def test_a_client_spelling_of_a_key_decodes_to_the_same_path() -> None:
    assert fieldsets.decode({'k:{"proto": "TCP", "name": "a"}': {}}) == {(PORT_A,)}


def test_malformed_trees_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown field path element"):
        fieldsets.decode({"x:y": {}})


def test_paths_print_as_conflict_messages_name_them() -> None:
    assert fieldsets.printed((SPEC, field("ports"), PORT_A, field("port"))) == '.spec.ports[name="a",proto="TCP"].port'
    assert fieldsets.printed((SPEC, field("tags"), value("x"))) == '.spec.tags[="x"]'


def test_order_lists_the_members_of_a_level_before_deeper_paths() -> None:
    paths = {(SPEC, field("size")), (SPEC, field("ports"), PORT_A, field("port")), (SPEC, field("args"))}
    assert [fieldsets.printed(p) for p in fieldsets.ordered(paths)] == [
        ".spec.args", ".spec.size", '.spec.ports[name="a",proto="TCP"].port']


def test_without_below_drops_a_path_and_its_descendants_only() -> None:
    item = (SPEC, field("ports"), PORT_A)
    kept = (SPEC, field("size"))
    assert fieldsets.without_below({item, (*item, field("name")), kept}, {item}) == {kept}


names = st.sampled_from(["a", "b", "spec", "x.y"])
elements = st.one_of(names.map(field), names.map(lambda n: key({"name": n})), st.integers(0, 3).map(value))


@given(st.sets(st.lists(elements, min_size=1, max_size=4).map(tuple), max_size=8))
def test_decode_inverts_encode(paths: set[Path]) -> None:
    assert fieldsets.decode(fieldsets.encode(paths)) == frozenset(paths)
