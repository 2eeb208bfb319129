"""Valid sample objects and table-case types for the validator tests.

Each `valid_*` sample is a small valid object of its kind, built with the shared fluent builders
(`tests/builders/kueue.py`); table cases change it with named steps or, for odd shapes, with
`.set("spec.podSets.0.count", -1)` / `.drop(...)`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from tests.builders.kueue import (
    ClusterQueueBuilder,
    JobBuilder,
    LocalQueueBuilder,
    ResourceFlavorBuilder,
    TopologyBuilder,
    WorkloadBuilder,
    make_cluster_queue,
    make_flavor,
    make_job,
    make_local_queue,
    make_topology,
    make_workload,
)
from tests.builders.manifest import Manifest

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"


def valid_topology(name: str = "gpu") -> TopologyBuilder:
    return make_topology(name, BLOCK, RACK)


def valid_flavor(name: str = "h100") -> ResourceFlavorBuilder:
    return make_flavor(name)


def valid_cluster_queue(name: str = "team-a") -> ClusterQueueBuilder:
    return make_cluster_queue(name).namespace_selector(None).group("cpu", "memory") \
        .flavor("h100", {"cpu": "8", "memory": "64Gi"})


def valid_local_queue(name: str = "training", cluster_queue: str = "team-a") -> LocalQueueBuilder:
    return make_local_queue(name, cluster_queue)


def valid_workload(name: str = "wl", *, pod_sets: bool = True) -> WorkloadBuilder:
    builder = make_workload(name).queue("training")
    return builder.pod_set("main", 2) if pod_sets else builder.drop("spec.podSets")


def valid_job(name: str = "train") -> JobBuilder:
    job = make_job(name).queue("training").parallelism(4).requests({"cpu": "1"})
    return job.drop("metadata.annotations").drop("spec.completionMode")


@dataclass(frozen=True)
class Case:
    """One table row: a narrative name, the object, and the exact field paths expected to fail."""

    name: str
    obj: Manifest | dict[str, Any] | list[Any]
    want_errors: tuple[str, ...] = ()

    def manifest(self) -> Any:
        """A fresh plain-dict copy of the object, as the validators receive it."""
        return self.obj.build() if isinstance(self.obj, Manifest) else copy.deepcopy(self.obj)


@dataclass(frozen=True)
class UpdateCase:
    """One update row: the stored object, the object written over it, the paths expected to fail."""

    name: str
    old: Manifest
    new: Manifest
    want_errors: tuple[str, ...] = ()


def cases(*rows: Case | UpdateCase) -> pytest.MarkDecorator:
    """pytest parametrize arguments (argument `case`) with the case names as ids."""
    return pytest.mark.parametrize("case", rows, ids=[r.name for r in rows])
