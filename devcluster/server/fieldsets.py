"""Field sets of server-side apply: paths into an object, their `fieldsV1` encoding and their text.

A path is a tuple of elements: a field name, a list item's key values, a set member's value or an
index. `devcluster.server.applying` computes which paths each field manager owns; this module only
encodes, decodes, orders and prints them as kube-apiserver does (structured-merge-diff's fieldpath).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class Element:
    """One step of a path. `kind` orders as structured-merge-diff does: field < key < value < index;
    `text` is the step's JSON form (the key values as a sorted compact object, or the value)."""

    kind: int
    text: str

    def encoded(self) -> str:
        """The step as a `fieldsV1` key (`f:name`, `k:{"name":"a"}`, `v:"x"`, `i:0`)."""
        return f"{_PREFIXES[self.kind]}:{self.text}"

    def printed(self) -> str:
        """The step as a conflict message prints it (`.name`, `[name="a"]`, `[="x"]`, `[0]`)."""
        if self.kind == FIELD:
            return f".{self.text}"
        if self.kind == KEY:
            keys = json.loads(self.text)
            return "[" + ",".join(f"{k}={_compact(v)}" for k, v in keys.items()) + "]"
        if self.kind == VALUE:
            return f"[={self.text}]"
        return f"[{self.text}]"


FIELD, KEY, VALUE, INDEX = 0, 1, 2, 3
_PREFIXES = {FIELD: "f", KEY: "k", VALUE: "v", INDEX: "i"}
_KINDS = {prefix: kind for kind, prefix in _PREFIXES.items()}

Path = tuple[Element, ...]
FieldSet = frozenset[Path]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def field(name: str) -> Element:
    return Element(FIELD, name)


def key(values: Mapping[str, Any]) -> Element:
    return Element(KEY, _compact(dict(values)))


def value(member: Any) -> Element:
    return Element(VALUE, _compact(member))


def printed(path: Path) -> str:
    """`.spec.ports[name="a",proto="TCP"].port`, as conflict messages name a field."""
    return "".join(e.printed() for e in path)


def under(paths: Iterable[Path], prefix: Path) -> bool:
    """Whether any of `paths` is `prefix` or below it."""
    n = len(prefix)
    return any(p[:n] == prefix for p in paths)


def without_below(paths: Iterable[Path], removed: Iterable[Path]) -> FieldSet:
    """`paths` less every path equal to or below one of `removed`."""
    gone = set(removed)
    return frozenset(p for p in paths if not any(p[:i] in gone for i in range(1, len(p) + 1)))


# ---------------------------------------------------------------- fieldsV1


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """The `fieldsV1` tree: one nested object per step; a member that also has children gets `.`."""
    members = set(paths)
    root: dict[str, Any] = {}
    for path in sorted(members):
        node = root
        for element in path:
            node = node.setdefault(element.encoded(), {})
    _mark_members(root, members, ())
    return root


def _mark_members(node: dict[str, Any], members: set[Path], prefix: Path) -> None:
    """`.` stays only where the node itself is a member and has children (leaves are plain `{}`)."""
    for name, child in list(node.items()):
        if name == ".":
            continue
        path = (*prefix, decode_element(name))
        _mark_members(child, members, path)
        child.pop(".", None)
        if path in members and child:
            node[name] = {".": {}, **child}  # kube-apiserver writes the member mark first


def decode_element(text: str) -> Element:
    prefix, _, rest = text.partition(":")
    if prefix not in _KINDS:
        raise ValueError(f"unknown field path element {text!r}")
    kind = _KINDS[prefix]
    if kind in (KEY, VALUE):
        rest = _compact(json.loads(rest))  # one spelling per value, whatever the client sent
    return Element(kind, rest)


def decode(tree: Mapping[str, Any]) -> FieldSet:
    """The paths of a `fieldsV1` tree (ValueError for a malformed one)."""
    out: set[Path] = set()

    def walk(node: Mapping[str, Any], prefix: Path) -> None:
        if not isinstance(node, Mapping):
            raise ValueError("fieldsV1 nodes must be objects")
        if prefix and (not node or "." in node):
            out.add(prefix)
        for name, child in node.items():
            if name != ".":
                walk(child, (*prefix, decode_element(name)))
    walk(tree, ())
    return frozenset(out)


def ordered(paths: Iterable[Path]) -> Iterator[Path]:
    """Paths in structured-merge-diff's set order: at each level the members ending there (sorted),
    then the deeper paths child by child (sorted); conflict messages list fields in this order."""
    by_first: dict[Element, list[Path]] = {}
    members: list[Element] = []
    for p in paths:
        if len(p) == 1:
            members.append(p[0])
        elif p:
            by_first.setdefault(p[0], []).append(p[1:])
    for element in sorted(set(members)):
        yield (element,)
    for element in sorted(by_first):
        for rest in ordered(by_first[element]):
            yield (element, *rest)
