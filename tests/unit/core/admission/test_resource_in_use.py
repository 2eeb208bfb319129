"""The resource-in-use finalizer decisions (controller.core.admission.resource_in_use), as Kueue keeps it:
always on a live flavor or ClusterQueue, removed at deletion only once nothing uses the object."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.api import constants as c
from controller.api.flavor import ResourceFlavor
from controller.api.queues import ClusterQueue
from controller.core.admission.resource_in_use import FINALIZER, FinalizerChange, finalizer_changes

DELETED = "2026-11-27T06:00:00Z"


def meta(name: str, finalizers: list[str], deleting: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resourceVersion": "7", "finalizers": finalizers}
    if deleting:
        out["deletionTimestamp"] = DELETED
    return out


def flavor(name: str, finalizers: list[str] | None = None, deleting: bool = False) -> ResourceFlavor:
    return ResourceFlavor.model_validate({"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
                                          "metadata": meta(name, finalizers or [], deleting), "spec": {}})


def queue(name: str, flavors: list[str], finalizers: list[str] | None = None, deleting: bool = False) -> ClusterQueue:
    groups = [{"coveredResources": ["cpu"], "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "1"}]}
                                                        for f in flavors]}] if flavors else []
    return ClusterQueue.model_validate({"apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE,
                                        "metadata": meta(name, finalizers or [], deleting),
                                        "spec": {"resourceGroups": groups}})


def names(changes: list[FinalizerChange]) -> list[tuple[str, str, bool]]:
    return [(ch.kind, ch.name, ch.add) for ch in changes]


RF, CQ = c.KIND_RESOURCE_FLAVOR, c.KIND_CLUSTER_QUEUE


@pytest.mark.parametrize(("flavors", "queues", "holding", "expected"), [
    pytest.param([flavor("a")], [queue("q", ["a"])], [], [(RF, "a", True), (CQ, "q", True)],
                 id="live objects without the finalizer get it, used or not"),
    pytest.param([flavor("a", [FINALIZER])], [queue("q", ["a"], [FINALIZER])], ["q"], [],
                 id="live objects with it are left alone"),
    pytest.param([flavor("a", [FINALIZER], deleting=True)], [queue("q", ["a"], [FINALIZER])], [], [],
                 id="a deleted flavor a ClusterQueue names stays terminating"),
    pytest.param([flavor("a", [FINALIZER], deleting=True)], [queue("q", ["b"], [FINALIZER])], [], [(RF, "a", False)],
                 id="a deleted flavor no queue names loses it"),
    pytest.param([], [queue("q", [], [FINALIZER], deleting=True)], ["q"], [],
                 id="a deleted queue holding quota stays terminating"),
    pytest.param([], [queue("q", [], [FINALIZER], deleting=True)], ["other"], [(CQ, "q", False)],
                 id="a deleted queue holding nothing loses it"),
    pytest.param([flavor("a", [FINALIZER], deleting=True)], [queue("q", ["a"], [FINALIZER], deleting=True)], [],
                 [(CQ, "q", False)], id="a deleted queue still names its flavor until it is gone"),
    pytest.param([flavor("a", deleting=True)], [], [], [], id="a deleted object never gets it again"),
])
def test_finalizer_changes(flavors: list[ResourceFlavor], queues: list[ClusterQueue], holding: list[str],
                           expected: list[tuple[str, str, bool]]) -> None:
    changes = finalizer_changes({str(f.metadata.name): f for f in flavors}, {str(q.metadata.name): q for q in queues},
                                holding)
    assert names(changes) == expected


def test_a_change_keeps_the_other_finalizers_and_the_version_it_was_decided_on() -> None:
    (change,) = finalizer_changes({"a": flavor("a", ["x.io/other", FINALIZER], deleting=True)}, {}, [])
    assert change.finalizers == ("x.io/other",) and change.resource_version == "7"
    (added,) = finalizer_changes({"a": flavor("a", ["x.io/other"])}, {}, [])
    assert added.finalizers == ("x.io/other", FINALIZER)


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.sets(st.sampled_from("abc"), max_size=2)),
                max_size=4),
       st.sets(st.sampled_from("abc")), st.sets(st.sampled_from("abc")))
def test_deletion_completes_exactly_when_nothing_uses_the_object(
        queue_specs: list[tuple[bool, bool, set[str]]], deleting_flavors: set[str], holding: set[str]) -> None:
    """Oracle: a finalized, deleted flavor is released iff no queue names it; a queue iff it holds no quota."""
    flavors = {n: flavor(n, [FINALIZER], deleting=n in deleting_flavors) for n in "abc"}
    queues = {f"q{i}": queue(f"q{i}", sorted(fs), [FINALIZER] if has else [], deleting=deleting and has)
              for i, (has, deleting, fs) in enumerate(queue_specs)}
    holding_queues = {f"q{'abc'.index(h)}" for h in holding}
    changes = {(ch.kind, ch.name): ch.add for ch in finalizer_changes(flavors, queues, holding_queues)}
    named = {f for _, _, fs in queue_specs for f in fs}
    for n in "abc":
        assert changes.get((RF, n)) == (False if n in deleting_flavors and n not in named else None)
    for name, q in queues.items():
        has = FINALIZER in q.metadata.finalizers
        deleting = q.metadata.deletion_timestamp is not None
        want = True if not has and not deleting else (False if deleting and name not in holding_queues else None)
        assert changes.get((CQ, name)) == want
