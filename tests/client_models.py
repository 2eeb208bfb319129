"""Typing aids for the official kubernetes client, used by the e2e, conformance and bench code.

The client serializes a dict body as is, but its generated methods annotate model classes (V1Pod,
V1ConfigMap...): `as_body` lets a test send a manifest the way kubectl does. Its models type every
field optional; `present` asserts a field the server always fills (metadata, spec...) before use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def as_body(manifest: Mapping[str, Any]) -> Any:
    """`manifest` unchanged, typed so that any client method accepts it as its body."""
    return manifest


def present(value: T | None) -> T:
    """`value`, asserted not None (a field of a model the server returned)."""
    assert value is not None
    return value
