"""Every failure message form, with its reason constant and the structured data behind it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.api import constants as c
from controller.core.topology.assigning import level_noun
from tests.builders.cluster import NodeBuilder
from tests.unit.core.topology.scenario import (
    BLOCK,
    RACK,
    PodSetBuilder,
    expect_failure,
    gpu_node,
    make_podset,
    run,
)

# Two blocks; h3 is tainted, h4 cordoned (free GPUs in brackets):
#
#             b1                 b2
#          /      \               |
#        r1        r2            r3
#       /  \        |           /   \
#    h1(2) h2(1)  h3(4,taint) h4(4,cordoned) h5(1)
NODES = (
    gpu_node("h1", "b1", "r1", 2),
    gpu_node("h2", "b1", "r1", 1),
    gpu_node("h3", "b1", "r2", 4).taint("gpu", "broken"),
    gpu_node("h4", "b2", "r3", 4).unschedulable(),
    gpu_node("h5", "b2", "r3", 1),
)
TALLY = 'Total nodes: 5; excluded: unschedulable: 1, taint "gpu=broken:NoSchedule": 1'


@dataclass(frozen=True)
class Case:
    name: str
    podset: PodSetBuilder
    want_reason: str
    want_message: str
    want_fits: tuple[tuple[str, int], ...] = ()
    nodes: tuple[NodeBuilder, ...] = NODES


CASES = [
    Case("required: the best domain and the exclusion tally", make_podset(4).require(RACK),
         c.REASON_POD_SET_TOPOLOGY_UNFIT,
         f'topology "gpu" allows to fit only 3 out of 4 pod(s) at level "cloud.com/rack" (best: b1/r1). {TALLY}',
         (("b1/r1", 3), ("b2/r3", 1))),
    Case("required at the widest level", make_podset(5).require(BLOCK), c.REASON_POD_SET_TOPOLOGY_UNFIT,
         f'topology "gpu" allows to fit only 3 out of 5 pod(s) at level "cloud.com/block" (best: b1). {TALLY}',
         (("b1", 3), ("b2", 1))),
    Case("preferred: the total, counted at the widest level", make_podset(5).prefer(RACK),
         c.REASON_POD_SET_TOPOLOGY_UNFIT,
         f'topology "gpu" allows to fit only 4 out of 5 pod(s) in total. {TALLY}', (("b1", 3), ("b2", 1))),
    Case("unconstrained: the total", make_podset(5).unconstrained(), c.REASON_POD_SET_TOPOLOGY_UNFIT,
         f'topology "gpu" allows to fit only 4 out of 5 pod(s) in total. {TALLY}', (("b1", 3), ("b2", 1))),
    Case("no node at all", make_podset(1).require(RACK), c.REASON_POD_SET_TOPOLOGY_UNFIT,
         'topology "gpu" allows to fit only 0 out of 1 pod(s) at level "cloud.com/rack". '
         "Total nodes: 0; excluded: none", nodes=()),
    Case("a level the topology lacks", make_podset(1).prefer("cloud.com/zone"), c.REASON_TOPOLOGY_LEVEL_MISSING,
         'topology "gpu" has no level "cloud.com/zone"; its levels: "cloud.com/block", "cloud.com/rack", '
         '"kubernetes.io/hostname"'),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_message(case: Case) -> None:
    failure = expect_failure(run(case.nodes, case.podset))
    assert (failure.reason, failure.message) == (case.want_reason, case.want_message)
    assert failure.domain_fits == case.want_fits
    assert failure.podset == "main"


# `never`: the same five nodes read as empty, every node counted whatever excludes it now:
# racks hold 3 (r1), 4 (r2) and 5 (r3) GPUs, blocks 7 (b1) and 5 (b2), the topology 12.
NEVER_CASES = [
    ("a rack too small for the pod set's GPUs names the largest rack and the need",
     make_podset(6).require(RACK),
     'can never fit: the largest rack has 5 nvidia.com/gpu, pod set "main" needs 6'),
    ("racks large enough once the taint and cordon go: it waits, no never",
     make_podset(4).require(RACK), None),
    ("GPUs enough in a block but no node takes a 3-GPU pod twice: counted in pods",
     make_podset(2).gpus(3).require(BLOCK),
     'can never fit: the largest block holds at most 1 such pod(s) even empty, pod set "main" needs 2'),
    ("preferred: the whole topology is too small",
     make_podset(13).prefer(RACK),
     'can never fit: the flavor\'s nodes have 12 nvidia.com/gpu in total, pod set "main" needs 13'),
    ("preferred: the whole topology would hold it empty",
     make_podset(12).prefer(RACK), None),
]


@pytest.mark.parametrize(("name", "podset", "want"), NEVER_CASES, ids=[case[0] for case in NEVER_CASES])
def test_never_fits_reads_allocatable_alone(name: str, podset: PodSetBuilder, want: str | None) -> None:
    failure = expect_failure(run(NODES, podset))
    assert failure.never == want
    assert failure.message.startswith('topology "gpu" allows to fit only')  # Kueue's message stays as is


@pytest.mark.parametrize(("level", "noun"), [
    ("cloud.provider.com/topology-rack", "rack"), ("cloud.com/block", "block"),
    (c.LABEL_HOSTNAME, "node"), ("zone", "zone")])
def test_level_noun(level: str, noun: str) -> None:
    assert level_noun(level) == noun
