"""Server-side apply's merge, removal, conflicts and update tracking (devcluster.server.applying).
What kube-apiserver answers is proven in tests/conformance/test_server_side_apply.py; these pin the
pure steps."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster.server import applying, fieldsets, shapes
from devcluster.server.applying import APPLY, UPDATE, Manager, Owned
from devcluster.server.errors import ApiError
from devcluster.server.fieldsets import field, key, value

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {
        "size": {"type": "integer"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "sel": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
        "opts": {"type": "object", "additionalProperties": {"type": "string"}}}}}}
SHAPE = shapes.of_kind(SCHEMA)
BUILTIN = shapes.of_kind(None)
ALICE = Manager("alice", APPLY)
BOB = Manager("bob", APPLY)
CAROL = Manager("carol", UPDATE, "v1")
NOW = "2026-11-27T06:00:00Z"


def obj(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec}


def apply(live: dict[str, Any], cfg: dict[str, Any], managers: applying.Managers, who: Manager = ALICE,
          force: bool = False) -> tuple[dict[str, Any], applying.Managers]:
    return applying.applied(live, cfg, SHAPE, managers, who, force, "", False, "x/v1", NOW)


def p(*names: str) -> fieldsets.Path:
    return tuple(field(n) for n in names)


@pytest.mark.parametrize(("live", "cfg", "merged"), [
    pytest.param({"ports": [{"name": "a", "port": 1}]}, {"ports": [{"name": "b"}]},
                 {"ports": [{"name": "a", "port": 1}, {"name": "b"}]}, id="keyed items are added beside live ones"),
    pytest.param({"ports": [{"name": "a", "port": 1}]}, {"ports": [{"name": "a", "port": 2}]},
                 {"ports": [{"name": "a", "port": 2}]}, id="an item with the same key merges"),
    pytest.param({"tags": ["x"]}, {"tags": ["y", "x"]}, {"tags": ["y", "x"]}, id="sets take the applied order"),
    pytest.param({"args": ["1", "2"]}, {"args": ["3"]}, {"args": ["3"]}, id="atomic lists are replaced"),
    pytest.param({"sel": {"a": "1"}}, {"sel": {"b": "2"}}, {"sel": {"b": "2"}}, id="atomic maps are replaced"),
    pytest.param({"opts": {"a": "1"}}, {"opts": {"b": "2"}}, {"opts": {"a": "1", "b": "2"}}, id="maps merge"),
])
def test_merge_follows_the_schema(live: dict[str, Any], cfg: dict[str, Any], merged: dict[str, Any]) -> None:
    assert applying.merged(obj(live), obj(cfg), SHAPE)["spec"] == merged


def test_live_only_items_follow_the_shared_item_before_them() -> None:
    live = {"ports": [{"name": n} for n in "abc"]}
    cfg = {"ports": [{"name": n} for n in "dba"]}
    assert [i["name"] for i in applying.merged(obj(live), obj(cfg), SHAPE)["spec"]["ports"]] == list("dbca")


def test_config_fields_are_leaves_items_members_and_atomic_values() -> None:
    cfg = obj({"size": 1, "ports": [{"name": "a"}], "tags": ["x"], "args": ["1"], "opts": {}})
    fields = applying.owned_paths(applying.config_fields(cfg, SHAPE), "", False)
    item = (*p("spec", "ports"), key({"name": "a"}))
    assert fields == {p("spec", "size"), item, (*item, field("name")), (*p("spec", "tags"), value("x")),
                      p("spec", "args"), p("spec", "opts")}


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param({"bogus": 1}, ".spec.bogus: field not declared in schema", id="undeclared field"),
    pytest.param({"ports": [{"name": "a"}, {"name": "a"}]}, '.spec.ports: duplicate entries for key [name="a"]',
                 id="duplicate key"),
    pytest.param({"ports": [{"port": 1}]}, "element 0: associative list with keys has an element that omits all key",
                 id="keyless item"),
])
def test_untypable_configurations_are_refused(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(applying.ApplyError, match=message.replace("[", r"\[").replace(".", r"\.")):
        applying.config_fields(obj(spec), SHAPE)


def test_a_changed_field_of_another_manager_conflicts_and_force_moves_it() -> None:
    live, managers = apply({}, obj({"size": 1, "opts": {"a": "1"}}), {})
    with pytest.raises(ApiError) as refused:
        apply(live, obj({"size": 2, "opts": {"a": "1"}}), managers, BOB)
    assert refused.value.code == 409
    assert refused.value.message == 'Apply failed with 1 conflict: conflict with "alice": .spec.size'
    new, after = apply(live, obj({"size": 2}), managers, BOB, force=True)
    assert new["spec"]["size"] == 2
    assert after[ALICE].fields == {p("spec", "opts", "a")} and after[BOB].fields == {p("spec", "size")}


def test_conflicts_with_several_managers_are_grouped_by_manager() -> None:
    managers = {ALICE: Owned(frozenset({p("spec", "size")}), "x/v1", NOW),
                CAROL: Owned(frozenset({p("spec", "args")}), "v1", NOW)}
    live = obj({"size": 1, "args": ["1"]})
    with pytest.raises(ApiError) as refused:
        apply(live, obj({"size": 2, "args": ["2"]}), managers, BOB)
    assert refused.value.message == ('Apply failed with 2 conflicts: conflicts with "alice":\n- .spec.size\n'
                                     'conflicts with "carol" using v1:\n- .spec.args')
    assert [c.message for c in refused.value.causes] == ['conflict with "alice"', 'conflict with "carol" using v1']


def test_a_dropped_field_goes_unless_another_manager_owns_it_and_emptied_maps_go_too() -> None:
    live, managers = apply({}, obj({"size": 1, "opts": {"a": "1"}, "args": ["1"]}), {})
    live, managers = apply(live, obj({"args": ["1"]}), managers, BOB)
    new, after = apply(live, {k: v for k, v in obj({}).items() if k != "spec"}, managers)
    assert new["spec"] == {"args": ["1"]}
    assert not after[ALICE].fields and applying.written_managers(after)[0]["manager"] == "bob"


def test_an_update_owns_what_it_adds_or_changes_with_dots_for_new_containers() -> None:
    old = obj({"size": 1})
    managers = {ALICE: Owned(frozenset({p("spec", "size")}), "x/v1", NOW)}
    new = obj({"size": 2, "opts": {"a": "1"}})
    after = applying.updated(old, new, SHAPE, managers, CAROL, "", False, NOW)
    assert ALICE not in after  # its only field is the updater's now
    assert after[CAROL].fields == {p("spec", "size"), p("spec", "opts"), p("spec", "opts", "a")}


def test_status_and_identity_are_never_owned_by_a_main_resource_write() -> None:
    paths = {p("apiVersion"), p("metadata"), p("metadata", "name"), p("metadata", "labels", "x"), p("status", "a"),
             p("spec", "size")}
    assert applying.owned_paths(frozenset(paths), "", True) == {p("metadata", "labels", "x"), p("spec", "size")}
    assert applying.owned_paths(frozenset(paths), "status", True) == {p("status", "a")}


def test_managed_fields_round_trip_and_sort_apply_first() -> None:
    managers = {CAROL: Owned(frozenset({p("data", "b")}), "v1", NOW),
                BOB: Owned(frozenset({p("data", "a")}), "v1", NOW)}
    written = applying.written_managers(managers)
    assert [(e["manager"], e["operation"]) for e in written] == [("bob", "Apply"), ("carol", "Update")]
    assert applying.read_managers(written) == managers


def test_builtin_container_ports_are_keyed_with_the_default_protocol() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}
    fields = applying.config_fields(pod, BUILTIN)
    assert (*p("spec", "containers"), key({"name": "c"}), field("ports"),
            key({"containerPort": 80, "protocol": "TCP"})) in fields


opts = st.dictionaries(st.sampled_from("abcd"), st.sampled_from(["1", "2"]), min_size=1, max_size=4)


@given(opts, opts, opts)
def test_after_an_apply_every_applied_value_is_live_and_only_dropped_unshared_keys_are_gone(
        first: dict[str, str], other: dict[str, str], second: dict[str, str]) -> None:
    """Oracle: a map owned key by key. After alice applies `first`, bob `other` (forced) and alice
    `second`, the map holds alice's `second`, bob's values where alice does not apply, and nothing
    alice alone applied before and dropped."""
    live, managers = apply({}, obj({"opts": first}), {})
    live, managers = apply(live, obj({"opts": other}), managers, BOB, force=True)
    new, _ = apply(live, obj({"opts": second}), managers, ALICE, force=True)
    expected = {**{k: v for k, v in live["spec"].get("opts", {}).items() if k in other or k in second}, **second}
    assert new["spec"].get("opts", {}) == expected
