"""Node failures of admitted Workloads: which hosts of a topology assignment count as failed at `now`.

Kueue's TASFailedNodeReplacement rules: a host that is gone, lacks a Ready condition, or has been not
Ready for NODE_FAILURE_DELAY (timed from the condition's lastTransitionTime, so no one polls), or
carries a NoExecute taint the pod set does not tolerate. The not-ready and unreachable taints the node
lifecycle controller adds are the NotReady signal itself, timed by the delay, not taints. Pure: `now`
is passed in. Called by the operator's node-failure handling (controller.kube.node_failing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.api import constants as c
from controller.api.selectors import NO_EXECUTE, Toleration, untolerated_taint
from controller.api.views import NodeView
from controller.api.workload import Admission

NODE_FAILURE_DELAY = timedelta(seconds=30)
"""Kueue's NodeFailureDelay: how long a node stays not Ready before its pods are replaced."""
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """`failed`: why the host counts as failed now (None: healthy, or still within the delay);
    `recheck_at`: when a not-Ready host's delay runs out (None when nothing is pending)."""

    failed: str | None
    recheck_at: datetime | None = None


def _parse(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def node_health(view: NodeView | None, now: datetime, tolerations: Sequence[Toleration] = (),
                delay: timedelta = NODE_FAILURE_DELAY) -> NodeHealth:
    """One host of an assignment, for a pod set with these tolerations."""
    if view is None:
        return NodeHealth("deleted")
    execute = [t for t in view.taints if t.effect == NO_EXECUTE and t.key not in NOT_READY_TAINTS]
    taint = untolerated_taint(execute, tolerations)
    if taint is not None:
        return NodeHealth(f"tainted {taint}")
    if view.ready:
        return NodeHealth(None)
    since = _parse(view.not_ready_since) if view.not_ready_since else None
    if since is None:
        return NodeHealth("not Ready (no Ready condition time)")
    due = since + delay
    if due <= now:
        return NodeHealth(f"not Ready since {view.not_ready_since}")
    return NodeHealth(None, due)


def assigned_hosts(admission: Admission) -> dict[str, set[str]]:
    """Per pod set, the hosts its topology assignment names (assignments whose lowest level is the
    hostname; an assignment at racks or blocks leaves the host to kube-scheduler)."""
    out: dict[str, set[str]] = {}
    for psa in admission.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != c.LABEL_HOSTNAME:
            continue
        out[psa.name] = {d.values[-1] for d in ta.assigned_domains() if d.count > 0}
    return out


@dataclass(frozen=True, slots=True)
class WorkloadNodeFailures:
    """The failed hosts of one Workload (host -> why, in name order) and the earliest time one of its
    not-Ready hosts' delay runs out."""

    failed: Mapping[str, str]
    recheck_at: datetime | None


def workload_node_failures(admission: Admission, nodes: Mapping[str, NodeView],
                           tolerations: Mapping[str, Sequence[Toleration]], now: datetime,
                           delay: timedelta = NODE_FAILURE_DELAY) -> WorkloadNodeFailures:
    """Every host of the admission's hostname-level assignments, judged by `node_health` with its
    pod set's tolerations (`tolerations` by pod set name)."""
    failed: dict[str, str] = {}
    recheck: datetime | None = None
    for pod_set, hosts in assigned_hosts(admission).items():
        for host in sorted(hosts):
            health = node_health(nodes.get(host), now, tolerations.get(pod_set, ()), delay)
            if health.failed is not None:
                failed.setdefault(host, health.failed)
            elif health.recheck_at is not None and (recheck is None or health.recheck_at < recheck):
                recheck = health.recheck_at
    return WorkloadNodeFailures(dict(sorted(failed.items())), recheck)
