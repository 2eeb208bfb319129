"""Job -> Workload: pod set shape, requests as kube-scheduler computes them, topology, priority, name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.workload import Workload
from controller.core.admission.workloads import workload_info
from controller.core.jobs.batch_job import workload_from_job, workload_name_for_job
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
WORKLOAD_PRIORITY_CLASSES = {"urgent": 50_000, "batch": -100}

JOB_CASES = [
    JobCase("parallelism absent means one pod", make_job("a").parallelism(None).requests({"cpu": "1"}),
            want_count=1, want_requests={"cpu": 1000}),
    JobCase("parallelism is the pod count", make_job("a").parallelism(8).requests({"cpu": "500m"}),
            want_count=8, want_requests={"cpu": 500}),
    JobCase("an init container larger than the app containers sets the request",
            make_job("a").requests({"cpu": "1", "memory": "1Gi"}).init_container({"cpu": "3"}),
            want_requests={"cpu": 3000, "memory": 1024**3 * 1000}),
    JobCase("limits stand in for absent requests, and an explicit request wins over its limit",
            make_job("a").requests({"cpu": "1"}).limits({"cpu": "2", "nvidia.com/gpu": "1"}),
            want_requests={"cpu": 1000, "nvidia.com/gpu": 1000}),
    JobCase("the RuntimeClass overhead is added to the pod's requests",
            make_job("a").requests({"cpu": "1"}).overhead({"cpu": "250m", "memory": "120Mi"}),
            want_requests={"cpu": 1250, "memory": 120 * 1024**2 * 1000}),
    JobCase("a sidecar keeps running beside the app containers and under later init containers",
            make_job("a").requests({"cpu": "1"}).init_container({"cpu": "500m"}, sidecar=True)
            .init_container({"cpu": "2"}),
            want_requests={"cpu": 2500}),
    JobCase("parallelism 0 is a pod set of no pods", make_job("a").parallelism(0).requests({"cpu": "1"}),
            want_count=0, want_requests={"cpu": 1000}),
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
    JobCase("the WorkloadPriorityClass label gives its value",
            make_job("a").label(c.LABEL_PRIORITY_CLASS, "urgent"), want_priority=50_000),
    JobCase("the WorkloadPriorityClass label wins over the pod's PriorityClass and priority",
            make_job("a").label(c.LABEL_PRIORITY_CLASS, "batch").priority(7, "high"), want_priority=-100),
]


@pytest.mark.parametrize("case", JOB_CASES, ids=lambda case: case.name)
def test_workload_from_job(case: JobCase) -> None:
    manifest = workload_from_job(case.job.queue("q").obj(), PRIORITY_CLASSES, 0, WORKLOAD_PRIORITY_CLASSES)
    info = workload_info(Workload.from_dict(manifest))
    assert len(info.pod_sets) == 1
    ps = info.pod_sets[0]
    assert ps.name == "main"
    assert ps.count == case.want_count
    if case.want_requests:
        assert ps.requests == case.want_requests
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


def test_a_workload_manifest_takes_its_class_priority_and_template_topology() -> None:
    """A Workload given as is (not built from a Job): priority from its PriorityClass when
    spec.priority is absent, topology from Kueue's pod-template annotation when no topologyRequest."""
    manifest = workload_from_job(make_job("a").queue("q").template_annotate(
        c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, "rack").obj())
    manifest["spec"].pop("priority")
    manifest["spec"]["priorityClassRef"] = POD_CLASS | {"name": "high"}
    manifest["spec"]["podSets"][0].pop("topologyRequest")
    info = workload_info(Workload.from_dict(manifest), priority_classes=PRIORITY_CLASSES)
    assert info.priority == 1000
    assert info.pod_sets[0].topology == TopologyRequest("required", "rack")


POD_CLASS = {"group": c.PRIORITY_CLASS_GROUP, "kind": c.KIND_PRIORITY_CLASS}


@dataclass(frozen=True)
class PriorityCase:
    name: str
    spec: dict[str, Any]
    want_priority: int


PRIORITY_CASES = [
    PriorityCase("an explicit priority wins over its class",
                 {"priority": 7, "priorityClassRef": POD_CLASS | {"name": "high"}}, 7),
    PriorityCase("a zero priority is explicit too", {"priority": 0, "priorityClassRef": POD_CLASS | {"name": "high"}}, 0),
    PriorityCase("a known class gives its value", {"priorityClassRef": POD_CLASS | {"name": "low"}}, -5),
    PriorityCase("an unknown class falls back to 0", {"priorityClassRef": POD_CLASS | {"name": "missing"}}, 0),
    PriorityCase("neither field gives 0", {}, 0),
]


@pytest.mark.parametrize("case", PRIORITY_CASES, ids=lambda case: case.name)
def test_a_workload_manifest_priority(case: PriorityCase) -> None:
    wl = workload_info(Workload.from_dict({"metadata": {"name": "w", "namespace": "ns"}, "spec": {"queueName": "q", "podSets": [{"name": "main"}], **case.spec}}),
                       priority_classes=PRIORITY_CLASSES)
    assert wl.priority == case.want_priority


@pytest.mark.parametrize(("notes", "want"), [
    pytest.param({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack", c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: "host",
                  c.ANNOTATION_PODSET_SLICE_SIZE: "4"},
                 {"required": "rack", "podSetSliceRequiredTopology": "host", "podSetSliceSize": 4},
                 id="slice level and size"),
    pytest.param({c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: "host", c.ANNOTATION_PODSET_SLICE_SIZE: "2"},
                 {"podSetSliceRequiredTopology": "host", "podSetSliceSize": 2},
                 id="slices alone: Kueue's slice-only request, no mode field"),
    pytest.param({c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY: "block",
                  c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS:
                      '[{"topology": "rack", "size": 8}, {"topology": "host", "size": 4}]'},
                 {"preferred": "block", "podsetSliceRequiredTopologyConstraints": [
                     {"topology": "rack", "size": 8}, {"topology": "host", "size": 4}]},
                 id="multi-layer constraints from JSON"),
    pytest.param({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack", c.ANNOTATION_PODSET_GROUP_NAME: "g"},
                 {"required": "rack", "podSetGroupName": "g"}, id="pod-set group"),
    pytest.param({c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack", c.ANNOTATION_PODSET_SLICE_SIZE: "x",
                  c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: "host"},
                 {"required": "rack"}, id="a malformed size gives no slices (the validators refuse it first)"),
])
def test_slice_and_group_annotations_reach_the_workload_and_back(notes: dict[str, str], want: dict[str, Any]) -> None:
    job = make_job("a").parallelism(8)
    for key, value in notes.items():
        job = job.template_annotate(key, value)
    workload = workload_from_job(job.obj())
    (pod_set,) = workload["spec"]["podSets"]
    assert pod_set["topologyRequest"] == want
    # The Workload's fields parse back into the same request the annotations gave.
    (info,) = workload_info(Workload.from_dict(workload)).pod_sets
    (from_notes,) = workload_info(Workload.from_dict({"spec": {"podSets": [{**pod_set, "topologyRequest": None}]}})).pod_sets
    assert info.topology == from_notes.topology


@pytest.mark.parametrize(("job", "want_ref"), [
    (make_job("a").label(c.LABEL_PRIORITY_CLASS, "urgent").priority(class_name="high"),
     {"group": c.GROUP, "kind": c.KIND_WORKLOAD_PRIORITY_CLASS, "name": "urgent"}),
    (make_job("a").priority(class_name="high"),
     {"group": c.PRIORITY_CLASS_GROUP, "kind": c.KIND_PRIORITY_CLASS, "name": "high"}),
    (make_job("a"), None),
], ids=["the label names a WorkloadPriorityClass", "the pod template names a PriorityClass", "no class"])
def test_the_workload_records_which_class_gave_its_priority(job: JobBuilder, want_ref: dict[str, str] | None) -> None:
    spec = workload_from_job(job.queue("q").obj(), PRIORITY_CLASSES, 0, WORKLOAD_PRIORITY_CLASSES)["spec"]
    assert spec.get("priorityClassRef") == want_ref
    Workload.from_dict(workload_from_job(job.queue("q").obj(), PRIORITY_CLASSES, 0, WORKLOAD_PRIORITY_CLASSES))
