"""Failed-node replacement (controller.core.topology.replacing): table cases on a drawn tree, and a
property test against a brute-force oracle that enumerates every way to re-place the failed pods."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.topology_assignment import AssignedDomain
from controller.api.views import PodView
from controller.core.topology import Usage
from controller.core.topology.replacing import (
    ReplacementFailure,
    ReplacementSuccess,
    find_replacement,
)
from tests.builders.cluster import make_pod
from tests.unit.core.topology.scenario import GPU, LEVELS, gpu_node, make_podset, topology

#   block b1                         block b2
#   ├─ rack r1: x1 x2 x3  (8 GPUs)   └─ rack r3: z1 z2 (8 GPUs)
#   └─ rack r2: y1 y2     (8 GPUs)
PATHS = {"x1": ("b1", "r1"), "x2": ("b1", "r1"), "x3": ("b1", "r1"),
         "y1": ("b1", "r2"), "y2": ("b1", "r2"), "z1": ("b2", "r3"), "z2": ("b2", "r3")}


def domain(host: str, count: int) -> AssignedDomain:
    block, rack = PATHS[host]
    return AssignedDomain((block, rack, host), count)


def used(node: str, gpus: int) -> PodView:
    return make_pod(f"other-{node}").requests({GPU: gpus}).on(node).view()


def replace_on(assigned: Sequence[AssignedDomain], failed: set[str], podset: object,
               busy: dict[str, int] | None = None, not_ready: Sequence[str] = ()) -> object:
    nodes = [gpu_node(h, b, r).not_ready() if h in not_ready else gpu_node(h, b, r) for h, (b, r) in PATHS.items()]
    usage = Usage.from_pods([used(n, g) for n, g in (busy or {}).items()])
    # The Workload's own pods on its healthy hosts take their GPUs too.
    usage.reserve("ns/wl", {d.values[-1]: {GPU: 1000 * d.count, c.RESOURCE_PODS: 1000 * d.count}
                            for d in assigned if d.values[-1] not in failed})
    return find_replacement(topology(nodes), usage, podset.build(), LEVELS, assigned, failed)  # type: ignore[attr-defined]


def hosts(outcome: object) -> dict[str, int]:
    assert isinstance(outcome, ReplacementSuccess), getattr(outcome, "message", outcome)
    return {d.values[-1]: d.count for d in outcome.domains}


def test_a_failed_host_is_replaced_in_its_own_rack_and_healthy_hosts_keep_their_pods() -> None:
    # x1 (8 pods) and x2 (8 pods) admitted in rack r1; x1 fails; x3 is free in the same rack.
    outcome = replace_on([domain("x1", 8), domain("x2", 8)], {"x1"}, make_podset(16).require(LEVELS[1]))
    assert hosts(outcome) == {"x2": 8, "x3": 8}
    assert isinstance(outcome, ReplacementSuccess)
    assert [(r.failed, r.to) for r in outcome.replaced] == [("x1", (("x3", 8),))]


def test_the_rack_is_preferred_even_when_the_required_block_has_room_elsewhere() -> None:
    outcome = replace_on([domain("x1", 4)], {"x1"}, make_podset(4).require(LEVELS[0]))
    assert set(hosts(outcome)) <= {"x2", "x3"}


def test_a_full_rack_widens_to_the_required_block_but_never_beyond() -> None:
    busy = {"x2": 8, "x3": 8}
    outcome = replace_on([domain("x1", 8)], {"x1"}, make_podset(8).require(LEVELS[0]), busy=busy)
    assert set(hosts(outcome)) <= {"y1", "y2"}
    # Required rack: the rack is full, so there is no replacement, and the message names the node.
    failure = replace_on([domain("x1", 8)], {"x1"}, make_podset(8).require(LEVELS[1]), busy=busy)
    assert isinstance(failure, ReplacementFailure)
    assert failure.reason == c.REASON_NODE_FAILURES
    assert failure.nodes == ("x1",)
    assert "x1 (8 pods)" in failure.message and f"{LEVELS[1]}=r1" in failure.message


def test_several_failed_hosts_of_one_pod_set_are_replaced_together() -> None:
    # x1 and x2 fail at once (Kueue would evict); r1 has only x3, so x2's pods spill into block b1.
    outcome = replace_on([domain("x1", 8), domain("x2", 4)], {"x1", "x2"}, make_podset(12).require(LEVELS[0]))
    placed = hosts(outcome)
    assert sum(placed.values()) == 12 and not {"x1", "x2"} & set(placed)
    assert set(placed) <= {"x3", "y1", "y2"}


def test_not_ready_and_failed_hosts_are_never_candidates() -> None:
    outcome = replace_on([domain("x1", 8)], {"x1", "x3"}, make_podset(8).require(LEVELS[1]), not_ready=["x2"])
    assert isinstance(outcome, ReplacementFailure)


def test_a_pod_set_split_over_hosts_can_grow_on_a_host_it_already_holds() -> None:
    # x2 holds 4 pods and has room for 4 more: x1's 4 pods go there (one node, fewest nodes).
    outcome = replace_on([domain("x1", 4), domain("x2", 4)], {"x1"}, make_podset(8).require(LEVELS[1]),
                         busy={"x3": 6})
    assert hosts(outcome) == {"x2": 8}


def test_an_assignment_at_levels_the_topology_no_longer_has_is_not_repaired() -> None:
    nodes = [gpu_node(h, b, r) for h, (b, r) in PATHS.items()]
    outcome = find_replacement(topology(nodes), Usage(), make_podset(1).build(), (LEVELS[0], LEVELS[2]),
                               [AssignedDomain(("b1", "x1"), 1)], {"x1"})
    assert isinstance(outcome, ReplacementFailure)
    assert "levels" in outcome.message


@pytest.mark.parametrize("mode", ["preferred", "unconstrained"])
def test_an_unconfined_pod_set_may_go_anywhere_in_the_flavor(mode: str) -> None:
    busy = {h: 8 for h in PATHS if h.startswith(("x", "y"))}
    builder = make_podset(8).prefer(LEVELS[1]) if mode == "preferred" else make_podset(8).unconstrained()
    outcome = replace_on([domain("x1", 8)], {"x1"}, builder, busy=busy)
    assert set(hosts(outcome)) <= {"z1", "z2"}


# -- property test against a brute-force oracle ----------------------------------------------------

def oracle_feasible(free: dict[str, int], allowed: set[str], need: int) -> bool:
    """Every way to put `need` pods onto the allowed hosts, one count per host within its room."""
    names = sorted(allowed)
    return any(sum(choice) == need
               for choice in itertools.product(*(range(free[n] + 1) for n in names)))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_replacement_matches_the_brute_force_oracle(data: st.DataObject) -> None:
    busy = {h: data.draw(st.integers(0, 8), label=f"busy {h}") for h in PATHS}
    assigned_hosts = data.draw(st.lists(st.sampled_from(sorted(PATHS)), min_size=1, max_size=3, unique=True))
    counts = {h: data.draw(st.integers(1, 3), label=f"pods {h}") for h in assigned_hosts}
    for h in assigned_hosts:  # an assigned host holds its own pods besides what else runs there
        busy[h] = min(busy[h], 8 - counts[h])
    failed = set(data.draw(st.lists(st.sampled_from(assigned_hosts), min_size=1, unique=True)))
    level = data.draw(st.sampled_from([0, 1, -1]))
    if level >= 0 and len({PATHS[h][: level + 1] for h in assigned_hosts}) > 1:
        level = -1  # the admission kept them in one domain of the required level; here they are not
    builder = make_podset(sum(counts.values()))
    builder = builder.require(LEVELS[level]) if level >= 0 else builder.unconstrained()
    assigned = [domain(h, counts[h]) for h in sorted(assigned_hosts)]
    outcome = replace_on(assigned, failed, builder, busy=busy)

    anchor = PATHS[sorted(failed)[0]]
    allowed = {h for h, path in PATHS.items()
               if h not in failed and (level < 0 or path[: level + 1] == anchor[: level + 1])}
    free = {h: 8 - busy[h] - (counts[h] if h in counts and h not in failed else 0) for h in PATHS}
    need = sum(counts[h] for h in failed)
    assert isinstance(outcome, ReplacementSuccess) == oracle_feasible(free, allowed, need)
    if isinstance(outcome, ReplacementSuccess):
        placed = {d.values[-1]: d.count for d in outcome.domains}
        assert sum(placed.values()) == sum(counts.values())
        assert not failed & set(placed)
        for h, n in placed.items():
            assert h in allowed or h in counts
            assert n - (counts.get(h, 0) if h not in failed else 0) <= free[h]
        for h in set(counts) - failed:  # pods on healthy hosts never move
            assert placed[h] >= counts[h]
        for r in outcome.replaced:  # each failed host's pods stay in its rack when the rack has room
            rack = {h for h in allowed if PATHS[h] == PATHS[r.failed]}
            if len(failed) == 1 and sum(free[h] for h in rack) >= counts[r.failed]:
                assert {name for name, _ in r.to} <= rack
