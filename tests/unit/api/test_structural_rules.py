"""The structural-schema checker: each rule caught at its path, valid shapes left alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.api.structural_rules import Rule, check_crd, check_schema

# Small schema builders: each returns a fresh OpenAPI node.


def string(**extra: Any) -> dict[str, Any]:
    return {"type": "string", **extra}


def integer(**extra: Any) -> dict[str, Any]:
    return {"type": "integer", **extra}


def array(items: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "array", **extra}
    if items is not None:
        node["items"] = items
    return node


def obj(properties: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", **extra}
    if properties is not None:
        node["properties"] = properties
    return node


def root(spec: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A resource root whose `spec` is the node under test."""
    props: dict[str, Any] = {"apiVersion": string(), "kind": string(), "metadata": obj()}
    if spec is not None:
        props["spec"] = spec
    return obj(props, **extra)


INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [integer(), string()], "pattern": "^[0-9]+$"}
SPEC = "openAPIV3Schema.properties[spec]"


@dataclass(frozen=True)
class BrokenCase:
    name: str
    schema: dict[str, Any]
    want: tuple[tuple[str, Rule], ...]  # (want_path, want_rule), in walk order


def one(path: str, rule: Rule) -> tuple[tuple[str, Rule], ...]:
    return ((path, rule),)


BROKEN_CASES = [
    BrokenCase("a field without a type", root(obj({"size": {"minimum": 1}})),
               one(f"{SPEC}.properties[size].type", Rule.TYPE_REQUIRED)),
    BrokenCase("array items without a type", root(obj({"tags": array({"maxLength": 3})})),
               one(f"{SPEC}.properties[tags].items.type", Rule.TYPE_REQUIRED)),
    BrokenCase("map values without a type", root(obj({"m": obj(additionalProperties={"pattern": "x"})})),
               one(f"{SPEC}.properties[m].additionalProperties.type", Rule.TYPE_REQUIRED)),
    BrokenCase("an unknown type", root(obj({"f": {"type": "float"}})),
               one(f"{SPEC}.properties[f].type", Rule.TYPE_UNKNOWN)),
    BrokenCase("an array without items", root(obj({"tags": array()})),
               one(f"{SPEC}.properties[tags].items", Rule.ITEMS_REQUIRED)),
    BrokenCase("a $ref", root(obj({"r": {"$ref": "#/definitions/x", "type": "object"}})),
               one(f"{SPEC}.properties[r].$ref", Rule.FORBIDDEN_KEYWORD)),
    BrokenCase("uniqueItems true", root(obj({"s": array(string(), uniqueItems=True)})),
               one(f"{SPEC}.properties[s].uniqueItems", Rule.FORBIDDEN_KEYWORD)),
    BrokenCase("items given as a list (tuple validation)", root(obj({"t": {"type": "array", "items": [string()]}})),
               (
                   (f"{SPEC}.properties[t].items", Rule.FORBIDDEN_KEYWORD),
                   (f"{SPEC}.properties[t].items", Rule.ITEMS_REQUIRED),
               )),
    BrokenCase("properties and additionalProperties together",
               root(obj({"a": string()}, additionalProperties=string())),
               one(f"{SPEC}.additionalProperties", Rule.PROPERTIES_AND_ADDITIONAL)),
    BrokenCase("additionalProperties false", root(obj({"m": obj(additionalProperties=False)})),
               one(f"{SPEC}.properties[m].additionalProperties", Rule.ADDITIONAL_FALSE)),
    BrokenCase("a root that is not an object", {"type": "string"},
               one("openAPIV3Schema.type", Rule.ROOT_NOT_OBJECT)),
    BrokenCase("a root that is a map", obj(additionalProperties=string()),
               one("openAPIV3Schema.additionalProperties", Rule.ROOT_ADDITIONAL)),
    BrokenCase("apiVersion that is not a string", obj({"apiVersion": integer()}),
               one("openAPIV3Schema.properties[apiVersion].type", Rule.METADATA)),
    BrokenCase("a type inside anyOf", root(obj({"a": string()}, anyOf=[{"type": "object"}])),
               one(f"{SPEC}.anyOf[0].type", Rule.JUNCTOR_KEYWORD)),
    BrokenCase("a description inside allOf", root(obj({"a": string()}, allOf=[{"description": "x"}])),
               one(f"{SPEC}.allOf[0].description", Rule.JUNCTOR_KEYWORD)),
    BrokenCase("nullable inside not", root(obj({"a": string()}, **{"not": {"nullable": True}})),
               one(f"{SPEC}.not.nullable", Rule.JUNCTOR_KEYWORD)),
    BrokenCase("a default deep inside oneOf",
               root(obj({"a": obj({"b": string()})}, oneOf=[{"properties": {"a": {"properties": {
                   "b": {"default": "x"}}}}}])),
               one(f"{SPEC}.oneOf[0].properties[a].properties[b].default", Rule.JUNCTOR_KEYWORD)),
    BrokenCase("an extension inside anyOf",
               root(obj({"a": string()}, anyOf=[{"x-kubernetes-preserve-unknown-fields": True}])),
               one(f"{SPEC}.anyOf[0].x-kubernetes-preserve-unknown-fields", Rule.JUNCTOR_KEYWORD)),
    BrokenCase("a field only specified inside anyOf",
               root(obj({"a": string()}, anyOf=[{"properties": {"b": {"maxLength": 2}}}])),
               one(f"{SPEC}.anyOf[0].properties[b]", Rule.JUNCTOR_UNSPECIFIED)),
    BrokenCase("items only specified inside allOf",
               root(obj({"l": array(string(), allOf=[{"items": {"items": {"minLength": 1}}}])})),
               one(f"{SPEC}.properties[l].allOf[0].items.items", Rule.JUNCTOR_UNSPECIFIED)),
    BrokenCase("int-or-string with a type", root(obj({"q": {**INT_OR_STRING, "type": "string"}})),
               one(f"{SPEC}.properties[q].type", Rule.INT_OR_STRING)),
    BrokenCase("int-or-string spelled with other types",
               root(obj({"q": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "number"}, string()]}})),
               (
                   (f"{SPEC}.properties[q].anyOf[0].type", Rule.JUNCTOR_KEYWORD),
                   (f"{SPEC}.properties[q].anyOf[1].type", Rule.JUNCTOR_KEYWORD),
               )),
    BrokenCase("preserve-unknown-fields false",
               root(obj({"a": obj({"b": string()}, **{"x-kubernetes-preserve-unknown-fields": False})})),
               one(f"{SPEC}.properties[a].x-kubernetes-preserve-unknown-fields", Rule.PRESERVE_FALSE)),
    BrokenCase("an embedded resource that is a string",
               root(obj({"e": string(**{"x-kubernetes-embedded-resource": True})})),
               (
                   (f"{SPEC}.properties[e].type", Rule.EMBEDDED_RESOURCE),
                   (f"{SPEC}.properties[e].x-kubernetes-preserve-unknown-fields", Rule.EMBEDDED_RESOURCE),
               )),
    BrokenCase("an embedded resource whose metadata constrains labels",
               root(obj({"e": obj({"metadata": obj({"labels": obj()})},
                                  **{"x-kubernetes-embedded-resource": True})})),
               one(f"{SPEC}.properties[e].properties[metadata].properties[labels]", Rule.METADATA)),
    BrokenCase("an unknown list type", root(obj({"l": array(string(), **{"x-kubernetes-list-type": "bag"})})),
               one(f"{SPEC}.properties[l].x-kubernetes-list-type", Rule.LIST_TYPE)),
    BrokenCase("a map list without keys",
               root(obj({"l": array(obj({"k": string()}, required=["k"]), **{"x-kubernetes-list-type": "map"})})),
               one(f"{SPEC}.properties[l].x-kubernetes-list-map-keys", Rule.LIST_TYPE)),
    BrokenCase("a map list keyed by an optional field",
               root(obj({"l": array(obj({"k": string()}), **{"x-kubernetes-list-type": "map",
                                                           "x-kubernetes-list-map-keys": ["k"]})})),
               one(f"{SPEC}.properties[l].x-kubernetes-list-map-keys[0]", Rule.LIST_TYPE)),
    BrokenCase("map keys on a set list",
               root(obj({"l": array(string(), **{"x-kubernetes-list-type": "set",
                                                 "x-kubernetes-list-map-keys": ["k"]})})),
               one(f"{SPEC}.properties[l].x-kubernetes-list-map-keys", Rule.LIST_TYPE)),
    BrokenCase("a set of granular objects",
               root(obj({"l": array(obj({"k": string()}), **{"x-kubernetes-list-type": "set"})})),
               one(f"{SPEC}.properties[l].items", Rule.LIST_TYPE)),
    BrokenCase("a map type on an array",
               root(obj({"l": array(string(), **{"x-kubernetes-map-type": "atomic"})})),
               one(f"{SPEC}.properties[l].x-kubernetes-map-type", Rule.MAP_TYPE)),
    BrokenCase("metadata constraining labels", obj({"metadata": obj({"labels": obj()})}),
               one("openAPIV3Schema.properties[metadata].properties[labels]", Rule.METADATA)),
    BrokenCase("metadata name that is an integer", obj({"metadata": obj({"name": integer()})}),
               one("openAPIV3Schema.properties[metadata].properties[name].type", Rule.METADATA)),
    BrokenCase("metadata name with a default", obj({"metadata": obj({"name": string(default="x")})}),
               one("openAPIV3Schema.properties[metadata].properties[name].default", Rule.METADATA)),
    BrokenCase("metadata with required fields", obj({"metadata": obj(required=["name"])}),
               one("openAPIV3Schema.properties[metadata].required", Rule.METADATA)),
    BrokenCase("metadata constrained inside a root junctor",
               obj({"metadata": obj()}, anyOf=[{"properties": {"metadata": {"required": ["name"]}}}]),
               one("openAPIV3Schema.anyOf[0].properties[metadata]", Rule.METADATA)),
    BrokenCase("a null default on a non-nullable field", root(obj({"a": string(default=None)})),
               one(f"{SPEC}.properties[a].default", Rule.DEFAULT_NULL)),
    BrokenCase("three independent breaks are all reported",
               root(obj({"a": {}, "b": array(), "c": {"type": "float"}})),
               (
                   (f"{SPEC}.properties[a].type", Rule.TYPE_REQUIRED),
                   (f"{SPEC}.properties[b].items", Rule.ITEMS_REQUIRED),
                   (f"{SPEC}.properties[c].type", Rule.TYPE_UNKNOWN),
               )),
]


@pytest.mark.parametrize("case", BROKEN_CASES, ids=lambda case: case.name)
def test_checker_catches_each_rule_at_its_path(case: BrokenCase) -> None:
    got = tuple((v.path, v.rule) for v in check_schema(case.schema))
    assert got == case.want


@dataclass(frozen=True)
class ValidCase:
    name: str
    schema: dict[str, Any]


VALID_CASES = [
    ValidCase("int-or-string spelled with anyOf", root(obj({"q": dict(INT_OR_STRING)}))),
    ValidCase("int-or-string spelled with allOf and more validation",
              root(obj({"q": {"x-kubernetes-int-or-string": True,
                              "allOf": [{"anyOf": [integer(), string()]}, {"pattern": "^[0-9]"}]}}))),
    ValidCase("int-or-string without junctors", root(obj({"q": {"x-kubernetes-int-or-string": True}}))),
    ValidCase("an untyped preserved field", root(obj({"free": {"x-kubernetes-preserve-unknown-fields": True}}))),
    ValidCase("value validation over fields specified outside",
              root(obj({"a": string(), "b": obj({"c": integer()})},
                       anyOf=[{"required": ["a"]}, {"properties": {"b": {"properties": {"c": {"minimum": 2}}}}}],
                       **{"not": {"required": ["a", "b"]}}))),
    ValidCase("metadata restricting name and generateName",
              obj({"metadata": obj({"name": string(maxLength=63, pattern="^[a-z]+$"),
                                    "generateName": string(maxLength=50)})})),
    ValidCase("a nested field that happens to be called metadata",
              root(obj({"metadata": obj({"labels": obj(additionalProperties=string())})}))),
    ValidCase("a map list keyed by a required and a defaulted field",
              root(obj({"l": array(obj({"k": string(), "j": string(default="x")}, required=["k"]),
                                   **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "j"]})}))),
    ValidCase("a set of strings", root(obj({"l": array(string(), **{"x-kubernetes-list-type": "set"})}))),
    ValidCase("an embedded resource that preserves its fields",
              root(obj({"e": obj(None, **{"x-kubernetes-embedded-resource": True,
                                          "x-kubernetes-preserve-unknown-fields": True})}))),
    ValidCase("nullable with a null default", root(obj({"a": string(nullable=True, default=None)}))),
]


@pytest.mark.parametrize("case", VALID_CASES, ids=lambda case: case.name)
def test_checker_accepts_structural_shapes(case: ValidCase) -> None:
    assert check_schema(case.schema) == []


def test_check_crd_prefixes_paths_with_the_version_and_flags_a_missing_schema() -> None:
    crd = {"spec": {"versions": [
        {"name": "v1", "schema": {"openAPIV3Schema": root(obj({"a": {}}))}},
        {"name": "v2"},
    ]}}
    got = [(v.path, v.rule) for v in check_crd(crd)]
    assert got == [
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].type", Rule.TYPE_REQUIRED),
        ("spec.versions[1].schema.openAPIV3Schema", Rule.TYPE_REQUIRED),
    ]
    assert str(check_crd(crd)[0]).endswith("properties[a].type: must not be empty for specified fields")


# -- property: TYPE_REQUIRED fires exactly where a type was left out ---------------------------


@st.composite
def _schema_tree(draw: st.DrawFn, path: str, depth: int) -> tuple[dict[str, Any], set[str]]:
    """A random object/array/scalar tree and the paths of the nodes drawn without a type."""
    kind = draw(st.sampled_from(["string", "integer", "object", "array"] if depth < 3 else ["string", "integer"]))
    untyped: set[str] = set()
    node: dict[str, Any] = {"type": kind}
    if kind == "object":
        names = draw(st.lists(st.from_regex(r"[a-z]{1,4}", fullmatch=True), max_size=3, unique=True))
        node["properties"] = {}
        for name in names:
            child, missing = draw(_schema_tree(f"{path}.properties[{name}]", depth + 1))
            node["properties"][name] = child
            untyped |= missing
    elif kind == "array":
        child, missing = draw(_schema_tree(f"{path}.items", depth + 1))
        node["items"] = child
        untyped |= missing
    if kind in ("string", "integer") and draw(st.booleans()):
        del node["type"]
        untyped.add(f"{path}.type")
    return node, untyped


@settings(max_examples=80, deadline=None)
@given(_schema_tree(SPEC, 0))
def test_missing_types_are_reported_exactly_where_they_are(tree: tuple[dict[str, Any], set[str]]) -> None:
    spec, untyped = tree
    violations = check_schema(root(spec))
    assert {v.path for v in violations if v.rule == Rule.TYPE_REQUIRED} == untyped
    assert all(v.rule == Rule.TYPE_REQUIRED for v in violations)
