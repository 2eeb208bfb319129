"""ClusterCache: events patch state, admissions are reserved once, restored after a restart and released;
each object is parsed once as it comes, and one that does not parse is refused whole.

The topology of every case (flavor `gpu` = label gpu=yes, 8 GPUs per host):

    rack r1: h1 h2        rack r2: h3 h4

ClusterQueue `cq` has 32 GPUs of quota; LocalQueue default/lq points at it.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import constants as c
from controller.api.workload import Workload
from controller.cache.cluster import (
    KIND_NAMESPACE,
    KIND_NODE,
    KIND_POD,
    KIND_PRIORITY_CLASS,
    WATCHED_KINDS,
    ClusterCache,
)
from controller.core.admission.cycle import Admit, run_until_quiet
from tests.builders.cluster import make_node, make_pod
from tests.builders.kueue import (
    label_slices,
    make_cluster_queue,
    make_cohort,
    make_flavor,
    make_job,
    make_local_queue,
    make_priority_class,
    make_topology,
    make_workload,
)

RACK = "example.com/rack"
GPU = "nvidia.com/gpu"
HOSTS = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}


def versioned(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(rv)
    return obj


@pytest.fixture
def cache() -> ClusterCache:
    cache = ClusterCache()
    cache.upsert(c.KIND_TOPOLOGY, make_topology("dc", RACK, c.LABEL_HOSTNAME).obj())
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "yes").topology_name("dc").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 32}).obj())
    cache.upsert(c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq").obj())
    for host, rack in HOSTS.items():
        cache.upsert(KIND_NODE, make_node(host).labels({RACK: rack, "gpu": "yes"}).allocatable({GPU: 8}).obj())
    return cache


def gang(name: str, pods: int, rv: int = 1) -> dict[str, Any]:
    return versioned(make_workload(name).queue("lq").pod_set("main", pods, {GPU: 8}, required=RACK).obj(), rv)


def admitted_on_hosts(name: str, hosts: dict[str, int], rv: int = 1) -> dict[str, Any]:
    """A Workload admitted (by an earlier operator) with host-level slices."""
    builder = make_workload(name).queue("lq").pod_set("main", sum(hosts.values()), {GPU: 8}, required=RACK)
    builder.admitted("cq").assignment(
        "main", sum(hosts.values()), *[({RACK: HOSTS[h], c.LABEL_HOSTNAME: h}, n) for h, n in sorted(hosts.items())],
        cluster_queue="cq", flavors={GPU: "gpu"}, resourceUsage={GPU: str(8 * sum(hosts.values()))})
    return versioned(builder.obj(), rv)


def gpus_used(cache: ClusterCache) -> dict[str, int]:
    return {host: cache.usage.used(host).get(GPU, 0) // 1000 for host in HOSTS}


def test_the_same_version_delivered_twice_is_applied_once(cache: ClusterCache) -> None:
    before = cache.generation
    node = make_node("h9").labels({RACK: "r3", "gpu": "yes"}).obj()
    assert cache.upsert(KIND_NODE, versioned(node, 7)) is True
    assert cache.upsert(KIND_NODE, versioned(node, 7)) is False
    assert cache.generation == before + 1
    assert cache.stale_events == 1  # counted: the watch echoes the operator's own writes this way


def test_a_node_version_that_changes_nothing_the_view_keeps_is_recorded_without_a_change(
        cache: ClusterCache) -> None:
    node = make_node("h9").labels({RACK: "r3", "gpu": "yes"}).obj()
    assert cache.upsert(KIND_NODE, versioned(node, 7)) is True
    before = cache.generation
    beat = versioned(node, 8)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-27T09:00:00Z"
    assert cache.upsert(KIND_NODE, beat) is False
    assert (cache.generation, cache.unchanged_nodes, cache.stale_events) == (before, 1, 0)
    assert cache.upsert(KIND_NODE, versioned(node, 8)) is False  # that version is now the one held
    assert cache.stale_events == 1
    beat["spec"]["unschedulable"] = True
    assert cache.upsert(KIND_NODE, versioned(beat, 9)) is True and cache.nodes["h9"].unschedulable


def test_managed_fields_are_dropped_as_objects_arrive(cache: ClusterCache) -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    job = make_job("train").queue("lq").obj()
    job["metadata"]["managedFields"] = managed
    pod = make_pod("p1").obj()
    pod["metadata"]["labels"] = {c.LABEL_MANAGED: "true", c.LABEL_QUEUE_NAME: "lq"}
    pod["metadata"]["managedFields"] = managed
    assert cache.upsert(c.KIND_JOB, job) and cache.upsert(KIND_POD, pod)
    assert "managedFields" not in cache.jobs["default/train"]["metadata"]
    assert cache.jobs["default/train"]["metadata"]["labels"] == job["metadata"]["labels"]
    assert [m["metadata"].get("managedFields") for members in cache.group_pods.values() for m in members.values()] \
        == [None]
    assert job["metadata"]["managedFields"] == managed  # the caller's object is left as it was


def test_nodes_of_one_rack_share_their_label_strings_and_read_the_labels_they_were_given(cache: ClusterCache) -> None:
    # Each label value built at run time, as each decoded page has its own copies.
    given = {name: {RACK: "".join(["r", "9"]), "gpu": "".join(["y", "es"])} for name in ("h8", "h9")}
    assert given["h8"][RACK] is not given["h9"][RACK]
    for name, labels in given.items():
        cache.upsert(KIND_NODE, versioned(make_node(name).labels(labels).allocatable({GPU: 8}).obj(), 5))
    h8, h9 = cache.nodes["h8"].labels, cache.nodes["h9"].labels
    assert h8[RACK] is h9[RACK] and h8["gpu"] is h9["gpu"]
    assert {k: v for k, v in h9.items() if k != c.LABEL_HOSTNAME} == given["h9"]


@pytest.mark.parametrize(("held", "arriving", "applied"), [
    ("12", "12", False),     # the same version again (the watch echoing our own write)
    ("12", "11", False),     # an older one after a newer one
    ("12", "13", True),
    ("abc", "abc", False),   # a version that is not an integer: compared by equality only
    ("abc", "abb", True),
    ("12", "abc", True),
], ids=["same", "older", "newer", "same-opaque", "other-opaque", "opaque-after-integer"])
def test_a_version_is_applied_unless_it_is_the_one_held_or_an_older_integer(
        cache: ClusterCache, held: str, arriving: str, applied: bool) -> None:
    pod = make_pod("p1").obj()
    pod["metadata"]["resourceVersion"] = held
    assert cache.upsert(KIND_POD, pod) is True
    pod = make_pod("p1").obj()
    pod["metadata"]["resourceVersion"] = arriving
    assert cache.upsert(KIND_POD, pod) is applied


def test_the_keys_of_a_kind_are_those_held(cache: ClusterCache) -> None:
    cache.upsert(KIND_POD, versioned(make_pod("p1").obj(), 3))
    assert "h1" in cache.keys_of(KIND_NODE) and "default/p1" not in cache.keys_of(KIND_NODE)
    assert cache.keys_of(KIND_POD) == {"default/p1"}
    cache.delete(KIND_POD, make_pod("p1").obj())
    assert cache.keys_of(KIND_POD) == set()


def test_an_older_version_arriving_after_a_newer_one_is_ignored(cache: ClusterCache) -> None:
    node = make_node("h9").labels({RACK: "r3", "gpu": "yes"})
    assert cache.upsert(KIND_NODE, versioned(node.allocatable({GPU: 8}).obj(), 12)) is True
    assert cache.upsert(KIND_NODE, versioned(make_node("h9").labels({RACK: "r3"}).obj(), 11)) is False
    assert cache.nodes["h9"].labels.get("gpu") == "yes"


def with_uid(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


def test_the_answer_to_a_write_that_raced_the_deletion_does_not_bring_the_object_back(cache: ClusterCache) -> None:
    # A status patch sent before a namespace went, answered after the watch said the Workload was
    # gone: kept, it was decided again every cycle and patched (404) for ever.
    cache.upsert(c.KIND_WORKLOAD, with_uid(gang("a", 1, rv=5), "uid-a"))
    cache.delete(c.KIND_WORKLOAD, with_uid(gang("a", 1, rv=7), "uid-a"))
    assert cache.upsert(c.KIND_WORKLOAD, with_uid(gang("a", 1, rv=6), "uid-a")) is False
    assert "default/a" not in cache.workloads and cache.admission_state().waiting() == []
    # One created again under the name is another object (another UID): it is applied.
    assert cache.upsert(c.KIND_WORKLOAD, with_uid(gang("a", 1, rv=9), "uid-a2")) is True
    assert "default/a" in cache.workloads


def test_deleted_uids_are_remembered_up_to_a_bound_oldest_forgotten_first(
        cache: ClusterCache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("controller.cache.cluster.DELETED_UIDS_KEPT", 2)
    for name in ("a", "b", "c"):
        cache.upsert(c.KIND_WORKLOAD, with_uid(gang(name, 1, rv=1), f"uid-{name}"))
        cache.delete(c.KIND_WORKLOAD, with_uid(gang(name, 1, rv=2), f"uid-{name}"))
    assert cache.upsert(c.KIND_WORKLOAD, with_uid(gang("a", 1, rv=1), "uid-a")) is True  # forgotten
    assert cache.upsert(c.KIND_WORKLOAD, with_uid(gang("b", 1, rv=1), "uid-b")) is False
    assert cache.upsert(c.KIND_WORKLOAD, with_uid(gang("c", 1, rv=1), "uid-c")) is False


def test_a_cycle_reserves_in_the_cache_and_a_stale_event_does_not_release_it(cache: ClusterCache) -> None:
    cache.upsert(c.KIND_WORKLOAD, gang("a", 2))
    state = cache.admission_state()
    (decision,) = run_until_quiet(state)
    assert isinstance(decision, Admit)
    cache.record_admission("default/a", state.admitted["default/a"])
    assert sum(gpus_used(cache).values()) == 16
    # The watch echoes an older version (no admission yet) before ours: the reservation stays.
    cache.upsert(c.KIND_WORKLOAD, gang("a", 2, rv=2))
    assert sum(gpus_used(cache).values()) == 16
    assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 16_000
    # The next cycle does not admit it again.
    assert run_until_quiet(cache.admission_state()) == []


def test_forgetting_an_unwritten_admission_releases_quota_and_nodes(cache: ClusterCache) -> None:
    cache.upsert(c.KIND_WORKLOAD, gang("a", 2))
    state = cache.admission_state()
    run_until_quiet(state)
    cache.record_admission("default/a", state.admitted["default/a"])
    cache.forget_admission("default/a")
    assert gpus_used(cache) == {h: 0 for h in HOSTS}
    assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 0
    (again,) = run_until_quiet(cache.admission_state())
    assert isinstance(again, Admit)


def test_after_a_restart_an_admission_is_restored_once_even_with_its_pods_already_bound(cache: ClusterCache) -> None:
    # Pods arrive before the Workload (watch order is not guaranteed): h1 runs one of its two pods.
    pod = make_pod("a-0").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "a").requests({GPU: 8}).on("h1")
    cache.upsert(KIND_POD, versioned(pod.obj(), 1))
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h2": 1}))
    state = cache.admission_state()
    assert gpus_used(cache) == {"h1": 8, "h2": 8, "h3": 0, "h4": 0}
    assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 16_000
    assert "default/a" in state.admitted
    # A second gang of 3 hosts does not fit in one rack any more; 2 do (rack r2).
    cache.upsert(c.KIND_WORKLOAD, gang("b", 3))
    cache.upsert(c.KIND_WORKLOAD, gang("c", 2))
    decisions = {d.key: d for d in run_until_quiet(cache.admission_state())}
    assert not isinstance(decisions["default/b"], Admit)
    assert isinstance(decisions["default/c"], Admit)
    slices = label_slices(decisions["default/c"].admission["podSetAssignments"][0]["topologyAssignment"])
    assert {sl["nodeLabels"][RACK] for sl in slices} == {"r2"}


def test_a_finished_workload_releases_quota_and_its_reservation_but_running_pods_still_count(
        cache: ClusterCache) -> None:
    pod = make_pod("a-0").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "a").requests({GPU: 8}).on("h1")
    cache.upsert(KIND_POD, versioned(pod.obj(), 1))
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h2": 1}))
    cache.admission_state()
    finished = admitted_on_hosts("a", {"h1": 1, "h2": 1}, rv=2)
    finished["status"]["conditions"].append({"type": c.CONDITION_FINISHED, "status": "True",
                                             "reason": c.REASON_SUCCEEDED, "message": "done",
                                             "lastTransitionTime": "2026-01-01T00:00:00Z"})
    cache.upsert(c.KIND_WORKLOAD, finished)
    assert gpus_used(cache) == {"h1": 8, "h2": 0, "h3": 0, "h4": 0}
    assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 0


def test_an_admission_rewritten_in_place_moves_the_node_reservation_and_keeps_the_quota(
        cache: ClusterCache) -> None:
    # h1 failed and was replaced by h2 (same rack): h1's GPUs are free again, h2's taken, quota unchanged.
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h3": 1}))
    cache.admission_state()
    assert gpus_used(cache) == {"h1": 8, "h2": 0, "h3": 8, "h4": 0}
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h2": 1, "h3": 1}, rv=2))
    cache.admission_state()
    assert gpus_used(cache) == {"h1": 0, "h2": 8, "h3": 8, "h4": 0}
    assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 16_000


def test_a_node_change_patches_the_flavor_tree_in_place(cache: ClusterCache) -> None:
    tree = cache.snapshot().flavors["gpu"].topology
    assert tree is not None and tree.node_count == 4
    cache.delete(KIND_NODE, make_node("h4").obj())
    cache.upsert(KIND_NODE, make_node("h5").labels({RACK: "r2", "gpu": "yes"}).allocatable({GPU: 8}).obj())
    cache.upsert(KIND_NODE, make_node("x1").labels({RACK: "r2"}).allocatable({GPU: 8}).obj())  # not the flavor's
    assert cache.snapshot().flavors["gpu"].topology is tree
    assert tree.node_count == 4
    assert tree.slot_of("h4") is None and tree.slot_of("h5") is not None and tree.slot_of("x1") is None



def test_a_flavor_update_rebuilds_the_trees_only_when_its_spec_changed(cache: ClusterCache) -> None:
    infos = cache.snapshot().flavors
    finalized = make_flavor("gpu").node_label("gpu", "yes").topology_name("dc").obj()
    finalized["metadata"]["finalizers"] = [c.FINALIZER_RESOURCE_IN_USE]
    cache.upsert(c.KIND_RESOURCE_FLAVOR, finalized)
    assert cache.snapshot().flavors is infos
    cache.upsert(c.KIND_RESOURCE_FLAVOR, make_flavor("gpu").node_label("gpu", "no").topology_name("dc").obj())
    rebuilt = cache.snapshot().flavors["gpu"].topology
    assert cache.snapshot().flavors is not infos and rebuilt is not None and rebuilt.node_count == 0

def test_a_cluster_queue_change_rebuilds_the_ledger_with_every_held_admission(cache: ClusterCache) -> None:
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1}))
    cache.admission_state()
    cache.upsert(c.KIND_CLUSTER_QUEUE, versioned(make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj(), 5))
    assert cache.snapshot().quota.used["cq"][("gpu", GPU)] == 8_000
    cache.upsert(c.KIND_WORKLOAD, gang("b", 1))
    (decision,) = run_until_quiet(cache.admission_state())
    assert not isinstance(decision, Admit)  # quota 8, all used


def test_a_queue_status_write_coming_back_neither_rebuilds_the_ledger_nor_wakes_admission(
        cache: ClusterCache) -> None:
    ledger = cache.snapshot().quota
    generation = cache.generation
    for kind, builder in ((c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq").flavor("gpu", {GPU: 32})),
                          (c.KIND_LOCAL_QUEUE, make_local_queue("lq", "cq"))):
        obj = versioned(builder.obj(), 7)
        obj["status"] = {"pendingWorkloads": 3}
        assert cache.upsert(kind, obj)
    assert cache.cluster_queues["cq"].status is not None  # the status is kept (for its conditions' times)
    assert cache.snapshot().quota is ledger and cache.generation == generation
    cache.upsert(c.KIND_CLUSTER_QUEUE, versioned(make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj(), 8))
    assert cache.snapshot().quota is not ledger and cache.generation > generation  # a spec change does both


def test_a_cluster_queue_deletion_rebuilds_the_quotas_so_admission_sees_it_terminating(cache: ClusterCache) -> None:
    generation = cache.generation
    assert not cache.snapshot().cluster_queues["cq"].terminating
    deleted = versioned(make_cluster_queue("cq").flavor("gpu", {GPU: 32}).deleted().obj(), 9)
    assert cache.upsert(c.KIND_CLUSTER_QUEUE, deleted)
    assert cache.snapshot().cluster_queues["cq"].terminating and cache.generation > generation


def test_ungating_input_lists_the_slices_and_pod_states_of_an_admitted_workload(cache: ClusterCache) -> None:
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h3": 1}))
    gated = (make_pod("a-0").annotation(c.ANNOTATION_TOPOLOGY_WORKLOAD, "a")
             .annotation(c.ANNOTATION_TOPOLOGY_PODSET, "main").label(c.LABEL_JOB_COMPLETION_INDEX, "0").gate())
    cache.upsert(KIND_POD, versioned(gated.obj(), 1))
    assert cache.workload_of_pod(gated.obj()) == ("default", "a")
    inp = cache.ungating_input("default", "a")
    assert inp is not None
    assert [sl.count for sl in inp.slices["main"]] == [1, 1]
    (state,) = inp.pods
    assert (state.name, state.pod_set, state.completion_index, state.gated) == ("a-0", "main", 0, True)
    assert cache.ungating_input("default", "missing") is None
    cache.upsert(c.KIND_WORKLOAD, gang("b", 1))
    assert cache.ungating_input("default", "b") is None  # not admitted


def test_an_evicted_workloads_pods_are_not_ungated_while_its_reservation_stays(cache: ClusterCache) -> None:
    wl = admitted_on_hosts("a", {"h1": 1, "h3": 1})
    wl["status"]["conditions"].append({"type": c.CONDITION_EVICTED, "status": "True", "reason": c.REASON_PREEMPTED,
                                       "message": "for b", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    cache.upsert(c.KIND_WORKLOAD, wl)
    state = cache.admission_state()
    assert "default/a" in state.admitted and state.evicting == {"default/a": None}  # held until its pods are gone
    assert cache.ungating_input("default", "a") is None  # its pods are being deleted: none is released



def test_each_cycle_reads_an_admitted_workloads_latest_version_for_its_reservation_time_and_eviction(
        cache: ClusterCache) -> None:
    wl = admitted_on_hosts("a", {"h1": 1, "h3": 1})
    wl["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:10Z"
    cache.upsert(c.KIND_WORKLOAD, wl)
    first = cache.admission_state()
    assert (first.admitted_at, first.evicting) == ({"default/a": 1767225610.0}, {})
    # The same object again: the same reading. Then a new version, evicted and re-reserved later.
    assert cache.admission_state().admitted_at == {"default/a": 1767225610.0}
    again = admitted_on_hosts("a", {"h1": 1, "h3": 1}, rv=2)
    again["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:20Z"
    again["status"]["conditions"].append({"type": c.CONDITION_EVICTED, "status": "True", "reason": c.REASON_PREEMPTED,
                                          "message": "for b", "lastTransitionTime": "2026-01-01T00:00:30Z"})
    cache.upsert(c.KIND_WORKLOAD, again)
    later = cache.admission_state()
    assert (later.admitted_at, later.evicting) == ({"default/a": 1767225620.0}, {"default/a": None})

# -- parsed once ------------------------------------------------------------------------------------

def test_a_malformed_workload_update_is_refused_whole_and_the_previous_version_stays(cache: ClusterCache) -> None:
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h2": 1}))
    cache.admission_state()
    entry = cache.workloads["default/a"]
    before = (entry.obj, entry.info, entry.fit, cache.generation, gpus_used(cache))
    broken = admitted_on_hosts("a", {"h1": 1, "h2": 1}, rv=2)
    broken["spec"]["podSets"][0]["count"] = "many"
    del broken["status"]["admission"]  # a release, were it half-applied
    assert cache.upsert(c.KIND_WORKLOAD, broken) is False
    refusal = cache.malformed[(c.KIND_WORKLOAD, "default/a")]
    assert refusal.version == "2"
    assert "Workload default/a" in refusal.message and "spec.podSets.0.count" in refusal.message
    assert (entry.obj, entry.info, entry.fit, cache.generation, gpus_used(cache)) == before
    assert cache.workloads["default/a"] is entry
    # The same version again is refused again (not taken for one already applied); a good one clears it.
    assert cache.upsert(c.KIND_WORKLOAD, broken) is False
    assert cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h2": 1}, rv=3)) is True
    assert (c.KIND_WORKLOAD, "default/a") not in cache.malformed


def test_a_malformed_new_workload_is_not_tracked_and_its_deletion_forgets_the_refusal(cache: ClusterCache) -> None:
    job_owned = gang("x", 1)
    job_owned["metadata"]["ownerReferences"] = [{"apiVersion": c.JOB_API_VERSION, "kind": c.KIND_JOB,
                                                 "name": "x", "uid": "u1", "controller": True}]
    job_owned["spec"]["podSets"] = []  # a Workload has 1 to 8 pod sets
    generation = cache.generation
    assert cache.upsert(c.KIND_WORKLOAD, job_owned) is False
    assert "spec.podSets" in cache.malformed[(c.KIND_WORKLOAD, "default/x")].message
    assert ("default/x" not in cache.workloads and (c.KIND_JOB, "default/x") not in cache.workload_of
            and cache.generation == generation)
    assert run_until_quiet(cache.admission_state()) == []
    cache.delete(c.KIND_WORKLOAD, job_owned)
    assert cache.malformed == {}


def test_a_malformed_cluster_queue_keeps_the_quota_of_the_last_good_one(cache: ClusterCache) -> None:
    ledger = cache.snapshot().quota
    broken = versioned(make_cluster_queue("cq").flavor("gpu", {GPU: 8}).obj(), 9)
    broken["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    assert cache.upsert(c.KIND_CLUSTER_QUEUE, broken) is False
    message = cache.malformed[(c.KIND_CLUSTER_QUEUE, "cq")].message
    assert "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota" in message
    assert cache.snapshot().quota is ledger
    assert cache.snapshot().cluster_queues["cq"].quota("gpu", GPU).nominal == 32_000


def test_reads_use_the_model_parsed_when_the_event_came(cache: ClusterCache, monkeypatch: pytest.MonkeyPatch) -> None:
    cache.upsert(c.KIND_WORKLOAD, admitted_on_hosts("a", {"h1": 1, "h3": 1}))
    cache.upsert(c.KIND_WORKLOAD, gang("b", 1))
    model = cache.workloads["default/a"].obj

    def no_parse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a read parsed a Workload again")

    monkeypatch.setattr(Workload, "model_validate", no_parse)
    monkeypatch.setattr(Workload, "from_dict", no_parse)
    state = cache.admission_state()
    assert "default/a" in state.admitted and "default/b" in state.workloads
    assert cache.ungating_input("default", "a") is not None
    assert cache.workloads["default/a"].obj is model


@pytest.mark.parametrize("kind", WATCHED_KINDS)
def test_every_watched_kind_is_taken_and_deleted(kind: str) -> None:
    objects = {
        KIND_NODE: make_node("n1").obj(), KIND_POD: make_pod("p1").obj(), c.KIND_JOB: make_job("j1").obj(),
        c.KIND_WORKLOAD: gang("w1", 1), c.KIND_RESOURCE_FLAVOR: make_flavor("f1").obj(),
        c.KIND_CLUSTER_QUEUE: make_cluster_queue("cq1").flavor("f1", {GPU: 1}).obj(),
        c.KIND_LOCAL_QUEUE: make_local_queue("lq1", "cq1").obj(), c.KIND_TOPOLOGY: make_topology("t1", RACK).obj(),
        KIND_PRIORITY_CLASS: {"metadata": {"name": "high"}, "value": 10},
        KIND_NAMESPACE: {"metadata": {"name": "ns1", "labels": {"team": "a"}}},
        c.KIND_COHORT: make_cohort("org").obj(), c.KIND_WORKLOAD_PRIORITY_CLASS: make_priority_class("hi", 9).obj(),
        c.KIND_JOBSET: {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                        "metadata": {"name": "js1", "namespace": "default"}, "spec": {"replicatedJobs": []}},
    }
    stores = {c.KIND_COHORT: "cohorts", c.KIND_WORKLOAD_PRIORITY_CLASS: "workload_priority_classes",KIND_NODE: "nodes", KIND_POD: "pods", c.KIND_JOB: "jobs", c.KIND_WORKLOAD: "workloads",
              c.KIND_RESOURCE_FLAVOR: "flavors", c.KIND_CLUSTER_QUEUE: "cluster_queues",
              c.KIND_LOCAL_QUEUE: "local_queues", c.KIND_TOPOLOGY: "topologies",
              KIND_PRIORITY_CLASS: "priority_classes", KIND_NAMESPACE: "namespaces"}
    cache = ClusterCache()
    assert cache.upsert(kind, objects[kind]) is True
    store = cache.owners[kind] if kind == c.KIND_JOBSET else getattr(cache, stores[kind])
    assert len(store) == 1
    cache.delete(kind, objects[kind])
    assert len(store) == 0


def test_a_cohort_tree_lets_a_queue_borrow_from_a_cousin_and_a_cycle_stops_it() -> None:
    """
            org
           /   \
        left   right
         |       |
        cq-a(1) cq-b(3)      (GPUs)
    """
    cache = ClusterCache()
    for cohort in (make_cohort("org"), make_cohort("left").parent("org"), make_cohort("right").parent("org")):
        cache.upsert(c.KIND_COHORT, cohort.obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq-a").flavor("f1", {GPU: 1}).cohort("left").obj())
    cache.upsert(c.KIND_CLUSTER_QUEUE, make_cluster_queue("cq-b").flavor("f1", {GPU: 3}).cohort("right").obj())
    assert cache.snapshot().quota.availability("cq-a", "f1", GPU).available == 4000
    generation = cache.generation
    cache.upsert(c.KIND_COHORT, make_cohort("org").parent("left").obj())  # org -> left -> org
    assert cache.generation > generation
    assert cache.snapshot().quota.availability("cq-a", "f1", GPU).available == 0
    assert cache.snapshot().quota.cohort_cycle("cq-b") == ("left", "org")


def test_plain_pods_tasq_manages_are_kept_whole_under_their_group_and_leave_it_when_relabelled_or_deleted() -> None:
    cache = ClusterCache()

    def pod(name: str, group: str | None, queue: str | None = "lq") -> dict[str, Any]:
        built = make_pod(name)
        if queue:
            built.label(c.LABEL_QUEUE_NAME, queue)
        if group:
            built.label(c.LABEL_POD_GROUP_NAME, group).annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, "2")
        return built.build()

    a, b = pod("a", "g"), pod("b", "g")
    cache.upsert(KIND_POD, a)
    cache.upsert(KIND_POD, b)
    cache.upsert(KIND_POD, pod("plain", None, queue=None))  # not tasq's: not kept whole
    assert sorted(p["metadata"]["name"] for p in cache.group_members("default/g")) == ["a", "b"]
    assert list(cache.group_pods) == ["default/g"]
    moved = pod("b", "h")
    moved["metadata"]["resourceVersion"] = "2"
    cache.upsert(KIND_POD, moved)
    assert [p["metadata"]["name"] for p in cache.group_members("default/g")] == ["a"]
    assert [p["metadata"]["name"] for p in cache.group_members("default/h")] == ["b"]
    cache.delete(KIND_POD, a)
    assert "default/g" not in cache.group_pods and cache.group_members("default/g") == []


def test_a_deletion_a_relist_found_refuses_versions_up_to_the_lists_and_not_a_later_creation(
        cache: ClusterCache) -> None:
    # A relist knows a missing object only by name and the list's version: an answer to a write
    # sent before the deletion (version 6 < the list's 8) is refused, a creation after the list is not.
    cache.upsert(c.KIND_WORKLOAD, gang("a", 1, rv=5))
    cache.delete(c.KIND_WORKLOAD, {"metadata": {"namespace": "default", "name": "a", "resourceVersion": "8"}})
    assert cache.upsert(c.KIND_WORKLOAD, gang("a", 1, rv=6)) is False
    assert cache.upsert(c.KIND_WORKLOAD, gang("a", 1, rv=8)) is False
    assert "default/a" not in cache.workloads and cache.admission_state().waiting() == []
    assert cache.upsert(c.KIND_WORKLOAD, gang("a", 1, rv=9)) is True
    assert "default/a" in cache.workloads
    # Once created again, the name is free: a later deletion by the watch works as before.
    cache.delete(c.KIND_WORKLOAD, gang("a", 1, rv=10))
    assert "default/a" not in cache.workloads


def test_names_found_gone_are_remembered_up_to_a_bound_oldest_forgotten_first(
        cache: ClusterCache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("controller.cache.cluster.DELETED_UIDS_KEPT", 2)
    for name in ("a", "b", "c"):
        cache.upsert(c.KIND_WORKLOAD, gang(name, 1, rv=1))
        cache.delete(c.KIND_WORKLOAD, {"metadata": {"namespace": "default", "name": name, "resourceVersion": "2"}})
    assert cache.upsert(c.KIND_WORKLOAD, gang("a", 1, rv=1)) is True  # forgotten
    assert cache.upsert(c.KIND_WORKLOAD, gang("b", 1, rv=1)) is False
    assert cache.upsert(c.KIND_WORKLOAD, gang("c", 1, rv=1)) is False
