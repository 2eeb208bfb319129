"""YAML text -> plain objects, built from libyaml's event stream without its node graph.

One pass, no recursion: nesting deeper than the caller's limit stops the read (libyaml's own
composer would overflow the C stack ~100,000 levels deep); keys must be strings and unique;
aliases, merge keys and YAML-only types (sets, binary, timestamps) are refused; unquoted timestamps
stay strings, as Kubernetes reads them. A document's top-level `items` list is handed out item by
item, so a dump is never whole in memory. Called by `documents.parse_documents`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

STREAMED: Final = object()
"""Stands for a top-level `items` list whose items were already handed out."""

_TIMESTAMP_TAG: Final = "tag:yaml.org,2002:timestamp"
_STR_TAG: Final = "tag:yaml.org,2002:str"
_MERGE_TAG: Final = "tag:yaml.org,2002:merge"
_SCALAR_TAGS: Final = frozenset({_STR_TAG, "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool",
                                 "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})
_COLLECTION_TAGS: Final = (None, "!", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")
_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _EventLoader(_BaseLoader):  # type: ignore[misc]
    """libyaml's parser (when available) and the safe scalar rules without timestamps."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


class YamlProblem(Exception):
    """Why the text cannot be read, with its line (`line 3: duplicate key 'a'`)."""


_NO_KEY: Final = object()


@dataclass(slots=True)
class _Open:
    """A map or list being built: its value so far, the key awaiting its value (maps), whether its
    items are handed out instead of kept (the top-level `items`), and how many were."""

    value: Any
    key: Any = _NO_KEY
    streaming: bool = False
    handed_out: int = 0
    is_map: bool = field(init=False)

    def __post_init__(self) -> None:
        self.is_map = isinstance(self.value, dict)


def _line(event: Any) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}" if mark is not None else "somewhere"


def _scalar(loader: Any, event: Any) -> Any:
    """A scalar as the safe loader resolves it (str, int, float, bool or None); other tags refused."""
    tag = event.tag
    if tag is None or tag == "!":
        tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _STR_TAG:
        return event.value
    if tag == _MERGE_TAG:
        raise YamlProblem(f"{_line(event)}: YAML merge keys (<<) are not accepted")
    if tag not in _SCALAR_TAGS:
        raise YamlProblem(f"{_line(event)}: YAML type {tag!r} has no JSON equivalent (quote the value)")
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    return loader.yaml_constructors[tag](loader, node)


def read_yaml(text: str, max_depth: int) -> Iterator[tuple[int, str, Any]]:
    """(document number, item path, value): each document whole (path ""), or first the items of
    its top-level `items` list (`items[i]`) and then the document with `items` set to STREAMED.
    Empty documents are skipped. Raises YamlProblem."""
    loader = _EventLoader(text)
    try:
        yield from _documents(loader, max_depth)
    except yaml.YAMLError as err:
        raise YamlProblem("not YAML or JSON: " + " ".join(str(err).replace(' in "<unicode string>",', " at").split())) from err
    finally:
        loader.dispose()


def _documents(loader: Any, max_depth: int) -> Iterator[tuple[int, str, Any]]:
    """The event loop: a stack of open maps and lists; a finished value goes into its parent."""
    number = 0
    stack: list[_Open] = []
    root: Any = None
    while True:
        event = loader.get_event()
        if isinstance(event, yaml.ScalarEvent):
            value = _scalar(loader, event)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= max_depth:
                raise YamlProblem(f"{_line(event)}: nested deeper than {max_depth} levels")
            if event.tag not in _COLLECTION_TAGS:
                raise YamlProblem(f"{_line(event)}: YAML type {event.tag!r} has no JSON equivalent")
            is_map = isinstance(event, yaml.MappingStartEvent)
            top = stack[-1] if stack else None
            streaming = (not is_map and len(stack) == 1 and top is not None and top.is_map
                         and top.key == "items")
            stack.append(_Open({} if is_map else [], streaming=streaming))
            continue
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            done = stack.pop()
            value = STREAMED if done.streaming else done.value
        elif isinstance(event, yaml.AliasEvent):
            raise YamlProblem(f"{_line(event)}: YAML aliases (*{event.anchor}) are not accepted")
        elif isinstance(event, yaml.DocumentStartEvent):
            number += 1
            continue
        elif isinstance(event, yaml.DocumentEndEvent):
            if root is not None:
                yield number, "", root
            root = None
            continue
        elif isinstance(event, yaml.StreamEndEvent):
            return
        else:
            continue
        if not stack:
            root = value
            continue
        top = stack[-1]
        if top.streaming:
            yield number, f"items[{top.handed_out}]", value
            top.handed_out += 1
        elif not top.is_map:
            top.value.append(value)
        elif top.key is _NO_KEY:
            top.key = _key(top.value, value, event)
        else:
            top.value[top.key] = value
            top.key = _NO_KEY


def _key(mapping: dict[str, Any], key: Any, event: Any) -> str:
    if not isinstance(key, str):
        raise YamlProblem(f"{_line(event)}: mapping key {key!r} is not a string (quote it)")
    if key in mapping:
        raise YamlProblem(f"{_line(event)}: duplicate key {key!r}")
    return key
