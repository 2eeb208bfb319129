"""Minimal OpenAPI v3 documents: enough for kubectl to use server-side field validation.

kubectl (apply/create/replace) asks /openapi/v3 whether each kind's PATCH accepts the
`fieldValidation` query parameter; without an answer it insists on downloading full schemas for
client-side validation. These documents declare every served resource's operations and that
parameter, and no component schemas (so kubectl uses its built-in patch metadata).
"""

from __future__ import annotations

import hashlib
from typing import Any

from devcluster.resources import ResourceRegistry, ResourceType

_QUERY_PARAMS = ("fieldValidation", "dryRun", "fieldManager")


def _prefix(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def root(registry: ResourceRegistry) -> dict[str, Any]:
    """The /openapi/v3 discovery: one serverRelativeURL per group/version, hashed by content."""
    paths: dict[str, Any] = {}
    for group in registry.groups():
        for version in registry.versions(group):
            doc_hash = _hash(group_version(registry, group, version))
            prefix = _prefix(group, version)
            paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={doc_hash}"}
    return {"paths": paths}


def _hash(doc: dict[str, Any]) -> str:
    return hashlib.sha256(repr(sorted(doc["paths"])).encode()).hexdigest()[:32].upper()


def _operation(r: ResourceType, action: str) -> dict[str, Any]:
    return {
        "operationId": f"{action}{r.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [{"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                       for p in _QUERY_PARAMS],
        "responses": {"200": {"description": "OK"}},
    }


def group_version(registry: ResourceRegistry, group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    base = "/" + _prefix(group, version)
    for r in sorted(registry.resources(group, version), key=lambda r: r.plural):
        collection = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/{r.plural}"
        paths[collection] = {"post": _operation(r, "post")}
        paths[f"{collection}/{{name}}"] = {"put": _operation(r, "put"), "patch": _operation(r, "patch")}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.37.0"}, "paths": paths,
            "components": {"schemas": {}}}
