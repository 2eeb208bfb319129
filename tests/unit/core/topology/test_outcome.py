"""The result types of the topology engine: a slice's labels are a read-only mapping shared per domain,
and an assignment's wire form is Kueue's compact encoding, a fresh copy each time."""

from __future__ import annotations

import json

import pytest

from controller.api.topology_assignment import AssignedDomain, encode
from controller.api.topology_assignment import TopologyAssignment as WireAssignment
from controller.core.topology import Usage, assign
from controller.core.topology.outcome import DomainLabels, Slice, TopologyAssignment
from tests.unit.core.topology.scenario import (
    BLOCK,
    HOST,
    LEVELS,
    RACK,
    expect_success,
    gpu_node,
    make_podset,
    topology,
)

LABELS = DomainLabels(LEVELS, ("b1", "r1", "x1"))


def test_domain_labels_read_as_the_dict_of_level_values() -> None:
    assert LABELS == {BLOCK: "b1", RACK: "r1", HOST: "x1"}
    assert {BLOCK: "b1", RACK: "r1", HOST: "x1"} == LABELS
    assert LABELS != {BLOCK: "b1", RACK: "r1", HOST: "x2"}
    assert (LABELS[RACK], len(LABELS), list(LABELS)) == ("r1", 3, list(LEVELS))
    assert repr(LABELS) == repr({BLOCK: "b1", RACK: "r1", HOST: "x1"})


def test_a_level_the_domain_does_not_have_is_a_key_error() -> None:
    assert "zone" not in LABELS
    assert LABELS.get("zone") is None
    with pytest.raises(KeyError, match="zone"):
        LABELS["zone"]


def test_an_assignment_is_written_in_kueues_compact_form_and_reads_back_as_its_slices() -> None:
    slices = (Slice(LABELS, 2), Slice(DomainLabels(LEVELS, ("b1", "r1", "x2")), 2))
    out = json.loads(json.dumps(TopologyAssignment(LEVELS, slices).to_dict()))
    assert out == {"levels": list(LEVELS), "slices": [{
        "domainCount": 2, "podCounts": {"universal": 2},
        "valuesPerLevel": [{"universal": "b1"}, {"universal": "r1"},
                           {"individual": {"prefix": "x", "roots": ["1", "2"]}}]}]}
    assert [(d.node_labels, d.count) for d in WireAssignment.model_validate(out).domains()] == [
        (dict(s.node_labels), s.count) for s in slices]


# Two hosts in one rack:
#
#        b1
#        |
#        r1
#      /    \
#   x1(2)  x2(2)
def test_results_naming_the_same_host_share_its_labels() -> None:
    topo = topology([gpu_node("x1", "b1", "r1", 2), gpu_node("x2", "b1", "r1", 2)])
    first = expect_success(assign(topo, Usage(), [make_podset(3).require(RACK).build()])).assignments[0]
    again = expect_success(assign(topo, Usage(), [make_podset(4).require(RACK).build()])).assignments[0]
    assert [s.node_labels for s in first.slices] == [{BLOCK: "b1", RACK: "r1", HOST: h} for h in ("x1", "x2")]
    assert all(a.node_labels is b.node_labels for a, b in zip(first.slices, again.slices, strict=True))


def test_an_assignment_written_again_is_an_equal_copy_of_its_own() -> None:
    ta = TopologyAssignment(LEVELS, (Slice(LABELS, 2), Slice(DomainLabels(LEVELS, ("b1", "r1", "x2")), 1)))
    first = ta.to_dict()
    first["slices"][0]["podCounts"]["individual"].append(99)  # a caller changing its copy
    first["levels"].clear()
    again = ta.to_dict()
    assert again == encode(LEVELS, [AssignedDomain(("b1", "r1", "x1"), 2),
                                    AssignedDomain(("b1", "r1", "x2"), 1)]).to_dict()
    assert again["levels"] == list(LEVELS) and again["slices"][0]["podCounts"] == {"individual": [2, 1]}


def test_an_assignment_of_many_slices_is_written_as_one_of_few() -> None:
    # 100 hosts named apart (no shared prefix to compact), more than the encodings kept are made of.
    slices = tuple(Slice(DomainLabels(LEVELS, ("b1", f"r{i % 3}", f"{chr(97 + i % 26)}{i}")), 1 + i % 2)
                   for i in range(100))
    ta = TopologyAssignment(LEVELS, slices)
    fresh = encode(LEVELS, [AssignedDomain(s.node_labels.level_values, s.count)  # type: ignore[attr-defined]
                            for s in slices]).to_dict()
    assert ta.to_dict() == fresh
    assert sum(d.count for d in WireAssignment.model_validate(ta.to_dict()).domains()) == 150
