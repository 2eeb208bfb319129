"""A pod set's TopologyAssignment in Kueue's compact v1beta2 form, and its pure encode/expand functions.

Written by the admission path (`controller.core.topology.outcome` encodes what the topology engine
chose), read everywhere else through the expanded view `TopologyAssignment.domains()` (the ungater,
restoring, the cache, `tasq explain`/`simulate`); `controller.api.conversion` turns it into v1beta1's
`levels` + `domains` and back. The KEP's per-slice `nodeLabels` form, which tasq wrote before, is read
as input only (a stored Workload parses into the compact form).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Annotated, Any, Final

from pydantic import Field, ValidationError, model_validator

from controller.api import constants as c
from controller.api.meta import ApiModel, Int32, LabelKeyStr, omitempty_list, schema_only

MAX_LEVELS: Final = 16
MAX_DOMAINS_PER_SLICE: Final = 100_000
"""Kueue's MaxItems of `roots` and `podCounts.individual`: a longer run is cut into several slices."""
MAX_SLICES: Final = 1_000
"""Kueue's MaxItems of `slices`: hostname-prefix runs are merged until they fit."""
MAX_VALUE_LENGTH: Final = 63

_Value = Annotated[str, schema_only(maxLength=MAX_VALUE_LENGTH)]


# -- the wire models ------------------------------------------------------------------------------

class TopologyAssignmentSliceLevelIndividualValues(ApiModel):
    """The values of one level, one per domain of the slice: prefix + root + suffix."""

    prefix: _Value | None = None
    """A prefix common to every value of this level in the slice (absent or non-empty)."""
    suffix: _Value | None = None
    """A suffix common to every value of this level in the slice (absent or non-empty)."""
    roots: list[_Value] = omitempty_list(minItems=1, maxItems=MAX_DOMAINS_PER_SLICE)
    """Each domain's value without the prefix and suffix; as many as the slice's domainCount."""


class TopologyAssignmentSliceLevelValues(ApiModel):
    """The values of one topology level for the domains of a slice: exactly one of universal, individual."""

    universal: _Value | None = None
    """The value every domain of the slice has at this level."""
    individual: TopologyAssignmentSliceLevelIndividualValues | None = None
    """One value per domain of the slice."""

    def values(self, domain_count: int) -> list[str]:
        """The level's value for each of the slice's domains, in order."""
        if self.universal is not None:
            return [self.universal] * domain_count
        ind = self.individual
        assert ind is not None, "checked when parsed"
        prefix, suffix = ind.prefix or "", ind.suffix or ""
        if not prefix and not suffix:
            return list(ind.roots)
        return [prefix + root + suffix for root in ind.roots]


class TopologyAssignmentSlicePodCounts(ApiModel):
    """How many pods go to each domain of a slice: exactly one of universal, individual."""

    universal: Annotated[Int32, schema_only(minimum=1)] | None = None
    """The number of pods in every domain of the slice."""
    individual: list[Annotated[Int32, schema_only(minimum=1)]] | None = Field(default=None, json_schema_extra={
        "minItems": 1, "maxItems": MAX_DOMAINS_PER_SLICE})
    """The number of pods in each domain of the slice; as many as its domainCount."""

    def counts(self, domain_count: int) -> list[int]:
        if self.universal is not None:
            return [self.universal] * domain_count
        assert self.individual is not None, "checked when parsed"
        return list(self.individual)


class TopologyAssignmentSlice(ApiModel):
    """Consecutive domains of the assignment: their values level by level and their pod counts."""

    domain_count: Annotated[Int32, schema_only(minimum=1)]
    """The number of domains in this slice."""
    values_per_level: list[TopologyAssignmentSliceLevelValues] = omitempty_list(minItems=1, maxItems=MAX_LEVELS)
    """One entry per level of the assignment, in the same order: the domains' values at that level."""
    pod_counts: TopologyAssignmentSlicePodCounts = Field(default_factory=TopologyAssignmentSlicePodCounts)
    """The number of pods assigned to each domain of this slice."""


@dataclass(frozen=True, slots=True)
class AssignedDomain:
    """One domain of an assignment: its value at each level (the assignment's level order), and
    how many pods go there. Encoding takes these in the order slots are numbered."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class DomainPods:
    """One domain of the expanded view: its labels (level -> value) and its pod count."""

    node_labels: Mapping[str, str]
    count: int


class TopologyAssignment(ApiModel):
    """Where a pod set's pods go: the topology domains, in order, and how many pods each gets."""

    # Parsing also reads the KEP's `slices[{nodeLabels, count}]` into this form; a slice whose lists
    # disagree with its `domainCount` or the `levels` is refused (`shape_problem`).

    levels: list[LabelKeyStr] = omitempty_list(minItems=1, maxItems=MAX_LEVELS)
    """The node labels of the topology levels the domains are named by, widest first."""
    slices: list[TopologyAssignmentSlice] = omitempty_list(maxItems=MAX_SLICES)
    """Groups of consecutive domains; all the slices, one after another, list every domain once."""

    @model_validator(mode="before")
    @classmethod
    def _read_node_label_slices(cls, data: Any) -> Any:
        """The KEP's form has no `levels` and slices of `nodeLabels`: re-encode it compactly."""
        if not isinstance(data, Mapping) or "levels" in data:
            return data
        slices = data.get("slices")
        if not isinstance(slices, list) or not slices or not all(
                isinstance(s, Mapping) and "nodeLabels" in s for s in slices):
            return data
        read = read_node_label_slices(slices)
        if isinstance(read, str):
            raise ValueError(read)
        return encode(*read).to_dict()

    @model_validator(mode="after")
    def _check_shape(self) -> TopologyAssignment:
        problem = shape_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def domain_count(self) -> int:
        return sum(s.domain_count for s in self.slices)

    @property
    def total_count(self) -> int:
        """Pods over every domain."""
        return sum(s.pod_counts.universal * s.domain_count if s.pod_counts.universal is not None
                   else sum(s.pod_counts.individual or ()) for s in self.slices)

    def assigned_domains(self) -> list[AssignedDomain]:
        """Every domain in order, O(domains x levels): a slice's values are expanded level by level."""
        out: list[AssignedDomain] = []
        for sl in self.slices:
            n = sl.domain_count
            columns = [level.values(n) for level in sl.values_per_level]
            out.extend(map(AssignedDomain, zip(*columns, strict=True), sl.pod_counts.counts(n)))
        return out

    def domains(self) -> list[DomainPods]:
        """The expanded view every reader uses: each domain's labels and pod count, in slot order."""
        levels = tuple(self.levels)
        return [DomainPods(dict(zip(levels, d.values, strict=True)), d.count) for d in self.assigned_domains()]

    def to_v1beta1(self) -> dict[str, Any]:
        """v1beta1's `levels` + `domains[{values, count}]` (Kueue's expansion)."""
        return {"levels": list(self.levels),
                "domains": [{"values": list(d.values), "count": d.count} for d in self.assigned_domains()]}


def shape_problem(ta: TopologyAssignment) -> str | None:
    """What makes `ta` impossible to expand (Kueue's CEL rules on the type), naming the field path,
    or None. Bounds (counts of at least 1, lengths) are the schema's and the validators' to check."""
    for i, sl in enumerate(ta.slices):
        here = f"slices[{i}]"
        if len(sl.values_per_level) != len(ta.levels):
            return (f"{here}.valuesPerLevel: has {len(sl.values_per_level)} entries, must have one per "
                    f"level ({len(ta.levels)})")
        for j, level in enumerate(sl.values_per_level):
            if (level.universal is None) == (level.individual is None):
                return f"{here}.valuesPerLevel[{j}]: exactly one of universal, individual must be set"
            if level.individual is not None and len(level.individual.roots) != sl.domain_count:
                return (f"{here}.valuesPerLevel[{j}].individual.roots: has {len(level.individual.roots)} "
                        f"items, must have domainCount ({sl.domain_count})")
        counts = sl.pod_counts
        if (counts.universal is None) == (counts.individual is None):
            return f"{here}.podCounts: exactly one of universal, individual must be set"
        if counts.individual is not None and len(counts.individual) != sl.domain_count:
            return (f"{here}.podCounts.individual: has {len(counts.individual)} items, must have "
                    f"domainCount ({sl.domain_count})")
    return None


class TopologyDomainAssignment(ApiModel):
    """One domain of a v1beta1 assignment and its pods."""

    values: list[_Value] = omitempty_list(minItems=1, maxItems=MAX_LEVELS)
    """The domain's value at each level of the assignment, widest first."""
    count: Annotated[Int32, schema_only(minimum=1)]
    """The number of pods assigned to the domain."""


class NodeLabelSlice(ApiModel):
    """A domain in the form an earlier tasq stored: its level labels and its pods (read, never written)."""

    node_labels: dict[str, str] = Field(default_factory=dict)
    """The domain's value at each level, by the level's node label."""
    count: Annotated[Int32, schema_only(minimum=1)]
    """The number of pods assigned to the domain."""


class V1Beta1TopologyAssignment(ApiModel):
    """Where a pod set's pods go: the topology domains, in order, and how many pods each gets."""

    # v1beta1's schema only (controller.api.v1beta1): conversion works on the wire form
    # (`v1beta1_to_v1beta2`, `v1beta2_to_v1beta1`). `slices` keeps objects an earlier tasq stored as
    # v1beta1 readable.

    levels: list[LabelKeyStr] = omitempty_list(minItems=1, maxItems=MAX_LEVELS)
    """The node labels of the topology levels the domains are named by, widest first."""
    domains: list[TopologyDomainAssignment] = omitempty_list()
    """Every assigned domain, in order, with its pods."""
    slices: list[NodeLabelSlice] = omitempty_list()
    """The assignment as an earlier tasq wrote it (one entry per domain, by node labels); read only."""


# -- encoding (as Kueue's V1Beta2From) ------------------------------------------------------------

def _common_prefix(values: Sequence[str]) -> str:
    """The longest prefix of every value: that of the smallest and largest (lexicographically)."""
    low, high = min(values), max(values)
    n = 0
    for a, b in zip(low, high, strict=False):
        if a != b:
            break
        n += 1
    return low[:n]


def _level_values(values: Sequence[str]) -> TopologyAssignmentSliceLevelValues:
    """One level of one slice: universal when every value is the same; otherwise the longest common
    prefix and suffix factored out (the prefix shortened so the two never overlap) and the roots."""
    prefix = _common_prefix(values)
    longest = max(map(len, values))
    if len(prefix) == longest:
        return TopologyAssignmentSliceLevelValues(universal=prefix)
    suffix = _common_prefix([v[::-1] for v in values])[::-1]
    shortest = min(map(len, values))
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[:shortest - len(suffix)]
    end = len(suffix)
    roots = [v[len(prefix):len(v) - end] for v in values]
    return TopologyAssignmentSliceLevelValues(individual=TopologyAssignmentSliceLevelIndividualValues(
        prefix=prefix or None, suffix=suffix or None, roots=roots))


def _slice(level_count: int, domains: Sequence[AssignedDomain]) -> TopologyAssignmentSlice:
    """Kueue's compact slice of consecutive domains: each level's values compacted, pod counts
    universal when they agree."""
    per_level = [_level_values([d.values[i] for d in domains]) for i in range(level_count)]
    counts = [d.count for d in domains]
    pods = (TopologyAssignmentSlicePodCounts(universal=counts[0]) if counts.count(counts[0]) == len(counts)
            else TopologyAssignmentSlicePodCounts(individual=counts))
    return TopologyAssignmentSlice(domain_count=len(domains), values_per_level=per_level, pod_counts=pods)


def _dash_prefixes(host: str) -> list[str]:
    """Every prefix of `host` ending in '-' that is not the whole of it, shortest first."""
    out = []
    at = host.find("-")
    while 0 <= at < len(host) - 1:
        out.append(host[:at + 1])
        at = host.find("-", at + 1)
    return out


def _hostname_prefix_keys(domains: Sequence[AssignedDomain]) -> list[str] | None:
    """Each domain's reusable hostname prefix: the longest prefix ending in '-' (not the last
    character) that at least two hostnames share, at most `depth` dashes deep; the depth backs off
    from the deepest until the runs of equal keys make at most MAX_SLICES slices (None: none does)."""
    candidates = [_dash_prefixes(d.values[-1]) for d in domains]
    uses = Counter(chain.from_iterable(candidates))
    # deepest[i][j]: the longest reusable prefix among host i's first j+1 candidates ("" for none).
    deepest = []
    for prefixes in candidates:
        best, row = "", []
        for prefix in prefixes:
            if uses[prefix] >= 2:
                best = prefix
            row.append(best)
        deepest.append(row)
    for depth in range(max(map(len, candidates), default=0), 0, -1):
        keys = [row[min(depth, len(row)) - 1] if row else "" for row in deepest]
        if sum(-(-len(run) // MAX_DOMAINS_PER_SLICE) for run in _runs(keys)) <= MAX_SLICES:
            return keys
    return None


def _runs(keys: Sequence[str]) -> list[range]:
    """Index ranges of consecutive equal keys, in order (keys a a b a: 0-2, 2-3, 3-4)."""
    out, start = [], 0
    for i in range(1, len(keys)):
        if keys[i] != keys[start]:
            out.append(range(start, i))
            start = i
    out.append(range(start, len(keys)))
    return out


def encode_hostname_prefix_runs(levels: Sequence[str], domains: Sequence[AssignedDomain]) -> TopologyAssignment:
    """One slice per run of consecutive domains sharing a reusable hostname prefix (when the lowest
    level is the hostname), each run cut at MAX_DOMAINS_PER_SLICE."""
    keys = (_hostname_prefix_keys(domains)
            if len(domains) > 1 and levels and levels[-1] == c.LABEL_HOSTNAME else None)
    runs = _runs(keys) if keys else [range(len(domains))]
    slices = [_slice(len(levels), domains[run.start + at:min(run.stop, run.start + at + MAX_DOMAINS_PER_SLICE)])
              for run in runs for at in range(0, len(run), MAX_DOMAINS_PER_SLICE)]
    return TopologyAssignment(levels=list(levels), slices=slices)


def _wire_size(ta: TopologyAssignment) -> int:
    return len(json.dumps(ta.to_dict(), separators=(",", ":")))


def encode(levels: Sequence[str], domains: Sequence[AssignedDomain], *,
           by_hostname_prefix: bool = True) -> TopologyAssignment:
    """The compact form of `domains` (in slot order), exactly as Kueue's V1Beta2From writes it.

    With `by_hostname_prefix` (Kueue's TASAssignmentsEncodingByHostnamePrefix, on by default) the
    domains are split into runs sharing a hostname prefix; when that gives more than one slice, the
    single compact slice is written instead if its JSON is strictly smaller (and the assignment
    fits one slice). Without it: one slice for all domains. No domain: no slice."""
    if not domains:
        return TopologyAssignment(levels=list(levels), slices=[])
    if not by_hostname_prefix:
        return TopologyAssignment(levels=list(levels), slices=[_slice(len(levels), domains)])
    runs = encode_hostname_prefix_runs(levels, domains)
    # One run is the single slice itself; the single slice is built only to compare with several
    # (the admission cycle encodes one assignment per admitted pod set, most of them one run).
    if len(runs.slices) <= 1 or len(domains) > MAX_DOMAINS_PER_SLICE:
        return runs
    single = TopologyAssignment(levels=list(levels), slices=[_slice(len(levels), domains)])
    return single if _wire_size(single) < _wire_size(runs) else runs


# -- other forms, read as input -------------------------------------------------------------------

def read_node_label_slices(slices: Sequence[Any]) -> tuple[list[str], list[AssignedDomain]] | str:
    """The KEP's `slices[{nodeLabels, count}]`: levels are the first slice's label keys (in their
    order), every slice must name the same keys. A problem is returned as its message."""
    levels: list[str] = []
    domains: list[AssignedDomain] = []
    for i, sl in enumerate(slices):
        labels, count = (sl.get("nodeLabels"), sl.get("count")) if isinstance(sl, Mapping) else (None, None)
        if not isinstance(labels, Mapping) or not labels or not all(
                isinstance(v, str) for v in labels.values()):
            return f"slices[{i}].nodeLabels: must map every topology level to a value"
        if i == 0:
            levels = [str(k) for k in labels]
        elif set(labels) != set(levels):
            return (f"slices[{i}].nodeLabels: names {sorted(labels)}, every slice must name the same "
                    f"levels as slices[0] ({sorted(levels)})")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return f"slices[{i}].count: {count!r}, must be an integer of at least 1"
        domains.append(AssignedDomain(tuple(labels[k] for k in levels), count))
    return levels, domains


def read_v1beta1(ta: Mapping[str, Any]) -> tuple[list[str], list[AssignedDomain]] | str:
    """v1beta1's `levels` + `domains[{values, count}]` (or the KEP's nodeLabels slices, which tasq's
    v1beta1 held before); a problem is returned as its message naming the field."""
    if "levels" not in ta and isinstance(ta.get("slices"), list):
        return read_node_label_slices(ta["slices"])
    levels, domains = ta.get("levels"), ta.get("domains") or []
    if not isinstance(levels, list) or not all(isinstance(level, str) for level in levels):
        return "levels: must be a list of node label keys"
    if not isinstance(domains, list):
        return "domains: must be a list"
    out = []
    for i, d in enumerate(domains):
        values, count = (d.get("values"), d.get("count")) if isinstance(d, Mapping) else (None, None)
        if not isinstance(values, list) or len(values) != len(levels) or not all(
                isinstance(v, str) for v in values):
            return f"domains[{i}].values: must hold one value per level ({len(levels)})"
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return f"domains[{i}].count: {count!r}, must be an integer of at least 1"
        out.append(AssignedDomain(tuple(values), count))
    return list(levels), out


def v1beta1_to_v1beta2(ta: Mapping[str, Any]) -> dict[str, Any] | str:
    """A v1beta1 TopologyAssignment (either form) in v1beta2's compact form, or what is wrong."""
    read = read_v1beta1(ta)
    return read if isinstance(read, str) else encode(*read).to_dict()


def v1beta2_to_v1beta1(ta: Mapping[str, Any]) -> dict[str, Any] | str:
    """A v1beta2 TopologyAssignment expanded to v1beta1's `levels` + `domains`, or what is wrong."""
    try:
        model = TopologyAssignment.model_validate(ta)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(step) for step in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return model.to_v1beta1()
