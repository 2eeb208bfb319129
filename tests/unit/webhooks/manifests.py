"""Fluent builders of plain-dict manifests for the validator tests.

Each builder starts from a small valid object of its kind; table cases change it with named
steps (`make_flavor("h100").node_label(...).topology_name(...)`) or, for odd shapes no
well-formed builder step produces, with `.set("spec.podSets.0.count", -1)` / `.drop(...)`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Self

import pytest

from controller.api import constants as c

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"


def _walk(obj: Any, parts: list[str]) -> Any:
    for part in parts:
        obj = obj[int(part)] if isinstance(obj, list) else obj.setdefault(part, {})
    return obj


class Manifest:
    """A manifest under construction; `build()` returns an independent copy."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    def set(self, dotted: str, value: Any) -> Self:
        """Set a field by dotted path (list items by index), creating objects on the way."""
        *parents, last = dotted.split(".")
        holder = _walk(self.obj, parents)
        if isinstance(holder, list):
            holder[int(last)] = value
        else:
            holder[last] = value
        return self

    def drop(self, dotted: str) -> Self:
        *parents, last = dotted.split(".")
        holder = _walk(self.obj, parents)
        if isinstance(holder, list):
            del holder[int(last)]
        else:
            holder.pop(last, None)
        return self

    def label(self, key: str, value: str) -> Self:
        self.obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotate(self, key: str, value: str) -> Self:
        self.obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.obj)


def _kueue(kind: str, name: str, version: str = c.VERSION_V1BETA1) -> dict[str, Any]:
    return {"apiVersion": f"{c.GROUP}/{version}", "kind": kind, "metadata": {"name": name}, "spec": {}}


class TopologyBuilder(Manifest):
    def levels(self, *labels: Any) -> Self:
        self.obj["spec"]["levels"] = [{"nodeLabel": label} for label in labels]
        return self


def make_topology(name: str = "gpu") -> TopologyBuilder:
    return TopologyBuilder(_kueue(c.KIND_TOPOLOGY, name, c.VERSION_V1ALPHA1)).levels(BLOCK, RACK)


class FlavorBuilder(Manifest):
    def node_label(self, key: str, value: str) -> Self:
        self.obj["spec"].setdefault("nodeLabels", {})[key] = value
        return self

    def taint(self, key: str, value: str, effect: str) -> Self:
        self.obj["spec"].setdefault("nodeTaints", []).append({"key": key, "value": value, "effect": effect})
        return self

    def toleration(self, **fields: Any) -> Self:
        self.obj["spec"].setdefault("tolerations", []).append(fields)
        return self

    def topology_name(self, name: str) -> Self:
        self.obj["spec"]["topologyName"] = name
        return self

    def inline_levels(self, *labels: Any) -> Self:
        self.obj["spec"]["topology"] = {"levels": list(labels)}
        return self


def make_flavor(name: str = "h100") -> FlavorBuilder:
    return FlavorBuilder(_kueue(c.KIND_RESOURCE_FLAVOR, name))


class ClusterQueueBuilder(Manifest):
    def cohort(self, name: str) -> Self:
        self.obj["spec"]["cohort"] = name
        return self

    def group(self, *covered: str) -> Self:
        """Start a resource group covering `covered`; `flavor()` adds flavors to it."""
        self.obj["spec"].setdefault("resourceGroups", []).append({"coveredResources": list(covered),
                                                                  "flavors": []})
        return self

    def flavor(self, name: str, *resources: tuple[str, Any], borrowing: dict[str, Any] | None = None) -> Self:
        """A flavor of the last group with (resource, nominalQuota) pairs in the given order."""
        items = []
        for resource, quota in resources:
            item = {"name": resource, "nominalQuota": quota}
            if borrowing and resource in borrowing:
                item["borrowingLimit"] = borrowing[resource]
            items.append(item)
        self.obj["spec"]["resourceGroups"][-1]["flavors"].append({"name": name, "resources": items})
        return self


def make_cluster_queue(name: str = "team-a") -> ClusterQueueBuilder:
    return ClusterQueueBuilder(_kueue(c.KIND_CLUSTER_QUEUE, name)).group("cpu", "memory").flavor(
        "h100", ("cpu", "8"), ("memory", "64Gi"))


def make_local_queue(name: str = "training", cluster_queue: str = "team-a") -> Manifest:
    obj = _kueue(c.KIND_LOCAL_QUEUE, name)
    obj["metadata"]["namespace"] = "default"
    obj["spec"]["clusterQueue"] = cluster_queue
    return Manifest(obj)


def pod_template(requests: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": requests or {"cpu": "1"}}}]}}


class WorkloadBuilder(Manifest):
    def pod_set(self, name: str, count: int = 1, **fields: Any) -> Self:
        self.obj["spec"].setdefault("podSets", []).append(
            {"name": name, "count": count, "template": pod_template(), **fields})
        return self

    def admitted(self) -> Self:
        """QuotaReserved=True, a complete metav1.Condition as the admission cycle writes it."""
        self.obj.setdefault("status", {})["conditions"] = [{
            "type": c.CONDITION_QUOTA_RESERVED, "status": "True", "reason": c.REASON_QUOTA_RESERVED,
            "message": "Quota reserved in ClusterQueue team-a", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        return self

    def assignment(self, name: str, count: int | None, *slices: tuple[dict[str, str], int],
                   **fields: Any) -> Self:
        """Add a PodSetAssignment to status.admission (ClusterQueue team-a); `slices` are
        (nodeLabels, count) pairs of its topologyAssignment, left out when none are given."""
        admission = self.obj.setdefault("status", {}).setdefault(
            "admission", {"clusterQueue": "team-a", "podSetAssignments": []})
        item: dict[str, Any] = {"name": name, **fields}
        if count is not None:
            item["count"] = count
        if slices:
            item["topologyAssignment"] = {"slices": [{"nodeLabels": labels, "count": n} for labels, n in slices]}
        admission["podSetAssignments"].append(item)
        return self


def make_workload(name: str = "wl", *, pod_sets: bool = True) -> WorkloadBuilder:
    obj = _kueue(c.KIND_WORKLOAD, name)
    obj["metadata"]["namespace"] = "default"
    obj["spec"]["queueName"] = "training"
    builder = WorkloadBuilder(obj)
    return builder.pod_set("main", 2) if pod_sets else builder


class JobBuilder(Manifest):
    def template_annotate(self, key: str, value: str) -> Self:
        template = self.obj["spec"]["template"]
        template.setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self


def make_job(name: str = "train") -> JobBuilder:
    obj = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default", "labels": {c.LABEL_QUEUE_NAME: "training"}},
           "spec": {"parallelism": 4, "completions": 4, "template": pod_template()}}
    return JobBuilder(obj)



@dataclass(frozen=True)
class Case:
    """One table row: a narrative name, the object, and the exact field paths expected to fail."""

    name: str
    obj: Manifest | dict[str, Any] | list[Any]
    want_errors: tuple[str, ...] = ()

    def manifest(self) -> Any:
        """A fresh plain-dict copy of the object, as the validators receive it."""
        return self.obj.build() if isinstance(self.obj, Manifest) else copy.deepcopy(self.obj)


def cases(*rows: Case) -> Any:
    """pytest parametrize arguments with the case names as ids."""
    return pytest.mark.parametrize("case", rows, ids=[r.name for r in rows])


@dataclass(frozen=True)
class UpdateCase:
    """One update row: the stored object, the object written over it, the paths expected to fail."""

    name: str
    old: Manifest
    new: Manifest
    want_errors: tuple[str, ...] = ()


def update_cases(*rows: UpdateCase) -> Any:
    """pytest parametrize arguments (argument `case`) with the case names as ids."""
    return pytest.mark.parametrize("case", rows, ids=[r.name for r in rows])
