"""convert(): Kueue's v1beta1 <-> v1beta2 renames per kind, round trips that lose nothing, failures
that name the object and field, and no exception on any input."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.conversion import ConversionFailure, convert
from controller.api.topology_assignment import AssignedDomain, encode

V1 = c.API_VERSION_V1BETA1
V2 = c.API_VERSION
V1A1 = c.API_VERSION_V1ALPHA1


def obj(api_version: str, kind: str, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        namespace: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x"}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if spec is not None:
        out["spec"] = spec
    if status is not None:
        out["status"] = status
    return out


@dataclass(frozen=True)
class RenameCase:
    name: str
    v1beta1: dict[str, Any]
    v1beta2: dict[str, Any]


WPC_REF = {"group": c.GROUP, "kind": "WorkloadPriorityClass", "name": "high"}
POD_REF = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}

RENAMES = [
    RenameCase("a ClusterQueue's cohort becomes cohortName",
               obj(V1, "ClusterQueue", {"cohort": "research", "queueingStrategy": "StrictFIFO"}),
               obj(V2, "ClusterQueue", {"cohortName": "research", "queueingStrategy": "StrictFIFO"})),
    RenameCase("current fungibility values pass unchanged",
               obj(V1, "ClusterQueue", {"flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                                                              "whenCanPreempt": "TryNextFlavor"}}),
               obj(V2, "ClusterQueue", {"flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                                                              "whenCanPreempt": "TryNextFlavor"}})),
    RenameCase("a LocalQueue's status.flavorUsage becomes flavorsUsage",
               obj(V1, "LocalQueue", {"clusterQueue": "cq"}, {"flavorUsage": [{"name": "gpu", "resources": []}],
                                                               "flavorsReservation": []}, namespace="ns"),
               obj(V2, "LocalQueue", {"clusterQueue": "cq"}, {"flavorsUsage": [{"name": "gpu", "resources": []}],
                                                               "flavorsReservation": []}, namespace="ns")),
    RenameCase("a WorkloadPriorityClass source and name become a priorityClassRef",
               obj(V1, "Workload", {"priorityClassName": "high", "priority": 9,
                                    "priorityClassSource": c.PRIORITY_SOURCE_WORKLOAD}, namespace="ns"),
               obj(V2, "Workload", {"priorityClassRef": WPC_REF, "priority": 9}, namespace="ns")),
    RenameCase("a pod PriorityClass source and name become a priorityClassRef",
               obj(V1, "Workload", {"priorityClassName": "high", "priority": 9,
                                    "priorityClassSource": c.PRIORITY_SOURCE_POD}, namespace="ns"),
               obj(V2, "Workload", {"priorityClassRef": POD_REF, "priority": 9}, namespace="ns")),
    RenameCase("Kueue's misspelt status field gets its v1beta2 spelling",
               obj(V1, "Workload", {"queueName": "q"}, {"accumulatedPastExexcutionTimeSeconds": 30}, namespace="ns"),
               obj(V2, "Workload", {"queueName": "q"}, {"accumulatedPastExecutionTimeSeconds": 30}, namespace="ns")),
    RenameCase("a ResourceFlavor is the same in both versions",
               obj(V1, "ResourceFlavor", {"nodeLabels": {"a": "b"}, "topologyName": "t"}),
               obj(V2, "ResourceFlavor", {"nodeLabels": {"a": "b"}, "topologyName": "t"})),
]


@pytest.mark.parametrize("case", RENAMES, ids=lambda case: case.name)
def test_kueues_renames_map_both_ways(case: RenameCase) -> None:
    assert convert(case.v1beta1, V2) == case.v1beta2
    assert convert(case.v1beta2, V1) == case.v1beta1


def test_topology_v1alpha1_and_v1beta1_convert_to_v1beta2_and_back() -> None:
    spec = {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "rack"}]}
    for spoke in (V1, V1A1):
        assert convert(obj(spoke, "Topology", spec), V2) == obj(V2, "Topology", spec)
        assert convert(obj(V2, "Topology", spec), spoke) == obj(spoke, "Topology", spec)
    assert convert(obj(V1A1, "Topology", spec), V1) == obj(V1, "Topology", spec)


def test_deprecated_fungibility_becomes_may_stop_search_and_comes_back_while_unchanged() -> None:
    """Kueue maps Borrow and Preempt to MayStopSearch; tasq keeps the old word for v1beta1 readers."""
    v1 = obj(V1, "ClusterQueue", {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}})
    hub = convert(v1, V2)
    assert isinstance(hub, dict)
    assert hub["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    assert c.ANNOTATION_CONVERSION_V1BETA1 in hub["metadata"]["annotations"]
    assert convert(hub, V1) == v1

    hub["spec"]["flavorFungibility"]["whenCanBorrow"] = "TryNextFlavor"  # a v1beta2 writer's change wins
    back = convert(hub, V1)
    assert isinstance(back, dict)
    assert back["spec"]["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"}
    assert "annotations" not in back["metadata"]


def test_a_priority_class_ref_v1beta1_cannot_name_survives_a_v1beta1_round_trip() -> None:
    ref = {"group": "example.com", "kind": "Tier", "name": "gold"}
    hub = obj(V2, "Workload", {"priorityClassRef": ref, "queueName": "q"}, namespace="ns")
    v1 = convert(hub, V1)
    assert isinstance(v1, dict)
    assert v1["spec"] == {"queueName": "q"}
    assert convert(v1, V2) == hub

    assert isinstance(v1, dict)
    v1["spec"]["priorityClassName"] = "other"  # a v1beta1 writer set a name: the saved ref must not return
    v1["spec"]["priorityClassSource"] = c.PRIORITY_SOURCE_POD
    again = convert(v1, V2)
    assert isinstance(again, dict)
    assert again["spec"]["priorityClassRef"] == {**POD_REF, "name": "other"}


@dataclass(frozen=True)
class FailureCase:
    name: str
    obj: Any
    desired: str
    message: str


FAILURES = [
    FailureCase("not an object", ["x"], V2, "object: must be a JSON object, not list"),
    FailureCase("a kind tasq does not serve", {"apiVersion": V1, "kind": "Pod", "metadata": {"name": "p"}}, V2,
                "Pod p: kind: must be one of"),
    FailureCase("a version the kind is not served in", obj("kueue.x-k8s.io/v9", "Workload", {}, namespace="ns"), V2,
                "Workload ns/x: apiVersion: must be one of kueue.x-k8s.io/v1beta2, kueue.x-k8s.io/v1beta1"),
    FailureCase("Topology's v1alpha1 for another kind", obj(V2, "ClusterQueue", {}), V1A1,
                "ClusterQueue x: cannot be converted to 'kueue.x-k8s.io/v1alpha1'"),
    FailureCase("a spec that is no object", obj(V1, "ClusterQueue") | {"spec": "big"}, V2,
                "ClusterQueue x: spec: must be an object, not str"),
    FailureCase("a priorityClassRef that is no object", obj(V2, "Workload", {"priorityClassRef": "high"},
                                                            namespace="ns"), V1,
                "Workload ns/x: spec.priorityClassRef: must be an object, not str"),
    FailureCase("a status that is no object", obj(V1, "LocalQueue", {}, namespace="ns") | {"status": [1]}, V2,
                "LocalQueue ns/x: status: must be an object, not list"),
]


@pytest.mark.parametrize("case", FAILURES, ids=lambda case: case.name)
def test_what_cannot_be_converted_is_a_failure_naming_object_and_field(case: FailureCase) -> None:
    result = convert(case.obj, case.desired)
    assert isinstance(result, ConversionFailure)
    assert result.message.startswith(case.message)


def test_convert_leaves_its_input_unchanged() -> None:
    v1 = obj(V1, "ClusterQueue", {"cohort": "a", "flavorFungibility": {"whenCanBorrow": "Borrow"}})
    snapshot = json.dumps(v1, sort_keys=True)
    convert(v1, V2)
    assert json.dumps(v1, sort_keys=True) == snapshot


# ---------------------------------------------------------------------------------------------
# Properties: generated v1beta1 objects survive v1beta1 -> v1beta2 -> v1beta1; anything at all
# gives a dict or a ConversionFailure, never an exception.

names = st.text(alphabet="abcxyz-", min_size=1, max_size=6)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), names)
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(names, inner, max_size=3)), max_leaves=8)


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


fungibility_value = st.sampled_from(["Borrow", "Preempt", "MayStopSearch", "TryNextFlavor", "other"])
cq_spec = optional(cohort=names, queueingStrategy=st.sampled_from(["StrictFIFO", "BestEffortFIFO"]),
                   resourceGroups=json_values,
                   flavorFungibility=optional(whenCanBorrow=fungibility_value, whenCanPreempt=fungibility_value))
lq_status = optional(flavorUsage=json_values, flavorsReservation=json_values, pendingWorkloads=st.integers(0, 9))
source = st.sampled_from([c.PRIORITY_SOURCE_WORKLOAD, c.PRIORITY_SOURCE_POD, ""])
wl_spec = optional(priorityClassName=names, priorityClassSource=source, priority=st.integers(-3, 3),
                   queueName=names, podSets=json_values, active=st.booleans())
wl_status = optional(admission=json_values, conditions=json_values, accumulatedPastExexcutionTimeSeconds=st.integers(0, 9))
user_annotations = st.dictionaries(names, names, max_size=2)


def v1beta1_objects() -> st.SearchStrategy[dict[str, Any]]:
    def build(kind: str, spec: dict[str, Any], status: dict[str, Any] | None, ann: dict[str, str],
              version: str = V1) -> dict[str, Any]:
        return obj(version, kind, spec, status, namespace="ns" if kind in ("LocalQueue", "Workload") else None,
                   annotations=ann or None)

    return st.one_of(
        st.builds(build, st.just("ClusterQueue"), cq_spec, st.none(), user_annotations),
        st.builds(build, st.just("LocalQueue"), optional(clusterQueue=names), lq_status, user_annotations),
        st.builds(build, st.just("Workload"), wl_spec, st.one_of(st.none(), wl_status), user_annotations),
        st.builds(build, st.just("ResourceFlavor"), optional(nodeLabels=json_values), st.none(), user_annotations),
        st.builds(build, st.just("Topology"), optional(levels=json_values), st.none(), user_annotations,
                  st.sampled_from([V1, V1A1])),
    )


@settings(max_examples=300, deadline=None)
@given(v1beta1_objects())
def test_a_v1beta1_object_survives_a_round_trip_through_v1beta2(original: dict[str, Any]) -> None:
    hub = convert(original, V2)
    assert isinstance(hub, dict)
    assert hub["apiVersion"] == V2
    assert convert(hub, original["apiVersion"]) == original


@settings(max_examples=300, deadline=None)
@given(v1beta1_objects())
def test_a_v1beta2_object_survives_a_round_trip_through_v1beta1(original: dict[str, Any]) -> None:
    hub = convert(original, V2)
    assert isinstance(hub, dict)
    hub.get("metadata", {}).get("annotations", {}).pop(c.ANNOTATION_CONVERSION_V1BETA1, None)
    if hub.get("metadata", {}).get("annotations") == {}:
        del hub["metadata"]["annotations"]
    spoke = convert(hub, V1)
    assert isinstance(spoke, dict)
    assert convert(spoke, V2) == hub


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, st.builds(lambda kind, version, rest: {**rest, "kind": kind, "apiVersion": version},
                                        st.sampled_from(["Workload", "ClusterQueue", "LocalQueue", "Topology", "x"]),
                                        st.sampled_from([V1, V2, V1A1, "v1"]),
                                        st.dictionaries(st.sampled_from(["spec", "status", "metadata"]), json_values))),
       st.sampled_from([V1, V2, V1A1]))
def test_any_input_gives_an_object_or_a_failure(anything: Any, desired: str) -> None:
    result = convert(anything, desired)
    assert isinstance(result, dict | ConversionFailure)
    if isinstance(result, ConversionFailure):
        assert result.message


def _containers(value: Any) -> list[Any]:
    """Every dict and list inside a JSON value, the value itself included."""
    if isinstance(value, dict):
        return [value, *(x for v in value.values() for x in _containers(v))]
    if isinstance(value, list):
        return [value, *(x for v in value for x in _containers(v))]
    return []


@settings(max_examples=200, deadline=None)
@given(v1beta1_objects(), st.sampled_from([V1, V2]))
def test_the_converted_object_shares_no_object_or_array_with_its_input(original: dict[str, Any], desired: str) -> None:
    """The caller may change what convert returns (the webhook answers it, devcluster stores it)
    without changing the object it passed in, in either direction and within one version."""
    for source in (original, convert(original, V2)):
        assert isinstance(source, dict)
        converted = convert(source, desired)
        assert isinstance(converted, dict)
        inputs = {id(x) for x in _containers(source)}
        assert not [x for x in _containers(converted) if id(x) in inputs]


def test_a_mapping_that_is_not_a_dict_converts_to_plain_dicts_and_lists() -> None:
    """A Python caller's read-only mapping and tuples come back as the JSON types the API writes."""
    spec = MappingProxyType({"cohort": "a", "resourceGroups": ({"coveredResources": ("cpu",)},)})
    cq = MappingProxyType({"apiVersion": V1, "kind": "ClusterQueue", "metadata": MappingProxyType({"name": "x"}),
                           "spec": spec})
    hub = convert(cq, V2)
    assert hub == {"apiVersion": V2, "kind": "ClusterQueue", "metadata": {"name": "x"},
                   "spec": {"cohortName": "a", "resourceGroups": [{"coveredResources": ["cpu"]}]}}
    assert isinstance(hub, dict) and type(hub["metadata"]) is dict


def test_a_workload_priority_class_converts_by_its_api_version_alone() -> None:
    """Its fields are the same in v1beta1 and v1beta2 (top-level value and description)."""
    v1 = {"apiVersion": V1, "kind": c.KIND_WORKLOAD_PRIORITY_CLASS, "metadata": {"name": "urgent"},
          "value": 10, "description": "on call"}
    up = convert(v1, V2)
    assert up == {**v1, "apiVersion": V2}
    assert convert(up, V1) == v1


def test_a_cohort_is_served_as_v1beta2_only() -> None:
    cohort = {"apiVersion": V2, "kind": c.KIND_COHORT, "metadata": {"name": "org"}, "spec": {"parentName": "root"}}
    assert convert(cohort, V2) == cohort
    failure = convert(cohort, V1)
    assert isinstance(failure, ConversionFailure) and "Cohort is served as" in failure.message


def test_an_admitted_workload_with_a_multi_slice_assignment_reads_the_same_in_both_versions() -> None:
    """Two node pools, 8 hosts each, one pod per host: Kueue's encoding writes a slice per hostname
    prefix. v1beta1 lists the same 16 hosts as `domains`, in order, and converting back gives the
    same Workload (nothing kept in an annotation)."""
    hosts = [f"{pool}-{i:02d}" for pool in ("gpu-pool-alpha-7f3a9c", "cpu-pool-omega-c91d0e") for i in range(8)]
    compact = encode([c.LABEL_HOSTNAME], [AssignedDomain((h,), 1) for h in hosts]).to_dict()
    assert len(compact["slices"]) == 2
    hub = obj(V2, "Workload", {"queueName": "lq", "podSets": []}, namespace="ns", status={"admission": {
        "clusterQueue": "team", "podSetAssignments": [{"name": "main", "count": 16, "topologyAssignment": compact}]}})
    spoke = convert(hub, V1)
    assert isinstance(spoke, dict)
    assert spoke["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == {
        "levels": [c.LABEL_HOSTNAME], "domains": [{"values": [h], "count": 1} for h in hosts]}
    assert "annotations" not in spoke["metadata"]
    assert convert(spoke, V2) == hub


def test_a_value_nested_deeper_than_python_can_copy_is_a_failure_not_an_exception() -> None:
    deep: list[Any] = []
    for _ in range(sys.getrecursionlimit() + 10):
        deep = [deep]
    workload = obj(V1, "Workload", {"podSets": deep}, namespace="ns")
    failure = convert(workload, V2)
    assert isinstance(failure, ConversionFailure)
    assert failure.message == "Workload ns/x: a value is nested too deeply to convert"


def test_unhealthy_nodes_are_the_same_field_in_both_workload_versions() -> None:
    from controller.api.v1beta1.workload import Workload as V1Beta1Workload
    from controller.api.workload import Workload

    hub = {"apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD, "metadata": {"name": "w", "namespace": "ns"},
           "spec": {"podSets": [{"name": "main", "count": 1, "template": {}}]},
           "status": {"unhealthyNodes": [{"name": "n1"}, {"name": "n2"}]}}
    down = convert(hub, f"{c.GROUP}/v1beta1")
    assert isinstance(down, dict) and down["status"]["unhealthyNodes"] == [{"name": "n1"}, {"name": "n2"}]
    assert V1Beta1Workload.model_validate(down).status.unhealthy_nodes[1].name == "n2"  # type: ignore[union-attr]
    up = convert(down, c.API_VERSION)
    assert isinstance(up, dict) and Workload.from_dict(up).unhealthy_node_names == ["n1", "n2"]
