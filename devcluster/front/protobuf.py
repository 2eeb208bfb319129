"""Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON objects.

kubectl's imperative commands (`create namespace|configmap|secret|job|priorityclass|serviceaccount|
clusterrolebinding|rolebinding`, `run`, and the evictions of `drain`) send built-in objects as protobuf and do not fall back to JSON, so the HTTP layer decodes
them here. Pure: a wire-format reader plus field tables from the Kubernetes `generated.proto` files
for the kinds those commands create; an unknown field is refused (never silently dropped).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from devcluster.server.clock import timestamp

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body this decoder cannot turn into JSON faithfully."""


# A field: (json name, kind, nested message name). Kinds: str, bytes, int, bool (Go `bool`, omitted when
# false as JSON does), pbool (Go `*bool`, kept when false), msg, time, quantity, map_str, map_bytes,
# map_quantity; a leading "*" marks a repeated field.
Field = tuple[str, str, str]
F = dict[int, Field]

MESSAGES: dict[str, F] = {
    "ObjectMeta": {1: ("name", "str", ""), 2: ("generateName", "str", ""), 3: ("namespace", "str", ""),
                   4: ("selfLink", "str", ""), 5: ("uid", "str", ""), 6: ("resourceVersion", "str", ""), 7: ("generation", "int", ""),
                   8: ("creationTimestamp", "time", ""), 9: ("deletionTimestamp", "time", ""),
                   10: ("deletionGracePeriodSeconds", "int", ""), 11: ("labels", "map_str", ""),
                   12: ("annotations", "map_str", ""), 13: ("ownerReferences", "*msg", "OwnerReference"),
                   14: ("finalizers", "*str", "")},
    "OwnerReference": {1: ("kind", "str", ""), 3: ("name", "str", ""), 4: ("uid", "str", ""),
                       5: ("apiVersion", "str", ""), 6: ("controller", "pbool", ""),
                       7: ("blockOwnerDeletion", "pbool", "")},
    "LabelSelector": {1: ("matchLabels", "map_str", ""), 2: ("matchExpressions", "*msg", "LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: ("key", "str", ""), 2: ("operator", "str", ""), 3: ("values", "*str", "")},
    "Namespace": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "NamespaceSpec"),
                  3: ("status", "msg", "Empty")},
    "NamespaceSpec": {1: ("finalizers", "*str", "")},
    "ConfigMap": {1: ("metadata", "msg", "ObjectMeta"), 2: ("data", "map_str", ""),
                  3: ("binaryData", "map_bytes", ""), 4: ("immutable", "pbool", "")},
    "Secret": {1: ("metadata", "msg", "ObjectMeta"), 2: ("data", "map_bytes", ""), 3: ("type", "str", ""),
               4: ("stringData", "map_str", ""), 5: ("immutable", "pbool", "")},
    "ServiceAccount": {1: ("metadata", "msg", "ObjectMeta"), 2: ("secrets", "*msg", "ObjectReference"),
                       3: ("imagePullSecrets", "*msg", "LocalObjectReference"),
                       4: ("automountServiceAccountToken", "pbool", "")},
    "ObjectReference": {1: ("kind", "str", ""), 2: ("namespace", "str", ""), 3: ("name", "str", ""),
                        4: ("uid", "str", ""), 5: ("apiVersion", "str", ""), 6: ("resourceVersion", "str", ""),
                        7: ("fieldPath", "str", "")},
    "LocalObjectReference": {1: ("name", "str", "")},
    "PriorityClass": {1: ("metadata", "msg", "ObjectMeta"), 2: ("value", "int", ""), 3: ("globalDefault", "bool", ""),
                      4: ("description", "str", ""), 5: ("preemptionPolicy", "str", "")},
    "Pod": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "PodSpec"), 3: ("status", "msg", "Empty")},
    "Job": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "JobSpec"), 3: ("status", "msg", "Empty")},
    "JobSpec": {1: ("parallelism", "int", ""), 2: ("completions", "int", ""), 3: ("activeDeadlineSeconds", "int", ""),
                4: ("selector", "msg", "LabelSelector"), 5: ("manualSelector", "pbool", ""),
                6: ("template", "msg", "PodTemplateSpec"), 7: ("backoffLimit", "int", ""),
                8: ("ttlSecondsAfterFinished", "int", ""), 9: ("completionMode", "str", ""), 10: ("suspend", "pbool", "")},
    "PodTemplateSpec": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "PodSpec")},
    "PodSpec": {2: ("containers", "*msg", "Container"), 3: ("restartPolicy", "str", ""),
                4: ("terminationGracePeriodSeconds", "int", ""), 5: ("activeDeadlineSeconds", "int", ""),
                6: ("dnsPolicy", "str", ""), 7: ("nodeSelector", "map_str", ""), 8: ("serviceAccountName", "str", ""),
                9: ("serviceAccount", "str", ""), 10: ("nodeName", "str", ""), 11: ("hostNetwork", "bool", ""),
                12: ("hostPID", "bool", ""), 13: ("hostIPC", "bool", ""),
                15: ("imagePullSecrets", "*msg", "LocalObjectReference"), 16: ("hostname", "str", ""),
                17: ("subdomain", "str", ""), 19: ("schedulerName", "str", ""),
                20: ("initContainers", "*msg", "Container"), 21: ("automountServiceAccountToken", "pbool", ""),
                22: ("tolerations", "*msg", "Toleration"), 24: ("priorityClassName", "str", ""),
                25: ("priority", "int", ""), 38: ("schedulingGates", "*msg", "PodSchedulingGate")},
    "PodSchedulingGate": {1: ("name", "str", "")},
    "Container": {1: ("name", "str", ""), 2: ("image", "str", ""), 3: ("command", "*str", ""), 4: ("args", "*str", ""),
                  5: ("workingDir", "str", ""), 6: ("ports", "*msg", "ContainerPort"), 7: ("env", "*msg", "EnvVar"),
                  8: ("resources", "msg", "ResourceRequirements"), 13: ("terminationMessagePath", "str", ""),
                  14: ("imagePullPolicy", "str", ""), 16: ("stdin", "bool", ""), 17: ("stdinOnce", "bool", ""),
                  18: ("tty", "bool", ""), 20: ("terminationMessagePolicy", "str", "")},
    "ContainerPort": {1: ("name", "str", ""), 2: ("hostPort", "int", ""), 3: ("containerPort", "int", ""),
                      4: ("protocol", "str", ""), 5: ("hostIP", "str", "")},
    "EnvVar": {1: ("name", "str", ""), 2: ("value", "str", "")},
    "ResourceRequirements": {1: ("limits", "map_quantity", ""), 2: ("requests", "map_quantity", "")},
    "Toleration": {1: ("key", "str", ""), 2: ("operator", "str", ""), 3: ("value", "str", ""),
                   4: ("effect", "str", ""), 5: ("tolerationSeconds", "int", "")},
    "Eviction": {1: ("metadata", "msg", "ObjectMeta"), 2: ("deleteOptions", "msg", "DeleteOptions")},
    "DeleteOptions": {1: ("gracePeriodSeconds", "int", ""), 2: ("preconditions", "msg", "Preconditions"),
                      3: ("orphanDependents", "pbool", ""), 4: ("propagationPolicy", "str", ""),
                      5: ("dryRun", "*str", ""), 6: ("ignoreStoreReadErrorWithClusterBreakingPotential", "pbool", "")},
    "Preconditions": {1: ("uid", "str", ""), 2: ("resourceVersion", "str", "")},
    # authorization.k8s.io/v1 reviews (`kubectl auth can-i`) and authentication.k8s.io/v1 TokenRequest
    # (`kubectl create token`)
    "SelfSubjectAccessReview": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "SelfSubjectAccessReviewSpec"),
                                3: ("status", "msg", "Empty")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "msg", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "msg", "NonResourceAttributes")},
    "ResourceAttributes": {1: ("namespace", "str", ""), 2: ("verb", "str", ""), 3: ("group", "str", ""),
                           4: ("version", "str", ""), 5: ("resource", "str", ""), 6: ("subresource", "str", ""),
                           7: ("name", "str", "")},
    "NonResourceAttributes": {1: ("path", "str", ""), 2: ("verb", "str", "")},
    "SelfSubjectRulesReview": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "SelfSubjectRulesReviewSpec"),
                               3: ("status", "msg", "Empty")},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", "str", "")},
    "TokenRequest": {1: ("metadata", "msg", "ObjectMeta"), 2: ("spec", "msg", "TokenRequestSpec"),
                     3: ("status", "msg", "Empty")},
    "TokenRequestSpec": {1: ("audiences", "*str", ""), 3: ("boundObjectRef", "msg", "BoundObjectReference"),
                         4: ("expirationSeconds", "int", "")},
    "BoundObjectReference": {1: ("kind", "str", ""), 2: ("apiVersion", "str", ""), 3: ("name", "str", ""),
                             4: ("uid", "str", "")},
    # rbac.authorization.k8s.io/v1 bindings (`kubectl create clusterrolebinding|rolebinding`)
    "ClusterRoleBinding": {1: ("metadata", "msg", "ObjectMeta"), 2: ("subjects", "*msg", "Subject"),
                           3: ("roleRef", "msg", "RoleRef")},
    "RoleBinding": {1: ("metadata", "msg", "ObjectMeta"), 2: ("subjects", "*msg", "Subject"),
                    3: ("roleRef", "msg", "RoleRef")},
    "Subject": {1: ("kind", "str", ""), 2: ("apiGroup", "str", ""), 3: ("name", "str", ""), 4: ("namespace", "str", "")},
    "RoleRef": {1: ("apiGroup", "str", ""), 2: ("kind", "str", ""), 3: ("name", "str", "")},
    "Empty": {},  # status stanzas of new objects: skipped whole, the server drops them anyway
}
_SKIPPED = "Empty"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) in order; length-delimited values stay bytes."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _field_map(data: bytes) -> dict[int, Any]:
    """Field number -> value, the last occurrence winning (for messages read by number)."""
    return {n: v for n, _w, v in _fields(data)}


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: Any) -> Any:
    """One non-message value of a field kind."""
    if kind == "str":
        return bytes(value).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "int":
        return _signed(int(value))
    if kind in ("bool", "pbool"):
        return bool(value)
    if kind == "time":
        seconds = _field_map(value).get(1, 0)
        if not seconds:
            return None  # the zero time is how Go writes an unset metav1.Time
        return timestamp(datetime.fromtimestamp(_signed(seconds), UTC))
    if kind == "quantity":
        return _field_map(value).get(1, b"").decode()
    raise ProtobufError(f"unsupported field kind {kind}")


def _map_entry(kind: str, value: bytes) -> tuple[str, Any]:
    entry = _field_map(value)
    key = bytes(entry.get(1, b"")).decode()
    raw = entry.get(2, b"")
    if kind == "map_str":
        return key, bytes(raw).decode()
    if kind == "map_bytes":
        return key, base64.b64encode(bytes(raw)).decode()
    return key, _scalar("quantity", raw)


def decode_message(name: str, data: bytes, path: str = "") -> dict[str, Any]:
    """One message as its JSON form, by the field table `MESSAGES[name]`."""
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    if name == _SKIPPED:
        return out
    for number, _wire, value in _fields(data):
        if number not in table:
            raise ProtobufError(f"field {number} of {name} ({path or 'object'}) is not supported by the "
                                f"devcluster's protobuf decoder; send JSON (e.g. kubectl apply -f)")
        field, kind, nested = table[number]
        repeated = kind.startswith("*")
        kind = kind.lstrip("*")
        where = f"{path}.{field}" if path else field
        if kind == "msg":
            item: Any = decode_message(nested, value, where)
        elif kind.startswith("map_"):
            key, item = _map_entry(kind, value)
            out.setdefault(field, {})[key] = item
            continue
        else:
            item = _scalar(kind, value)
            if item is None or (not repeated and (item == "" or (kind == "bool" and item is False))):
                continue  # Go writes unset strings, bools and times as zero values; JSON omits them
        if repeated:
            out.setdefault(field, []).append(item)
        else:
            out[field] = item
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The runtime.Unknown envelope (magic, typeMeta, raw) -> the object as JSON."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    envelope = _field_map(body[len(MAGIC):])
    type_meta: Mapping[int, Any] = _field_map(envelope.get(1, b""))
    api_version = bytes(type_meta.get(1, b"")).decode()
    kind = bytes(type_meta.get(2, b"")).decode()
    if kind not in MESSAGES or kind in ("ObjectMeta", _SKIPPED):
        raise ProtobufError(f"protobuf bodies of kind {kind or '?'} are not supported by the devcluster; send JSON")
    obj = decode_message(kind, envelope.get(2, b""))
    obj.pop("status", None)
    obj.get("metadata", {}).pop("selfLink", None)
    return {"apiVersion": api_version, "kind": kind, **obj}
