"""Raw manifest bytes -> documents: where file and stdin contents become plain JSON-shaped objects.

`decode` takes UTF-8 within a size limit; `parse_documents` parses JSON with `json` (a top-level
List's items one at a time) and YAML from libyaml's events (`yaml_stream`: strict, depth-limited
before anything is built, items one at a time too), and flattens `kind: List`. Problems are
values, never raised. Called by `tasq simulate`; `kube_objects.check_object` checks each
document next.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any, Final

from controller.manifests.yaml_stream import STREAMED, YamlProblem, read_yaml

MAX_INPUT_BYTES: Final = 1 << 30
"""Largest file (or stdin) accepted: a 50,000-node `kubectl get nodes,pods -o json` is 250-700 MB."""
MAX_DEPTH: Final = 100
"""Deepest nesting of maps and lists accepted; Kubernetes objects stay far below (~20 with
managedFields), and every walker behind this boundary may recurse this deep."""


@dataclass(frozen=True, slots=True)
class Document:
    """One object and where it came from: `file:document` plus the List item path when expanded."""

    origin: str
    item: str
    obj: Any

    def where(self, path: str) -> str:
        """`origin: items[3].spec.x` for a field path inside this document."""
        inner = f"{self.item}.{path}" if self.item and path else (self.item or path)
        return f"{self.origin}: {inner}" if inner else self.origin


def decode(data: bytes) -> tuple[str | None, str | None]:
    """(text, problem): UTF-8 text (a BOM is dropped), or why the bytes are not accepted."""
    if len(data) > MAX_INPUT_BYTES:
        return None, f"{len(data)} bytes is more than the {MAX_INPUT_BYTES} accepted"
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as err:
        return None, f"not UTF-8 text: byte {err.start} (0x{data[err.start]:02x}) is invalid"


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as json decodes them; a repeated key is refused (kubectl's strict decoding)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return obj


def parse_documents(origin: str, text: str) -> Iterator[Document | str]:
    """The documents of one file or stdin, lazily, each checked object after object by the caller:
    a Document, or an error line `origin[:document]: [path: ]message`. Empty documents are skipped;
    List items become documents (`items[i]` in their path). JSON when the text starts with `{` or
    `[` (a top-level List's items decoded one at a time, so a dump is never whole in memory), else
    YAML (multi-document, read from libyaml's events by `yaml_stream`, items one at a time too)."""
    start = _SPACE.match(text).end()  # type: ignore[union-attr]
    if text.startswith(("{", "["), start):
        try:
            yield from _json_documents(f"{origin}:1", text, start)
        except RecursionError:
            yield f"{origin}: nested deeper than the JSON parser's limit"
        except ValueError as err:
            yield f"{origin}: not JSON: {err}"
        return
    try:
        for number, path, value in read_yaml(text, MAX_DEPTH):
            where = f"{origin}:{number}"
            if path:
                yield from _flatten(where, value, path)
            elif isinstance(value, dict) and value.get("items") is STREAMED:
                yield from _streamed_list(where, value)
            else:
                yield from _flatten(where, value)
    except YamlProblem as err:
        yield f"{origin}: {err}"


_DECODER = json.JSONDecoder(object_pairs_hook=_json_pairs)
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, pos: int) -> int:
    return _SPACE.match(text, pos).end()  # type: ignore[union-attr]


def _json_documents(where: str, text: str, pos: int) -> Iterator[Document | str]:
    """A top-level object read key by key: an `items` array is decoded item by item; every other
    value whole. Raises ValueError (as json does) on bad JSON."""
    if not text.startswith("{", pos):
        value, pos = _DECODER.raw_decode(text, pos)
        _expect_end(text, pos)
        yield from _flatten(where, value)
        return
    header: dict[str, Any] = {}
    streamed = False
    pos = _skip(text, pos + 1)
    while not text.startswith("}", pos):
        if not text.startswith('"', pos):
            raise ValueError(f"expected a property name in double quotes at char {pos}")
        key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        if key in header or (key == "items" and streamed):
            raise ValueError(f"duplicate key {key!r}")
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise ValueError(f"expected ':' at char {pos}")
        pos = _skip(text, pos + 1)
        if key == "items" and text.startswith("[", pos):
            streamed = True
            pos = yield from _json_items(where, text, pos)
        else:
            header[key], pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif not text.startswith("}", pos):
            raise ValueError(f"expected ',' or '}}' at char {pos}")
    _expect_end(text, pos + 1)
    if not streamed:
        yield from _flatten(where, header)
        return
    header["items"] = STREAMED
    yield from _streamed_list(where, header)


def _streamed_list(where: str, header: dict[str, Any]) -> Iterator[str]:
    """The rest of an object whose top-level `items` were handed out one by one: it must have been
    a List (its items went through `_flatten` already)."""
    problem = _header_problem(header)
    if problem is None and not header["kind"].endswith("List"):
        problem = "items", f"Invalid value: only a kind: List has items (kind is {header['kind']!r})"
    if problem is not None:
        yield f"{where}: {problem[0]}: {problem[1]}"


def _json_items(where: str, text: str, pos: int) -> Generator[Document | str, None, int]:
    """The items of a top-level List, each decoded and flattened on its own; returns the position
    after the array."""
    pos = _skip(text, pos + 1)
    index = 0
    while not text.startswith("]", pos):
        item, pos = _DECODER.raw_decode(text, pos)
        yield from _flatten(where, item, f"items[{index}]")
        index += 1
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif not text.startswith("]", pos):
            raise ValueError(f"expected ',' or ']' at char {pos}")
    return pos + 1


def _expect_end(text: str, pos: int) -> None:
    pos = _skip(text, pos)
    if pos != len(text):
        raise ValueError(f"extra data at char {pos}")


def _flatten(where: str, raw: Any, path: str = "") -> Iterator[Document | str]:
    """Each object as a Document, or the error line at its path: a List's items (Lists in Lists
    too, as kubectl flattens them, iteratively), each released from its List as it goes."""
    stack: list[tuple[str, Any]] = [(path, raw)]
    while stack:
        item, obj = stack.pop()
        doc = Document(where, item, obj)
        problem = _header_problem(obj)
        if problem is not None:
            yield f"{doc.where(problem[0])}: {problem[1]}"
            continue
        if not obj["kind"].endswith("List") or "items" not in obj:
            yield doc
            continue
        items = obj["items"]
        if items is None:
            continue
        if not isinstance(items, list):
            yield f"{doc.where('items')}: Invalid value: {type(items).__name__}: must be a list of objects"
            continue
        prefix = f"{item}.items" if item else "items"
        children = [(f"{prefix}[{i}]", child) for i, child in enumerate(items)]
        items.clear()
        stack.extend(reversed(children))


def _header_problem(obj: Any) -> tuple[str, str] | None:
    """(path, message) when an object cannot be dispatched: not a map, or apiVersion/kind missing or
    not strings."""
    if not isinstance(obj, dict):
        return "", f"Invalid value: {type(obj).__name__}: must be an object with apiVersion and kind"
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            shown = "missing" if value is None else f"a {type(value).__name__}"
            return key, f"Required value: must be a non-empty string (is {shown})"
    return None
