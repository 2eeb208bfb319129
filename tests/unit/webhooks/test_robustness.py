"""Validators never raise and never pass what the models refuse: any field of a valid manifest
replaced by arbitrary JSON (or YAML-only shapes: non-string keys, values nested 1,000 deep, huge
strings) yields FieldErrors with paths, not exceptions, and an object with no errors builds its model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.crds import kind_spec
from tests.unit.api import examples
from tests.unit.webhooks.manifests import (
    valid_cluster_queue,
    valid_flavor,
    valid_local_queue,
    valid_topology,
    valid_workload,
)
from webhooks.validation import FieldError, validate, validate_update
from webhooks.validation.errors import RENDER_MAX, render

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
DOCS = [d for p in sorted(SAMPLES.glob("[0-9]*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
TASQ_KINDS = (c.KIND_TOPOLOGY, c.KIND_RESOURCE_FLAVOR, c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE, c.KIND_WORKLOAD)
POD_CLASS = {"group": c.PRIORITY_CLASS_GROUP, "kind": c.KIND_PRIORITY_CLASS}


def _example_workload() -> dict[str, Any]:
    """examples.workload() with a container in its launcher template, so that it validates."""
    wl = examples.workload()
    wl["spec"]["podSets"][1]["template"] = {"spec": {"containers": [{"name": "launcher", "image": "x"}]}}
    return wl


EXAMPLES = [examples.topology(), examples.flavor_kueue_form(), examples.flavor_inline_form(),
            examples.cluster_queue(), examples.local_queue(), _example_workload()]
TASQ_DOCS = [*EXAMPLES, *(d for d in DOCS if d.get("kind") in TASQ_KINDS)]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from([2**31, 2**63, -(2**63) - 1])
    | st.floats(allow_nan=True) | st.text(max_size=8) | st.sampled_from(["", "None", "2026-01-02T03:04:05Z"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=6) | st.integers(0, 3) | st.booleans(), inner, max_size=3),
    max_leaves=8)


def value_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `node` (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        out.extend(value_paths(child, (*prefix, key)))
    return out


def _replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    holder: Any = out
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return out


@st.composite
def corrupted(draw: st.DrawFn, docs: list[dict[str, Any]] = DOCS) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a valid sample, the same sample with one field replaced by arbitrary JSON or YAML)."""
    doc = draw(st.sampled_from(docs))
    path = draw(st.sampled_from(value_paths(doc)))
    return doc, _replaced(doc, path, draw(json_values))


@settings(max_examples=300, deadline=None)
@given(corrupted())
def test_corrupted_manifests_give_errors_not_exceptions(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    valid, broken = pair
    for errs in (validate(broken), validate_update(valid, broken), validate_update(broken, valid)):
        assert all(isinstance(e, FieldError) and e.path for e in errs)


@settings(max_examples=400, deadline=None)
@given(corrupted(TASQ_DOCS))
def test_what_the_validators_accept_builds_its_model(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The operator and `tasq simulate` build models from validated objects: no pydantic error
    may escape for an object the validators passed."""
    _, broken = pair
    ours = broken.get("apiVersion") in (c.API_VERSION, f"{c.GROUP}/{c.VERSION_V1ALPHA1}")
    if ours and validate(broken) == []:
        kind_spec(broken["kind"]).model.model_validate(broken)


def test_unchanged_samples_update_cleanly() -> None:
    for doc in DOCS:
        assert validate_update(doc, copy.deepcopy(doc)) == []


def test_the_examples_are_valid_and_build_their_models() -> None:
    for doc in TASQ_DOCS:
        assert validate(doc) == [], doc["kind"]
        kind_spec(doc["kind"]).model.model_validate(doc)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


@pytest.mark.parametrize("depth", [1_000, 10_000])
@pytest.mark.parametrize("doc", TASQ_DOCS[:6], ids=lambda d: f"{d['kind']}-{d['metadata']['name']}")
def test_values_nested_deeper_than_the_recursion_limit_are_errors(doc: dict[str, Any], depth: int) -> None:
    """Python's recursion limit is 1,000; comparing or quoting such a value must not hit it."""
    with_status = kind_spec(doc["kind"]).has_status
    for path in (("spec",), ("metadata", "labels"), *((("status",),) if with_status else ())):
        broken = _replaced(doc, path, _nested(depth))
        for errs in (validate(broken), validate_update(doc, broken), validate_update(broken, broken)):
            assert errs and all(len(e.message) < 2 * RENDER_MAX for e in errs)


def test_a_huge_string_is_refused_without_being_echoed_whole() -> None:
    errs = validate(valid_topology().set("spec.levels.0.nodeLabel", "a" * 1_000_000).build())
    assert errs and all(len(str(e)) < 3 * RENDER_MAX for e in errs)
    assert "(1000000 characters)" in errs[0].message


def test_render_quotes_what_json_cannot() -> None:
    assert render({1: "x", "cpu": "y"}) == "{1: 'x', 'cpu': 'y'}"
    assert render(_nested(5_000)) == "<list nested too deep to show>"
    assert render(10**5000) == "<int too long to show>"


@dataclass(frozen=True)
class RootCause:
    """One minimal document of a known failure: the model used to raise on it (or the CRD refused
    it) while the validators passed it; now the validators name the field."""

    name: str
    doc: dict[str, Any]
    want_path: str


def _wl() -> Any:
    return valid_workload().admitted()


ROOT_CAUSES = [
    RootCause("LocalQueue stopPolicy outside the enum", valid_local_queue().set("spec.stopPolicy", "Paused").build(),
              "spec.stopPolicy"),
    RootCause("LocalQueue stopPolicy of another type", valid_local_queue().set("spec.stopPolicy", 3).build(),
              "spec.stopPolicy"),
    RootCause("LocalQueue clusterQueue: null", valid_local_queue().set("spec.clusterQueue", None).build(),
              "spec.clusterQueue"),
    RootCause("ClusterQueue maxPriorityThreshold a string", valid_cluster_queue().set(
        "spec.preemption", {"borrowWithinCohort": {"policy": "Never", "maxPriorityThreshold": "high"}}).build(),
              "spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
    RootCause("ClusterQueue maxPriorityThreshold past int32", valid_cluster_queue().set(
        "spec.preemption", {"borrowWithinCohort": {"policy": "Never", "maxPriorityThreshold": 2**31}}).build(),
              "spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
    RootCause("ClusterQueue status count of 2^63", valid_cluster_queue().set("status", {"pendingWorkloads": 2**63})
              .build(), "status.pendingWorkloads"),
    RootCause("a flavor taint timeAdded that is no time", valid_flavor().set("spec.nodeTaints", [
        {"key": "gpu", "effect": "NoSchedule", "timeAdded": "yesterday"}]).build(), "spec.nodeTaints[0].timeAdded"),
    RootCause("a flavor taint timeAdded a number", valid_flavor().set("spec.nodeTaints", [
        {"key": "gpu", "effect": "NoSchedule", "timeAdded": 5}]).build(), "spec.nodeTaints[0].timeAdded"),
    RootCause("a flavor tolerationSeconds of 2^63", valid_flavor().set("spec.tolerations", [
        {"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2**63}]).build(),
              "spec.tolerations[0].tolerationSeconds"),
    RootCause("a flavor nodeLabels map mixing key types", valid_flavor().set("spec.nodeLabels", {1: "x", "gpu": "y"})
              .build(), "spec.nodeLabels[1]"),
    RootCause("Workload priorityClassRef a list", valid_workload().set("spec.priority", 1)
              .set("spec.priorityClassRef", ["a"]).build(), "spec.priorityClassRef"),
    RootCause("Workload priorityClassRef name not a DNS name", valid_workload().set("spec.priority", 1)
              .set("spec.priorityClassRef", {**POD_CLASS, "name": "High_Prio"}).build(), "spec.priorityClassRef.name"),
    RootCause("Workload priorityClassRef name of 254 characters", valid_workload().set("spec.priority", 1)
              .set("spec.priorityClassRef", {**POD_CLASS, "name": "a" * 254}).build(), "spec.priorityClassRef.name"),
    RootCause("Workload priorityClassRef without a priority (Kueue's CEL rule)",
              valid_workload().set("spec.priorityClassRef", {**POD_CLASS, "name": "high"}).build(), "spec.priority"),
    RootCause("Workload priorityClassRef group outside the enum", valid_workload().set("spec.priority", 1)
              .set("spec.priorityClassRef", {**POD_CLASS, "group": "mine"}).build(), "spec.priorityClassRef.group"),
    RootCause("Workload priorityClassRef kind of another group", valid_workload().set("spec.priority", 1)
              .set("spec.priorityClassRef", {**POD_CLASS, "kind": "WorkloadPriorityClass"}).build(),
              "spec.priorityClassRef"),
    RootCause("Workload priority past int32", valid_workload().set("spec.priority", 2**31).build(), "spec.priority"),
    RootCause("Workload pod set count of 2^63", valid_workload().set("spec.podSets.0.count", 2**63).build(),
              "spec.podSets[0].count"),
    RootCause("Workload active a string", valid_workload().set("spec.active", "yes").build(), "spec.active"),
    RootCause("Workload requeueState a string", _wl().set("status.requeueState", "soon").build(),
              "status.requeueState"),
    RootCause("Workload requeueState count below 0", _wl().set("status.requeueState", {"count": -1}).build(),
              "status.requeueState.count"),
    RootCause("Workload requeueAt no time", _wl().set("status.requeueState", {"requeueAt": "soon"}).build(),
              "status.requeueState.requeueAt"),
    RootCause("a condition without message", _wl().drop("status.conditions.0.message").build(),
              "status.conditions[0].message"),
    RootCause("a condition type of 317 characters", _wl().set(
        "status.conditions.0.type", f"{'a' * 253}/{'b' * 63}").build(), "status.conditions[0].type"),
    RootCause("a non-string label value", valid_topology().set("metadata.labels", {"team": 1}).build(),
              "metadata.labels[team]"),
    RootCause("a non-string label key", valid_topology().set("metadata.labels", {1: "a"}).build(),
              "metadata.labels[1]"),
    RootCause("an ownerReference without uid", valid_local_queue().set("metadata.ownerReferences", [
        {"apiVersion": "v1", "kind": "Namespace", "name": "x"}]).build(), "metadata.ownerReferences[0].uid"),
    RootCause("a resourceUsage map mixing key types", valid_workload().assignment(
        "main", 2, resourceUsage={1: "2", "cpu": "2"}).build(),
              "status.admission.podSetAssignments[0].resourceUsage[1]"),
    RootCause("a pod-set group name that is no string", valid_workload().set(
        "spec.podSets.0.topologyRequest", {"required": "rack", "podSetGroupName": 5}).build(),
              "spec.podSets[0].topologyRequest.podSetGroupName"),
    RootCause("a pod-set group name of 257 characters", valid_workload().set(
        "spec.podSets.0.topologyRequest", {"required": "rack", "podSetGroupName": "g" * 257}).build(),
              "spec.podSets[0].topologyRequest.podSetGroupName"),
    RootCause("a mistyped kind in tasq's group", {**examples.topology(), "kind": "Topologie"}, "kind"),
    RootCause("a version tasq's group does not serve for the kind", {**examples.local_queue(),
              "apiVersion": f"{c.GROUP}/{c.VERSION_V1ALPHA1}"}, "apiVersion"),
]


@pytest.mark.parametrize("case", ROOT_CAUSES, ids=lambda case: case.name)
def test_each_root_cause_is_a_field_error_at_its_path(case: RootCause) -> None:
    assert case.want_path in [e.path for e in validate(case.doc)]


@pytest.mark.parametrize(("name", "doc"), [
    pytest.param("ClusterQueue queueingStrategy: null", valid_cluster_queue().set("spec.queueingStrategy", None)),
    pytest.param("ResourceFlavor spec: null", valid_flavor().set("spec", None)),
    pytest.param("toleration operator and effect empty", valid_flavor().set("spec.tolerations", [
        {"key": "gpu", "operator": "", "value": "yes", "effect": ""}])),
], ids=lambda v: v if isinstance(v, str) else "")
def test_what_kubernetes_accepts_validates_and_builds(name: str, doc: Any) -> None:
    """A null reads as absent (the API server prunes it, then defaults); core/v1 lets a toleration
    leave operator ("": Equal) and effect ("": every effect) empty."""
    obj = doc.build()
    assert validate(obj) == []
    kind_spec(obj["kind"]).model.model_validate(obj)
