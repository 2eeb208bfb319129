"""Minimal OpenAPI v3 documents, served by the HTTP layer at /openapi/v3, enough for kubectl.

kubectl apply/create/replace ask whether each kind's PATCH takes `fieldValidation` (else they want
full schemas for client-side validation): every served resource's operations declare it (no
requestBody media types, so kubectl keeps its own patch metadata). `kubectl explain` reads the kinds'
schemas: custom kinds' from their CRD, built-in kinds' from the official client's models.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from typing import Any

from devcluster.front.discovery import KUBERNETES_VERSION
from devcluster.server.builtins import client_model, model_fields
from devcluster.server.resources import ResourceRegistry, ResourceType

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
    """Content hash: kubectl caches a document by it, so a changed CRD schema must change it."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def schema_name(r: ResourceType) -> str:
    """kube-apiserver's component name for a custom kind: the group reversed, `io.x-k8s.kueue.v1beta1.Workload`."""
    return ".".join([*reversed(r.group.split(".")), r.version, r.kind])


def _custom_schema(r: ResourceType) -> dict[str, Any]:
    """The CRD version's openAPIV3Schema with the object envelope fields and the GVK extension."""
    schema = dict(r.schema or {})
    schema["properties"] = {
        "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this "
                                                        "representation of an object."},
        "kind": {"type": "string", "description": "Kind is a string value representing the REST resource "
                                                  "this object represents."},
        "metadata": {"type": "object", "description": "Standard object's metadata."},
        **(schema.get("properties") or {}),
    }
    schema["x-kubernetes-group-version-kind"] = [{"group": r.group, "version": r.version, "kind": r.kind}]
    return schema


def _operation(r: ResourceType, action: str) -> dict[str, Any]:
    return {
        "operationId": f"{action}{r.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [{"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                       for p in _QUERY_PARAMS],
        "responses": {"200": {"description": "OK"}},
    }


_SCALARS: dict[str, dict[str, str]] = {
    "str": {"type": "string"}, "int": {"type": "integer", "format": "int64"}, "bool": {"type": "boolean"},
    "float": {"type": "number", "format": "double"}, "datetime": {"type": "string", "format": "date-time"},
    "bytes": {"type": "string", "format": "byte"}, "object": {},
}


def _type_schema(kind: str, wanted: set[str]) -> dict[str, Any]:
    """A client type string as an OpenAPI schema; models become refs (collected in `wanted`)."""
    if kind.startswith("List["):
        return {"type": "array", "items": _type_schema(kind[5:-1], wanted)}
    if kind.startswith("Dict[str, "):
        return {"type": "object", "additionalProperties": _type_schema(kind[10:-1], wanted)}
    if kind in _SCALARS:
        return dict(_SCALARS[kind])
    wanted.add(kind)
    return {"allOf": [{"$ref": f"#/components/schemas/{_component(kind)}"}]}


_MODEL_NAME = re.compile(r"^(.*?V\d+(?:alpha\d+|beta\d+)?)([A-Z].*)$")


def _component(model: str) -> str:
    """`V1PodSpec` -> `io.k8s.api.v1.PodSpec`, `CoreV1Event` -> `io.k8s.api.corev1.Event` (unique, kind last)."""
    m = _MODEL_NAME.match(model)
    return f"io.k8s.api.{m.group(1).lower()}.{m.group(2)}" if m else f"io.k8s.api.{model}"


@cache
def _model_schemas(root: str) -> dict[str, Any]:
    """The component schemas of a model and every model it reaches (static: cached per root)."""
    schemas: dict[str, Any] = {}
    todo = [root]
    while todo:
        model = todo.pop()
        if _component(model) in schemas:
            continue
        wanted: set[str] = set()
        properties = {}
        for name, (kind, description) in sorted(model_fields(model).items()):
            properties[name] = {**_type_schema(kind, wanted), **({"description": description} if description else {})}
        schemas[_component(model)] = {"type": "object", "properties": properties}
        todo.extend(sorted(wanted))
    return schemas


def _builtin_schemas(r: ResourceType) -> dict[str, Any]:
    model = client_model(r)
    if model is None:
        return {}
    schemas = dict(_model_schemas(model))
    name = _component(model)
    schemas[name] = {**schemas[name], "x-kubernetes-group-version-kind": [
        {"group": r.group, "version": r.version, "kind": r.kind}]}
    return schemas


def group_version(registry: ResourceRegistry, group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    base = "/" + _prefix(group, version)
    for r in sorted(registry.resources(group, version), key=lambda r: r.plural):
        if r.custom and r.schema is not None:
            schemas[schema_name(r)] = _custom_schema(r)
        elif r.storage_group is None:  # events.k8s.io Events are stored as core ones: no model of their own
            schemas.update(_builtin_schemas(r))
        collection = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/{r.plural}"
        paths[collection] = {"post": _operation(r, "post")}
        paths[f"{collection}/{{name}}"] = {"put": _operation(r, "put"), "patch": _operation(r, "patch")}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION[2]}, "paths": paths,
            "components": {"schemas": schemas}}


# what kube-openapi answers to kubectl's (deprecated) `...spec.v2@v1.0+protobuf`, a media type Go can parse
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def v2_document() -> dict[str, Any]:
    """The OpenAPI v2 document: no paths or definitions (kubectl finds no model, so it validates nothing)."""
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION[2]},
            "paths": {}, "definitions": {}}


def v2_protobuf() -> bytes:
    """`v2_document` as gnostic's openapi_v2.Document message (swagger = 1, info = 2: title = 1,
    version = 2), the encoding kubectl asks for."""
    info = _proto_string(1, "Kubernetes") + _proto_string(2, KUBERNETES_VERSION[2])
    return _proto_string(1, "2.0") + _proto_field(2, info)


def _proto_string(number: int, text: str) -> bytes:
    return _proto_field(number, text.encode())


def _proto_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
