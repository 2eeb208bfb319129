"""The nodes of Kueue's TAS guide, read from its `kind-cluster.yaml` (tests/data/kueue-examples/tas/):
one Node per kind worker with that worker's labels. Used by the e2e and simulate tests of Kueue's
documentation examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from devcluster.simulated.nodes import node_object
from tests.builders.operator import KWOK_NODE_ANNOTATION, KWOK_NODE_VALUE

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "kueue-examples"
# Kueue's guide assumes 8 allocatable CPUs per worker, of which kind's own pods (kindnet, kube-proxy)
# take 100m: a worker holds 7 of the examples' one-CPU pods, which is what its pod counts show.
KIND_WORKER_ALLOCATABLE = {"cpu": "7900m", "memory": "16Gi", "pods": "110"}


def kind_worker_name(index: int) -> str:
    """kind's names: kind-worker, kind-worker2, kind-worker3, ... (`index` counts from 0)."""
    return "kind-worker" if index == 0 else f"kind-worker{index + 1}"


def kind_workers(allocatable: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A Ready Node per worker of the guide's kind cluster, named as kind names them, with its labels,
    annotated so kwok runs it on the real control plane."""
    config = yaml.safe_load((EXAMPLES / "tas" / "kind-cluster.yaml").read_text())
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    nodes = []
    for i, worker in enumerate(workers):
        node = node_object(kind_worker_name(i), dict(worker.get("labels") or {}),
                           dict(allocatable or KIND_WORKER_ALLOCATABLE))
        node["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE}
        nodes.append(node)
    return nodes


def assigned_domains(assignment: dict[str, Any]) -> list[tuple[dict[str, str], int]]:
    """(level label -> value, pod count) per domain of a Workload's TopologyAssignment as Kueue
    writes it: v1beta2's `slices` (`domainCount`, `valuesPerLevel` universal or individual with
    prefix/suffix/roots, `podCounts` universal or individual) or v1beta1's `domains`. Written from
    Kueue's API description, independently of tasq's encoder, so the tests check one against the other."""
    levels: list[str] = assignment["levels"]
    if "domains" in assignment:
        return [(dict(zip(levels, d["values"], strict=True)), int(d["count"])) for d in assignment["domains"]]
    domains: list[tuple[dict[str, str], int]] = []
    for sl in assignment["slices"]:
        n = int(sl["domainCount"])
        per_level: list[list[str]] = []
        for values in sl["valuesPerLevel"]:
            if "universal" in values:
                per_level.append([values["universal"]] * n)
            else:
                ind = values["individual"]
                per_level.append([ind.get("prefix", "") + root + ind.get("suffix", "") for root in ind["roots"]])
        counts = sl["podCounts"]
        pods = [int(counts["universal"])] * n if "universal" in counts else [int(x) for x in counts["individual"]]
        domains += [({level: per_level[j][i] for j, level in enumerate(levels)}, pods[i]) for i in range(n)]
    return domains
