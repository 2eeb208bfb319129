"""Topology validation: level count, label syntax, uniqueness, hostname placement, immutability."""

from __future__ import annotations

import pytest

from tests.unit.webhooks.manifests import BLOCK, RACK, Case, cases, valid_topology
from webhooks.validation import validate, validate_update

HOST = "kubernetes.io/hostname"
LEVELS = "spec.levels"


@cases(
    Case("three levels block rack host are accepted", valid_topology().levels(BLOCK, RACK, HOST)),
    Case("a single hostname level is accepted", valid_topology().levels(HOST)),
    Case("sixteen levels are the maximum", valid_topology().levels(*[f"l{i}" for i in range(16)])),
    Case("served as v1beta1 too", valid_topology().set("apiVersion", "kueue.x-k8s.io/v1beta1")),
    Case("no levels at all", valid_topology().levels(), want_errors=(LEVELS,)),
    Case("missing spec", valid_topology().drop("spec"), want_errors=("spec",)),
    Case("seventeen levels are too many", valid_topology().levels(*[f"l{i}" for i in range(17)]),
         want_errors=(LEVELS,)),
    Case("the same label twice", valid_topology().levels(BLOCK, RACK, BLOCK),
         want_errors=("spec.levels[2].nodeLabel",)),
    Case("hostname above the rack level", valid_topology().levels(BLOCK, HOST, RACK),
         want_errors=("spec.levels[1].nodeLabel",)),
    Case("a label with a space", valid_topology().levels(BLOCK, "rack id"),
         want_errors=("spec.levels[1].nodeLabel",)),
    Case("a label with an empty prefix", valid_topology().levels("/rack"),
         want_errors=("spec.levels[0].nodeLabel",)),
    Case("a level without nodeLabel", valid_topology().set("spec.levels", [{}]),
         want_errors=("spec.levels[0].nodeLabel",)),
    Case("levels is not a list", valid_topology().set("spec.levels", "rack"), want_errors=(LEVELS,)),
    Case("an uppercase object name", valid_topology("GPU"), want_errors=("metadata.name",)),
)
def test_topology(case: Case) -> None:
    assert sorted(e.path for e in validate(case.manifest())) == sorted(case.want_errors)


def test_duplicate_and_misplaced_hostname_messages_name_the_value() -> None:
    errs = validate(valid_topology().levels(HOST, RACK, RACK).build())
    assert [str(e) for e in errs] == [
        'spec.levels[0].nodeLabel: Invalid value: "kubernetes.io/hostname": '
        "'kubernetes.io/hostname' may only be the lowest (last) level, found at 1 of 3",
        'spec.levels[2].nodeLabel: Duplicate value: "cloud.provider.com/topology-rack"',
    ]


@pytest.mark.parametrize(("old_levels", "new_levels", "want_errors"), [
    pytest.param((BLOCK, RACK), (BLOCK, RACK), [], id="unchanged levels may be updated"),
    pytest.param((BLOCK, RACK), (BLOCK, RACK, HOST), [LEVELS], id="adding a level is refused"),
    pytest.param((BLOCK, RACK), (RACK, BLOCK), [LEVELS], id="reordering levels is refused"),
])
def test_topology_levels_are_immutable(old_levels: tuple[str, ...], new_levels: tuple[str, ...],
                                       want_errors: list[str]) -> None:
    old = valid_topology().levels(*old_levels).build()
    new = valid_topology().levels(*new_levels).label("team", "ml").build()
    assert [e.path for e in validate_update(old, new)] == want_errors
