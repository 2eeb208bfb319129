"""Simulation.explanations() reports the reasons run() wrote into the QuotaReserved conditions."""

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
