"""Property: after admission is quiet, no cohort limit is broken and every waiting workload would
break one if it were added, checked against a brute-force restatement of Kueue's quota rules."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.admission.cycle import run_until_quiet
from controller.core.admission.workloads import workload_info
from tests.builders.kueue import make_admission_state, make_cluster_queue, make_flavor, make_workload

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class QueueSpec:
    nominal: int
    borrowing: int | None
    lending: int | None


queue_specs = st.builds(QueueSpec, st.integers(0, 12), st.one_of(st.none(), st.integers(0, 8)),
                        st.one_of(st.none(), st.integers(0, 12)))


def within_limits(specs: list[QueueSpec], used: list[int]) -> bool:
    """Kueue's rules, stated directly: each queue stays within nominal + borrowingLimit, and what
    all queues use beyond their guaranteed (non-lent) part fits in what they lend together."""
    lendable = [s.nominal if s.lending is None else min(s.nominal, s.lending) for s in specs]
    guaranteed = [s.nominal - lend for s, lend in zip(specs, lendable, strict=True)]
    for s, u in zip(specs, used, strict=True):
        if s.borrowing is not None and u > s.nominal + s.borrowing:
            return False
    beyond = sum(max(0, u - g) for u, g in zip(used, guaranteed, strict=True))
    return beyond <= sum(lendable)


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(queue_specs, min_size=1, max_size=4),
       demands=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 10)), min_size=1, max_size=12))
def test_quiet_admission_is_within_limits_and_maximal(specs: list[QueueSpec],
                                                       demands: list[tuple[int, int]]) -> None:
    builders = []
    for i, s in enumerate(specs):
        b = make_cluster_queue(f"q{i}").cohort("c").flavor("a100", {GPU: s.nominal})
        builders.append(b.limits("a100", GPU, borrowing=s.borrowing, lending=s.lending))
    state = make_admission_state(builders, [make_flavor("a100")])
    gpus_of = {}
    for n, (queue, gpus) in enumerate(demands):
        queue %= len(specs)
        info = workload_info(make_workload(f"w{n}").queue(f"lq-q{queue}").pod_set("main", 1, {GPU: gpus}).model(), seq=n)
        gpus_of[info.key] = (queue, gpus)
        state.submit(info)
    run_until_quiet(state)
    used = [0] * len(specs)
    for key in state.admitted:
        queue, gpus = gpus_of[key]
        used[queue] += gpus
    assert within_limits(specs, used)
    for key in state.waiting():
        queue, gpus = gpus_of[key]
        more = list(used)
        more[queue] += gpus
        assert not within_limits(specs, more), f"{key} waits but would fit"
