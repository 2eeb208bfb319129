"""Checks on an object's metadata shared by every kind: name or generateName, namespace, owner references.

Called first by each kind's validator; names of tasq's kinds are DNS subdomains, as for
every custom resource the API server serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhooks.validation import formats, shapes
from webhooks.validation.errors import ROOT, FieldError, invalid, required

METADATA = ROOT.child("metadata")


def modelled_meta(meta: Mapping[str, Any], errs: list[FieldError]) -> None:
    """The other ObjectMeta fields tasq's models read: types of uid, resourceVersion, timestamps,
    generation, finalizers and ownerReferences; labels (qualified-name keys, label values) and
    annotations (qualified-name keys, string values), as the API server checks them."""
    for field in ("uid", "resourceVersion"):
        shapes.string(meta, field, METADATA.child(field), errs)
    for field in ("creationTimestamp", "deletionTimestamp"):
        shapes.timestamp(meta, field, METADATA.child(field), errs)
    generation = shapes.integer(meta, "generation", METADATA.child("generation"), errs)
    if generation is not None and generation < 0:
        errs.append(invalid(METADATA.child("generation"), generation, "must be greater than or equal to 0"))
    finalizers = shapes.sequence(meta, "finalizers", METADATA.child("finalizers"), errs) or []
    for i, finalizer in enumerate(finalizers):
        errs.extend(formats.qualified_name(METADATA.child("finalizers").index(i), finalizer))
    owners_path = METADATA.child("ownerReferences")
    for path, owner in shapes.objects(shapes.sequence(meta, "ownerReferences", owners_path, errs), owners_path, errs):
        for field in ("apiVersion", "kind", "name", "uid"):
            if not shapes.string(owner, field, path.child(field), errs):
                errs.append(required(path.child(field)))
        for field in ("controller", "blockOwnerDeletion"):
            shapes.boolean(owner, field, path.child(field), errs)
    labels_path, notes_path = METADATA.child("labels"), METADATA.child("annotations")
    for key, value in shapes.string_map(meta, "labels", labels_path, errs).items():
        errs.extend(formats.qualified_name(labels_path.key(key), key))
        errs.extend(formats.label_value(labels_path.key(key), value))
    for key in shapes.string_map(meta, "annotations", notes_path, errs):
        errs.extend(formats.qualified_name(notes_path.key(key), key))


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
    errs.extend(owner_references(meta.get("ownerReferences")))
    return meta


OWNER_REFERENCE_FIELDS: Final = ("apiVersion", "kind", "name", "uid")


def owner_references(refs: Any) -> list[FieldError]:
    """Each owner reference names its owner fully (a null item is an empty one, as the API server
    decodes it); other shapes are the schema's to report."""
    path = METADATA.child("ownerReferences")
    return [required(path.index(i).child(key), "must not be empty")
            for i, ref in enumerate(refs if isinstance(refs, list) else ())
            for key in OWNER_REFERENCE_FIELDS
            if ref is None or (isinstance(ref, (dict, Mapping)) and ref.get(key) in (None, ""))]
