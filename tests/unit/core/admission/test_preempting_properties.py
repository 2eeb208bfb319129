"""Properties of the victim search against a brute-force oracle on a small topology, for random
admitted workloads and a random preemptor (withinClusterQueue LowerPriority):

    b1
    ├── r1: n1 (4 GPU), n2 (4 GPU)
    └── r2: n3 (4 GPU), n4 (4 GPU)

- every victim has a lower priority than the preemptor;
- with the victims gone the preemptor fits (quota and one rack where it asks for one);
- no victim is superfluous: with any one of them kept, it does not fit;
- when nothing is preempted, even every lower-priority workload gone (but those being evicted for
  another preemptor) would not make it fit.
The oracle is the real flavor assignment on a clone without the given workloads.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import event, given, settings
from hypothesis import strategies as st

from controller.api import constants as c
from controller.core.admission.cycle import AdmissionState, Preempt, run_until_quiet
from controller.core.admission.flavoring import WorkloadFit, assign_flavors
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
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"
NODES = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}

shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.booleans(), st.integers(0, 4))
"""(pods, GPUs per pod, required rack, priority)."""


def fits_without(state: AdmissionState, key: str, gone: Iterable[str]) -> bool:
    sim = state.snapshot.clone()
    for other in gone:
        sim.quota.release(other)
        sim.usage.remove_workload(other)
    return isinstance(assign_flavors(sim, "a", state.workloads[key]), WorkloadFit)


@settings(max_examples=150, deadline=None)
@given(admitted=st.lists(shapes, min_size=1, max_size=8), preemptor=shapes, quota=st.integers(4, 16),
       boost=st.integers(0, 3))
def test_victims_are_lower_priority_sufficient_and_minimal(
        admitted: list[tuple[int, int, bool, int]], preemptor: tuple[int, int, bool, int], quota: int,
        boost: int) -> None:
    nodes = [make_node(n).labels({BLOCK: "b1", RACK: rack}).allocatable({GPU: "4"}, cpu="32").view()
             for n, rack in NODES.items()]
    state = make_admission_state(
        [make_cluster_queue("a").preemption(within=c.PREEMPTION_LOWER_PRIORITY).flavor("h100", {GPU: quota})],
        [make_flavor("h100").topology_name("t")], nodes, [make_topology("t", BLOCK, RACK, HOST)])
    for i, (count, gpus, rack, priority) in enumerate(admitted):
        state.now = float(i)
        builder = make_workload(f"w{i}").queue("lq-a").priority(priority).pod_set(
            "main", count, {GPU: gpus}, required=RACK if rack else None)
        state.submit(workload_info(builder.model(), seq=i))
        run_until_quiet(state)
    count, gpus, rack, priority = preemptor
    priority += boost
    hi = make_workload("hi").queue("lq-a").priority(priority).pod_set(
        "main", count, {GPU: gpus}, required=RACK if rack else None)
    state.submit(workload_info(hi.model(), seq=100))
    key = "default/hi"
    decisions = run_until_quiet(state)
    # Victims another preemptor of the setup claimed are not the preemptor's to count on.
    lower = [k for k in state.admitted if state.workloads[k].priority < priority
             and state.evicting.get(k, key) == key]
    preempts = [d for d in decisions if isinstance(d, Preempt) and d.key == key]
    if key in state.admitted or all(d.key != key for d in decisions):
        event("fits or not tried")
        return  # it fits, or waits parked behind a setup workload of its shape and priority
    event("preempts" if preempts else "no preemption")
    if not preempts:
        assert not fits_without(state, key, lower), "nothing preempted though the lower ones gone would fit"
        return
    (decision,) = preempts
    victims = [v.key for v in decision.victims]
    assert all(state.workloads[v].priority < priority for v in victims)
    assert fits_without(state, key, victims)
    for kept in victims:
        assert not fits_without(state, key, [v for v in victims if v != kept]), f"{kept} is superfluous"
