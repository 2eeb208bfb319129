"""Properties of the cycle on a small topology: held capacity equals what admissions report, no
node is overcommitted, and releasing every admission leaves no quota or node usage behind; also
with partially admitted workloads among them.

    b1
    ├── r1: n1 (4 GPU), n2 (4 GPU)
    └── r2: n3 (4 GPU), n4 (2 GPU)
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.admission.cycle import run_until_quiet
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
BLOCK, RACK = "cloud.com/block", "cloud.com/rack"
NODES = {"n1": ("r1", 4), "n2": ("r1", 4), "n3": ("r2", 4), "n4": ("r2", 2)}

pod_sets = st.tuples(st.integers(1, 5), st.integers(1, 3), st.sampled_from([None, RACK, BLOCK]))
workloads = st.lists(st.lists(pod_sets, min_size=1, max_size=2), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(specs=workloads, quota=st.integers(4, 20))
def test_held_capacity_matches_admissions_and_is_all_given_back(
        specs: list[list[tuple[int, int, str | None]]], quota: int) -> None:
    nodes = [make_node(n).labels({BLOCK: "b1", RACK: rack}).allocatable({GPU: str(g)}, cpu="32").view()
             for n, (rack, g) in NODES.items()]
    state = make_admission_state([make_cluster_queue("a").flavor("h100", {GPU: quota})],
                                 [make_flavor("h100").topology_name("t")], nodes,
                                 [make_topology("t", BLOCK, RACK, "kubernetes.io/hostname")])
    for n, spec in enumerate(specs):
        builder = make_workload(f"w{n}").queue("lq-a")
        for i, (count, gpus, level) in enumerate(spec):
            # every other workload may be partially admitted down to one pod (its first pod set)
            partial: dict[str, Any] = {"minCount": 1} if n % 2 and i == 0 and count > 1 else {}
            builder.pod_set(f"ps{i}", count, {GPU: gpus}, required=level, **partial)
        state.submit(workload_info(builder.model(), seq=n))
    run_until_quiet(state)

    admitted_gpus = sum(ps.usage[GPU] for fit in state.admitted.values() for ps in fit.pod_sets)
    assert admitted_gpus <= quota * 1000
    assert state.snapshot.quota.availability("a", "h100", GPU).available == quota * 1000 - admitted_gpus
    held = {name: state.snapshot.usage.used(name).get(GPU, 0) for name in NODES}
    assert sum(held.values()) == admitted_gpus
    assert all(held[name] <= gpus * 1000 for name, (_, gpus) in NODES.items())
    for fit in state.admitted.values():
        for ps in fit.pod_sets:
            assert ps.topology is not None and ps.topology.count == ps.count

    for key in list(state.admitted):
        assert state.release(key)
    assert state.snapshot.quota.availability("a", "h100", GPU).available == quota * 1000
    assert all(state.snapshot.usage.used(name) == {} for name in NODES)
