"""Server-side Table output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`) for `kubectl get`.

Columns for Pods, Nodes, Jobs, Namespaces and Events follow kubectl's familiar printers; custom
resources use their CRD's additionalPrinterColumns (evaluated with `devcluster.front.jsonpath`). Called
by the HTTP layer for lists, single objects and watch events; `now` makes AGE deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from devcluster.constants import CONDITION_JOB_COMPLETE, CONDITION_JOB_FAILED, TERMINAL_PHASES
from devcluster.front import jsonpath
from devcluster.server.builtins import CONDITION_POD_SCHEDULED, REASON_SCHEDULING_GATED
from devcluster.server.clock import parse_time
from devcluster.server.resources import ResourceType

Column = tuple[str, str, str, int]  # name, type, format, priority (1 = only with -o wide)
Row = list[Any]


def age(created: str | None, now: datetime) -> str:
    """kubectl's HumanDuration of now - created: `12s`, `5m3s`, `3h`, `4d`..."""
    if not created:
        return "<unknown>"
    then = parse_time(created)
    if then is None:
        return "<invalid>"
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


# Pod reasons and condition values kube-apiserver's pod printer (`printPod`) reads.
_REASON_COMPLETED = "Completed"
_REASON_POD_INITIALIZING = "PodInitializing"
_REASON_NODE_LOST = "NodeLost"  # status.reason of pods on an unreachable node: printed `Unknown`


def _terminated_reason(term: Mapping[str, Any], prefix: str) -> str:
    """`<prefix><reason>`, or `<prefix>Signal:<n>` / `<prefix>ExitCode:<n>` when the runtime gave none."""
    if term.get("reason"):
        return f"{prefix}{term['reason']}"
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def _init_reason(pod: Mapping[str, Any]) -> tuple[str | None, int]:
    """`Init:...` while an init container has not completed (the first such one decides), else None;
    and how many started sidecars (restartable init containers) before it are ready."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    restartable = {str(c.get("name")) for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    total = len(spec.get("initContainers") or [])
    ready = 0
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting") or {}
        if term is not None and int(term.get("exitCode", 0)) == 0:
            continue
        if cs.get("name") in restartable and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue  # a sidecar that is up does not hold initialization
        if term is not None:
            return _terminated_reason(term, "Init:"), ready
        if waiting.get("reason") and waiting["reason"] != _REASON_POD_INITIALIZING:
            return f"Init:{waiting['reason']}", ready
        return f"Init:{i}/{total}", ready
    return None, ready


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def pod_status_reason(pod: Mapping[str, Any]) -> tuple[str, int]:
    """The STATUS column and the count of ready containers, decided as kube-apiserver's pod printer does.

    Order: status.reason over the phase; SchedulingGated from the PodScheduled condition; an unfinished
    init container (`Init:Error`, `Init:0/2`); else the containers' waiting/terminated reasons
    (`Completed`, `Error`, `OOMKilled`, `ExitCode:3`), `Completed` turned back into `Running`/`NotReady`
    while another container runs; finally `Terminating` (or `Unknown` for a lost node) once deleted.
    """
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    reason = status.get("reason") or phase
    if any(c.get("type") == CONDITION_POD_SCHEDULED and c.get("reason") == REASON_SCHEDULING_GATED
           for c in status.get("conditions") or []):
        reason = REASON_SCHEDULING_GATED
    init, ready = _init_reason(pod)
    if init is not None:
        reason = init
    if init is None or _condition_true(status, "Initialized"):
        running = False
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated") is not None:
                reason = _terminated_reason(state["terminated"], "")
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == _REASON_COMPLETED and running:
            reason = "Running" if _condition_true(status, "Ready") else "NotReady"
    if _meta(pod).get("deletionTimestamp"):
        if status.get("reason") == _REASON_NODE_LOST:
            reason = "Unknown"
        elif phase not in TERMINAL_PHASES:
            reason = "Terminating"
    return reason, ready


def _pod_row(pod: Mapping[str, Any], now: datetime) -> Row:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    reason, ready = pod_status_reason(pod)
    total = len(spec.get("containers") or []) + sum(
        1 for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always")
    nominated = status.get("nominatedNodeName") or "<none>"
    gates = spec.get("readinessGates") or []
    return [_meta(pod).get("name"), f"{ready}/{total}", reason, restarts,
            age(_meta(pod).get("creationTimestamp"), now), status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>", nominated, f"{len(gates)}/{len(gates)}" if gates else "<none>"]


_LABEL_ROLE_PREFIX = "node-role.kubernetes.io/"
_LABEL_ROLE = "kubernetes.io/role"  # the older form: the role is the label's value


def node_roles(labels: Mapping[str, str]) -> list[str]:
    """kubectl's ROLES: `node-role.kubernetes.io/<role>` keys and `kubernetes.io/role` values, sorted, unique."""
    roles = {k[len(_LABEL_ROLE_PREFIX):] for k in labels if k.startswith(_LABEL_ROLE_PREFIX)}
    if labels.get(_LABEL_ROLE):
        roles.add(labels[_LABEL_ROLE])
    return sorted(r for r in roles if r)


def _node_row(node: Mapping[str, Any], now: datetime) -> Row:
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = ",".join(node_roles(_meta(node).get("labels") or {})) or "<none>"
    info = status.get("nodeInfo") or {}
    addresses = {str(a.get("type")): a.get("address") for a in reversed(status.get("addresses") or [])}
    return [_meta(node).get("name"), state, roles, age(_meta(node).get("creationTimestamp"), now),
            info.get("kubeletVersion", ""), addresses.get("InternalIP") or "<none>",
            addresses.get("ExternalIP") or "<none>", info.get("osImage", "<unknown>"),
            info.get("kernelVersion", "<unknown>"), info.get("containerRuntimeVersion", "<unknown>")]


def _job_row(job: Mapping[str, Any], now: datetime) -> Row:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if conditions.get(CONDITION_JOB_COMPLETE) == "True":
        state = "Complete"
    elif conditions.get(CONDITION_JOB_FAILED) == "True":
        state = "Failed"
    elif conditions.get("Suspended") == "True" or spec.get("suspend"):
        state = "Suspended"
    elif _meta(job).get("deletionTimestamp"):
        state = "Terminating"
    else:
        state = "Running"
    completions = spec.get("completions")
    done = status.get("succeeded", 0)
    shown = f"{done}/{completions}" if completions is not None else f"{done}/1 of {spec.get('parallelism', 1)}"
    duration = ""
    if status.get("startTime"):
        end = status.get("completionTime")
        duration = age(status["startTime"], (parse_time(end) if end else None) or now)
    template = (spec.get("template") or {}).get("spec") or {}
    containers = template.get("containers") or []
    selector = ",".join(f"{k}={v}" for k, v in sorted(((spec.get("selector") or {}).get("matchLabels") or {}).items()))
    return [_meta(job).get("name"), state, shown, duration, age(_meta(job).get("creationTimestamp"), now),
            ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            selector]


def _namespace_row(ns: Mapping[str, Any], now: datetime) -> Row:
    return [_meta(ns).get("name"), (ns.get("status") or {}).get("phase", "Active"),
            age(_meta(ns).get("creationTimestamp"), now)]


def _event_row(ev: Mapping[str, Any], now: datetime) -> Row:
    involved = ev.get("involvedObject") or ev.get("regarding") or {}
    last = ev.get("lastTimestamp") or ev.get("eventTime") or _meta(ev).get("creationTimestamp")
    if isinstance(last, str) and "." in last:
        last = last.split(".")[0] + "Z"
    obj = f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"
    return [age(last, now), ev.get("type", ""), ev.get("reason", ""), obj, ev.get("message") or ev.get("note", "")]


def _configmap_row(cm: Mapping[str, Any], now: datetime) -> Row:
    count = len(cm.get("data") or {}) + len(cm.get("binaryData") or {})
    return [_meta(cm).get("name"), count, age(_meta(cm).get("creationTimestamp"), now)]


def _secret_row(secret: Mapping[str, Any], now: datetime) -> Row:
    count = len(secret.get("data") or {}) + len(secret.get("stringData") or {})
    return [_meta(secret).get("name"), secret.get("type", "Opaque"), count,
            age(_meta(secret).get("creationTimestamp"), now)]


def _lease_row(lease: Mapping[str, Any], now: datetime) -> Row:
    return [_meta(lease).get("name"), (lease.get("spec") or {}).get("holderIdentity") or "",
            age(_meta(lease).get("creationTimestamp"), now)]


def _priority_class_row(pc: Mapping[str, Any], now: datetime) -> Row:
    return [_meta(pc).get("name"), pc.get("value", 0), bool(pc.get("globalDefault", False)),
            age(_meta(pc).get("creationTimestamp"), now), pc.get("preemptionPolicy", "PreemptLowerPriority")]


def _crd_row(crd: Mapping[str, Any], _now: datetime) -> Row:
    return [_meta(crd).get("name"), _meta(crd).get("creationTimestamp")]


def _default_row(obj: Mapping[str, Any], now: datetime) -> Row:
    return [_meta(obj).get("name"), age(_meta(obj).get("creationTimestamp"), now)]


_NAME: Column = ("Name", "string", "name", 0)
_AGE: Column = ("Age", "string", "", 0)
_EVENT_COLUMNS: tuple[Column, ...] = (("Last Seen", "string", "", 0), ("Type", "string", "", 0),
                                      ("Reason", "string", "", 0), ("Object", "string", "", 0),
                                      ("Message", "string", "", 0))
_BUILTIN: dict[tuple[str, str], tuple[tuple[Column, ...], Callable[[Mapping[str, Any], datetime], Row]]] = {
    ("", "Pod"): ((_NAME, ("Ready", "string", "", 0), ("Status", "string", "", 0), ("Restarts", "string", "", 0),
                   _AGE, ("IP", "string", "", 1), ("Node", "string", "", 1), ("Nominated Node", "string", "", 1),
                   ("Readiness Gates", "string", "", 1)), _pod_row),
    ("", "Node"): ((_NAME, ("Status", "string", "", 0), ("Roles", "string", "", 0), _AGE,
                    ("Version", "string", "", 0), ("Internal-IP", "string", "", 1), ("External-IP", "string", "", 1),
                    ("OS-Image", "string", "", 1), ("Kernel-Version", "string", "", 1),
                    ("Container-Runtime", "string", "", 1)), _node_row),
    ("batch", "Job"): ((_NAME, ("Status", "string", "", 0), ("Completions", "string", "", 0),
                        ("Duration", "string", "", 0), _AGE, ("Containers", "string", "", 1),
                        ("Images", "string", "", 1), ("Selector", "string", "", 1)), _job_row),
    ("", "Namespace"): ((_NAME, ("Status", "string", "", 0), _AGE), _namespace_row),
    ("", "ConfigMap"): ((_NAME, ("Data", "string", "", 0), _AGE), _configmap_row),
    ("", "Secret"): ((_NAME, ("Type", "string", "", 0), ("Data", "string", "", 0), _AGE), _secret_row),
    ("coordination.k8s.io", "Lease"): ((_NAME, ("Holder", "string", "", 0), _AGE), _lease_row),
    ("scheduling.k8s.io", "PriorityClass"): ((_NAME, ("Value", "integer", "", 0), ("Global-Default", "boolean", "", 0),
                                             _AGE, ("Preemption-Policy", "string", "", 1)), _priority_class_row),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ((_NAME, ("Created At", "date", "", 0)), _crd_row),
    ("", "Event"): (_EVENT_COLUMNS, _event_row),
    ("events.k8s.io", "Event"): (_EVENT_COLUMNS, _event_row),  # the same Events, served by both APIs
}


def _cell(values: list[Any], kind: str, now: datetime) -> Any:
    """A printer-column cell: the first value (as kubectl), typed; JSON for structures; dates as ages."""
    if not values:
        return None
    v = values[0]
    if kind == "date":
        return age(v, now) if isinstance(v, str) else "<unknown>"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    if kind == "integer" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return int(v)
    if kind == "string" and not isinstance(v, str):
        return json.dumps(v) if isinstance(v, bool) else str(v)
    return v


class TableMaker:
    """Columns and row cells for one resource; CRD column paths are parsed once."""

    def __init__(self, r: ResourceType) -> None:
        self.resource = r
        self._custom: list[tuple[Column, tuple[jsonpath.Step, ...] | None]] = []
        self._builtin = None if r.custom else _BUILTIN.get((r.group, r.kind))
        if r.custom:
            for col in r.printer_columns or ({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},):
                try:
                    steps: tuple[jsonpath.Step, ...] | None = jsonpath.parse(str(col.get("jsonPath", "")))
                except jsonpath.JSONPathError:
                    steps = None
                self._custom.append(((str(col.get("name")), str(col.get("type", "string")),
                                      str(col.get("format", "")), int(col.get("priority", 0))), steps))

    def columns(self) -> Sequence[Column]:
        if self._builtin is not None:
            return self._builtin[0]
        if self.resource.custom:
            return (_NAME, *(c for c, _ in self._custom))
        return (_NAME, _AGE)

    def cells(self, obj: Mapping[str, Any], now: datetime) -> Row:
        if self._builtin is not None:
            return self._builtin[1](obj, now)
        if self.resource.custom:
            return [_meta(obj).get("name")] + [
                _cell(jsonpath.evaluate(steps, obj), col[1], now) if steps is not None else None
                for col, steps in self._custom]
        return _default_row(obj, now)

    def column_definitions(self) -> list[dict[str, Any]]:
        return [{"name": n, "type": t, "format": f, "description": "", "priority": p}
                for n, t, f, p in self.columns()]

    def row(self, obj: Mapping[str, Any], now: datetime, include: str) -> dict[str, Any]:
        row: dict[str, Any] = {"cells": self.cells(obj, now)}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata") or {}}
        return row

    def table(self, objects: Sequence[Mapping[str, Any]], now: datetime, include: str,
              list_meta: Mapping[str, Any], with_columns: bool = True) -> dict[str, Any]:
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(list_meta),
                "columnDefinitions": self.column_definitions() if with_columns else [],
                "rows": [self.row(o, now, include) for o in objects]}
