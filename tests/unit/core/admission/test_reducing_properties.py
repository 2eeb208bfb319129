"""Property: the partial admission's binary search admits exactly the count a brute-force oracle finds
(every count from the full one down to minCount tried in turn, the first that fits), on small random
topologies already partly taken, for required, preferred and slice requests, balanced or not.

    b1                      b2
    ├── r1: hosts ...       └── r3: hosts ...
    └── r2: hosts ...       (each host 1-4 GPUs; 1-3 hosts a rack)
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.features import FeatureGates
from controller.core.admission.cycle import run_until_quiet
from controller.core.admission.flavoring import NoFit, WorkloadFit, assign_flavors
from controller.core.admission.reducing import reducible, reserve_largest_count, with_count
from controller.core.admission.workloads import workload_info
from tests.builders.cluster import make_node
from tests.builders.kueue import (
    make_admission_state,
    make_cluster_queue,
    make_flavor,
    make_topology,
    make_workload,
)

GPU = "nvidia.com/gpu"
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", c.LABEL_HOSTNAME
RACKS = (("b1", "r1"), ("b1", "r2"), ("b2", "r3"))

racks = st.tuples(*(st.lists(st.integers(1, 4), min_size=1, max_size=3) for _ in RACKS))
taken = st.lists(st.tuples(st.integers(1, 4), st.sampled_from([RACK, HOST])), max_size=3)
requests = st.fixed_dictionaries({
    "count": st.integers(2, 12),
    "min": st.integers(1, 3),
    "gpus": st.integers(1, 2),
    "mode": st.sampled_from(["required", "preferred"]),
    "level": st.sampled_from([BLOCK, RACK, HOST]),
    "slice": st.sampled_from([None, 2, 3]),
    "quota": st.integers(2, 30),
    "balanced": st.booleans(),
})


def oracle(snap: Any, cq: str, wl: Any) -> int | None:
    """The largest count in [minCount, count) that fits, each tried in turn (its trial released)."""
    found = reducible(wl)
    if found is None:
        return None
    for count in sorted(found.counts, reverse=True):
        trial = assign_flavors(snap, cq, with_count(wl, found.pod_set.name, count))
        if isinstance(trial, WorkloadFit):
            snap.usage.release(wl.key)
            return count
    return None


@settings(max_examples=300, deadline=None)
@given(layout=racks, before=taken, req=requests)
def test_binary_search_equals_the_brute_force_oracle(layout: tuple[list[int], ...],
                                                     before: list[tuple[int, str]], req: dict[str, Any]) -> None:
    nodes = [make_node(f"{rack}-n{i}").labels({BLOCK: block, RACK: rack}).allocatable({GPU: str(g)}, cpu="64").view()
             for (block, rack), gpus in zip(RACKS, layout, strict=True) for i, g in enumerate(gpus)]
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: req["quota"]})],
                                 [make_flavor("h100").topology_name("t")], nodes,
                                 [make_topology("t", BLOCK, RACK, HOST)])
    state.snapshot.features = FeatureGates({c.FEATURE_TAS_BALANCED_PLACEMENT: req["balanced"]})
    for n, (count, level) in enumerate(before):  # earlier admissions take some of the room
        state.submit(workload_info(make_workload(f"w{n}").queue("lq-a").pod_set("main", count, {GPU: 1},
                                                                                required=level).model(), seq=n))
    run_until_quiet(state)

    topology: dict[str, Any] = {req["mode"]: req["level"]}
    if req["slice"] is not None:
        topology |= {"podSetSliceRequiredTopology": HOST, "podSetSliceSize": req["slice"]}
    count = req["count"]
    min_count = max(1, count * req["min"] // 4)  # a quarter, half or three quarters of the count
    wl = workload_info(make_workload("p").queue("lq-a").pod_set(
        "main", count, {GPU: req["gpus"]}, minCount=min_count, topologyRequest=topology).model(), seq=99)
    before_usage = {n.name: dict(state.snapshot.usage.used(n.name)) for n in nodes}

    full = assign_flavors(state.snapshot, "a", wl)
    if isinstance(full, WorkloadFit):
        event("whole fits")
        return  # partial admission is only searched when the whole does not fit
    want = oracle(state.snapshot, "a", wl)
    got = reserve_largest_count(state.snapshot, "a", wl, full)
    event("reduced" if want is not None else "nothing fits")
    if want is None:
        assert isinstance(got, NoFit)
        assert {n.name: dict(state.snapshot.usage.used(n.name)) for n in nodes} == before_usage
    else:
        assert isinstance(got, WorkloadFit)
        assert [ps.count for ps in got.pod_sets] == [want]
        assert got.pod_sets[0].topology is not None and got.pod_sets[0].topology.count == want
        held = sum(state.snapshot.usage.used(n.name).get(GPU, 0) for n in nodes)
        assert held == sum(u.get(GPU, 0) for u in before_usage.values()) + want * req["gpus"] * 1000
