"""PodSetRequest.from_template: effective requests as kube-scheduler computes them, plus 1 `pods`."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.api.selectors import NodeSelectorTerm, Toleration
from controller.core.topology import PodSetRequest, TopologyRequest
from tests.builders.cluster import PodBuilder, make_pod


@dataclass(frozen=True)
class Case:
    name: str
    pod: PodBuilder
    want_requests: dict[str, int]


CASES = [
    Case("no requests still uses one pods slot", make_pod("p"), {c.RESOURCE_PODS: 1000}),
    Case("app containers add up", make_pod("p").requests(cpu="500m").container("side", {"cpu": "1"}),
         {"cpu": 1500, c.RESOURCE_PODS: 1000}),
    Case("limits stand in for absent requests", make_pod("p").limits({"nvidia.com/gpu": "2"}),
         {"nvidia.com/gpu": 2000, c.RESOURCE_PODS: 1000}),
    Case("a big init container raises the peak", make_pod("p").requests(cpu="1").init_container("init", {"cpu": "4"}),
         {"cpu": 4000, c.RESOURCE_PODS: 1000}),
    Case("a small init container does not", make_pod("p").requests(cpu="2").init_container("init", {"cpu": "1"}),
         {"cpu": 2000, c.RESOURCE_PODS: 1000}),
    Case("sidecars run alongside the app and later init containers",
         make_pod("p").requests(cpu="1").init_container("proxy", {"cpu": "1"}, sidecar=True)
         .init_container("init", {"cpu": "3"}),
         {"cpu": 4000, c.RESOURCE_PODS: 1000}),
    Case("sidecars add to the app containers", make_pod("p").requests(cpu="2")
         .init_container("proxy", {"cpu": "500m"}, sidecar=True),
         {"cpu": 2500, c.RESOURCE_PODS: 1000}),
    Case("the pod overhead is added", make_pod("p").requests(memory="1Gi").overhead(memory="128Mi"),
         {"memory": (1024 + 128) * 1024 * 1024 * 1000, c.RESOURCE_PODS: 1000}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_requests_from_template(case: Case) -> None:
    request = PodSetRequest.from_template("main", case.pod.template(), 4)
    assert dict(request.requests) == case.want_requests


def test_template_filters_are_carried() -> None:
    pod = (make_pod("p").node_selector({"pool": "gpu"}).toleration("gpu", "x", "NoSchedule")
           .node_affinity([("gen", "Gt", ["4"])]))
    request = PodSetRequest.from_template("main", pod.template(), 8, TopologyRequest("required", "rack"))
    assert (request.count, request.topology) == (8, TopologyRequest("required", "rack"))
    assert dict(request.node_selector) == {"pool": "gpu"}
    assert request.tolerations == (Toleration("gpu", "Equal", "x", "NoSchedule"),)
    assert request.affinity_terms == (NodeSelectorTerm((("gen", "Gt", ("4",)),), ()),)
