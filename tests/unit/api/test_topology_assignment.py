"""The compact v1beta2 TopologyAssignment: the encodings Kueue writes, expansion back to the same
domains, v1beta1 and the KEP's nodeLabels form as input, and shapes that cannot be expanded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from controller.api import constants as c
from controller.api import topology_assignment as ta_module
from controller.api.topology_assignment import (
    AssignedDomain,
    TopologyAssignment,
    encode,
    encode_hostname_prefix_runs,
    read_node_label_slices,
    v1beta1_to_v1beta2,
    v1beta2_to_v1beta1,
)

HOST = c.LABEL_HOSTNAME


def domains(*items: tuple[tuple[str, ...], int]) -> list[AssignedDomain]:
    return [AssignedDomain(values, count) for values, count in items]


def individual(roots: list[str], prefix: str | None = None, suffix: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"roots": roots}
    if prefix is not None:
        out["prefix"] = prefix
    if suffix is not None:
        out["suffix"] = suffix
    return {"individual": out}


def one_slice(n: int, counts: int | list[int], *levels: dict[str, Any]) -> dict[str, Any]:
    pods = {"universal": counts} if isinstance(counts, int) else {"individual": counts}
    return {"domainCount": n, "valuesPerLevel": list(levels), "podCounts": pods}


@dataclass(frozen=True)
class Case:
    name: str
    levels: list[str]
    domains: list[AssignedDomain]
    want: dict[str, Any]


# Kueue's own table (pkg/util/tas tas_assignment_test.go): one compact slice per assignment.
SINGLE_SLICE_CASES = [
    Case("no domain: no slice", ["a", "b"], [], {"levels": ["a", "b"]}),
    Case("one domain: every level universal", ["a", "b"], domains((("a1", "b1"), 1)),
         {"levels": ["a", "b"], "slices": [one_slice(1, 1, {"universal": "a1"}, {"universal": "b1"})]}),
    Case("values differing only in their last character keep the rest as prefix", ["a", "b"],
         domains((("a1", "b1"), 1), (("a2", "b2"), 1)),
         {"levels": ["a", "b"], "slices": [one_slice(2, 1, individual(["1", "2"], "a"), individual(["1", "2"], "b"))]}),
    Case("a common prefix and suffix both factored out, pod counts individual", ["a", "b"],
         domains((("p.a1.s", "p.b1.s"), 1), (("p.a2.s", "p.b2.s"), 2)),
         {"levels": ["a", "b"], "slices": [one_slice(2, [1, 2], individual(["1", "2"], "p.a", ".s"),
                                                     individual(["1", "2"], "p.b", ".s"))]}),
    Case("a level where every domain agrees is universal", ["a", "b"],
         domains((("a1", "b1"), 3), (("a1", "b2"), 3)),
         {"levels": ["a", "b"], "slices": [one_slice(2, 3, {"universal": "a1"}, individual(["1", "2"], "b"))]}),
    Case("the prefix shrinks to what every value shares", ["a"], domains((("abc1",), 1), (("abd2",), 1), (("ax3",), 1)),
         {"levels": ["a"], "slices": [one_slice(3, 1, individual(["bc1", "bd2", "x3"], "a"))]}),
    Case("the suffix shrinks to what every value shares", ["a"], domains((("1cba",), 1), (("2dba",), 1), (("3xa",), 1)),
         {"levels": ["a"], "slices": [one_slice(3, 1, individual(["1cb", "2db", "3x"], suffix="a"))]}),
    Case("overlapping prefix and suffix: the prefix gives way (ababa, aba)", ["a"],
         domains((("ababa",), 1), (("aba",), 1)),
         {"levels": ["a"], "slices": [one_slice(2, 1, individual(["ab", ""], suffix="aba"))]}),
    Case("one value is a prefix of the other: empty root", ["a"], domains((("x",), 1), (("xy",), 1)),
         {"levels": ["a"], "slices": [one_slice(2, 1, individual(["", "y"], "x"))]}),
]


@pytest.mark.parametrize("case", SINGLE_SLICE_CASES, ids=lambda case: case.name)
def test_kueues_single_slice_encodings(case: Case) -> None:
    got = encode(case.levels, case.domains)
    assert got.to_dict() == case.want
    assert got.assigned_domains() == case.domains


GKE = domains((("gke-c-pool-a-hash1-aa",), 3), (("gke-c-pool-a-hash1-bb",), 3),
              (("gke-c-pool-b-hash2-cc",), 4), (("gke-c-pool-b-hash2-dd",), 5))

# Kueue's hostname-prefix runs (TASAssignmentsEncodingByHostnamePrefix): consecutive hostnames sharing
# their longest reusable '-'-delimited prefix form one slice.
RUN_CASES = [
    Case("GKE node pools", [HOST], GKE, {"levels": [HOST], "slices": [
        one_slice(2, 3, individual(["aa", "bb"], "gke-c-pool-a-hash1-")),
        one_slice(2, [4, 5], individual(["cc", "dd"], "gke-c-pool-b-hash2-"))]}),
    Case("EKS private DNS names", [HOST], domains(
        (("ip-10-24-34-0.us-west-2.compute.internal",), 2), (("ip-10-24-34-1.us-west-2.compute.internal",), 2),
        (("ip-10-24-35-0.us-west-2.compute.internal",), 3), (("ip-10-24-35-1.us-west-2.compute.internal",), 4)),
        {"levels": [HOST], "slices": [
            one_slice(2, 2, individual(["0", "1"], "ip-10-24-34-", ".us-west-2.compute.internal")),
            one_slice(2, [3, 4], individual(["0", "1"], "ip-10-24-35-", ".us-west-2.compute.internal"))]}),
    Case("AKS scale sets: the slice's own prefix goes past the run's key", [HOST], domains(
        (("aks-nodepool1-12345678-vmss000000",), 1), (("aks-nodepool1-12345678-vmss000001",), 1),
        (("aks-nodepool2-87654321-vmss000000",), 2), (("aks-nodepool2-87654321-vmss000001",), 3)),
        {"levels": [HOST], "slices": [
            one_slice(2, 1, individual(["0", "1"], "aks-nodepool1-12345678-vmss00000")),
            one_slice(2, [2, 3], individual(["0", "1"], "aks-nodepool2-87654321-vmss00000"))]}),
    Case("runs follow the domain order, never regroup it", [HOST], [GKE[0], GKE[2], GKE[1], GKE[3]],
         {"levels": [HOST], "slices": [
             one_slice(1, 3, {"universal": "gke-c-pool-a-hash1-aa"}),
             one_slice(1, 4, {"universal": "gke-c-pool-b-hash2-cc"}),
             one_slice(1, 3, {"universal": "gke-c-pool-a-hash1-bb"}),
             one_slice(1, 5, {"universal": "gke-c-pool-b-hash2-dd"})]}),
    Case("a lowest level that is not the hostname: one slice", ["rack"], domains((("rack-a",), 1), (("rack-b",), 2)),
         {"levels": ["rack"], "slices": [one_slice(2, [1, 2], individual(["a", "b"], "rack-"))]}),
    Case("no prefix used twice: one slice", [HOST], domains((("node-a",), 1), (("host-b",), 1)),
         {"levels": [HOST], "slices": [one_slice(2, 1, individual(["node-a", "host-b"]))]}),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=lambda case: case.name)
def test_kueues_hostname_prefix_runs(case: Case) -> None:
    got = encode_hostname_prefix_runs(case.levels, case.domains)
    assert got.to_dict() == case.want
    assert got.assigned_domains() == case.domains


def _size(ta: TopologyAssignment) -> int:
    return len(json.dumps(ta.to_dict(), separators=(",", ":")))


def pools(pool_count: int, hosts_per_pool: int) -> list[AssignedDomain]:
    return [AssignedDomain((f"pool-{p}-node-{n:05d}",), 1) for p in range(pool_count) for n in range(hosts_per_pool)]


@pytest.mark.parametrize(("name", "hosts", "want_runs"), [
    ("four hosts of two pools: the single slice is smaller", GKE, False),
    ("two large pools: the runs are smaller", pools(2, 500), True),
])
def test_the_smaller_of_runs_and_one_slice_is_written(name: str, hosts: list[AssignedDomain], want_runs: bool) -> None:
    runs, single = encode_hostname_prefix_runs([HOST], hosts), encode([HOST], hosts, by_hostname_prefix=False)
    got = encode([HOST], hosts)
    assert got == (runs if want_runs else single)
    assert _size(got) == min(_size(runs), _size(single))


def test_more_runs_than_slices_allowed_back_off_to_a_shorter_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ta_module, "MAX_SLICES", 2)
    hosts = [AssignedDomain((f"dc-{dc}-rack{r}-node-{n}",), 1) for dc in "ab" for r in range(3) for n in range(2)]
    got = encode_hostname_prefix_runs([HOST], hosts)
    assert [s.values_per_level[0].individual.prefix for s in got.slices if s.values_per_level[0].individual] == [
        "dc-a-rack", "dc-b-rack"]
    assert got.assigned_domains() == hosts


def test_when_no_prefix_depth_fits_all_domains_are_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ta_module, "MAX_SLICES", 1)
    hosts = pools(3, 2)
    assert len(encode_hostname_prefix_runs([HOST], hosts).slices) == 1


def test_a_run_longer_than_a_slice_holds_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ta_module, "MAX_DOMAINS_PER_SLICE", 4)
    hosts = pools(1, 10)
    got = encode([HOST], hosts)
    assert [s.domain_count for s in got.slices] == [4, 4, 2]
    assert got.assigned_domains() == hosts


# -- properties -----------------------------------------------------------------------------------

_chars = st.sampled_from("ab-.1")
_values = st.text(_chars, min_size=1, max_size=6)


@st.composite
def assignments(draw: st.DrawFn) -> tuple[list[str], list[AssignedDomain]]:
    """Random levels (sometimes the hostname last) and distinct domains with random counts."""
    level_count = draw(st.integers(1, 3))
    levels = [f"l{i}" for i in range(level_count - 1)] + [draw(st.sampled_from([HOST, "lowest"]))]
    rows = draw(st.lists(st.tuples(*[_values] * level_count), max_size=12, unique=True))
    return levels, [AssignedDomain(row, draw(st.integers(1, 4))) for row in rows]


def oracle_level(values: list[str]) -> dict[str, Any]:
    """Kueue's per-level compaction written naively: grow the prefix and suffix one character at a
    time while every value shares it, then give way to the suffix where they overlap."""
    if len(set(values)) == 1:
        return {"universal": values[0]}
    prefix = suffix = 0
    while all(len(v) > prefix and v[prefix] == values[0][prefix] for v in values):
        prefix += 1
    while all(len(v) > suffix and v[-1 - suffix] == values[0][-1 - suffix] for v in values):
        suffix += 1
    prefix = min(prefix, min(map(len, values)) - suffix)
    return individual([v[prefix:len(v) - suffix] for v in values],
                      values[0][:prefix] or None, values[0][len(values[0]) - suffix:] or None)


@settings(max_examples=300, deadline=None)
@given(assignments())
def test_encoding_then_expanding_gives_back_the_same_domains(case: tuple[list[str], list[AssignedDomain]]) -> None:
    levels, ds = case
    ta = encode(levels, ds)
    assert ta.assigned_domains() == ds
    assert [(d.node_labels, d.count) for d in ta.domains()] == [(dict(zip(levels, d.values, strict=True)), d.count)
                                                              for d in ds]
    assert ta.total_count == sum(d.count for d in ds)
    assert TopologyAssignment.model_validate(json.loads(json.dumps(ta.to_dict()))) == ta


@settings(max_examples=300, deadline=None)
@given(assignments())
def test_every_slice_is_compacted_as_the_oracle_does(case: tuple[list[str], list[AssignedDomain]]) -> None:
    levels, ds = case
    at = 0
    for sl in encode(levels, ds).slices:
        mine = ds[at:at + sl.domain_count]
        at += sl.domain_count
        assert [v.to_dict() for v in sl.values_per_level] == [
            oracle_level([d.values[i] for d in mine]) for i in range(len(levels))]
        counts = [d.count for d in mine]
        assert sl.pod_counts.to_dict() == ({"universal": counts[0]} if len(set(counts)) == 1
                                           else {"individual": counts})
    assert at == len(ds)


@settings(max_examples=300, deadline=None)
@given(assignments())
def test_v1beta1_and_back_gives_the_same_compact_form(case: tuple[list[str], list[AssignedDomain]]) -> None:
    levels, ds = case
    compact = encode(levels, ds).to_dict()
    v1beta1 = v1beta2_to_v1beta1(compact)
    assert isinstance(v1beta1, dict)
    assert v1beta1 == {"levels": levels, "domains": [{"values": list(d.values), "count": d.count} for d in ds]}
    assert v1beta1_to_v1beta2(v1beta1) == compact


# -- the KEP's nodeLabels form, input only --------------------------------------------------------

def test_the_keps_node_label_slices_parse_into_the_compact_form() -> None:
    # An API round trip sorts label keys: the levels are the first slice's keys as they come.
    legacy = {"slices": [{"nodeLabels": {"block": "b1", "rack": "r1"}, "count": 2},
                         {"nodeLabels": {"rack": "r2", "block": "b1"}, "count": 2}]}
    ta = TopologyAssignment.model_validate(legacy)
    assert ta.to_dict() == {"levels": ["block", "rack"], "slices": [
        one_slice(2, 2, {"universal": "b1"}, individual(["1", "2"], "r"))]}
    assert v1beta1_to_v1beta2(legacy) == ta.to_dict()


@pytest.mark.parametrize(("slices", "want"), [
    ([{"nodeLabels": {"block": "b1"}, "count": 1}, {"nodeLabels": {"rack": "r1"}, "count": 1}],
     "slices[1].nodeLabels: names ['rack'], every slice must name the same levels as slices[0] (['block'])"),
    ([{"nodeLabels": {}, "count": 1}], "slices[0].nodeLabels: must map every topology level to a value"),
    ([{"nodeLabels": {"block": "b1"}, "count": 0}], "slices[0].count: 0, must be an integer of at least 1"),
])
def test_a_node_label_form_that_names_no_domain_is_refused_naming_the_field(slices: list[Any], want: str) -> None:
    assert read_node_label_slices(slices) == want
    with pytest.raises(ValidationError, match=want.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        TopologyAssignment.model_validate({"slices": slices})


@pytest.mark.parametrize(("ta", "want"), [
    ({"levels": ["a", "b"], "slices": [one_slice(1, 1, {"universal": "x"})]},
     "slices[0].valuesPerLevel: has 1 entries, must have one per level (2)"),
    ({"levels": ["a"], "slices": [one_slice(2, 1, individual(["x"]))]},
     "slices[0].valuesPerLevel[0].individual.roots: has 1 items, must have domainCount (2)"),
    ({"levels": ["a"], "slices": [one_slice(2, [1], individual(["x", "y"]))]},
     "slices[0].podCounts.individual: has 1 items, must have domainCount (2)"),
    ({"levels": ["a"], "slices": [one_slice(1, 1, {})]},
     "slices[0].valuesPerLevel[0]: exactly one of universal, individual must be set"),
    ({"levels": ["a"], "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "x"}], "podCounts": {}}]},
     "slices[0].podCounts: exactly one of universal, individual must be set"),
])
def test_a_compact_form_that_cannot_be_expanded_is_refused_naming_the_field(ta: dict[str, Any], want: str) -> None:
    assert v1beta2_to_v1beta1(ta) == want
