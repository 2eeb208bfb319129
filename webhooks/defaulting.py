"""Defaulting for the mutating webhooks: suspend queued Jobs, gate pods of admitted pod sets, gate
queued plain pods.

Pure: each rule takes the object as the AdmissionReview carries it and returns the RFC 6902 JSON
patch (a list of operations, empty when nothing changes); `applied` gives the patched copy.
Called by `webhooks.handlers` on CREATE; objects of an unexpected shape get no patch (the
validating webhook and the API server report those).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controller.api import constants as c
from controller.core.jobs import pod_group
from controller.core.jobs.framework import controller_kind
from controller.core.jobs.integrations import INTEGRATED_KINDS, POD_GROUP

JsonPatch = list[dict[str, Any]]


def _mapping(obj: Any, key: str) -> Mapping[str, Any] | None:
    value = obj.get(key) if isinstance(obj, (dict, Mapping)) else None
    return value if isinstance(value, (dict, Mapping)) else None


def suspend_job(job: Any) -> JsonPatch:
    """A Job carrying the queue label is created suspended, so only admission starts it
    (Kueue's rule; the label's value is checked by the validating webhook), unless an integrated
    kind controls it (a JobSet's child Job: its JobSet is suspended and admitted as a whole)."""
    labels = _mapping(_mapping(job, "metadata"), "labels")
    if labels is None or c.LABEL_QUEUE_NAME not in labels or controller_kind(job) in INTEGRATED_KINDS:
        return []
    spec = job.get("spec")
    if spec is None:
        return [{"op": "add", "path": "/spec", "value": {"suspend": True}}]
    if not isinstance(spec, (dict, Mapping)) or spec.get("suspend") is True:
        return []
    return [{"op": "add", "path": "/spec/suspend", "value": True}]


def gate_pod(pod: Any) -> JsonPatch:
    """A pod of an admitted pod set (it carries the topology-podset annotation) gets the topology
    scheduling gate, once; other gates stay, in their order (the ungater removes only its own)."""
    annotations = _mapping(_mapping(pod, "metadata"), "annotations")
    if annotations is None or c.ANNOTATION_TOPOLOGY_PODSET not in annotations:
        return []
    gate = {"name": c.SCHEDULING_GATE_TOPOLOGY}
    spec = pod.get("spec")
    if spec is None:
        return [{"op": "add", "path": "/spec", "value": {"schedulingGates": [gate]}}]
    if not isinstance(spec, (dict, Mapping)):
        return []
    gates = spec.get("schedulingGates")
    if gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    if not isinstance(gates, list):
        return []
    if any(isinstance(g, (dict, Mapping)) and g.get("name") == c.SCHEDULING_GATE_TOPOLOGY for g in gates):
        return []
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _add_to_map(pod: Mapping[str, Any], field: str, entries: Mapping[str, str]) -> JsonPatch:
    """Add `entries` to metadata.<field> (created when absent); keys already there are overwritten."""
    current = _mapping(pod.get("metadata"), field)
    if current is None:
        return [{"op": "add", "path": f"/metadata/{field}", "value": dict(entries)}]
    return [{"op": "add", "path": f"/metadata/{field}/{_escape(k)}", "value": v}
            for k, v in entries.items() if current.get(k) != v]


def manage_pod(pod: Any) -> JsonPatch:
    """A plain pod naming a queue (no integrated kind controls it: `PodGroupJob.is_managed`) is
    created behind Kueue's admission gate and the topology gate, labelled `kueue.x-k8s.io/managed`,
    with Kueue's pod finalizer of the same name, and, in a group, annotated with its role hash
    (Kueue's webhook does the same; the topology gate is added to every such pod because a gate can
    only be removed later, never added, and admission may give any pod set a topology assignment).
    The job reconciler removes the admission gate on admission, and the topology gate too where the
    pod set has no topology assignment; it removes the finalizer once the pod's end is recorded or
    no longer matters (`pod_group.finalizer_done`)."""
    if not isinstance(pod, (dict, Mapping)) or not isinstance(pod.get("metadata"), (dict, Mapping)) or not POD_GROUP.is_managed(pod):
        return []
    spec = pod.get("spec")
    if not isinstance(spec, (dict, Mapping)):
        return []
    ops = _add_to_map(pod, "labels", {c.LABEL_MANAGED: c.LABEL_MANAGED_VALUE})
    finalizers = pod["metadata"].get("finalizers")
    if finalizers is None:
        ops.append({"op": "add", "path": "/metadata/finalizers", "value": [pod_group.POD_FINALIZER]})
    elif isinstance(finalizers, list) and pod_group.POD_FINALIZER not in finalizers:
        ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": pod_group.POD_FINALIZER})
    if pod_group.group_name(pod) is not None:
        ops += _add_to_map(pod, "annotations", {c.ANNOTATION_ROLE_HASH: pod_group.role_hash(pod)})
    gates = spec.get("schedulingGates")
    if gates is not None and not isinstance(gates, list):
        return ops
    have = {g.get("name") for g in gates or [] if isinstance(g, (dict, Mapping))}
    missing = [{"name": n} for n in (c.SCHEDULING_GATE_ADMISSION, c.SCHEDULING_GATE_TOPOLOGY) if n not in have]
    if gates is None:
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": missing})
    else:
        ops += [{"op": "add", "path": "/spec/schedulingGates/-", "value": g} for g in missing]
    return ops


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def applied(obj: Mapping[str, Any], patch: JsonPatch) -> dict[str, Any]:
    """A copy of `obj` with the `add` operations above applied (the only ones these rules make):
    an object member is set, `-` appends to a list."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    for op in patch:
        *parents, last = [_unescape(t) for t in str(op["path"]).split("/")[1:]]
        holder: Any = out
        for token in parents:
            holder = holder[int(token)] if isinstance(holder, list) else holder[token]
        value = copy.deepcopy(op["value"])
        if isinstance(holder, list):
            if last == "-":
                holder.append(value)
            else:
                holder.insert(int(last), value)
        else:
            holder[last] = value
    return out
