"""CustomResourceDefinition handling: validation, the status the server sets, and registration.

Called by the request pipeline when a CRD is created, updated or deleted: each served version
becomes a `ResourceType` in the registry (so discovery shows it) with its schema and printer columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devcluster.server import celrules
from devcluster.server.errors import CAUSE_INVALID, CAUSE_NOT_SUPPORTED, CAUSE_REQUIRED, Cause, field_error
from devcluster.server.resources import ResourceRegistry, ResourceType

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


def group_plural(crd: Mapping[str, Any]) -> tuple[str, str]:
    spec = crd.get("spec") or {}
    return str(spec.get("group", "")), str((spec.get("names") or {}).get("plural", ""))


def validate(crd: Mapping[str, Any]) -> list[Cause]:
    """The CRD fields registration relies on; each missing one is a cause with its path."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[Cause] = []
    for path, value in (("spec.group", spec.get("group")), ("spec.names.plural", names.get("plural")),
                        ("spec.names.kind", names.get("kind"))):
        if not value:
            causes.append(field_error(path, CAUSE_REQUIRED))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(field_error("spec.scope", CAUSE_NOT_SUPPORTED, 'supported values: "Cluster", "Namespaced"',
                                  spec.get("scope"), True))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(field_error("spec.versions", CAUSE_REQUIRED))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(field_error("spec.versions", CAUSE_INVALID, "must have exactly one version marked as storage "
                                  "version", "{...}", False))
    for i, v in enumerate(versions):
        schema = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v, Mapping) else None
        causes += celrules.compile_causes(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
    expected = f"{names.get('plural')}.{spec.get('group')}"
    name = (crd.get("metadata") or {}).get("name")
    if not causes and name != expected:
        causes.append(field_error("metadata.name", CAUSE_INVALID, 'must be spec.names.plural+"."+spec.group',
                                  name, True))
    return causes


def initial_status(crd: Mapping[str, Any]) -> dict[str, Any]:
    """NamesAccepted + Established right away (there is no controller delay to emulate)."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    stored = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
    now = (crd.get("metadata") or {}).get("creationTimestamp")
    return {
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    }


def record_storage_version(crd: dict[str, Any]) -> None:
    """Add the storage version to `status.storedVersions` when it is new there (as the CRD strategy
    does on every write): objects may now be stored in it. In place, on a CRD being written."""
    status = crd.get("status")
    if not isinstance(status, dict):
        return
    stored = [v.get("name") for v in (crd.get("spec") or {}).get("versions") or [] if v.get("storage")]
    listed = list(status.get("storedVersions") or [])
    if stored and stored[0] not in listed:
        crd["status"] = {**status, "storedVersions": [*listed, stored[0]]}


def resource_types(crd: Mapping[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            continue
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        out.append(ResourceType(
            group=str(spec.get("group")), version=str(v.get("name")), plural=str(names.get("plural")),
            kind=str(names.get("kind")), namespaced=spec.get("scope") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            has_status="status" in (v.get("subresources") or {}),
            schema=schema if isinstance(schema, Mapping) else None,
            printer_columns=tuple(v.get("additionalPrinterColumns") or ()), custom=True,
            selectable_fields=tuple(f.get("jsonPath", "").lstrip(".") for f in v.get("selectableFields") or []),
            storage_version=bool(v.get("storage")), has_rules=celrules.has_rules(schema),
        ))
    return out


def register(registry: ResourceRegistry, crd: Mapping[str, Any]) -> None:
    """(Re-)register the CRD's versions, replacing what an earlier revision registered."""
    group, plural = group_plural(crd)
    registry.remove_group_resource(group, plural)
    for r in resource_types(crd):
        registry.add(r)
