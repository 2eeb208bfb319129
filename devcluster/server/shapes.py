"""How server-side apply sees an object's structure: which lists merge by key or as sets, which maps
are atomic, which fields a schema declares.

CRDs say it in their schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`); built-in kinds
by the strategic-merge keys the kinds tasq and its tests use (`patching.MERGE_KEYS`). Read by
`devcluster.server.applying`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devcluster.server.patching import MERGE_KEYS, MERGED_PRIMITIVE_LISTS

ATOMIC, SET, MAP = "atomic", "set", "map"

# metav1.LabelSelector and Service.spec.selector are atomic: one owner sets the whole selector.
_ATOMIC_MAPS = frozenset({"selector", "labelSelector", "namespaceSelector", "objectSelector"})


@dataclass(frozen=True, slots=True)
class Shape:
    """One node's structure. `schema` is a CRD's openAPIV3Schema node (None: a built-in kind, named
    by `name`, the field it is under); `untyped` accepts any field (preserve-unknown-fields)."""

    name: str = ""
    schema: Mapping[str, Any] | None = None
    untyped: bool = False
    root: bool = False
    key_defaults: Mapping[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------- maps

    def child(self, name: str) -> Shape | None:
        """The shape of field `name`, or None when the schema does not declare it."""
        if self.root and name == "metadata":
            return Shape("metadata")
        if self.root and name in ("apiVersion", "kind"):
            return Shape(name, untyped=True)
        if self.schema is None:
            return Shape(name, untyped=self.untyped)
        props = self.schema.get("properties") or {}
        if name in props:
            return _from_schema(name, props[name])
        extra = self.schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return _from_schema(name, extra)
        if extra is True or self.untyped or self.schema.get("x-kubernetes-preserve-unknown-fields"):
            return Shape(name, untyped=True)
        return None

    def declares(self, name: str) -> bool:
        """Whether `name` is a struct field (not a key of a map with free keys)."""
        if self.schema is None:
            return True
        return name in (self.schema.get("properties") or {})

    @property
    def atomic_map(self) -> bool:
        if self.schema is None:
            return not self.untyped and self.name in _ATOMIC_MAPS
        return self.schema.get("x-kubernetes-map-type") == "atomic"

    # ---------------------------------------------------------------- lists

    def list_type(self) -> str:
        if self.schema is not None:
            return str(self.schema.get("x-kubernetes-list-type") or ATOMIC)
        if self.untyped:
            return ATOMIC
        if self.name in MERGED_PRIMITIVE_LISTS:
            return SET
        return MAP if self.name in MERGE_KEYS or self.name == "ports" else ATOMIC

    def list_keys(self, items: list[Any]) -> tuple[tuple[str, ...], Mapping[str, Any]]:
        """The key fields of a map list and the defaults of those a client may omit."""
        if self.schema is not None:
            item_schema = self.schema.get("items") or {}
            defaults = {k: v.get("default") for k, v in (item_schema.get("properties") or {}).items()
                        if isinstance(v, Mapping) and "default" in v}
            keys = tuple(self.schema.get("x-kubernetes-list-map-keys") or ())
            return keys, {k: defaults[k] for k in keys if k in defaults}
        if self.name == "ports":
            # container ports are keyed by port and protocol, protocol defaulting to TCP (as Service ports)
            port = "containerPort" if any(isinstance(i, Mapping) and "containerPort" in i for i in items) else "port"
            return (port, "protocol"), {"protocol": "TCP"}
        return (MERGE_KEYS[self.name],), {}

    def item(self) -> Shape:
        if self.schema is None:
            return Shape("", untyped=self.untyped)
        items = self.schema.get("items")
        return _from_schema("", items) if isinstance(items, Mapping) else Shape(untyped=True)


def _from_schema(name: str, node: Any) -> Shape:
    if not isinstance(node, Mapping):
        return Shape(name, untyped=True)
    if node.get("x-kubernetes-embedded-resource"):
        return Shape(name, schema=node, root=True)
    return Shape(name, schema=node)


def of_kind(schema: Mapping[str, Any] | None) -> Shape:
    """The root shape of an object: a CRD version's openAPIV3Schema, or None for a built-in kind."""
    return Shape(schema=schema, root=True) if schema is not None else Shape(root=True)
