"""A checker of the Kubernetes structural-schema rules for CRD OpenAPI v3 schemas.

Written from the CustomResourceDefinition documentation ("Specifying a structural schema") and
the apiextensions.k8s.io/v1 validation rules it refers to. `check_crd` / `check_schema` return
every violation with its path (`...properties[spec].properties[count].type`), never raise.
A test helper, not product code: test_crds checks every generated CRD with it, so `tasq crds`
never writes a CRD a real API server would reject.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final


class Rule(StrEnum):
    """Which structural rule a violation breaks."""

    TYPE_REQUIRED = "TypeRequired"
    TYPE_UNKNOWN = "TypeUnknown"
    ITEMS_REQUIRED = "ItemsRequired"
    FORBIDDEN_KEYWORD = "ForbiddenKeyword"
    PROPERTIES_AND_ADDITIONAL = "PropertiesAndAdditionalProperties"
    ADDITIONAL_FALSE = "AdditionalPropertiesFalse"
    ROOT_NOT_OBJECT = "RootNotObject"
    ROOT_ADDITIONAL = "RootAdditionalProperties"
    JUNCTOR_KEYWORD = "JunctorKeyword"
    JUNCTOR_UNSPECIFIED = "JunctorFieldNotSpecified"
    INT_OR_STRING = "IntOrString"
    PRESERVE_FALSE = "PreserveUnknownFieldsFalse"
    EMBEDDED_RESOURCE = "EmbeddedResource"
    LIST_TYPE = "ListType"
    MAP_TYPE = "MapType"
    METADATA = "Metadata"
    DEFAULT_NULL = "DefaultNull"


@dataclass(frozen=True, slots=True)
class Violation:
    path: str
    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


TYPES: Final = frozenset({"array", "boolean", "integer", "number", "object", "string"})
JUNCTORS: Final = ("allOf", "anyOf", "oneOf", "not")
# Keywords apiextensions/v1 refuses anywhere in a schema.
FORBIDDEN_KEYWORDS: Final = ("$ref", "$schema", "id", "definitions", "$defs", "dependencies",
                             "patternProperties", "additionalItems")
# Keywords that only shape structure, so they may not appear inside value validation (junctors).
JUNCTOR_FORBIDDEN: Final = ("description", "type", "default", "additionalProperties", "nullable")
INT_OR_STRING: Final = "x-kubernetes-int-or-string"
PRESERVE_UNKNOWN: Final = "x-kubernetes-preserve-unknown-fields"
EMBEDDED: Final = "x-kubernetes-embedded-resource"
LIST_TYPE: Final = "x-kubernetes-list-type"
LIST_MAP_KEYS: Final = "x-kubernetes-list-map-keys"
MAP_TYPE: Final = "x-kubernetes-map-type"
# Metadata of a resource may constrain only these string fields, with value validations.
METADATA_FIELDS: Final = frozenset({"name", "generateName"})
METADATA_FIELD_KEYWORDS: Final = frozenset({"type", "description", "pattern", "maxLength", "minLength",
                                            "enum", "format", "x-kubernetes-validations"})

_INT_OR_STRING_ANY_OF: Final = [{"type": "integer"}, {"type": "string"}]


def check_crd(crd: Mapping[str, Any]) -> list[Violation]:
    """Every structural violation in every version's openAPIV3Schema of a CRD object."""
    out: list[Violation] = []
    for i, version in enumerate((crd.get("spec") or {}).get("versions") or []):
        schema = ((version.get("schema") or {}).get("openAPIV3Schema"))
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        if schema is None:
            out.append(Violation(path, Rule.TYPE_REQUIRED,
                                 "must be specified: a structural schema is required"))
        else:
            out.extend(check_schema(schema, path))
    return out


def check_schema(schema: Mapping[str, Any], path: str = "openAPIV3Schema") -> list[Violation]:
    """Every structural violation of one root schema, in walk order (root first, depth first)."""
    out = list(_check_root(schema, path))
    out.extend(_walk(schema, path, resource_root=True))
    return out


# ---------------------------------------------------------------------------------------------
# Phase 1: the root must describe an object, and an object root cannot be a free map.


def _check_root(schema: Mapping[str, Any], path: str) -> Iterator[Violation]:
    """The root is a resource: `type: object`, properties rather than additionalProperties."""
    if schema.get("type") != "object":
        yield Violation(f"{path}.type", Rule.ROOT_NOT_OBJECT,
                        "must be object at the root of a resource schema")
    if "additionalProperties" in schema:
        yield Violation(f"{path}.additionalProperties", Rule.ROOT_ADDITIONAL,
                        "must not be used at the root of a resource schema")
    for name in ("apiVersion", "kind"):
        sub = (schema.get("properties") or {}).get(name)
        if isinstance(sub, Mapping) and sub.get("type") not in (None, "string"):
            yield Violation(f"{path}.properties[{name}].type", Rule.METADATA, "must be string")


# ---------------------------------------------------------------------------------------------
# Phase 2: walk the structural nodes (properties, additionalProperties, items) and check each.


def _walk(node: Mapping[str, Any], path: str, resource_root: bool = False) -> Iterator[Violation]:
    """Check one specified node and recurse into its structural children.

    Junctor children (allOf/anyOf/oneOf/not) are value validation, not structure: they are
    checked by `_check_junctors` and not walked as nodes that need types.
    """
    yield from _check_keywords(node, path)
    yield from _check_type(node, path)
    yield from _check_extensions(node, path)
    yield from _check_junctors(node, path, root=resource_root)
    props = node.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            sub_path = f"{path}.properties[{name}]"
            if not isinstance(sub, Mapping):
                yield Violation(sub_path, Rule.TYPE_REQUIRED, "must be a schema object")
                continue
            if name == "metadata" and (resource_root or node.get(EMBEDDED)):
                yield from _check_metadata(sub, sub_path)
            yield from _walk(sub, sub_path, resource_root=bool(sub.get(EMBEDDED)))
    additional = node.get("additionalProperties")
    if isinstance(additional, Mapping):
        yield from _walk(additional, f"{path}.additionalProperties")
    items = node.get("items")
    if isinstance(items, Mapping):
        yield from _walk(items, f"{path}.items")


def _check_keywords(node: Mapping[str, Any], path: str) -> Iterator[Violation]:
    """Keywords apiextensions/v1 refuses, and combinations that make pruning ambiguous."""
    for key in FORBIDDEN_KEYWORDS:
        if key in node:
            yield Violation(f"{path}.{key}", Rule.FORBIDDEN_KEYWORD,
                            f"{key!r} is not allowed in a CRD schema")
    if node.get("uniqueItems") is True:
        yield Violation(f"{path}.uniqueItems", Rule.FORBIDDEN_KEYWORD,
                        "must not be true (its runtime cost is quadratic); use x-kubernetes-list-type: set")
    if isinstance(node.get("items"), list):
        yield Violation(f"{path}.items", Rule.FORBIDDEN_KEYWORD,
                        "must be a single schema, not a list of schemas")
    additional = node.get("additionalProperties")
    if additional is not None and node.get("properties"):
        yield Violation(f"{path}.additionalProperties", Rule.PROPERTIES_AND_ADDITIONAL,
                        "must not be used together with properties")
    if additional is False:
        yield Violation(f"{path}.additionalProperties", Rule.ADDITIONAL_FALSE,
                        "must not be false (unknown fields are pruned instead)")
    if node.get(PRESERVE_UNKNOWN) is False:
        yield Violation(f"{path}.{PRESERVE_UNKNOWN}", Rule.PRESERVE_FALSE, "must be true or left out")
    if "default" in node and node["default"] is None and node.get("nullable") is not True:
        yield Violation(f"{path}.default", Rule.DEFAULT_NULL, "must not be null unless nullable is true")


def _check_type(node: Mapping[str, Any], path: str) -> Iterator[Violation]:
    """Every specified node has a known, non-empty type, except int-or-string and preserved nodes."""
    type_ = node.get("type")
    if node.get(INT_OR_STRING) is True:
        if type_:
            yield Violation(f"{path}.type", Rule.INT_OR_STRING,
                            f"must be empty when {INT_OR_STRING} is true")
        return
    if not type_:
        if node.get(PRESERVE_UNKNOWN) is not True:
            yield Violation(f"{path}.type", Rule.TYPE_REQUIRED, "must not be empty for specified fields")
        return
    if type_ not in TYPES:
        yield Violation(f"{path}.type", Rule.TYPE_UNKNOWN,
                        f"unknown type {type_!r}; allowed: {', '.join(sorted(TYPES))}")
    elif type_ == "array" and not isinstance(node.get("items"), Mapping):
        yield Violation(f"{path}.items", Rule.ITEMS_REQUIRED, "must be specified for type array")


# ---------------------------------------------------------------------------------------------
# Phase 3: the x-kubernetes-* extensions on a structural node.


def _check_extensions(node: Mapping[str, Any], path: str) -> Iterator[Violation]:
    """Embedded resources are preserved objects; list and map types fit the node they annotate."""
    type_ = node.get("type")
    if node.get(EMBEDDED) is True:
        if type_ != "object":
            yield Violation(f"{path}.type", Rule.EMBEDDED_RESOURCE, f"must be object when {EMBEDDED} is true")
        if node.get(PRESERVE_UNKNOWN) is not True and not node.get("properties"):
            yield Violation(f"{path}.{PRESERVE_UNKNOWN}", Rule.EMBEDDED_RESOURCE,
                            f"must be true when {EMBEDDED} is true and no properties are given")
    map_type = node.get(MAP_TYPE)
    if map_type is not None:
        if map_type not in ("granular", "atomic"):
            yield Violation(f"{path}.{MAP_TYPE}", Rule.MAP_TYPE,
                            f"unknown map type {map_type!r}; allowed: atomic, granular")
        if type_ != "object":
            yield Violation(f"{path}.{MAP_TYPE}", Rule.MAP_TYPE, "must only be used on type object")
    yield from _check_list_type(node, path)


def _check_list_type(node: Mapping[str, Any], path: str) -> Iterator[Violation]:
    """`set` lists hold scalars; `map` lists hold objects keyed by required scalar properties."""
    list_type = node.get(LIST_TYPE)
    keys = node.get(LIST_MAP_KEYS)
    raw_items = node.get("items")
    items: Mapping[str, Any] = raw_items if isinstance(raw_items, Mapping) else {}
    if keys is not None and list_type != "map":
        yield Violation(f"{path}.{LIST_MAP_KEYS}", Rule.LIST_TYPE, f"must only be used with {LIST_TYPE}: map")
    if list_type is None:
        return
    if list_type not in ("atomic", "set", "map"):
        yield Violation(f"{path}.{LIST_TYPE}", Rule.LIST_TYPE,
                        f"unknown list type {list_type!r}; allowed: atomic, map, set")
        return
    if node.get("type") != "array":
        yield Violation(f"{path}.{LIST_TYPE}", Rule.LIST_TYPE, "must only be used on type array")
    if list_type == "set" and items.get("type") in ("object", "array") \
            and items.get(MAP_TYPE) != "atomic" and items.get(LIST_TYPE) != "atomic":
        yield Violation(f"{path}.items", Rule.LIST_TYPE, "items of a set must be scalars or atomic")
    if list_type != "map":
        return
    if items.get("type") != "object":
        yield Violation(f"{path}.items.type", Rule.LIST_TYPE, "items of a map list must be objects")
    if not keys:
        yield Violation(f"{path}.{LIST_MAP_KEYS}", Rule.LIST_TYPE,
                        f"must not be empty when {LIST_TYPE} is map")
        return
    props = items.get("properties") or {}
    required = set(items.get("required") or ())
    for i, key in enumerate(keys):
        prop = props.get(key)
        if not isinstance(prop, Mapping):
            yield Violation(f"{path}.{LIST_MAP_KEYS}[{i}]", Rule.LIST_TYPE,
                            f"{key!r} is not a property of the items")
        elif prop.get("type") in ("object", "array"):
            yield Violation(f"{path}.{LIST_MAP_KEYS}[{i}]", Rule.LIST_TYPE,
                            f"{key!r} must be a scalar property")
        elif key not in required and "default" not in prop:
            yield Violation(f"{path}.{LIST_MAP_KEYS}[{i}]", Rule.LIST_TYPE,
                            f"{key!r} must be required or have a default")


# ---------------------------------------------------------------------------------------------
# Phase 4: logical junctors hold value validation only, over fields specified outside them.


def _int_or_string_pattern(node: Mapping[str, Any], key: str, index: int) -> bool:
    """The two junctor shapes an int-or-string node may use to spell out its integer|string type."""
    if node.get(INT_OR_STRING) is not True:
        return False
    if key == "anyOf":
        return bool(node.get("anyOf") == _INT_OR_STRING_ANY_OF)
    all_of = node.get("allOf")
    return key == "allOf" and index == 0 and isinstance(all_of, list) and \
        all_of[0] == {"anyOf": _INT_OR_STRING_ANY_OF}


def _junctor_children(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, int, Any, str]]:
    """(junctor keyword, index, child schema, child path) for each junctor branch of a node."""
    for key in JUNCTORS:
        value = node.get(key)
        if value is None:
            continue
        if key == "not":
            yield key, 0, value, f"{path}.not"
        elif isinstance(value, list):
            for i, child in enumerate(value):
                yield key, i, child, f"{path}.{key}[{i}]"


def _check_junctors(node: Mapping[str, Any], path: str, root: bool = False) -> Iterator[Violation]:
    """Each junctor branch of a structural node, checked against that node as its `outside`."""
    for key, index, child, child_path in _junctor_children(node, path):
        if _int_or_string_pattern(node, key, index) or not isinstance(child, Mapping):
            continue
        yield from _check_value_validation(child, child_path, node, root)


def _check_value_validation(sub: Mapping[str, Any], path: str, outside: Mapping[str, Any],
                            root: bool) -> Iterator[Violation]:
    """A schema inside a junctor: no structural keywords or extensions, and every field or items
    it mentions is also specified by `outside`, the structural node at the same position.
    """
    for key in JUNCTOR_FORBIDDEN:
        if key in sub:
            yield Violation(f"{path}.{key}", Rule.JUNCTOR_KEYWORD,
                            "must not be used inside allOf, anyOf, oneOf or not")
    for key in sub:
        if key.startswith("x-kubernetes-") and key != "x-kubernetes-validations":
            yield Violation(f"{path}.{key}", Rule.JUNCTOR_KEYWORD,
                            "extensions must not be used inside allOf, anyOf, oneOf or not")
    outside_props = outside.get("properties") or {}
    for name, child in (sub.get("properties") or {}).items():
        child_path = f"{path}.properties[{name}]"
        if root and name == "metadata":
            yield Violation(child_path, Rule.METADATA, "metadata must not be constrained inside a junctor")
        if name not in outside_props:
            yield Violation(child_path, Rule.JUNCTOR_UNSPECIFIED,
                            f"field {name!r} must also be specified outside allOf, anyOf, oneOf and not")
        elif isinstance(child, Mapping):
            yield from _check_value_validation(child, child_path, outside_props[name], root=False)
    items = sub.get("items")
    if isinstance(items, Mapping):
        outside_items = outside.get("items")
        if not isinstance(outside_items, Mapping):
            yield Violation(f"{path}.items", Rule.JUNCTOR_UNSPECIFIED,
                            "items must also be specified outside allOf, anyOf, oneOf and not")
        else:
            yield from _check_value_validation(items, f"{path}.items", outside_items, root=False)
    for _key, _index, child, child_path in _junctor_children(sub, path):
        if isinstance(child, Mapping):
            yield from _check_value_validation(child, child_path, outside, root)


# ---------------------------------------------------------------------------------------------
# Phase 5: a resource's metadata may only constrain name and generateName.


def _check_metadata(node: Mapping[str, Any], path: str) -> Iterator[Violation]:
    """`metadata` of a resource (root or embedded): type object and name/generateName strings only."""
    if node.get("type") not in (None, "object"):
        yield Violation(f"{path}.type", Rule.METADATA, "must be object")
    for key in node:
        if key not in ("type", "properties"):
            yield Violation(f"{path}.{key}", Rule.METADATA,
                            "must not be specified: metadata may only restrict name and generateName")
    for name, sub in (node.get("properties") or {}).items():
        sub_path = f"{path}.properties[{name}]"
        if name not in METADATA_FIELDS:
            yield Violation(sub_path, Rule.METADATA,
                            "must not be specified: only name and generateName may be")
            continue
        if not isinstance(sub, Mapping):
            continue
        if sub.get("type") not in (None, "string"):
            yield Violation(f"{sub_path}.type", Rule.METADATA, "must be string")
        for key in sub:
            if key not in METADATA_FIELD_KEYWORDS:
                yield Violation(f"{sub_path}.{key}", Rule.METADATA,
                                "must not be specified: only value validations of a string are allowed")
