"""`tasq explain workload NAME -n NS` (alias `describe`): why a Workload waits, on a live cluster.

Reads the cluster once (nodes, pods, queues, flavors, topologies, Jobs, Workloads), runs the same
pure admission as `tasq simulate` over it, and prints the same explanation `tasq simulate --explain`
gives for that Workload: the reason and the quantitative message per pod set and domain, and, in a
ClusterQueue that may preempt, which Workloads it would preempt or why preemption would not help
(nothing is evicted: the simulation leaves every Workload as it is); then its waitForPodsReady state:
PodsReady, requeues after a timeout and when its backoff ends, a deactivation and why; and its failed
nodes: those replaced (tasq's NodeReplaced Events), those waiting, a NodeFailures eviction. Exit 0
when explained, 1 when the Workload does not exist, 2 for unusable arguments or an unreachable API.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.api import constants as c
from controller.api.workload import Workload
from controller.commands.simulate import placement_summary
from controller.core.admission.cycle import explain_preemption
from controller.core.admission.pods_ready import pods_ready_summary
from controller.core.simulating import Simulation


def register(subparsers: Any) -> None:
    """`explain`, and `describe` as its alias (kubectl's verb: `kubectl tasq describe workload X`)."""
    for verb in ("explain", "describe"):
        parser = subparsers.add_parser(verb, help="explain why a Workload waits, on a live cluster")
        parser.add_argument("kind", choices=("workload", "workloads", "wl"), help=f"what to {verb}: a Workload")
        parser.add_argument("name", help="the Workload's name (`kubectl get workloads -n NS`)")
        parser.add_argument("-n", "--namespace", default="default", help="the Workload's namespace (default: default)")
        parser.add_argument("--kubeconfig", type=Path, default=None,
                            help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
        parser.set_defaults(handler=run, verb=verb)


def node_failure_lines(key: str, live: dict[str, Any], events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The Workload's replaced nodes (its `NodeReplaced` Events, oldest first), the failed nodes
    still waiting for a replacement (`status.unhealthyNodes`) and a NodeFailures eviction."""
    name = (live.get("metadata") or {}).get("name")
    replaced = sorted((e for e in events if e.get("reason") == c.EVENT_REASON_NODE_REPLACED
                       and (e.get("involvedObject") or {}).get("kind") == c.KIND_WORKLOAD
                       and (e.get("involvedObject") or {}).get("name") == name),
                      key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    lines = [f"{key}: replaced at {e.get('lastTimestamp') or e.get('eventTime')}: {e.get('message')}"
             for e in replaced]
    workload = Workload.from_dict(live)
    if workload.unhealthy_node_names:
        lines.append(f"{key}: failed node(s) waiting for a replacement: {', '.join(workload.unhealthy_node_names)}")
    evicted = workload.condition(c.CONDITION_EVICTED)
    if evicted is not None and evicted.status == "True" and evicted.reason == c.REASON_NODE_FAILURES:
        lines.append(f"{key}: evicted ({c.REASON_NODE_FAILURES}): {evicted.message}")
    return lines


def explain_workload(objects: list[dict[str, Any]], namespace: str, name: str,
                     now: float | None = None, events: Sequence[Mapping[str, Any]] = ()) -> tuple[int, list[str]]:
    """(exit code, lines) for one Workload among a cluster's objects, then its waitForPodsReady state
    (PodsReady, requeues, the end of its backoff, at `now`) and its failed nodes (`events`: the Events
    of its namespace, for its replaced nodes). Pure: the caller read them and the clock."""
    code, lines = _admission_lines(objects, namespace, name)
    if code == 0:
        live = next(o for o in objects if o.get("kind") == c.KIND_WORKLOAD
                    and o["metadata"].get("namespace") == namespace and o["metadata"].get("name") == name)
        lines += [f"{namespace}/{name}: {line}"
                  for line in pods_ready_summary(Workload.from_dict(live), now if now is not None else 0.0)]
        lines += node_failure_lines(f"{namespace}/{name}", live, events)
    return code, lines


def _admission_lines(objects: list[dict[str, Any]], namespace: str, name: str) -> tuple[int, list[str]]:
    """Where it is admitted, or why it waits (see the module docstring)."""
    key = f"{namespace}/{name}"
    live = next((o for o in objects if o.get("kind") == c.KIND_WORKLOAD
                 and o["metadata"].get("namespace") == namespace and o["metadata"].get("name") == name), None)
    if live is None:
        return 1, [f'workload "{name}" not found in namespace "{namespace}"']
    admission = (live.get("status") or {}).get("admission")
    sim = Simulation(preempting=False)
    sim.apply(objects)
    sim.run()
    if admission:
        placed = placement_summary(Workload.from_dict(live))
        return 0, [f"{key}: admitted in ClusterQueue \"{admission.get('clusterQueue')}\": {placed}"]
    why = next((p for p in sim.explanations() if p.key == key), None)
    if why is None:
        return 0, [f"{key}: fits now; the controller admits it on its next cycle"]
    lines = [f"{why.key}: {why.detail}: {why.message}"]
    preemption = explain_preemption(sim.state, key) if sim.state is not None else None
    if preemption is not None:
        lines.append(f"{key}: {preemption}")
    return 0, lines


def kubeconfig_path(given: Path | None) -> Path | None:
    """The kubeconfig kubectl would use: the flag, else $KUBECONFIG's first file, else ~/.kube/config
    when it exists; None means in-cluster."""
    if given is not None:
        return given
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), None)
    if first:
        return Path(first)
    default = Path.home() / ".kube" / "config"
    return default if default.is_file() else None


async def read_events_at(kubeconfig: Path | None, namespace: str) -> list[dict[str, Any]]:
    """The Events of tasq's replaced nodes in one namespace (the user's read, not the operator's)."""
    from controller.kube.api import EVENTS, KubeApi, connect, path

    api_client = await connect(kubeconfig)
    try:
        listed = await KubeApi(api_client).request("GET", path(*EVENTS, namespace),
                                                   query={"fieldSelector": f"reason={c.EVENT_REASON_NODE_REPLACED}"})
        return [item for item in listed.get("items") or [] if isinstance(item, dict)]
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated


def run(args: argparse.Namespace) -> int:
    from controller.kube.api import ApiError
    from controller.kube.reading import read_cluster_at

    path = kubeconfig_path(args.kubeconfig)
    if path is not None and not path.is_file():
        print(f"tasq {args.verb}: kubeconfig {str(path)!r} is not a file", file=sys.stderr)
        return 2

    try:
        objects = asyncio.run(read_cluster_at(path))
        events = asyncio.run(read_events_at(path, args.namespace))
    except (ApiError, OSError) as e:
        detail = e.message if isinstance(e, ApiError) and e.status == 0 else f"cannot read the cluster: {e}"
        print(f"tasq {args.verb}: {detail}", file=sys.stderr)
        return 2
    code, lines = explain_workload(objects, args.namespace, args.name, time.time(), events)
    for line in lines:
        print(line, file=sys.stdout if code == 0 else sys.stderr)
    return code
