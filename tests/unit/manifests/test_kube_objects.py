"""kube_objects: one document -> its errors with field paths, the object tasq keeps, or ignored."""

from __future__ import annotations

from typing import Any

import pytest

from controller.manifests.kube_objects import check_object
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import make_flavor, make_job, make_local_queue

PRIORITY_CLASS = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                  "value": 10}

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("a Node label key with two slashes", make_node("n1").labels({"a/b/c": "x"}).build(),
     "metadata.labels[a/b/c]: Invalid value"),
    ("a Node label value with a space", make_node("n1").labels({"rack": "r 1"}).build(),
     "metadata.labels[rack]: Invalid value"),
    ("a Node allocatable that is no quantity", make_node("n1").allocatable(cpu="lots").build(),
     "status.allocatable[cpu]: Invalid value"),
    ("a Node condition status outside True/False/Unknown",
     make_node("n1").set("status.conditions", [{"type": "Ready", "status": "Yes"}]).build(),
     'status.conditions[0].status: Unsupported value: "Yes"'),
    ("a Pod phase nobody writes", make_pod("p").set("status.phase", "Runing").build(),
     'status.phase: Unsupported value: "Runing"'),
    ("a negative Pod overhead", make_pod("p").set("spec.overhead", {"cpu": "-1"}).build(),
     'spec.overhead[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ("a Namespace name that is not a DNS label",
     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}, "metadata.name: Invalid value"),
    ("negative Job completions", make_job("j").set("spec.completions", -1).build(),
     "spec.completions: Invalid value: -1: must be greater than or equal to 0"),
    ("an unknown Job completionMode", make_job("j").set("spec.completionMode", "Sorted").build(),
     'spec.completionMode: Unsupported value: "Sorted"'),
    ("a PriorityClass without value", {**PRIORITY_CLASS, "value": None}, "value: Required value"),
    ("a user PriorityClass above one billion", {**PRIORITY_CLASS, "value": 2_000_000_000},
     "value: Invalid value: 2000000000: must be no greater than 1000000000"),
    ("a LocalQueue with clusterQueue: null (the model needs it)",
     make_local_queue("lq", "cq").set("spec.clusterQueue", None).build(), "spec.clusterQueue: "),
    ("a LocalQueue stopPolicy that is a number", make_local_queue("lq", "cq").set("spec.stopPolicy", 3).build(),
     "spec.stopPolicy: "),
    ("an unknown kind in tasq's group", {**make_flavor("f").build(), "kind": "Cohort"}, 'kind: Unsupported value: "Cohort"'),
]


@pytest.mark.parametrize(("obj", "error"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_at_the_field_path(obj: dict[str, Any], error: str) -> None:
    checked = check_object(obj)
    assert checked.obj is None
    assert any(str(e).startswith(error) for e in checked.errors), checked.errors


def test_a_system_priority_class_may_exceed_one_billion() -> None:
    obj = {**PRIORITY_CLASS, "metadata": {"name": "system-node-critical"}, "value": 2_000_001_000}
    assert check_object(obj).errors == []


def test_kinds_tasq_does_not_read_are_ignored() -> None:
    checked = check_object({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": 3})
    assert checked.ignored


def test_nodes_keep_only_what_tasq_reads() -> None:
    node = make_node("n1").labels({"rack": "r1"}).taint("gpu", "x").allocatable(cpu="8").build()
    node["status"]["images"] = [{"names": ["a"], "sizeBytes": 1}]
    node["status"]["conditions"][0]["message"] = "kubelet is posting ready status"
    kept = check_object(node).obj
    assert kept == {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "n1", "labels": node["metadata"]["labels"]},
                    "spec": {"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]},
                    "status": {"allocatable": node["status"]["allocatable"],
                               "conditions": [{"type": "Ready", "status": "True"}]}}


def test_pods_keep_requests_placement_and_tasqs_annotations_only() -> None:
    pod = make_pod("p").requests({"cpu": "1"}).build()
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/topology-podset": "main", "other.io/big": "x" * 1000}
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    pod["spec"]["affinity"] = {"podAntiAffinity": {}, "nodeAffinity": {}}
    kept = check_object(pod).obj
    assert kept is not None
    assert kept["metadata"]["annotations"] == {"kueue.x-k8s.io/topology-podset": "main"}
    assert "env" not in kept["spec"]["containers"][0]
    assert kept["spec"]["containers"][0]["resources"] == pod["spec"]["containers"][0]["resources"]
    assert "affinity" not in kept["spec"], "an empty nodeAffinity constrains nothing"
