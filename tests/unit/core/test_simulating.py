"""Simulation: explanations() report the reasons run() wrote into the QuotaReserved conditions;
generateName draws seeded names; a waiting Workload follows a re-applied spec; queued plain pods
form their group's Workload."""

from __future__ import annotations

from controller.api import constants as c
from controller.core.jobs.batch_job import BATCH_JOB, workload_name_for_job
from controller.core.simulating import Simulation
from tests.builders.cluster import make_pod
from tests.builders.jobs import TRAINER, TRAINER_GVK, trainer
from tests.builders.kueue import (
    ClusterQueueBuilder,
    LocalQueueBuilder,
    ResourceFlavorBuilder,
    WorkloadBuilder,
    make_cohort,
    make_job,
    make_priority_class,
    pod_template,
)


def test_explanations_match_the_pending_conditions_and_follow_each_run() -> None:
    sim = Simulation()
    sim.apply([
        ResourceFlavorBuilder("cpu").obj(),
        ClusterQueueBuilder("team-a").group("cpu").flavor("cpu", {"cpu": 4}).obj(),
        LocalQueueBuilder("main", "team-a").obj(),
        WorkloadBuilder("small").queue("main").pod_set("main", 1, {"cpu": 3}).obj(),
        WorkloadBuilder("large").queue("main").pod_set("main", 1, {"cpu": 8}).obj(),
        WorkloadBuilder("lost").queue("nowhere").pod_set("main", 1, {"cpu": 2}).obj(),
    ])
    sim.run()
    reasons = {why.key: (why.detail, why.message) for why in sim.explanations()}
    assert [why.key for why in sim.explanations()] == ["default/large", "default/lost"]
    assert reasons["default/large"][0] == c.REASON_QUOTA_EXCEEDED
    assert reasons["default/lost"][0] == c.REASON_LOCAL_QUEUE_NOT_FOUND
    for wl in sim.workloads():
        reserved = wl.condition(c.CONDITION_QUOTA_RESERVED)
        assert reserved is not None
        if wl.key in reasons:
            assert (reserved.status, reserved.message) == ("False", reasons[wl.key][1])
        else:
            assert reserved.status == "True"

    sim.apply([LocalQueueBuilder("nowhere", "team-a").obj()])
    sim.run()
    assert [why.key for why in sim.explanations()] == ["default/large", "default/lost"]
    assert {why.key: why.detail for why in sim.explanations()}["default/lost"] == c.REASON_QUOTA_EXCEEDED


def _generated(prefix: str) -> dict[str, object]:
    obj = WorkloadBuilder("x").queue("main").pod_set("main", 1, {"cpu": 1}).obj()
    obj["metadata"] = {"generateName": prefix, "namespace": "default"}
    return obj


def test_generate_name_draws_a_new_seeded_name_per_create() -> None:
    first, second = Simulation(), Simulation()
    for sim in (first, second):
        sim.apply([_generated("job-"), _generated("job-")])
        sim.apply([_generated("job-")])
        sim.run()
    names = [wl.name for wl in first.workloads()]
    assert len(set(names)) == 3 and all(n.startswith("job-") and len(n) == len("job-") + 5 for n in names)
    assert names == [wl.name for wl in second.workloads()]
    assert names != [wl.name for wl in _applied(Simulation(seed=1), _generated("job-"), 3).workloads()]


def _applied(sim: Simulation, obj: dict[str, object], times: int) -> Simulation:
    sim.apply([obj] * times)
    sim.run()
    return sim


def test_a_waiting_workload_takes_a_reapplied_spec_an_admitted_one_does_not() -> None:
    sim = Simulation()
    sim.apply([ResourceFlavorBuilder("cpu").obj(),
               ClusterQueueBuilder("team-a").group("cpu").flavor("cpu", {"cpu": 4}).obj(),
               LocalQueueBuilder("main", "team-a").obj(),
               WorkloadBuilder("w").queue("main").pod_set("main", 1, {"cpu": 8}).obj(),
               WorkloadBuilder("ok").queue("main").pod_set("main", 1, {"cpu": 1}).obj()])
    sim.run()
    sim.apply([WorkloadBuilder("w").queue("main").pod_set("main", 1, {"cpu": 2}).obj(),
               WorkloadBuilder("ok").queue("main").pod_set("main", 1, {"cpu": 3}).obj()])
    sim.run()
    by_name = {wl.name: wl for wl in sim.workloads()}
    assert by_name["w"].has_quota_reservation
    assert by_name["ok"].spec.pod_sets[0].template["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}


def test_a_job_borrows_through_a_tree_of_cohorts_and_the_labelled_priority_goes_first() -> None:
    """
                 org (4 cpu of its own)
                /                \\
          research              prod (lends at most 2)
             |                    |
        team-a (2 cpu)       team-b (4 cpu)

    team-a can take 2 + 4 + 2 = 8 cpu. Two 6-cpu Jobs wait in team-a: the one labelled with the
    WorkloadPriorityClass `urgent` is admitted first although its pod template names a lower
    PriorityClass; a Job labelled with a class that does not exist gets no Workload.
    """
    sim = Simulation()
    sim.apply([
        ResourceFlavorBuilder("cpu").obj(),
        make_cohort("org").flavor("cpu", {"cpu": 4}).obj(),
        make_cohort("research").parent("org").obj(),
        make_cohort("prod").parent("org").flavor("cpu", {"cpu": 0}).limits("cpu", "cpu", lending=2).obj(),
        ClusterQueueBuilder("team-a").flavor("cpu", {"cpu": 2}).cohort("research").obj(),
        ClusterQueueBuilder("team-b").flavor("cpu", {"cpu": 4}).cohort("prod").obj(),
        LocalQueueBuilder("main", "team-a").obj(),
        make_priority_class("urgent", 10_000).obj(),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 1},
    ])
    sim.apply([
        make_job("plain").queue("main").requests({"cpu": 6}).obj(),
        make_job("labelled").queue("main").requests({"cpu": 6}).priority(class_name="low")
        .label(c.LABEL_PRIORITY_CLASS, "urgent").obj(),
        make_job("ghost").queue("main").requests({"cpu": 1}).label(c.LABEL_PRIORITY_CLASS, "nope").obj(),
    ])
    sim.run()
    admitted = {wl.name: wl.condition(c.CONDITION_ADMITTED) is not None for wl in sim.workloads()}
    assert admitted == {workload_name_for_job("labelled"): True, workload_name_for_job("plain"): False}
    by_name = {wl.name: wl for wl in sim.workloads()}
    assert by_name[workload_name_for_job("labelled")].spec.priority == 10_000
    assert sim.refused_jobs == {(c.KIND_JOB, "default", "ghost"): 'WorkloadPriorityClass "nope" not found: no Workload is created'}
    [why] = sim.explanations()
    assert why.message.endswith('requests 6, available 2 (nominal 2, used 6, unused in cohort "research" 2)')


def test_a_cycle_of_cohorts_keeps_its_queues_from_admitting_and_says_so() -> None:
    sim = Simulation()
    sim.apply([
        ResourceFlavorBuilder("cpu").obj(),
        make_cohort("x").parent("y").obj(), make_cohort("y").parent("x").obj(),
        ClusterQueueBuilder("team-a").flavor("cpu", {"cpu": 8}).cohort("x").obj(),
        LocalQueueBuilder("main", "team-a").obj(),
        WorkloadBuilder("w").queue("main").pod_set("main", 1, {"cpu": 1}).obj(),
    ])
    sim.run()
    [why] = sim.explanations()
    assert why.detail == c.REASON_COHORT_HAS_CYCLE
    assert why.message == 'ClusterQueue "team-a" is inactive: its cohort "x" is in a cycle of cohorts (x -> y -> x)'


def test_a_complete_group_of_queued_plain_pods_is_one_workload_an_incomplete_one_none() -> None:
    # quota for 4 CPUs: the group of 3 one-CPU pods fits; the group announcing 3 but with 2 pods waits unseen
    def pod(name: str, group: str, total: int) -> dict[str, object]:
        return (make_pod(name).requests(cpu="1").label(c.LABEL_QUEUE_NAME, "main")
                .label(c.LABEL_POD_GROUP_NAME, group).annotate(c.ANNOTATION_POD_GROUP_TOTAL_COUNT, str(total)).obj())
    sim = Simulation()
    sim.apply([
        ResourceFlavorBuilder("cpu").obj(),
        ClusterQueueBuilder("team-a").group("cpu").flavor("cpu", {"cpu": 4}).obj(),
        LocalQueueBuilder("main", "team-a").obj(),
        *(pod(f"a{i}", "complete", 3) for i in range(3)),
        *(pod(f"b{i}", "short", 3) for i in range(2)),
    ])
    sim.run()
    (workload,) = sim.workloads()
    assert workload.key == "default/complete"
    assert [(ps.count, len(ps.name)) for ps in workload.spec.pod_sets] == [(3, 8)]  # one role, Kueue's 8-digit hash
    reserved = workload.condition(c.CONDITION_QUOTA_RESERVED)
    assert reserved is not None and reserved.status == "True"


def test_a_queued_object_of_any_integrated_kind_gets_its_workload_and_finishes_with_it() -> None:
    """The simulation knows kinds only through the registry: a test-only Trainer (3 workers of
    1 cpu) gets its adapter's Workload and is admitted; once it reports its outcome the Workload is
    Finished; a Trainer labelled with a missing WorkloadPriorityClass is refused by kind and name."""
    sim = Simulation(integrations=(BATCH_JOB, TRAINER))
    bert = trainer(podTemplate=pod_template({"cpu": 1}))
    ghost = trainer()
    ghost["metadata"] = {**ghost["metadata"], "name": "ghost", "labels": {c.LABEL_QUEUE_NAME: "lq",
                                                                        c.LABEL_PRIORITY_CLASS: "nope"}}
    sim.apply([
        ResourceFlavorBuilder("cpu").obj(),
        ClusterQueueBuilder("cq").group("cpu").flavor("cpu", {"cpu": 4}).obj(),
        LocalQueueBuilder("lq", "cq", namespace="ns").obj(),
        bert, ghost,
    ])
    sim.run()
    [workload] = sim.workloads()
    assert workload.name == TRAINER.workload_name(bert) and workload.spec.pod_sets[0].count == 3
    assert workload.condition(c.CONDITION_ADMITTED) is not None
    assert sim.refused_jobs == {(TRAINER_GVK.kind, "ns", "ghost"): 'WorkloadPriorityClass "nope" not found: '
                                                                   'no Workload is created'}

    sim.apply([{**bert, "status": {"outcome": "done"}}])
    sim.run()
    [workload] = sim.workloads()
    finished = workload.condition(c.CONDITION_FINISHED)
    assert finished is not None and finished.status == "True"


def test_a_draining_local_queue_evicts_and_holds_its_workloads_and_its_restart_requeues_them() -> None:
    # team-a (4 cpu) <- main (drained, then running again) and other; "w" runs in main, "neighbour" in other.
    sim = Simulation()
    queue = LocalQueueBuilder("main", "team-a")
    sim.apply([ResourceFlavorBuilder("cpu").obj(),
               ClusterQueueBuilder("team-a").group("cpu").flavor("cpu", {"cpu": 4}).obj(),
               queue.obj(), LocalQueueBuilder("other", "team-a").obj(),
               WorkloadBuilder("w").queue("main").pod_set("main", 1, {"cpu": 2}).obj(),
               WorkloadBuilder("neighbour").queue("other").pod_set("main", 1, {"cpu": 2}).obj()])
    sim.run()
    assert all(wl.has_quota_reservation for wl in sim.workloads())
    sim.apply([queue.set("spec.stopPolicy", "HoldAndDrain").obj()])
    sim.run()
    by_name = {wl.name: wl for wl in sim.workloads()}
    drained, neighbour = by_name["w"], by_name["neighbour"]
    assert neighbour.has_quota_reservation and neighbour.condition(c.CONDITION_EVICTED) is None
    assert not drained.has_quota_reservation and drained.admission is None
    conditions = {t: drained.condition(t) for t in (c.CONDITION_EVICTED, c.CONDITION_REQUEUED, c.CONDITION_QUOTA_RESERVED)}
    assert {t: (x.status, x.reason) for t, x in conditions.items() if x is not None} == {
        c.CONDITION_EVICTED: ("True", c.REASON_LOCAL_QUEUE_STOPPED),
        c.CONDITION_REQUEUED: ("False", c.REASON_LOCAL_QUEUE_STOPPED),
        c.CONDITION_QUOTA_RESERVED: ("False", c.REASON_INADMISSIBLE)}
    assert [why.detail for why in sim.explanations()] == [c.REASON_STOPPED]
    sim.apply([queue.set("spec.stopPolicy", "None").obj()])
    sim.run()
    again = {wl.name: wl for wl in sim.workloads()}["w"]
    assert again.has_quota_reservation
    requeued = again.condition(c.CONDITION_REQUEUED)
    assert requeued is not None and (requeued.status, requeued.reason) == ("True", c.REASON_LOCAL_QUEUE_RESTARTED)
