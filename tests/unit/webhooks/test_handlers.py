"""The admission handlers as the webhook server answers with them: patches, 422 denials with every field
error, UPDATE rules, dryRun, and a fuzz showing they answer every Job, Pod and Workload; the handler
table against the configurations' routes, and verdicts as values."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from tests.builders.cluster import make_pod
from tests.unit.webhooks.manifests import (
    BLOCK,
    RACK,
    valid_cluster_queue,
    valid_flavor,
    valid_job,
    valid_local_queue,
    valid_topology,
    valid_workload,
)
from tests.unit.webhooks.reviews import Admission, patch_of, patched, review
from tests.unit.webhooks.test_robustness import value_paths
from webhooks.configurations import MUTATING_ROUTES, VALIDATING_ROUTES, Route
from webhooks.handlers import (
    ANY_SUBRESOURCE,
    DENIAL_CODE,
    AdmissionRequest,
    Denial,
    denial_message,
    handler_table,
)
from webhooks.serving import IDENTITY_FIELDS
from webhooks.validation import FieldError, validate, validate_update

REQUIRE_PATH = f"metadata.annotations[{c.ANNOTATION_REQUIRE_TOPOLOGY}]"
QUEUE_PATH = f"metadata.labels[{c.LABEL_QUEUE_NAME}]"


@pytest.fixture(scope="module")
def hooks() -> Admission:
    return Admission()


def admit(hooks: Admission, handler_id: str, obj: dict[str, Any], operation: str = "CREATE",
          old: dict[str, Any] | None = None, dry_run: bool = False) -> dict[str, Any]:
    return asyncio.run(hooks.admit(handler_id, review(obj, operation, old, dry_run)))


def denied_paths(response: dict[str, Any], *paths: str) -> None:
    """Denied with 422 and a message naming each path."""
    assert response["allowed"] is False, response
    assert response["status"]["code"] == DENIAL_CODE
    for path in paths:
        assert f"{path}: " in response["status"]["message"]


# ---------------------------------------------------------------- mutating


@pytest.mark.parametrize("dry_run", [False, True], ids=["applied", "dry run"])
def test_a_queued_job_comes_back_suspended(hooks: Admission, dry_run: bool) -> None:
    job = valid_job().set("spec.suspend", False).obj()
    response = admit(hooks, c.WEBHOOK_MUTATE_JOB, job, dry_run=dry_run)
    assert response["allowed"] is True
    assert patched(job, response)["spec"]["suspend"] is True


def test_an_unqueued_job_is_not_patched(hooks: Admission) -> None:
    job = valid_job().set("metadata.labels", {}).obj()
    response = admit(hooks, c.WEBHOOK_MUTATE_JOB, job)
    assert response["allowed"] is True and patch_of(response) == []


def test_an_admitted_pod_gets_the_gate_after_other_gates(hooks: Admission) -> None:
    pod = make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main").gate("example.com/other").obj()
    response = admit(hooks, c.WEBHOOK_MUTATE_POD, pod)
    assert patched(pod, response)["spec"]["schedulingGates"] == [
        {"name": "example.com/other"}, {"name": c.SCHEDULING_GATE_TOPOLOGY}]


def test_a_gated_pod_is_not_patched_again(hooks: Admission) -> None:
    pod = make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main").gate().obj()
    assert patch_of(admit(hooks, c.WEBHOOK_MUTATE_POD, pod)) == []


# ---------------------------------------------------------------- validating Jobs


def test_a_valid_job_is_allowed(hooks: Admission) -> None:
    job = valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, RACK).obj()
    assert admit(hooks, c.WEBHOOK_VALIDATE_JOB, job)["allowed"] is True


def test_a_bad_annotation_is_denied_with_every_error_and_its_path(hooks: Admission) -> None:
    job = valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "auto").set("spec.parallelism", -1).obj()
    response = admit(hooks, c.WEBHOOK_VALIDATE_JOB, job)
    denied_paths(response, REQUIRE_PATH, "spec.parallelism")
    assert response["status"]["message"].startswith('Job.batch "train" is invalid: [')


@pytest.mark.parametrize(("old", "new", "paths"), [
    pytest.param(valid_job().set("spec.suspend", False), valid_job().set("spec.suspend", False).label(
        c.LABEL_QUEUE_NAME, "other"), [QUEUE_PATH], id="the queue label changed while running"),
    pytest.param(valid_job().set("spec.suspend", False), valid_job().set("spec.suspend", False).set(
        "spec.template.spec.nodeSelector", {BLOCK: "b2"}), ["spec.template.spec.nodeSelector"],
        id="the template's nodeSelector changed while running"),
    pytest.param(valid_job().set("spec.suspend", True), valid_job().set("spec.suspend", True).label(
        c.LABEL_QUEUE_NAME, "other").set("spec.template.spec.nodeSelector", {BLOCK: "b2"}), [],
        id="a suspended Job may move queue and change its template"),
    pytest.param(valid_job().set("spec.suspend", True), valid_job().set("spec.suspend", False).set(
        "spec.template.spec.nodeSelector", {BLOCK: "b2"}), [],
        id="admission writes the template and unsuspends in one update"),
])
def test_job_updates(hooks: Admission, old: Any, new: Any, paths: list[str]) -> None:
    response = admit(hooks, c.WEBHOOK_VALIDATE_JOB, new.obj(), "UPDATE", old.obj())
    if paths:
        denied_paths(response, *paths)
    else:
        assert response["allowed"] is True, response


# ---------------------------------------------------------------- validating tasq's kinds


@pytest.mark.parametrize(("handler_id", "obj", "paths"), [
    pytest.param(c.WEBHOOK_VALIDATE_TOPOLOGY, valid_topology().obj(), [], id="a valid Topology"),
    pytest.param(c.WEBHOOK_VALIDATE_TOPOLOGY, valid_topology().set("spec.levels", [
        {"nodeLabel": RACK}, {"nodeLabel": RACK}, {"nodeLabel": c.LABEL_HOSTNAME}, {"nodeLabel": BLOCK}]).obj(),
        ["spec.levels[1].nodeLabel", "spec.levels[2].nodeLabel"], id="duplicate levels and hostname above the lowest"),
    pytest.param(c.WEBHOOK_VALIDATE_TOPOLOGY, valid_topology().set("apiVersion", f"{c.GROUP}/v1alpha1").set(
        "spec.levels", []).obj(), ["spec.levels"], id="a v1alpha1 Topology without levels"),
    pytest.param(c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, valid_flavor().obj(), [], id="a valid ResourceFlavor"),
    pytest.param(c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, valid_flavor().set("spec.nodeTaints", [{"key": "k"}]).obj(),
                 ["spec.nodeTaints[0].effect"], id="a flavor taint without effect"),
    pytest.param(c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, valid_cluster_queue().obj(), [], id="a valid ClusterQueue"),
    pytest.param(c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, valid_cluster_queue().set("spec.queueingStrategy", "Lifo").obj(),
                 ["spec.queueingStrategy"], id="an unknown queueing strategy"),
    pytest.param(c.WEBHOOK_VALIDATE_LOCAL_QUEUE, valid_local_queue().obj(), [], id="a valid LocalQueue"),
    pytest.param(c.WEBHOOK_VALIDATE_LOCAL_QUEUE, valid_local_queue().set("spec.clusterQueue", "Bad_Name").obj(),
                 ["spec.clusterQueue"], id="a LocalQueue naming an invalid ClusterQueue"),
    pytest.param(c.WEBHOOK_VALIDATE_WORKLOAD, valid_workload().obj(), [], id="a valid Workload"),
    pytest.param(c.WEBHOOK_VALIDATE_WORKLOAD, valid_workload().set("spec.podSets.0.count", -1).obj(),
                 ["spec.podSets[0].count"], id="a negative pod count"),
])
def test_tasq_kinds_on_create(hooks: Admission, handler_id: str, obj: dict[str, Any], paths: list[str]) -> None:
    response = admit(hooks, handler_id, obj)
    if paths:
        denied_paths(response, *paths)
    else:
        assert response["allowed"] is True, response


@pytest.mark.parametrize(("handler_id", "old", "new", "paths"), [
    pytest.param(c.WEBHOOK_VALIDATE_TOPOLOGY, valid_topology(), valid_topology().set(
        "spec.levels", [{"nodeLabel": BLOCK}]), ["spec.levels"], id="a Topology's levels are immutable"),
    pytest.param(c.WEBHOOK_VALIDATE_TOPOLOGY, valid_topology(), valid_topology().label("team", "a"), [],
                 id="a Topology's labels may change"),
    pytest.param(c.WEBHOOK_VALIDATE_WORKLOAD, valid_workload().admitted(),
                 valid_workload().admitted().set("spec.podSets.0.count", 3), ["spec.podSets"],
                 id="an admitted Workload's pod sets are immutable"),
    pytest.param(c.WEBHOOK_VALIDATE_WORKLOAD, valid_workload(), valid_workload().set("spec.podSets.0.count", 3),
                 [], id="a pending Workload's pod sets may change"),
    pytest.param(c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, valid_flavor().node_labels({"gpu": "h100"}).topology_name("gpu"),
                 valid_flavor().node_labels({"gpu": "a100"}).topology_name("gpu"), ["spec"], id="a flavor with a topology is frozen"),
    pytest.param(c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, valid_flavor().node_labels({"gpu": "h100"}),
                 valid_flavor().node_labels({"gpu": "a100"}), [],
                 id="a flavor without a topology may change"),
    pytest.param(c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, valid_cluster_queue(),
                 valid_cluster_queue().set("spec.queueingStrategy", c.QUEUEING_STRICT_FIFO),
                 ["spec.queueingStrategy"], id="a ClusterQueue's queueing strategy is immutable"),
    pytest.param(c.WEBHOOK_VALIDATE_LOCAL_QUEUE, valid_local_queue(), valid_local_queue(cluster_queue="team-b"),
                 ["spec.clusterQueue"], id="a LocalQueue cannot move to another ClusterQueue"),
])
def test_tasq_kinds_on_update(hooks: Admission, handler_id: str, old: Any, new: Any, paths: list[str]) -> None:
    response = admit(hooks, handler_id, new.obj(), "UPDATE", old.obj())
    if paths:
        denied_paths(response, *paths)
    else:
        assert response["allowed"] is True, response


@pytest.mark.parametrize(("new", "paths"), [
    pytest.param(valid_workload().admitted().assignment("main", 2, cluster_queue="team-b"), ["status.admission"],
                 id="an admission edited in place is refused"),
    pytest.param(valid_workload().admitted(), [], id="an admission cleared is allowed"),
])
def test_workload_status_writes_are_validated(hooks: Admission, new: Any, paths: list[str]) -> None:
    """Status writes (the status subresource) reach the Workload handler, as in Kueue."""
    old = valid_workload().admitted().assignment("main", 2).obj()
    response = asyncio.run(hooks.admit(c.WEBHOOK_VALIDATE_WORKLOAD,
                                       review(new.obj(), "UPDATE", old, subresource="status")))
    if paths:
        denied_paths(response, *paths)
    else:
        assert response["allowed"] is True, response


def test_dry_run_gets_the_same_verdict(hooks: Admission) -> None:
    bad = valid_topology().set("spec.levels", []).obj()
    wet, dry = (admit(hooks, c.WEBHOOK_VALIDATE_TOPOLOGY, bad, dry_run=d) for d in (False, True))
    assert wet == {**dry, "uid": wet["uid"]}


def test_denial_message_reads_like_the_api_servers() -> None:
    one = [FieldError("spec.levels", "Required value")]
    assert denial_message("Topology", c.GROUP, "t", one) == \
        f'Topology.{c.GROUP} "t" is invalid: spec.levels: Required value'
    assert denial_message("Pod", "", "p", one * 2) == \
        'Pod "p" is invalid: [spec.levels: Required value, spec.levels: Required value]'


# ---------------------------------------------------------------- fuzz

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10)

SAMPLES = [
    (c.WEBHOOK_VALIDATE_JOB, c.WEBHOOK_MUTATE_JOB,
     valid_job().annotate(c.ANNOTATION_PREFER_TOPOLOGY, RACK).set("spec.suspend", False).obj()),
    (None, c.WEBHOOK_MUTATE_POD, make_pod("p").annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main").gate("x/y").obj()),
    (c.WEBHOOK_VALIDATE_WORKLOAD, None, valid_workload().admitted().obj()),
]


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[str | None, str | None, dict[str, Any], dict[str, Any]]:
    """(validating id, mutating id, a valid sample, the sample with one field replaced by any JSON)."""
    validating, mutating, doc = draw(st.sampled_from(SAMPLES))
    path = draw(st.sampled_from([p for p in value_paths(doc) if p[0] not in ("apiVersion", "kind")]))
    out = copy.deepcopy(doc)
    holder: Any = out
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = draw(json_values)
    return validating, mutating, doc, out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corrupted())
def test_fuzzed_documents_are_answered_and_denials_name_field_paths(
        hooks: Admission, case: tuple[str | None, str | None, dict[str, Any], dict[str, Any]]) -> None:
    validating, mutating, valid, broken = case
    metadata = broken.get("metadata")
    if not isinstance(metadata, dict) or any(
            metadata.get(k) is not None and not isinstance(metadata[k], str) for k in IDENTITY_FIELDS):
        # kube-apiserver always sends a decoded ObjectMeta; the server answers such a review 400, not 500
        status, body = asyncio.run(hooks.answer(mutating or validating or "", review(broken)))
        assert status == 400 and "request.object.metadata" in body["message"]
        return
    if mutating is not None:
        response = admit(hooks, mutating, broken)
        assert response["allowed"] is True, response  # defaulting never refuses; validation does
    if validating is None:
        return
    for operation, old, want in (("CREATE", None, validate(broken)),
                                 ("UPDATE", valid, validate_update(valid, broken))):
        response = admit(hooks, validating, broken, operation, old)
        if response["allowed"]:
            continue
        assert response["status"]["code"] == DENIAL_CODE, response
        message = response["status"]["message"]
        assert want, message
        for error in want:
            assert error.path and f"{error.path}: " in message


def test_a_cluster_queue_asking_for_preemption_is_allowed_without_a_warning(hooks: Admission) -> None:
    asking = valid_cluster_queue().set("spec.preemption", {"withinClusterQueue": "LowerPriority"}).obj()
    response = admit(hooks, c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, asking)
    assert response["allowed"] is True and not response.get("warnings")


def test_a_v1beta1_cluster_queue_is_validated_as_v1beta2(hooks: Admission) -> None:
    """The API server may send a v1beta1 object (an exact rule match): its deprecated fungibility
    values are accepted (they convert) and its errors name v1beta2 fields."""
    v1 = (valid_cluster_queue().set("apiVersion", c.API_VERSION_V1BETA1)
          .set("spec.flavorFungibility", {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"})
          .set("spec.preemption", {"withinClusterQueue": "LowerPriority"}))
    response = admit(hooks, c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, v1.obj())
    assert response["allowed"] is True and not response.get("warnings"), response
    denied_paths(admit(hooks, c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, v1.set("spec.cohort", "Bad_Name").obj()),
                 "spec.cohortName")


# ---------------------------------------------------------------- the table


@pytest.mark.parametrize("route", [*MUTATING_ROUTES, *VALIDATING_ROUTES], ids=lambda route: route.handler_id)
def test_the_table_serves_each_route_as_the_configuration_sends_it(route: Route) -> None:
    """kube-apiserver calls a path for each version of the route's resource (its status writes too,
    where the route includes them): the table has one handler there for each, of the route's kind
    (mutating or validating), on the route's operations, and none elsewhere for that path."""
    mutating = route in MUTATING_ROUTES
    found = [h for h in handler_table() if h.path == route.handler_id]
    assert sorted(h.resource for h in found) == sorted((route.group, v, route.plural) for v in route.versions)
    for handler in found:
        assert handler.mutating is mutating and handler.operations == tuple(route.operations)
        assert handler.subresource == (ANY_SUBRESOURCE if route.with_status else None)


def test_a_handler_answers_with_a_value_a_denial_or_its_patch() -> None:
    """Verdicts are values: a validator's Denial carries the message and code the review sends, a
    mutating handler the operations (none for an object it leaves alone)."""
    table = {(h.path, h.resource): h.fn for h in handler_table()}
    jobs = ("batch", "v1", "jobs")
    invalid = valid_job().annotate(c.ANNOTATION_REQUIRE_TOPOLOGY, "").obj()
    verdict = table[(c.WEBHOOK_VALIDATE_JOB, jobs)](AdmissionRequest("CREATE", invalid))
    assert isinstance(verdict, Denial) and verdict.code == DENIAL_CODE
    assert verdict.message == denial_message(c.KIND_JOB, "batch", invalid["metadata"]["name"], validate(invalid))
    assert table[(c.WEBHOOK_VALIDATE_JOB, jobs)](AdmissionRequest("CREATE", valid_job().obj())) == []
    queued = valid_job().set("spec.suspend", False).obj()
    assert table[(c.WEBHOOK_MUTATE_JOB, jobs)](AdmissionRequest("CREATE", queued)) == [
        {"op": "add", "path": "/spec/suspend", "value": True}]
    assert table[(c.WEBHOOK_MUTATE_JOB, jobs)](AdmissionRequest("CREATE", valid_job().set("metadata.labels", {}).obj())) == []
