"""views: one pod's footprint on a node (placement_requests, shared by PodView, PodSetRequest and PodSetInfo),
PodTemplateView (what admission reads of a pod template), and null list items read without a crash."""

from __future__ import annotations

from typing import Any

from controller.api.selectors import Toleration
from controller.api.views import (
    POD_SLOT_MILLI,
    JobView,
    NodeView,
    PodTemplateView,
    PodView,
    placement_requests,
    pod_requests,
)
from controller.api.workload import PodSet
from controller.core.admission.workloads import pod_set_info
from controller.core.topology import PodSetRequest

SPEC: dict[str, Any] = {
    "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "8"}}}],
    "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
}


def test_placement_requests_are_the_effective_requests_plus_one_pod() -> None:
    assert placement_requests(SPEC) == {**pod_requests(SPEC), "pods": POD_SLOT_MILLI}
    assert placement_requests(SPEC) == {"cpu": 3000, "nvidia.com/gpu": 8000, "pods": 1000}


def test_every_view_of_one_pod_spec_takes_the_same_room_on_a_node() -> None:
    pod = PodView.from_dict({"metadata": {"name": "p", "namespace": "ns"}, "spec": SPEC})
    request = PodSetRequest.from_template("main", {"spec": SPEC}, 4)
    info = pod_set_info(PodSet(name="main", count=4, template={"spec": SPEC}))
    assert pod.requests == request.requests == info.placement_requests == placement_requests(SPEC)
    assert "pods" not in info.requests


def test_views_skip_null_list_items_instead_of_crashing() -> None:
    """The API never sends one; a manifest can (tasq simulate zeroes them first): read, never raise."""
    pod = PodView.from_dict({"metadata": {"name": "p", "ownerReferences": [None]}, "spec": {
        "containers": [None, {"name": "c", "resources": {"requests": {"cpu": "1"}}}], "initContainers": [None],
        "schedulingGates": [None, {"name": "g"}], "tolerations": [None],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [None]}}}}, "status": {"conditions": [None]}})
    assert (pod.scheduling_gates, pod.tolerations, pod.owners, pod.conditions) == (("g",), (), (), ())
    assert pod.requests == {"cpu": 1000, "pods": POD_SLOT_MILLI}
    [term] = pod.affinity_terms  # a null term is an empty one: it matches no node
    assert not term.matches("n1", {})
    job = JobView.from_dict({"metadata": {"name": "j"}, "status": {"conditions": [None]}})
    assert job.conditions == () and job.finished is None
    node = NodeView.from_dict({"metadata": {"name": "n"}, "spec": {"taints": [None]},
                               "status": {"conditions": [None]}})
    assert node.taints == () and not node.ready


def test_a_pod_template_view_reads_what_admission_and_placement_use() -> None:
    template = {"metadata": {"annotations": {"a": "1"}}, "spec": {
        **SPEC, "nodeSelector": {"gpu": "h100"}, "priorityClassName": "high",
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}}
    view = PodTemplateView.from_dict(template)
    assert (view.annotations, view.node_selector, view.priority, view.priority_class_name) == (
        {"a": "1"}, {"gpu": "h100"}, None, "high")
    assert view.tolerations == (Toleration("spot", "Exists", "", "NoSchedule"),)
    assert view.requests == pod_requests(SPEC) and view.placement_requests == placement_requests(SPEC)
    bare = PodTemplateView.from_dict({"spec": {"priority": 5}})
    assert (bare.annotations, bare.requests, bare.priority, bare.priority_class_name) == ({}, {}, 5, None)
