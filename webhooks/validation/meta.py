"""Checks on an object's metadata shared by every kind: name or generateName, namespace.

Called first by each kind's validator; names of tasq's kinds are DNS subdomains, as for
every custom resource the API server serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhooks.validation import formats, shapes
from webhooks.validation.errors import ROOT, FieldError, required

METADATA = ROOT.child("metadata")


def object_meta(obj: Mapping[str, Any], errs: list[FieldError]) -> Mapping[str, Any]:
    """Validate metadata.name (or generateName) and namespace; returns metadata ({} when absent)."""
    meta = shapes.mapping(obj, "metadata", METADATA, errs)
    if meta is None:
        errs.append(required(METADATA.child("name"), "name or generateName is required"))
        return {}
    name = shapes.string(meta, "name", METADATA.child("name"), errs)
    generate = shapes.string(meta, "generateName", METADATA.child("generateName"), errs)
    if name:
        errs.extend(formats.dns_subdomain(METADATA.child("name"), name))
    elif not generate:
        errs.append(required(METADATA.child("name"), "name or generateName is required"))
    namespace = shapes.string(meta, "namespace", METADATA.child("namespace"), errs)
    if namespace:
        errs.extend(formats.dns_label(METADATA.child("namespace"), namespace))
    return meta
