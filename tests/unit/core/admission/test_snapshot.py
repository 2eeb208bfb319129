"""The admission snapshot: reservations of admitted workloads turn into real usage as their pods bind."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.core.admission.snapshot import build_snapshot
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import make_cluster_queue, make_flavor

GPU = "nvidia.com/gpu"


@dataclass
class SnapshotCase:
    name: str
    pod_workload: str | None
    """The topology-workload annotation of the one bound 2-GPU pod on n1 (None: a foreign pod)."""
    want_used_gpus: int


CASES = [
    SnapshotCase("a bound pod of the reserving workload replaces its share", "w", 6),
    SnapshotCase("a foreign pod adds to the reservation", None, 8),
    SnapshotCase("a pod of another workload adds to the reservation", "other", 8),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_reservations_are_taken_before_pods(case: SnapshotCase) -> None:
    pod = make_pod("p0", "ns").requests({GPU: "2"}).on("n1")
    if case.pod_workload is not None:
        pod = pod.annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, case.pod_workload)
    snapshot = build_snapshot([make_cluster_queue("a").flavor("a100", {GPU: 8}).model()], [],
                              [make_flavor("a100").model()], [],
                              [make_node("n1").allocatable({GPU: "8"}).view()], [pod.view()],
                              reservations={"ns/w": {"n1": {GPU: 6000, c.RESOURCE_PODS: 3000}}})
    assert snapshot.usage.used("n1")[GPU] == case.want_used_gpus * 1000
