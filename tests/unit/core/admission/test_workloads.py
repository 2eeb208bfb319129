"""Job -> Workload: pod set shape, requests as kube-scheduler computes them, topology, priority, name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.api import constants as c
from controller.core.admission.workloads import workload_from_job, workload_info, workload_name_for_job
from controller.core.topology import TopologyRequest
from tests.builders.kueue import JobBuilder, make_job


@dataclass
class JobCase:
    name: str
    job: JobBuilder
    want_count: int = 1
    want_requests: dict[str, int] = field(default_factory=dict)
    want_topology: TopologyRequest | None = None
    want_priority: int = 0


PRIORITY_CLASSES = {"high": 1000, "low": -5}

JOB_CASES = [
    JobCase("parallelism absent means one pod", make_job("a").parallelism(None).requests({"cpu": "1"}),
            want_count=1, want_requests={"cpu": 1000}),
    JobCase("parallelism is the pod count", make_job("a").parallelism(8).requests({"cpu": "500m"}),
            want_count=8, want_requests={"cpu": 500}),
    JobCase("an init container larger than the app containers sets the request",
            make_job("a").requests({"cpu": "1", "memory": "1Gi"}).init_container({"cpu": "3"}),
            want_requests={"cpu": 3000, "memory": 1024**3 * 1000}),
    JobCase("KEP require-topology annotation on the Job",
            make_job("a").annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "rack"),
            want_topology=TopologyRequest("required", "rack")),
    JobCase("KEP prefer-topology auto means the lowest level (level None)",
            make_job("a").annotate(c.ANNOTATION_PREFER_TOPOLOGY, "auto"),
            want_topology=TopologyRequest("preferred", None)),
    JobCase("Kueue pod-template preferred annotation",
            make_job("a").template_annotate(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY, "block"),
            want_topology=TopologyRequest("preferred", "block")),
    JobCase("Kueue pod-template unconstrained annotation",
            make_job("a").template_annotate(c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY, "true"),
            want_topology=TopologyRequest("unconstrained", None)),
    JobCase("the Job annotation wins over the template annotation",
            make_job("a").annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "rack")
            .template_annotate(c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY, "block"),
            want_topology=TopologyRequest("required", "rack")),
    JobCase("spec.priority wins over the class", make_job("a").priority(7, "high"), want_priority=7),
    JobCase("the PriorityClass value", make_job("a").priority(class_name="high"), want_priority=1000),
    JobCase("an unknown PriorityClass falls back to the default", make_job("a").priority(class_name="nope"),
            want_priority=0),
]


@pytest.mark.parametrize("case", JOB_CASES, ids=lambda case: case.name)
def test_workload_from_job(case: JobCase) -> None:
    manifest = workload_from_job(case.job.queue("q").obj(), PRIORITY_CLASSES)
    info = workload_info(manifest)
    assert len(info.pod_sets) == 1
    ps = info.pod_sets[0]
    assert ps.name == "main"
    assert ps.count == case.want_count
    for resource, milli in case.want_requests.items():
        assert ps.requests[resource] == milli
    assert ps.placement_requests[c.RESOURCE_PODS] == 1000
    assert ps.topology == case.want_topology
    assert info.priority == case.want_priority
    assert info.queue_name == "q"


def test_workload_is_owned_by_the_job_and_named_like_kueue() -> None:
    manifest: dict[str, Any] = workload_from_job(make_job("train", "ml").uid("u-1").queue("q").obj())
    meta = manifest["metadata"]
    assert meta["namespace"] == "ml"
    assert meta["name"].startswith("job-train-") and len(meta["name"]) == len("job-train-") + 5
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Job", "train", "u-1", True)


def test_workload_names_differ_per_job_and_stay_dns_labels() -> None:
    long = "x" * 80
    assert workload_name_for_job("a") != workload_name_for_job("b")
    assert workload_name_for_job("a") == workload_name_for_job("a")
    assert len(workload_name_for_job(long)) == 63
