"""manifests.api_versions: tasq's kinds in any served version become the hub, and their errors are
named in the version the user wrote (paths and field names), as kubectl with that version would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.conversion import HUB, convert
from controller.manifests.api_versions import SPOKE_FIELDS, spoke_path, to_hub
from controller.manifests.kube_objects import check_object

V1BETA1 = c.API_VERSION_V1BETA1
POD_SETS = [{"name": "main", "count": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]


def cluster_queue(api_version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": c.KIND_CLUSTER_QUEUE, "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [], **spec}}


def workload(api_version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": c.KIND_WORKLOAD, "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": "lq", "podSets": POD_SETS, **spec}}


def _set(obj: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = obj
    for step in parents:
        node = node.setdefault(step, {})
    node[last] = value


def _get(obj: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path; `name[*]` steps into the first item of the list `name`."""
    node: Any = obj
    for step in dotted.split("."):
        key, _, index = step.partition("[")
        node = node.get(key) if isinstance(node, dict) else None
        if index and isinstance(node, list):
            node = node[0] if node else None
    return node


def admitted_by_domains(*domains: dict[str, Any]) -> dict[str, Any]:
    """A v1beta1 Workload status admitted with these `domains` (one hostname level) for its 2 pods."""
    return {"admission": {"clusterQueue": "cq", "podSetAssignments": [{
        "name": "main", "count": 2, "flavors": {"cpu": "f"},
        "topologyAssignment": {"levels": [c.LABEL_HOSTNAME], "domains": list(domains)}}]}}


ADMITTED_BY_DOMAINS = admitted_by_domains({"values": ["n1"], "count": 2})


PRIORITY = {"spec.priorityClassName": "high", "spec.priorityClassSource": c.PRIORITY_SOURCE_POD}
SPOKE_FIELDS_SET: dict[str, dict[str, Any]] = {
    "spec.cohort": {"spec.cohort": "pool"},
    "status.flavorUsage": {"status.flavorUsage": []},
    "spec.priorityClassName": PRIORITY,  # a name converts only with its source, and the other way round
    "spec.priorityClassSource": PRIORITY,
    "status.accumulatedPastExexcutionTimeSeconds": {"status.accumulatedPastExexcutionTimeSeconds": 7},
    "status.admission.podSetAssignments[*].topologyAssignment.domains": {"status": ADMITTED_BY_DOMAINS},
}
"""v1beta1 field -> the fields a v1beta1 object needs for it to convert."""


@pytest.mark.parametrize("kind, hub, spoke", [(kind, hub, spoke) for kind, pairs in SPOKE_FIELDS.items()
                                              for hub, spoke, _ in pairs])
def test_every_renamed_field_is_where_conversion_puts_it(kind: str, hub: str, spoke: str) -> None:
    obj: dict[str, Any] = {"apiVersion": V1BETA1, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}}
    for path, value in SPOKE_FIELDS_SET[spoke].items():
        _set(obj, path, value)
    converted = convert(obj, HUB)
    assert isinstance(converted, dict)
    assert _get(converted, hub) is not None, (hub, converted)
    assert _get(converted, spoke) is None


@dataclass(frozen=True)
class PathCase:
    name: str
    kind: str
    hub_path: str
    want: str


PATH_CASES = [
    PathCase("a renamed field", c.KIND_CLUSTER_QUEUE, "spec.cohortName", "spec.cohort"),
    PathCase("inside a renamed list keeps its index", c.KIND_LOCAL_QUEUE, "status.flavorsUsage[2].name",
             "status.flavorUsage[2].name"),
    PathCase("a reference's name is the old name field", c.KIND_WORKLOAD, "spec.priorityClassRef.name",
             "spec.priorityClassName"),
    PathCase("a reference's kind is the old source field", c.KIND_WORKLOAD, "spec.priorityClassRef.kind",
             "spec.priorityClassSource"),
    PathCase("the whole reference is the old name field", c.KIND_WORKLOAD, "spec.priorityClassRef",
             "spec.priorityClassName"),
    PathCase("a field with the same name in both stays", c.KIND_WORKLOAD, "spec.podSets[0].count",
             "spec.podSets[0].count"),
    PathCase("inside a topology assignment's slices: its domains, at the same pod set",
             c.KIND_WORKLOAD, "status.admission.podSetAssignments[3].topologyAssignment.slices[1].podCounts",
             "status.admission.podSetAssignments[3].topologyAssignment.domains"),
    PathCase("a prefix that is not the field stays", c.KIND_CLUSTER_QUEUE, "spec.cohortNameX", "spec.cohortNameX"),
]


@pytest.mark.parametrize("case", PATH_CASES, ids=lambda case: case.name)
def test_spoke_path(case: PathCase) -> None:
    assert spoke_path(case.kind, case.hub_path) == case.want


@dataclass(frozen=True)
class ErrorCase:
    name: str
    obj: dict[str, Any]
    want: list[str]


ERROR_CASES = [
    ErrorCase("v1beta1 cohort that is no DNS subdomain, named as written",
              cluster_queue(V1BETA1, cohort="ALL!"), ["spec.cohort: Invalid value"]),
    ErrorCase("v1beta1 priority class without priority: Kueue's v1beta1 message",
              workload(V1BETA1, priorityClassName="high", priorityClassSource=c.PRIORITY_SOURCE_POD),
              ["spec.priority: Required value: priority should not be nil when priorityClassName is set"]),
    ErrorCase("v1beta1 domains holding more pods than assigned: named as domains",
              {**workload(V1BETA1), "status": admitted_by_domains({"values": ["n1"], "count": 5})},
              ["status.admission.podSetAssignments[0].topologyAssignment.domains: Invalid value: \"5 pod(s)\": "
               "the domains must hold exactly"]),
    ErrorCase("v1beta1 domain that conversion refuses: its path written as kubectl writes it",
              {**workload(V1BETA1), "status": admitted_by_domains({"values": ["n1", "n2"], "count": 2})},
              ["status.admission.podSetAssignments[0].topologyAssignment.domains[0].values: Invalid value: must hold "
               "one value per level"]),
    ErrorCase("the hub's field name in v1beta1 is unknown there",
              cluster_queue(V1BETA1, cohortName="pool"), ['spec.cohortName: unknown field "cohortName"']),
    ErrorCase("v1beta1's field name in v1beta2 is unknown there, not silently dropped",
              cluster_queue(HUB, cohort="pool"), ['spec.cohort: unknown field "cohort"']),
    ErrorCase("an unknown field deep in a list, named by its index",
              workload(HUB, podSets=[{**POD_SETS[0], "replicas": 2}]), ['spec.podSets[0].replicas: unknown field']),
    ErrorCase("a version tasq does not serve",
              cluster_queue(f"{c.GROUP}/v1alpha1"), ["apiVersion: Unsupported value"]),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda case: case.name)
def test_errors_name_the_version_written(case: ErrorCase) -> None:
    checked = check_object(case.obj)
    assert checked.obj is None
    lines = [str(e) for e in checked.errors]
    assert len(lines) == len(case.want), lines
    for line, want in zip(lines, case.want, strict=True):
        assert line.startswith(want), lines


def test_a_v1beta1_object_becomes_the_hub_with_kueues_renames() -> None:
    checked = check_object(workload(V1BETA1, priorityClassName="high", priorityClassSource=c.PRIORITY_SOURCE_POD,
                                    priority=5))
    assert checked.errors == [] and checked.obj is not None
    assert checked.obj["apiVersion"] == HUB
    assert checked.obj["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass",
                                                       "name": "high"}


def test_a_v1alpha1_topology_becomes_the_hub() -> None:
    topology = {"apiVersion": c.API_VERSION_V1ALPHA1, "kind": c.KIND_TOPOLOGY, "metadata": {"name": "dc"},
                "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": c.LABEL_HOSTNAME}]}}
    checked = check_object(topology)
    assert checked.errors == [] and checked.obj == {**topology, "apiVersion": HUB}


def test_a_hub_object_is_kept_as_it_is() -> None:
    obj = cluster_queue(HUB, cohortName="pool")
    in_hub = to_hub(obj, lambda _: [])
    assert in_hub.errors == [] and in_hub.obj is obj
