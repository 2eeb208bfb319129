"""Simulation: explanations() report the reasons run() wrote into the QuotaReserved conditions;
generateName draws seeded names; a waiting Workload follows a re-applied spec."""

from __future__ import annotations

from controller.api import constants as c
from controller.core.simulating import Simulation
from tests.builders.kueue import (
    ClusterQueueBuilder,
    LocalQueueBuilder,
    ResourceFlavorBuilder,
    WorkloadBuilder,
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
