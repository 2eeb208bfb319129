"""Readings of nodes and pods for the simulated scheduler and kubelet: tolerations, node affinity and
the effective requests NodeResourcesFit counts."""

from __future__ import annotations

from typing import Any

import pytest

from devcluster.simulated.readings import (
    NodeSelectorTerm,
    NodeView,
    PodView,
    Taint,
    Toleration,
    node_matches_pod,
)

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(("_name", "toleration", "tolerated"), [
    ("equal key, value and effect", {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, True),
    ("Exists ignores the value", {"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ("an empty key with Exists tolerates everything", {"operator": "Exists"}, True),
    ("another value", {"key": "nvidia.com/gpu", "value": "absent"}, False),
    ("another effect", {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ("an empty key with Equal matches any key by value", {"value": "present"}, True),
    ("an unknown operator", {"key": "nvidia.com/gpu", "operator": "Like", "value": "present"}, False),
])
def test_a_toleration_tolerates_a_taint_as_the_api_defines(_name: str, toleration: dict[str, Any],
                                                            tolerated: bool) -> None:
    assert Toleration.from_dict(toleration).tolerates(GPU_TAINT) is tolerated


def term(*expressions: tuple[str, str, list[str]], fields: tuple[tuple[str, str, list[str]], ...] = ()) -> Any:
    return NodeSelectorTerm.from_dict({
        "matchExpressions": [{"key": k, "operator": o, "values": v} for k, o, v in expressions],
        "matchFields": [{"key": k, "operator": o, "values": v} for k, o, v in fields]})


@pytest.mark.parametrize(("_name", "selector", "terms", "matches"), [
    ("no constraint", {}, [], True),
    ("nodeSelector pair present", {"rack": "r1"}, [], True),
    ("nodeSelector pair differs", {"rack": "r2"}, [], False),
    ("one of two terms matches", {}, [term(("rack", "In", ["r9"])), term(("gpus", "Gt", ["4"]))], True),
    ("Lt on a numeric label", {}, [term(("gpus", "Lt", ["8"]))], False),
    ("Gt on a non-numeric value never matches", {}, [term(("gpus", "Gt", ["x"]))], False),
    ("matchFields on the node name", {}, [term(fields=(("metadata.name", "In", ["n1"]),))], True),
    ("an empty term selects nothing", {}, [term()], False),
    ("nodeSelector and terms are ANDed", {"rack": "r2"}, [term(("rack", "Exists", []))], False),
])
def test_node_affinity_filter(_name: str, selector: dict[str, str], terms: list[NodeSelectorTerm],
                              matches: bool) -> None:
    assert node_matches_pod("n1", {"rack": "r1", "gpus": "8"}, selector, terms) is matches


def container(cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": f"c{cpu}", "resources": {"requests": {"cpu": cpu}}, **extra}


def test_requests_are_the_larger_of_the_app_containers_and_the_init_peak_plus_overhead() -> None:
    # init steps: 3 (init) | sidecar 1 + init 1 = 2; running: 1 + 1 + sidecar 1 = 3 -> max 3, + overhead
    spec = {"containers": [container("1"), container("1")],
            "initContainers": [container("3"), container("1", restartPolicy="Always"), container("1")],
            "overhead": {"cpu": "250m"}}
    assert PodView.from_dict({"spec": spec}).requests == {"cpu": 3250, "pods": 1000}


def test_limits_stand_in_for_missing_requests_and_zero_requests_are_dropped() -> None:
    spec = {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2"},
                                                       "requests": {"memory": "0"}}}]}
    assert PodView.from_dict({"spec": spec}).requests == {"nvidia.com/gpu": 2000, "pods": 1000}


def test_unreadable_quantities_are_reported_not_raised() -> None:
    pod = PodView.from_dict({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [container("abc")]}})
    assert pod.invalid.startswith("invalid resource quantity")
    node = NodeView.from_dict({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "lots"}}})
    assert node.allocatable == {}
