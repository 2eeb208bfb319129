"""The plain-pod integration's pure transforms: which pods tasq manages, the group they form, its
Workload (pod sets by role, Kueue's names, minCount from min-available), which pods an admission
starts and how, when the group is finished and what an eviction stops."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.workload import Admission
from controller.core.jobs import pod_group
from controller.core.jobs.framework import Finished, PodSetRunInfo
from tests.builders.cluster import PodBuilder, make_pod

QUEUE = "team-a"


def member(name: str, group: str = "g", total: int | None = 3, *, cpu: str = "1", queue: str | None = QUEUE,
           created: str = "2026-01-01T00:00:00Z") -> PodBuilder:
    """A pod of group `group` (None: a single pod) announcing `total` pods, requesting `cpu`."""
    pod = make_pod(name).requests(cpu=cpu).created(created)
    if queue is not None:
        pod.label(c.LABEL_QUEUE_NAME, queue)
    if group:
        pod.label(c.LABEL_POD_GROUP_NAME, group)
    if total is not None:
        pod.annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, str(total))
    return pod


def with_phase(pod: PodBuilder, phase: str) -> dict[str, Any]:
    obj = pod.build()
    obj["status"]["phase"] = phase
    return obj


def admission(*assignments: Mapping[str, Any]) -> Admission:
    return Admission.model_validate({"clusterQueue": "cq", "podSetAssignments": list(assignments)})


# -- which pods, which group ------------------------------------------------------------------------

@pytest.mark.parametrize(("owner", "managed"), [
    (None, True),
    ({"apiVersion": "batch/v1", "kind": "Job", "controller": True}, False),  # the Job integration's
    ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "controller": True}, False),
    ({"apiVersion": "apps/v1", "kind": "StatefulSet", "controller": True}, True),  # not integrated: plain
    ({"apiVersion": "batch/v1", "kind": "Job", "controller": False}, True),  # owned, not controlled
])
def test_a_queued_pod_is_plain_unless_an_integrated_kind_controls_it(owner: dict[str, Any] | None,
                                                                     managed: bool) -> None:
    pod = member("p").build()
    if owner is not None:
        pod["metadata"]["ownerReferences"] = [{"name": "o", "uid": "u", **owner}]
    assert pod_group.is_managed(pod) is managed


def test_a_pod_without_a_queue_is_never_managed_whatever_its_group_labels() -> None:
    assert not pod_group.is_managed(member("p", queue=None).build())
    assert pod_group.workload_key(member("p", queue=None).build()) is None


@pytest.mark.parametrize(("labels", "expected"), [
    ({c.LABEL_POD_GROUP_NAME: "kueue"}, (c.LABEL_POD_GROUP_NAME, "kueue")),
    ({c.LABEL_COSCHEDULING_NAME: "legacy"}, (c.LABEL_COSCHEDULING_NAME, "legacy")),
    ({c.LABEL_SCHEDULING_POD_GROUP: "crd"}, (c.LABEL_SCHEDULING_POD_GROUP, "crd")),
    ({c.LABEL_SCHEDULING_POD_GROUP: "crd", c.LABEL_POD_GROUP_NAME: "kueue"}, (c.LABEL_POD_GROUP_NAME, "kueue")),
    ({}, None),
])
def test_the_group_name_comes_from_kueue_s_label_first_then_the_coscheduling_spellings(
        labels: dict[str, str], expected: tuple[str, str] | None) -> None:
    pod = member("p", group="", total=None)
    for key, value in labels.items():
        pod.label(key, value)
    assert pod_group.group_name(pod.build()) == expected


def test_a_group_s_workload_is_named_after_the_group_a_single_pod_s_as_kueue_names_it() -> None:
    assert pod_group.workload_key(member("p", group="train").build()) == "default/train"
    single = member("lonely", group="", total=None).build()
    name = pod_group.workload_name(single)
    assert name.startswith("pod-lonely-") and len(name) == len("pod-lonely-") + 5
    assert name != pod_group.workload_name(member("other", group="", total=None).build())


@pytest.mark.parametrize(("labels", "annotations", "total", "minimum"), [
    ({c.LABEL_POD_GROUP_NAME: "g"}, {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "8"}, 8, None),
    ({c.LABEL_COSCHEDULING_NAME: "g", c.LABEL_COSCHEDULING_MIN_AVAILABLE: "4"}, {}, 4, 4),  # the gang is its minimum
    ({c.LABEL_COSCHEDULING_NAME: "g", c.LABEL_COSCHEDULING_MIN_AVAILABLE: "4"},
     {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "6"}, 6, 4),
    ({c.LABEL_SCHEDULING_POD_GROUP: "g"}, {}, None, None),  # its size lives in a PodGroup object
    ({c.LABEL_POD_GROUP_NAME: "g"}, {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "0"}, None, None),
    ({c.LABEL_POD_GROUP_NAME: "g"}, {c.ANNOTATION_POD_GROUP_TOTAL_COUNT: "-1"}, None, None),
    ({}, {}, 1, None),  # a single pod is a group of one
])
def test_total_count_and_minimum(labels: dict[str, str], annotations: dict[str, str], total: int | None,
                                 minimum: int | None) -> None:
    pod = member("p", group="", total=None)
    for key, value in labels.items():
        pod.label(key, value)
    for key, value in annotations.items():
        pod.annotate(key, value)
    assert (pod_group.total_count(pod.build()), pod_group.min_available(pod.build())) == (total, minimum)


# -- roles --------------------------------------------------------------------------------------------

def test_the_role_ignores_what_does_not_matter_to_admission_and_splits_on_what_does() -> None:
    base = member("a").build()
    other_command = member("b").build()
    other_command["spec"]["containers"][0].update(command=["sleep"], image="other", env=[{"name": "X", "value": "1"}])
    assert pod_group.role_hash(base) == pod_group.role_hash(other_command)
    assert pod_group.role_hash(base) != pod_group.role_hash(member("c", cpu="2").build())
    assert pod_group.role_hash(base) != pod_group.role_hash(member("d").toleration("gpu").build())
    assert pod_group.role_hash(base) != pod_group.role_hash(member("e").node_selector({"x": "y"}).build())
    assert len(pod_group.role_hash(base)) == 8


def test_the_role_hash_annotation_the_webhook_wrote_wins_over_the_spec() -> None:
    # after admission the pod's nodeSelector grows: its role must not change with it
    pod = member("a").annotate(c.ANNOTATION_ROLE_HASH, "abcd1234").node_selector({"flavor": "x"}).build()
    assert pod_group.role_hash(pod) == "abcd1234"


# -- the group and its Workload -------------------------------------------------------------------------

def test_a_group_is_complete_once_its_total_count_of_runnable_pods_exists() -> None:
    pods = [member(f"p{i}").build() for i in range(2)]
    assert not pod_group.assemble(pods).complete
    assert "2 of 3 pods exist" in pod_group.assemble(pods).waiting_message
    failed = with_phase(member("p2"), "Failed")
    assert not pod_group.assemble([*pods, failed]).complete  # a failed pod waits for its replacement
    assert pod_group.assemble([*pods, member("p3").build()]).complete


def test_pods_beyond_the_total_are_extra_the_oldest_are_members() -> None:
    pods = [member(f"p{i}", total=2, created=f"2026-01-01T00:00:0{i}Z").build() for i in (2, 0, 1)]
    group = pod_group.assemble(pods)
    assert [pod_group.pod_name(p) for p in group.members] == ["p0", "p1"]
    assert [pod_group.pod_name(p) for p in group.extra] == ["p2"]


@pytest.mark.parametrize(("change", "path", "text"), [
    (lambda p: p.label(c.LABEL_QUEUE_NAME, "team-b"), f"metadata.labels[{c.LABEL_QUEUE_NAME}]",
     "'team-b' differs from 'team-a' of pod p0"),
    (lambda p: p.annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "4"),
     f"metadata.annotations[{c.ANNOTATION_POD_GROUP_TOTAL_COUNT}]", "4 differs from 3 of pod p0"),
    (lambda p: p.set("spec.priorityClassName", "high"), "spec.priorityClassName", "'high' differs from None of pod p0"),
    (lambda p: p.annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, "rack"), "metadata.annotations",
     "the topology request differs from that of pod p0 of the same role"),
])
def test_a_pod_disagreeing_with_the_oldest_is_a_conflict_naming_the_pod_the_field_and_both_values(
        change: Any, path: str, text: str) -> None:
    first = member("p0", created="2026-01-01T00:00:00Z").build()
    late = change(member("p1", created="2026-01-01T00:00:01Z")).build()
    group = pod_group.assemble([first, late, member("p2", created="2026-01-01T00:00:02Z").build()])
    (conflict,) = group.conflicts
    assert (conflict.pod, conflict.path) == ("p1", path)
    assert text in conflict.message
    assert not group.complete


def test_a_ninth_role_is_a_conflict() -> None:
    others = [member(f"p{i}", cpu=str(i + 1)).build() for i in range(8)]
    (conflict,) = pod_group.group_conflicts(member("p8", cpu="100").build(), others)
    assert conflict.path == "spec" and "9 pod sets" in conflict.message
    assert pod_group.group_conflicts(member("p9", cpu="1").build(), others) == []  # an existing role


def test_the_workload_has_one_pod_set_per_role_owners_queue_and_kueue_s_group_annotation() -> None:
    #   driver (2 CPUs) x1, workers (1 CPU) x2, the workers requiring a rack
    rack = {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: "rack"}
    workers = [member(f"w{i}").annotate(c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, "rack").gate(
        c.SCHEDULING_GATE_ADMISSION).gate().build() for i in range(2)]
    driver = member("d", cpu="2").build()
    manifest = pod_group.workload_from_pod_group(pod_group.assemble([*workers, driver]))
    assert manifest["metadata"]["name"] == "g"
    assert manifest["metadata"]["annotations"] == {c.ANNOTATION_IS_GROUP_WORKLOAD: "true"}
    assert manifest["spec"]["queueName"] == QUEUE
    assert {o["name"] for o in manifest["metadata"]["ownerReferences"]} == {"w0", "w1", "d"}
    assert not any(o.get("controller") for o in manifest["metadata"]["ownerReferences"])
    sets = {ps["name"]: ps for ps in manifest["spec"]["podSets"]}
    assert sorted(sets) == sorted({pod_group.role_hash(workers[0]), pod_group.role_hash(driver)})
    worker_set = sets[pod_group.role_hash(workers[0])]
    assert (worker_set["count"], worker_set["topologyRequest"]) == (2, {"required": rack[c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY]})
    assert "schedulingGates" not in worker_set["template"]["spec"]  # tasq's own gates are not the template's
    assert sets[pod_group.role_hash(driver)]["count"] == 1 and "topologyRequest" not in sets[pod_group.role_hash(driver)]


def test_a_single_pod_s_workload_has_one_main_pod_set_and_the_pod_as_its_controller() -> None:
    pod = member("solo", group="", total=None).build()
    manifest = pod_group.workload_from_pod_group(pod_group.assemble([pod]))
    (pod_set,) = manifest["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 1)
    (owner,) = manifest["metadata"]["ownerReferences"]
    assert owner["controller"] is True and owner["kind"] == "Pod"
    assert "annotations" not in manifest["metadata"]


@pytest.mark.parametrize(("workers", "driver", "minimum", "min_count"), [
    (6, 0, 4, 4),   # one role: min-available is the pod set's minimum
    (5, 1, 4, 3),   # the driver always runs: the workers may shrink to 3
    (5, 1, 1, 1),   # never below one pod
    (6, 0, 6, None),  # a minimum equal to the total is no minimum
])
def test_min_available_becomes_the_largest_role_s_min_count(workers: int, driver: int, minimum: int,
                                                            min_count: int | None) -> None:
    total = workers + driver
    pods = [member(f"w{i}", total=total).label(c.LABEL_COSCHEDULING_MIN_AVAILABLE, str(minimum)).build()
            for i in range(workers)]
    pods += [member(f"d{i}", total=total, cpu="2").label(c.LABEL_COSCHEDULING_MIN_AVAILABLE, str(minimum)).build()
             for i in range(driver)]
    sets = pod_group.pod_sets(pod_group.assemble(pods))
    largest = max(sets, key=lambda ps: ps["count"])
    assert largest.get("minCount") == min_count
    assert all("minCount" not in ps for ps in sets if ps is not largest)


def test_priority_from_the_pods_class_unless_a_workload_priority_class_is_named() -> None:
    pods = [member(f"p{i}", total=1).set("spec.priorityClassName", "high").build() for i in range(1)]
    manifest = pod_group.workload_from_pod_group(pod_group.assemble(pods), {"high": 100})
    assert manifest["spec"]["priority"] == 100
    assert manifest["spec"]["priorityClassRef"]["name"] == "high"
    pods[0]["metadata"]["labels"][c.LABEL_PRIORITY_CLASS] = "urgent"
    manifest = pod_group.workload_from_pod_group(pod_group.assemble(pods), {"high": 100}, 0, {"urgent": 7})
    assert manifest["spec"]["priority"] == 7


# -- starting, finishing, stopping ----------------------------------------------------------------------

def test_an_admission_starts_the_gated_members_up_to_each_pod_set_s_admitted_count() -> None:
    pods = [member(f"p{i}", total=4, created=f"2026-01-01T00:00:0{i}Z").gate(c.SCHEDULING_GATE_ADMISSION).build()
            for i in range(4)]
    role = pod_group.role_hash(pods[0])
    group = pod_group.assemble(pods)
    assert len(pod_group.pods_to_start(group, admission({"name": role}))) == 4
    partial = pod_group.pods_to_start(group, admission({"name": role, "count": 3}))
    assert [pod_group.pod_name(p) for p in partial] == ["p0", "p1", "p2"]  # the oldest
    pods[0]["spec"]["schedulingGates"] = []  # p0 already started: two more
    started = pod_group.pods_to_start(pod_group.assemble(pods), admission({"name": role, "count": 3}))
    assert [pod_group.pod_name(p) for p in started] == ["p1", "p2"]
    assert pod_group.pods_to_start(group, admission({"name": "other"})) == []


def test_the_start_patch_drops_the_admission_gate_and_keeps_the_topology_gate_only_for_a_topology_pod_set() -> None:
    pod = member("p").gate("example.com/mine").gate(c.SCHEDULING_GATE_ADMISSION).gate().node_selector(
        {"own": "1"}).set("metadata.resourceVersion", "7").build()
    tas = PodSetRunInfo(name="r", count=None, node_selector={"pool": "a"}, tolerations=({"key": "gpu"},),
                        annotations={c.ANNOTATION_TOPOLOGY_WORKLOAD: "g", c.ANNOTATION_TOPOLOGY_PODSET: "r"},
                        labels={c.LABEL_TAS: c.LABEL_TAS_VALUE}, scheduling_gates=(c.SCHEDULING_GATE_TOPOLOGY,))
    patch = pod_group.start_patch(pod, tas)
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["spec"]["schedulingGates"] == [{"name": "example.com/mine"}, {"name": c.SCHEDULING_GATE_TOPOLOGY}]
    assert patch["spec"]["nodeSelector"] == {"own": "1", "pool": "a"}
    assert patch["spec"]["tolerations"] == [{"key": "gpu"}]
    assert patch["metadata"]["annotations"][c.ANNOTATION_TOPOLOGY_WORKLOAD] == "g"
    plain = pod_group.start_patch(pod, PodSetRunInfo(name="r", count=None))
    assert plain["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]
    assert "annotations" not in plain["metadata"]
    alone = pod_group.start_patch(member("q").gate(c.SCHEDULING_GATE_ADMISSION).build(), PodSetRunInfo("r", None))
    assert alone["spec"]["schedulingGates"] is None  # a merge patch removes the list


@pytest.mark.parametrize(("phases", "retriable", "expected"), [
    (["Succeeded"] * 3, True, Finished(True, "Pods succeeded: 3/3.")),
    (["Succeeded", "Succeeded", "Running"], True, None),
    (["Succeeded", "Succeeded", "Failed"], True, None),  # a failed pod waits for its replacement
    (["Succeeded", "Succeeded", "Failed"], False, Finished(False, "Pods succeeded: 2/3.")),  # given up
    (["Succeeded", "Running", "Failed"], False, None),  # given up, but one still runs
    (["Succeeded", "Succeeded", "Failed", "Succeeded"], True, Finished(True, "Pods succeeded: 3/3.")),  # replaced
])
def test_a_group_finishes_as_kueue_decides(phases: list[str], retriable: bool, expected: Finished | None) -> None:
    pods = []
    for i, phase in enumerate(phases):
        pod = member(f"p{i}")
        if not retriable and phase == "Failed":
            pod.annotate(c.ANNOTATION_RETRIABLE_IN_GROUP, "false")
        pods.append(with_phase(pod, phase))
    assert pod_group.finished(pod_group.assemble(pods)) == expected


@pytest.mark.parametrize(("phase", "expected"), [
    ("Running", None), ("Succeeded", Finished(True, "Pod succeeded")), ("Failed", Finished(False, "Pod failed"))])
def test_a_single_pod_finishes_when_it_terminates(phase: str, expected: Finished | None) -> None:
    assert pod_group.finished(pod_group.assemble([with_phase(member("s", group="", total=None), phase)])) == expected


def test_an_eviction_stops_every_pod_not_yet_terminated_or_being_deleted() -> None:
    deleting = member("d").set("metadata.deletionTimestamp", "2026-01-01T00:00:00Z").on("n1").build()
    pods = [with_phase(member("done"), "Succeeded"), member("run").on("n1").build(), member("gated").build(), deleting]
    group = pod_group.assemble(pods)
    assert sorted(pod_group.pod_name(p) for p in pod_group.pods_to_stop(group)) == ["gated", "run"]
    assert pod_group.pods_left(group) == 3  # the deleting pod still runs on its node


@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])),
                min_size=1, max_size=12),
       st.integers(1, 8), st.dictionaries(st.integers(0, 2), st.integers(0, 6)))
def test_started_pods_never_exceed_what_the_admission_gives_any_pod_set(
        pods: list[tuple[int, str]], total: int, counts: dict[int, int]) -> None:
    # Oracle: per role, admitted count (or every member) minus members already started, at least 0.
    built = [with_phase(member(f"p{i:02d}", total=total, cpu=str(role + 1),
                               created=f"2026-01-01T00:00:{i:02d}Z").gate(c.SCHEDULING_GATE_ADMISSION), phase)
             for i, (role, phase) in enumerate(pods)]
    group = pod_group.assemble(built)
    roles = {role: pod_group.role_hash(member("x", cpu=str(role + 1)).build()) for role in range(3)}
    adm = admission(*({"name": roles[r], **({"count": counts[r]} if r in counts else {})} for r in range(3)))
    chosen = pod_group.pods_to_start(group, adm)
    for role, name in roles.items():
        mine = [p for p in group.members if pod_group.role_hash(p) == name]
        expected = len(mine) if role not in counts else min(len(mine), counts[role])
        assert sum(1 for p in chosen if pod_group.role_hash(p) == name) == expected
    assert all(p in group.members for p in chosen)


# -- the adapter: excess pods, finalizers, readiness ---------------------------------------------------

def test_a_started_pod_is_kept_over_an_older_gated_one_when_the_group_has_too_many() -> None:
    old = member("p0", total=2, created="2026-01-01T00:00:00Z").gate(c.SCHEDULING_GATE_ADMISSION).build()
    started = [member(f"p{i}", total=2, created=f"2026-01-01T00:00:0{i}Z").on("n1").build() for i in (1, 2)]
    group = pod_group.assemble([old, *started])
    assert [pod_group.pod_name(p) for p in group.members] == ["p1", "p2"]
    assert [w.name for w in pod_group.POD_GROUP.excess_writes(group)] == ["p0"]
    assert all(w.deletes for w in pod_group.POD_GROUP.excess_writes(group))


def test_an_excess_pod_already_being_deleted_is_not_deleted_again() -> None:
    pods = [member(f"p{i}", total=2, created=f"2026-01-01T00:00:0{i}Z").build() for i in range(2)]
    late = member("p2", total=2, created="2026-01-01T00:00:02Z").set(
        "metadata.deletionTimestamp", "2026-01-01T00:01:00Z").build()
    assert pod_group.POD_GROUP.excess_writes(pod_group.assemble([*pods, late])) == []
    assert [w.name for w in pod_group.POD_GROUP.excess_writes(pod_group.assemble(
        [*pods, member("p3", total=2, created="2026-01-01T00:00:03Z").build()]))] == ["p3"]


def finalized(name: str, phase: str = "Running", *, gated: bool = False, deleting: bool = False) -> dict[str, Any]:
    pod = member(name).set("metadata.finalizers", [pod_group.POD_FINALIZER, "example.com/keep"])
    if gated:
        pod.gate(c.SCHEDULING_GATE_ADMISSION)
    else:
        pod.on("n1")
    if deleting:
        pod.set("metadata.deletionTimestamp", "2026-01-01T00:01:00Z")
    return with_phase(pod, phase)


@pytest.mark.parametrize(("pod", "exists", "finished", "done"), [
    pytest.param(finalized("p", "Succeeded"), True, False, False, id="succeeded: kept until the Workload records it"),
    pytest.param(finalized("p", "Succeeded"), True, True, True, id="the Workload finished: every pod's goes"),
    pytest.param(finalized("p"), True, True, True, id="even a running one's once the Workload finished"),
    pytest.param(finalized("p", "Failed"), True, False, True, id="failed: it counts for nothing any more"),
    pytest.param(finalized("p", "Pending", gated=True, deleting=True), True, False, True,
                 id="deleted before it was bound"),
    pytest.param(finalized("p", "Running", deleting=True), True, False, True,
                 id="being deleted: it can no longer succeed for the group"),
    pytest.param(finalized("p", "Succeeded", deleting=True), True, False, False,
                 id="a succeeded pod being deleted keeps it until the Workload counts it"),
    pytest.param(finalized("p", "Pending", gated=True), False, False, False,
                 id="gated, no Workload yet: the group is still forming"),
    pytest.param(finalized("p"), False, False, True, id="started and its Workload is gone"),
    pytest.param(with_phase(member("p"), "Succeeded"), True, True, False, id="no finalizer: nothing to remove"),
])
def test_a_pod_s_finalizer_goes_once_its_end_is_recorded_or_no_longer_matters(
        pod: dict[str, Any], exists: bool, finished: bool, done: bool) -> None:
    assert pod_group.finalizer_done(pod, exists, finished) is done
    with_a_running_peer = pod_group.assemble([pod, finalized("q")])
    writes = pod_group.POD_GROUP.release_writes(with_a_running_peer, exists, finished)
    assert [w.name for w in writes if w.name == "p"] == (["p"] if done else [])


def test_the_finalizer_patch_keeps_other_finalizers_and_is_conditional_on_the_version() -> None:
    pod = finalized("p")
    pod["metadata"]["resourceVersion"] = "12"
    assert pod_group.finalizer_patch(pod) == {"metadata": {"resourceVersion": "12", "finalizers": ["example.com/keep"]}}
    pod["metadata"]["finalizers"] = [pod_group.POD_FINALIZER]
    assert pod_group.finalizer_patch(pod)["metadata"]["finalizers"] is None  # the merge patch drops the list


def ready(name: str, created: str) -> dict[str, Any]:
    pod = member(name, total=4, created=created).on("n1").build()
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


@pytest.mark.parametrize(("ready_count", "succeeded", "count", "expected"), [
    (4, 0, None, True),
    (3, 0, None, False),  # one started pod not ready yet
    (2, 2, None, True),  # succeeded pods were ready
    (3, 0, 3, True),  # partial admission: 3 admitted, 3 ready
    (2, 0, 3, False),
])
def test_pods_ready_counts_ready_and_succeeded_members_against_what_the_admission_started(
        ready_count: int, succeeded: int, count: int | None, expected: bool) -> None:
    pods = [ready(f"p{i}", f"2026-01-01T00:00:0{i}Z") for i in range(ready_count)]
    pods += [with_phase(member(f"s{i}", total=4).on("n1"), "Succeeded") for i in range(succeeded)]
    pods += [member(f"w{i}", total=4, created="2026-01-01T00:00:09Z").on("n1").build()
             for i in range(4 - ready_count - succeeded)]
    role = pod_group.role_hash(pods[0])
    adm = admission({"name": role, **({"count": count} if count is not None else {})})
    assert pod_group.POD_GROUP.pods_ready(pod_group.assemble(pods), adm) is expected


def test_the_adapter_starts_through_per_pod_patches_and_stops_through_deletions() -> None:
    pods = [member(f"p{i}", total=2, created=f"2026-01-01T00:00:0{i}Z").gate(c.SCHEDULING_GATE_ADMISSION).build()
            for i in range(2)]
    group = pod_group.POD_GROUP.load(pods)
    role = pod_group.role_hash(pods[0])
    runs = pod_group.POD_GROUP.run_writes(group, admission({"name": role}), [PodSetRunInfo(role, None)])
    assert [(w.name, w.deletes) for w in runs] == [("p0", False), ("p1", False)]
    assert runs[0].patch == pod_group.start_patch(pods[0], PodSetRunInfo(role, None))
    assert pod_group.POD_GROUP.run_writes(group, admission({"name": role}), []) == []  # no info: nothing
    assert [(w.name, w.deletes) for w in pod_group.POD_GROUP.stop_writes(group)] == [("p0", True), ("p1", True)]
    assert pod_group.POD_GROUP.waiting(group) is None
    assert pod_group.POD_GROUP.waiting(pod_group.POD_GROUP.load(pods[:1])) == (
        "pod group default/g: 1 of 2 pods exist; the Workload is created once all do")


def test_a_group_whose_pods_are_all_being_deleted_lets_every_finalizer_go() -> None:
    # The Workload is owned by its pods: a succeeded pod holding on would keep it, and so itself, for ever.
    done = finalized("p0", "Succeeded", deleting=True)
    running = finalized("p1", deleting=True)
    assert [w.name for w in pod_group.POD_GROUP.release_writes(pod_group.assemble([done, running]), True, False)] == [
        "p0", "p1"]
    staying = finalized("p2")
    assert [w.name for w in pod_group.POD_GROUP.release_writes(
        pod_group.assemble([done, running, staying]), True, False)] == ["p1"]
