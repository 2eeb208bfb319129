"""kube_objects: one document -> its errors with field paths, the object tasq keeps, or ignored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.api import constants as c
from controller.manifests.kube_objects import check_object
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import (
    make_cluster_queue,
    make_cohort,
    make_flavor,
    make_job,
    make_local_queue,
    make_priority_class,
)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
TERMS = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
PRIORITY_CLASS = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                  "value": 10}

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("a Node label key with two slashes", make_node("n1").labels({"a/b/c": "x"}).build(),
     "metadata.labels[a/b/c]: Invalid value"),
    ("a Node label value with a space", make_node("n1").labels({"rack": "r 1"}).build(),
     "metadata.labels[rack]: Invalid value"),
    ("a Node allocatable that is no quantity", make_node("n1").allocatable(cpu="lots").build(),
     "status.allocatable[cpu]: Invalid value"),
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
    ("an unknown kind in tasq's group", {**make_flavor("f").build(), "kind": "AdmissionCheck"}, 'kind: Unsupported value: "AdmissionCheck"'),
    # A null list item is what Go decodes it into (an empty object, ""), then refused as kube-apiserver does.
    ("a null scheduling gate (an unnamed one)", make_pod("p").set("spec.schedulingGates", [None]).build(),
     'spec.schedulingGates[0]: Invalid value: "": name part must be non-empty'),
    ("a null match expression (no key, no operator)", make_pod("p").node_affinity([("rack", "In", ["r1"])])
     .set("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0"
          ".matchExpressions", [None]).build(),
     f"{TERMS}[0].matchExpressions[0].operator: Invalid value: \"\": not a valid selector operator"),
    ("a null toleration (no key needs Exists)", make_pod("p").set("spec.tolerations", [None]).build(),
     "spec.tolerations[0].operator: Invalid value"),
    ("a null container (no name, no image)", make_pod("p").set("spec.initContainers", [None]).build(),
     "spec.initContainers[0].image: Required value"),
    ("a null owner reference", make_pod("p").set("metadata.ownerReferences", [None]).build(),
     "metadata.ownerReferences[0].uid: Required value: must not be empty"),
    ("a null Pod condition (a status write refuses an empty type)",
     make_pod("p").set("status.conditions", [None]).build(),
     'status.conditions[0].type: Invalid value: "": name part must be non-empty'),
    ("a null Node taint", make_node("n1").set("spec.taints", [None]).build(), "spec.taints[0].key: Required value"),
    # kube-apiserver's rules on Pods and Job templates (same paths and messages).
    ("a Job template without restartPolicy (defaulted to Always)",
     make_job("j").drop("spec.template.spec.restartPolicy").build(),
     'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    ("a Job template restarting Always", make_job("j").set("spec.template.spec.restartPolicy", "Always").build(),
     'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"'),
    ("a Job requesting a GPU without a limit",
     make_job("j").set("spec.template.spec.containers.0.resources", {"requests": {"nvidia.com/gpu": "1"}}).build(),
     "spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for non "
     "overcommitable resources"),
    ("a Pod requesting fewer GPUs than its limit", make_pod("p").requests({"nvidia.com/gpu": "1"})
     .limits({"nvidia.com/gpu": "2"}).build(),
     'spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
    ("half a GPU", make_pod("p").limits({"nvidia.com/gpu": "500m"}).build(),
     'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer'),
    ("hugepages without cpu or memory", make_pod("p").limits({"hugepages-2Mi": "2Mi"}).build(),
     "spec.containers[0].resources: Forbidden: HugePages require cpu or memory"),
    ("a Pod bound to a node while gated", make_pod("p").gate().set("spec.nodeName", "n1").build(),
     "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"),
    ("the same scheduling gate twice", make_pod("p").gate("a.io/x").gate("a.io/x").build(),
     'spec.schedulingGates[1]: Duplicate value: "a.io/x"'),
    ("a container without an image", make_pod("p").drop("spec.containers.0.image").build(),
     "spec.containers[0].image: Required value"),
    ("a node affinity operator that does not exist", make_pod("p").node_affinity([("rack", "Near", ["r1"])]).build(),
     f'{TERMS}[0].matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator'),
]

ACCEPTED: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], Any], Any]] = [
    ("a null node selector term is an empty term (it matches no node)",
     make_pod("p").set("spec.affinity", {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [None]}}}).build(),
     lambda kept: kept["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"], [{}]),
    ("a null Job condition is an empty one, stored as is by a status write",
     make_job("j").set("status", {"conditions": [None]}).build(),
     lambda kept: kept["status"]["conditions"], [{"type": "", "status": ""}]),
    ("a null Node condition likewise", make_node("n1").set("status.conditions", [None]).build(),
     lambda kept: kept["status"]["conditions"], [{"type": "", "status": ""}]),
    ("a Node condition status outside True/False/Unknown",
     make_node("n1").set("status.conditions", [{"type": "Ready", "status": "Yes"}]).build(),
     lambda kept: kept["status"]["conditions"], [{"type": "Ready", "status": "Yes"}]),
    ("null label, selector and request values are empty strings and a zero quantity",
     make_pod("p").set("metadata.labels", {"team": None}).set("spec.nodeSelector", {"rack": None})
     .set("spec.containers.0.resources", {"requests": {"cpu": None}}).build(),
     lambda kept: (kept["metadata"]["labels"], kept["spec"]["nodeSelector"],
                   kept["spec"]["containers"][0]["resources"]["requests"]),
     ({"team": ""}, {"rack": ""}, {"cpu": "0"})),
    ("a GPU limit alone (the request defaults to it)", make_pod("p").limits({"nvidia.com/gpu": "2"}).build(),
     lambda kept: kept["spec"]["containers"][0]["resources"]["limits"], {"nvidia.com/gpu": "2"}),
    ("a Job template with nodeName and gates (only a Pod may not have both)",
     make_job("j").set("spec.template.spec.nodeName", "n1")
     .set("spec.template.spec.schedulingGates", [{"name": "a.io/x"}]).build(),
     lambda kept: kept["spec"]["template"]["spec"]["nodeName"], "n1"),
]


@pytest.mark.parametrize(("obj", "error"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_at_the_field_path(obj: dict[str, Any], error: str) -> None:
    checked = check_object(obj)
    assert checked.obj is None
    assert any(str(e).startswith(error) for e in checked.errors), checked.errors


@pytest.mark.parametrize(("obj", "read", "kept"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_as_kube_apiserver_stores_it(obj: dict[str, Any], read: Callable[[dict[str, Any]], Any],
                                             kept: Any) -> None:
    checked = check_object(obj)
    assert checked.errors == []
    assert checked.obj is not None and read(checked.obj) == kept


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


def test_a_v1beta1_cluster_queue_is_kept_as_v1beta2() -> None:
    """A Kueue v1beta1 manifest keeps its meaning: cohort becomes cohortName, Borrow MayStopSearch."""
    queue = make_cluster_queue("cq").cohort("research").set("apiVersion", c.API_VERSION_V1BETA1).obj()
    queue["spec"]["cohort"] = queue["spec"].pop("cohortName")
    queue["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow"}
    checked = check_object(queue)
    assert checked.errors == []
    assert checked.obj is not None
    assert checked.obj["apiVersion"] == c.API_VERSION
    assert checked.obj["spec"]["cohortName"] == "research"
    assert "cohort" not in checked.obj["spec"]
    assert checked.obj["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch"}


@pytest.mark.parametrize("obj", [
    make_priority_class("urgent", 5, version=c.VERSION_V1BETA1).description("d").build(),
    make_priority_class("urgent", 5).description("d").build(),
], ids=["v1beta1", "v1beta2"])
def test_a_workload_priority_class_of_either_version_is_kept_as_v1beta2(obj: dict[str, Any]) -> None:
    checked = check_object(obj)
    assert checked.errors == []
    assert checked.obj == {**obj, "apiVersion": c.API_VERSION}


def test_a_cohort_is_kept_and_a_bad_one_refused_at_its_field() -> None:
    cohort = make_cohort("team").parent("org").flavor("h100", {"cpu": 4}).build()
    assert check_object(cohort).obj == cohort
    rooted = make_cohort("org").flavor("h100", {"cpu": 4}).limits("h100", "cpu", lending=1).build()
    assert [e.path for e in check_object(rooted).errors] == ["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"]
