"""The Priority admission plugin: a new pod's spec.priority (and preemptionPolicy) from its
priorityClassName, or from the global default PriorityClass; unknown classes and self-set numbers
refused with 403, as kube-apiserver's plugin does. The built-in system classes always exist.

Called by the request pipeline on pod CREATE, before the mutating webhooks (plugins run first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from devcluster.server.errors import FORBIDDEN, ApiError

PRIORITY_CLASSES_KEY = ("scheduling.k8s.io", "priorityclasses")
SYSTEM_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
PREEMPT_LOWER = "PreemptLowerPriority"


def _forbidden(pod_name: str, why: str) -> ApiError:
    return ApiError(403, FORBIDDEN, f'pods "{pod_name}" is forbidden: {why}', kind="pods", name=pod_name)


def _default_class(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The globalDefault class; of several, the one with the lowest value (as the plugin picks)."""
    defaults = [c for c in classes if c.get("globalDefault")]
    return min(defaults, key=lambda c: int(c.get("value") or 0), default=None)


def admit_pod_priority(pod: dict[str, Any], classes: Iterable[Mapping[str, Any]]) -> None:
    """Fill spec.priority/priorityClassName/preemptionPolicy in place, or raise the plugin's 403."""
    spec = pod.setdefault("spec", {})
    meta = pod.get("metadata") or {}
    pod_name = str(meta.get("name") or meta.get("generateName") or "")
    name = spec.get("priorityClassName") or ""
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in classes}
    policy: Any = PREEMPT_LOWER
    if not name:
        chosen = _default_class(by_name.values())
        value = int(chosen.get("value") or 0) if chosen else 0
        if chosen:
            spec["priorityClassName"] = str(chosen["metadata"]["name"])
            policy = chosen.get("preemptionPolicy") or PREEMPT_LOWER
    elif name in SYSTEM_CLASSES:
        value = SYSTEM_CLASSES[name]
    elif name in by_name:
        value = int(by_name[name].get("value") or 0)
        policy = by_name[name].get("preemptionPolicy") or PREEMPT_LOWER
    else:
        raise _forbidden(pod_name, f"no PriorityClass with name {name} was found")
    given = spec.get("priority")
    if given is not None and given != value:
        raise _forbidden(pod_name, f"the integer value of priority ({given}) must not be provided in pod spec; "
                                   f"priority admission controller computed {value} from the given PriorityClass name")
    if spec.get("preemptionPolicy") not in (None, policy):
        raise _forbidden(pod_name, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be "
                                   f"provided in pod spec; priority admission controller computed {policy} from the "
                                   "given PriorityClass name")
    spec["priority"] = value
    spec["preemptionPolicy"] = policy
