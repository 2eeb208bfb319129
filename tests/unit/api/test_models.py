"""The pydantic API models: wire round trips, both flavor topology forms, quantities, conditions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from controller.api import constants as c
from controller.api.flavor import ResourceFlavor
from controller.api.meta import ConditionStatus, KubeObject, format_time, object_key
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.topology_assignment import AssignedDomain, encode
from controller.api.workload import Workload, admission_of
from controller.cache.cluster import ClusterCache
from tests.builders.kueue import make_cluster_queue, make_flavor, make_topology, make_workload
from tests.unit.api import examples

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


@dataclass(frozen=True)
class RoundTripCase:
    name: str
    model: type[KubeObject]
    example: Callable[[], dict[str, Any]]


ROUND_TRIPS = [
    RoundTripCase("topology with three levels", Topology, examples.topology),
    RoundTripCase("flavor naming a Topology (Kueue form)", ResourceFlavor, examples.flavor_kueue_form),
    RoundTripCase("flavor with inline levels (KEP form)", ResourceFlavor, examples.flavor_inline_form),
    RoundTripCase("cluster queue with every spec and status field", ClusterQueue, examples.cluster_queue),
    RoundTripCase("local queue with status", LocalQueue, examples.local_queue),
    RoundTripCase("admitted workload with slices and requeue state", Workload, examples.workload),
]


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=lambda case: case.name)
def test_stored_object_round_trips_unchanged(case: RoundTripCase) -> None:
    obj = case.example()
    assert case.model.from_dict(obj).to_dict() == obj


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=lambda case: case.name)
def test_snake_case_names_are_accepted_like_camel_case(case: RoundTripCase) -> None:
    camel = case.model.from_dict(case.example())
    snake = case.model.model_validate(camel.model_dump(by_alias=False))
    assert snake == camel


def test_unknown_fields_are_dropped_but_unmodelled_metadata_is_kept() -> None:
    obj = examples.topology()
    obj["spec"]["colour"] = "blue"
    obj["metadata"]["selfLink"] = "/apis/x"
    out = Topology.from_dict(obj).to_dict()
    assert "colour" not in out["spec"]
    assert out["metadata"]["selfLink"] == "/apis/x"


def test_empty_optional_lists_are_omitted_as_go_omitempty_does() -> None:
    obj = examples.local_queue()
    obj["status"]["conditions"] = []
    obj["status"]["flavorsUsage"] = []
    status = LocalQueue.from_dict(obj).to_dict()["status"]
    assert "conditions" not in status
    assert "flavorsUsage" not in status
    assert status["pendingWorkloads"] == 2


def test_pod_template_keeps_empty_maps() -> None:
    """Empty maps inside a template mean something (`emptyDir: {}`); only our own fields omit empties."""
    out = Workload.from_dict(examples.workload()).to_dict()
    volumes = out["spec"]["podSets"][0]["template"]["spec"]["volumes"]
    assert volumes == [{"name": "scratch", "emptyDir": {}}]


# -- quantities --------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuantityCase:
    name: str
    given: Any
    want: str | None  # None: rejected


QUANTITY_CASES = [
    QuantityCase("an integer is accepted and written as a string", 10, "10"),
    QuantityCase("a milli quantity keeps its text", "1500m", "1500m"),
    QuantityCase("a binary suffix keeps its text", "2Gi", "2Gi"),
    QuantityCase("an exponent keeps its text", "1e3", "1e3"),
    QuantityCase("words are rejected", "ten", None),
    QuantityCase("a float is rejected (the API server would not store it)", 1.5, None),
    QuantityCase("a boolean is rejected", True, None),
]


@pytest.mark.parametrize("case", QUANTITY_CASES, ids=lambda case: case.name)
def test_quota_quantities_are_strings_on_the_wire(case: QuantityCase) -> None:
    obj = make_cluster_queue("cq").flavor("default", {"cpu": 1}).obj()
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = case.given
    if case.want is None:
        with pytest.raises(ValidationError) as err:
            ClusterQueue.from_dict(obj)
        assert err.value.errors()[0]["loc"][-1] == "nominalQuota"
        return
    out = ClusterQueue.from_dict(obj).to_dict()
    assert out["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == case.want


@pytest.mark.parametrize(("model", "doc", "read"), [
    pytest.param(ClusterQueue, {"spec": {"queueingStrategy": None}}, lambda o: o.spec.queueing_strategy,
                 id="a null queueingStrategy gets the default"),
    pytest.param(ResourceFlavor, {"spec": None}, lambda o: o.spec.node_labels, id="a null flavor spec is empty"),
    pytest.param(LocalQueue, {"spec": {"clusterQueue": "q", "stopPolicy": None}}, lambda o: o.spec.stop_policy,
                 id="a null optional field is None"),
])
def test_a_null_reads_as_absent(model: Any, doc: dict[str, Any], read: Any) -> None:
    """The API server prunes nulls from non-nullable fields before defaulting; so does parsing."""
    absent = {"spec": {k: v for k, v in doc["spec"].items() if v is not None}} if doc["spec"] else {}
    assert read(model.model_validate(doc)) == read(model.model_validate(absent))


def test_a_null_required_field_is_still_missing() -> None:
    with pytest.raises(ValidationError, match="clusterQueue"):
        LocalQueue.model_validate({"spec": {"clusterQueue": None}})


def test_cluster_queue_defaults_to_best_effort_fifo() -> None:
    cq = make_cluster_queue("cq").flavor("default", {"cpu": 1}).model()
    assert cq.spec.queueing_strategy == c.QUEUEING_BEST_EFFORT_FIFO
    assert cq.flavor_names == ("default",)


# -- ResourceFlavor: one normalised topology view ----------------------------------------------


@dataclass(frozen=True)
class FlavorTopologyCase:
    name: str
    flavor: ResourceFlavor
    topologies: tuple[Topology, ...]
    want_levels: tuple[str, ...] | None
    want_missing: bool | None  # None: the flavor has no topology at all


LEVELS = ("cloud.com/block", "cloud.com/rack", c.LABEL_HOSTNAME)
FLAVOR_TOPOLOGY_CASES = [
    FlavorTopologyCase("Kueue form resolves through the named Topology",
                       make_flavor("f").topology_name("gpu").model(),
                       (make_topology("gpu", *LEVELS).model(), make_topology("other", "x").model()),
                       want_levels=LEVELS, want_missing=False),
    FlavorTopologyCase("KEP inline form gives the same levels without a Topology object",
                       make_flavor("f").levels(*LEVELS).model(), (),
                       want_levels=LEVELS, want_missing=False),
    FlavorTopologyCase("a flavor naming an absent Topology is missing, not topology-less",
                       make_flavor("f").topology_name("gone").model(),
                       (make_topology("gpu", *LEVELS).model(),),
                       want_levels=None, want_missing=True),
    FlavorTopologyCase("a flavor with neither form has no topology",
                       make_flavor("f").node_labels({"a": "b"}).model(),
                       (make_topology("gpu", *LEVELS).model(),),
                       want_levels=None, want_missing=None),
]


@pytest.mark.parametrize("case", FLAVOR_TOPOLOGY_CASES, ids=lambda case: case.name)
def test_flavor_topology_forms_normalise_to_levels(case: FlavorTopologyCase) -> None:
    by_name = {t.name: t for t in case.topologies}
    assert case.flavor.topology_levels(by_name) == case.want_levels
    resolved = case.flavor.resolve_topology(by_name)
    assert (None if resolved is None else resolved.missing) == case.want_missing
    assert case.flavor.has_topology == (case.want_missing is not None)


def test_flavor_taints_and_tolerations_become_selector_values() -> None:
    flavor = ResourceFlavor.from_dict(examples.flavor_kueue_form())
    taint = flavor.taints()[0]
    assert str(taint) == "nvidia.com/gpu=present:NoSchedule"
    assert any(t.tolerates(taint) for t in flavor.selector_tolerations())


# -- conditions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConditionCase:
    name: str
    status: ConditionStatus
    reason: str
    message: str
    want_changed: bool
    want_time: str


EARLIER = "2026-01-02T03:04:05Z"
CONDITION_CASES = [
    ConditionCase("a message refresh keeps the transition time", "True", c.REASON_ADMITTED, "again",
                  want_changed=True, want_time=EARLIER),
    ConditionCase("the same condition again changes nothing", "True", c.REASON_ADMITTED,
                  "The workload is admitted", want_changed=False, want_time=EARLIER),
    ConditionCase("a status flip moves the transition time to now", "False", c.REASON_PENDING, "evicted",
                  want_changed=True, want_time=format_time(NOW)),
]


@pytest.mark.parametrize("case", CONDITION_CASES, ids=lambda case: case.name)
def test_set_condition_moves_time_only_on_status_flip(case: ConditionCase) -> None:
    wl = Workload.from_dict(examples.workload())
    changed = wl.set_condition(c.CONDITION_ADMITTED, case.status, case.reason, case.message, NOW)
    cond = wl.condition(c.CONDITION_ADMITTED)
    assert changed is case.want_changed
    assert cond is not None
    assert (cond.status, cond.reason, cond.message, cond.last_transition_time) == \
        (case.status, case.reason, case.message, case.want_time)
    assert [cd.type for cd in (wl.status.conditions if wl.status else [])] == \
        [c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED]


def test_first_condition_creates_the_status() -> None:
    wl = Workload.from_dict(examples.workload())
    wl.status = None
    assert not wl.has_quota_reservation
    assert wl.set_condition(c.CONDITION_QUOTA_RESERVED, "False", c.REASON_PENDING,
                            "couldn't assign flavors", NOW + timedelta(hours=1))
    assert wl.to_dict()["status"] == {"conditions": [{
        "type": c.CONDITION_QUOTA_RESERVED, "status": "False", "reason": c.REASON_PENDING,
        "message": "couldn't assign flavors", "lastTransitionTime": "2026-03-04T06:06:07Z",
        "observedGeneration": 3}]}


def test_format_time_refuses_a_naive_datetime() -> None:
    with pytest.raises(ValueError, match="aware"):
        format_time(datetime(2026, 1, 1))


def test_workload_helpers_read_spec_and_admission() -> None:
    wl = Workload.from_dict(examples.workload())
    assert (wl.queue_name, wl.priority, wl.active, wl.key) == ("team-a-queue", 1000, True, "team-a/job-train-1a2b3")
    assert wl.is_admitted and wl.has_quota_reservation and not wl.is_finished
    assert wl.pod_set("launcher") is not None and wl.pod_set("nope") is None
    assert wl.admission is not None
    main = wl.admission.assignment("main")
    assert main is not None and main.topology_assignment is not None
    assert main.topology_assignment.total_count == 8


def test_workload_is_active_unless_explicitly_false() -> None:
    obj = examples.workload()
    del obj["spec"]["active"]
    assert Workload.from_dict(obj).active
    obj["spec"]["active"] = False
    assert not Workload.from_dict(obj).active


# -- property: anything the model writes, it reads back identically ----------------------------

_names = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
_quantities = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["500m", "2Gi", "1e3", "0.5"]))
_slices = st.lists(st.tuples(_names, _names, st.integers(1, 64)), max_size=4).map(
    lambda domains: encode(["block", "rack"], [AssignedDomain((b, r), n) for b, r, n in domains]).to_dict())


@st.composite
def _workloads(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(_names, min_size=1, max_size=4, unique=True))
    pod_sets = [{"name": n, "count": draw(st.integers(0, 1000)), "template": {"spec": {}}} for n in names]
    assignments = [{"name": n, "resourceUsage": draw(st.dictionaries(_names, _quantities, max_size=3)),
                    "count": ps["count"], "topologyAssignment": draw(_slices)}
                   for n, ps in zip(names, pod_sets, strict=True)]
    obj: dict[str, Any] = {"metadata": {"name": draw(_names), "namespace": "ns"},
                           "spec": {"podSets": pod_sets, "queueName": draw(_names)}}
    if draw(st.booleans()):
        obj["status"] = {"admission": {"clusterQueue": draw(_names), "podSetAssignments": assignments}}
    return obj


def _omit_empty(value: Any, key: str = "") -> Any:
    """The oracle for omitempty: drop empty lists and maps everywhere except inside pod templates."""
    if key == "template" or not isinstance(value, dict | list):
        return value
    if isinstance(value, list):
        return [_omit_empty(v) for v in value]
    return {k: _omit_empty(v, k) for k, v in value.items() if not (isinstance(v, dict | list) and not v)}


@settings(max_examples=60, deadline=None)
@given(_workloads())
def test_generated_workloads_round_trip_up_to_omitted_empties(obj: dict[str, Any]) -> None:
    once = Workload.from_dict(obj).to_dict()
    assert once == _omit_empty(obj)
    assert Workload.from_dict(once) == Workload.from_dict(obj)


@dataclass(frozen=True)
class WireReadCase:
    name: str
    workload: Any  # a WorkloadBuilder
    reserved: bool
    owner: str | None


WIRE_READS = [
    WireReadCase("a pending Workload owned by a batch/v1 Job",
                 make_workload("w", "ns").pod_set("main").set("metadata.ownerReferences", [{
                     "apiVersion": c.JOB_API_VERSION, "kind": c.KIND_JOB, "name": "train", "uid": "u1"}]),
                 False, "ns/train"),
    WireReadCase("an owner of a kind not integrated is no Job",
                 make_workload("w", "ns").pod_set("main").set("metadata.ownerReferences", [{
                     "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "train", "uid": "u1"}]),
                 False, None),
    WireReadCase("an admission without QuotaReserved is no reservation",
                 make_workload("w", "ns").pod_set("main").assignment("main", 1, cluster_queue="cq"), False, None),
    WireReadCase("QuotaReserved with its admission is one",
                 make_workload("w", "ns").pod_set("main").admitted("cq").assignment("main", 1, cluster_queue="cq"),
                 True, None),
]


@pytest.mark.parametrize("case", WIRE_READS, ids=lambda case: case.name)
def test_the_wire_readers_agree_with_the_model(case: WireReadCase) -> None:
    """`admission_of` and the cache's `owner_of_workload_body` read bodies not yet parsed (watch
    events, API answers) as the model is read."""
    obj = case.workload.obj()
    model = Workload.from_dict(obj)
    assert (model.reserved_admission is not None, admission_of(obj) is not None) == (case.reserved, case.reserved)
    if case.reserved:
        assert model.reserved_admission == Workload.from_dict({**obj, "status": {
            **obj["status"], "admission": admission_of(obj)}}).reserved_admission
    cache = ClusterCache()
    owner = (c.KIND_JOB, case.owner) if case.owner is not None else None
    assert cache.owner_of_workload(model) == cache.owner_of_workload_body(obj) == owner
    assert object_key(obj) == model.key == "ns/w"
