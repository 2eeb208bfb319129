"""Converting tasq's objects between API versions: v1beta2 (the hub), v1beta1 and Topology's v1alpha1.

`convert(obj, desired_api_version)` is pure and total: it returns the converted wire form, or a
`ConversionFailure` naming kind, namespace/name and field path; it never raises. The field mapping is
Kueue's (v1beta1 `cohort`/`priorityClassName`+`priorityClassSource`/`flavorUsage`, deprecated
flavorFungibility values); what one version cannot hold is kept in an annotation (see LOSSY) so a round
trip through the other version gives back the original. Called by the conversion webhook and tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.api import constants as c
from controller.api.topology_assignment import v1beta1_to_v1beta2, v1beta2_to_v1beta1

Path = tuple[str, ...]
Obj = dict[str, Any]

HUB: Final = c.API_VERSION
SPOKES: Final[Mapping[str, tuple[str, ...]]] = {
    c.KIND_TOPOLOGY: (c.API_VERSION_V1BETA1, c.API_VERSION_V1ALPHA1),
    c.KIND_RESOURCE_FLAVOR: (c.API_VERSION_V1BETA1,),
    c.KIND_CLUSTER_QUEUE: (c.API_VERSION_V1BETA1,),
    c.KIND_LOCAL_QUEUE: (c.API_VERSION_V1BETA1,),
    c.KIND_WORKLOAD: (c.API_VERSION_V1BETA1,),
    c.KIND_COHORT: (),
    c.KIND_WORKLOAD_PRIORITY_CLASS: (c.API_VERSION_V1BETA1,),
}
"""The versions each kind is served in besides the hub."""

MAY_STOP_SEARCH: Final = "MayStopSearch"
DEPRECATED_FUNGIBILITY: Final = {("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")}
"""v1beta1's flavorFungibility values that v1beta2 spells MayStopSearch."""

PRIORITY_REF_BY_SOURCE: Final[Mapping[str, tuple[str, str]]] = {
    c.PRIORITY_SOURCE_WORKLOAD: (c.GROUP, c.KIND_WORKLOAD_PRIORITY_CLASS),
    c.PRIORITY_SOURCE_POD: (c.PRIORITY_CLASS_GROUP, c.KIND_PRIORITY_CLASS),
}
"""A v1beta1 priorityClassSource and the (group, kind) of the v1beta2 priorityClassRef it becomes."""


@dataclass(frozen=True, slots=True)
class ConversionFailure:
    """Why an object could not be converted: `field` is the dotted path of the offending field."""

    kind: str
    namespace: str
    name: str
    field: str
    detail: str

    @property
    def message(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        subject = f"{self.kind or 'object'} {where}".strip()
        return f"{subject}: {self.field}: {self.detail}" if self.field else f"{subject}: {self.detail}"


class _Refused(Exception):
    """Internal: a field that cannot be converted; `convert` turns it into a ConversionFailure."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(detail)
        self.path = path
        self.detail = detail


@dataclass(frozen=True, slots=True)
class LossyGroup:
    """Fields one version cannot hold exactly: `spoke` paths (v1beta1) and the `hub` paths they map to.

    Converting up, when converting back down would not give the spoke values again, the spoke values
    (and the hub values they became) are kept in ANNOTATION_CONVERSION_V1BETA1; converting down, they
    come back only while the hub values are still those (a v1beta2 writer's change wins). The same
    the other way round with ANNOTATION_CONVERSION_V1BETA2.
    """

    spoke: tuple[Path, ...]
    hub: tuple[Path, ...]


_FUNGIBILITY: Final = (("spec", "flavorFungibility", "whenCanBorrow"), ("spec", "flavorFungibility", "whenCanPreempt"))
LOSSY: Final[Mapping[str, tuple[LossyGroup, ...]]] = {
    c.KIND_CLUSTER_QUEUE: (LossyGroup(spoke=_FUNGIBILITY, hub=_FUNGIBILITY),),
    c.KIND_WORKLOAD: (LossyGroup(spoke=(("spec", "priorityClassName"), ("spec", "priorityClassSource")),
                                 hub=(("spec", "priorityClassRef"),)),),
}

_ABSENT: Final = {"$absent": True}
"""How a saved field that was not set is written in the annotation (null is a value of its own)."""


# ---------------------------------------------------------------------------------------------
# Paths in plain JSON objects.


def _get(obj: Mapping[str, Any], path: Path) -> Any:
    """The value at `path`, or _ABSENT when a step is missing or not an object."""
    node: Any = obj
    for step in path:
        if not isinstance(node, Mapping) or step not in node:
            return _ABSENT
        node = node[step]
    return node


def _object_at(obj: Obj, path: Path, create: bool) -> Obj | None:
    """The object at `path` (created when `create`), None when absent; refuses a non-object."""
    node = obj
    for depth, step in enumerate(path):
        child = node.get(step)
        if child is None:
            if not create:
                return None
            child = node[step] = {}
        if not isinstance(child, dict):
            raise _Refused(path[:depth + 1], f"must be an object, not {type(child).__name__}")
        node = child
    return node


def _set(obj: Obj, path: Path, value: Any) -> None:
    """Set (or with _ABSENT remove) the value at `path`; emptied parent objects stay (as written)."""
    parent = _object_at(obj, path[:-1], create=value is not _ABSENT and value != _ABSENT)
    if parent is None:
        return
    if value is _ABSENT or value == _ABSENT:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value


def _rename(obj: Obj, parent: Path, old: str, new: str) -> None:
    """Move `parent.old` to `parent.new` (Kueue's renames carry the value unchanged)."""
    node = _object_at(obj, parent, create=False)
    if node is not None and old in node:
        node[new] = node.pop(old)


def _dotted(path: Path) -> str:
    return ".".join(path)


# ---------------------------------------------------------------------------------------------
# Phase 1: field mappings per kind, spoke (v1beta1) <-> hub (v1beta2), on a private copy.


def _cluster_queue_up(obj: Obj) -> None:
    """spec.cohort -> spec.cohortName; deprecated fungibility values -> MayStopSearch."""
    _rename(obj, ("spec",), "cohort", "cohortName")
    fungibility = _object_at(obj, ("spec", "flavorFungibility"), create=False)
    if fungibility is not None:
        for key, old in DEPRECATED_FUNGIBILITY:
            if fungibility.get(key) == old:
                fungibility[key] = MAY_STOP_SEARCH


def _cluster_queue_down(obj: Obj) -> None:
    """spec.cohortName -> spec.cohort (v1beta1 reads MayStopSearch as it is)."""
    _rename(obj, ("spec",), "cohortName", "cohort")


def _workload_up(obj: Obj) -> None:
    """priorityClassName + priorityClassSource -> priorityClassRef (Kueue: unknown sources are dropped)."""
    spec = _object_at(obj, ("spec",), create=False)
    if spec is not None:
        name = spec.pop("priorityClassName", None)
        source = spec.pop("priorityClassSource", None)
        ref = PRIORITY_REF_BY_SOURCE.get(source) if isinstance(source, str) else None
        if ref is not None:
            spec["priorityClassRef"] = {"group": ref[0], "kind": ref[1], "name": name if isinstance(name, str) else ""}
    _workload_status_rename(obj, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")
    _topology_assignments(obj, v1beta1_to_v1beta2)


def _workload_down(obj: Obj) -> None:
    """priorityClassRef -> priorityClassName + priorityClassSource when v1beta1 has a source for it."""
    spec = _object_at(obj, ("spec",), create=False)
    if spec is not None and "priorityClassRef" in spec:
        ref = spec.pop("priorityClassRef")
        if not isinstance(ref, Mapping):
            raise _Refused(("spec", "priorityClassRef"), f"must be an object, not {type(ref).__name__}")
        for source, (group, kind) in PRIORITY_REF_BY_SOURCE.items():
            if ref.get("group") == group and ref.get("kind") == kind:
                spec["priorityClassSource"] = source
                spec["priorityClassName"] = ref.get("name", "")
    _workload_status_rename(obj, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
    _topology_assignments(obj, v1beta2_to_v1beta1)


def _topology_assignments(obj: Obj, convert_one: Callable[[Mapping[str, Any]], dict[str, Any] | str]) -> None:
    """Every pod set's topologyAssignment in the other version's form (v1beta1 `domains`, or the KEP's
    nodeLabels slices read as input; v1beta2 compact, encoded as Kueue does)."""
    assignments = _get(obj, ("status", "admission", "podSetAssignments"))
    if not isinstance(assignments, list):  # what is not an admission is carried as it is
        return
    for i, psa in enumerate(assignments):
        ta = psa.get("topologyAssignment") if isinstance(psa, dict) else None
        if ta is None:
            continue
        path = ("status", "admission", "podSetAssignments", str(i), "topologyAssignment")
        if not isinstance(ta, Mapping):
            raise _Refused(path, f"must be an object, not {type(ta).__name__}")
        converted = convert_one(ta)
        if isinstance(converted, str):
            where, _, detail = converted.partition(": ")
            raise _Refused((*path, where) if detail else path, detail or converted)
        psa["topologyAssignment"] = converted


def _workload_status_rename(obj: Obj, old: str, new: str) -> None:
    """Kueue fixed the spelling of this status field in v1beta2 (tasq keeps it only if written)."""
    _rename(obj, ("status",), old, new)


def _local_queue_up(obj: Obj) -> None:
    _rename(obj, ("status",), "flavorUsage", "flavorsUsage")


def _local_queue_down(obj: Obj) -> None:
    _rename(obj, ("status",), "flavorsUsage", "flavorUsage")


def _unchanged(obj: Obj) -> None:
    """Topology and ResourceFlavor have the same fields in every version."""


Mapper = Callable[[Obj], None]
_MAPPERS: Final[Mapping[str, tuple[Mapper, Mapper]]] = {
    c.KIND_TOPOLOGY: (_unchanged, _unchanged),
    c.KIND_RESOURCE_FLAVOR: (_unchanged, _unchanged),
    c.KIND_CLUSTER_QUEUE: (_cluster_queue_up, _cluster_queue_down),
    c.KIND_LOCAL_QUEUE: (_local_queue_up, _local_queue_down),
    c.KIND_WORKLOAD: (_workload_up, _workload_down),
    c.KIND_COHORT: (_unchanged, _unchanged),
    # The same fields in v1beta1 and v1beta2: only the apiVersion changes.
    c.KIND_WORKLOAD_PRIORITY_CLASS: (_unchanged, _unchanged),
}
"""kind -> (spoke to hub, hub to spoke), each rewriting a private copy in place."""


# ---------------------------------------------------------------------------------------------
# Phase 2: what the other version cannot hold, saved in and restored from an annotation.


def _annotations(obj: Obj, create: bool) -> Obj | None:
    return _object_at(obj, ("metadata", "annotations"), create=create)


def _take_saved(obj: Obj, key: str) -> list[Any]:
    """Remove annotation `key` and return its saved groups; an unreadable value counts as none
    (the annotation is tasq's own bookkeeping, not a user's data)."""
    annotations = _annotations(obj, create=False)
    raw = annotations.pop(key, None) if annotations is not None else None
    if annotations is not None and not annotations:
        del obj["metadata"]["annotations"]
    if not isinstance(raw, str):
        return []
    try:
        saved = json.loads(raw)
    except ValueError:
        return []
    return saved if isinstance(saved, list) else []


def _save(obj: Obj, key: str, groups: list[dict[str, Any]]) -> None:
    if groups:
        annotations = _annotations(obj, create=True)
        assert annotations is not None  # created above
        annotations[key] = json.dumps(groups, sort_keys=True, separators=(",", ":"))


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _copied(value: Any) -> Any:
    """A deep copy of a JSON value: objects and arrays copied, scalars shared (they are immutable).
    copy.deepcopy (its memo and per-type dispatch) was most of the time of converting a list
    (bench/conversion.py); a non-dict mapping or a tuple, which only a Python caller passes, is copied
    as a dict or list."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copied(v) for v in value]
    return value


def _values(obj: Mapping[str, Any], paths: tuple[Path, ...]) -> dict[str, Any]:
    """The values at `paths` by dotted path (copies, _ABSENT where unset)."""
    return {_dotted(p): _copied(_get(obj, p)) for p in paths}


def _only(obj: Mapping[str, Any], paths: tuple[Path, ...]) -> Obj:
    """A new object holding only the values at `paths` (copied): enough for a mapper to convert
    those fields without copying a whole Workload (pod templates, assignments)."""
    out: Obj = {}
    for path in paths:
        value = _get(obj, path)
        if value is not _ABSENT:
            _set(out, path, _copied(value))
    return out


def _restore(obj: Obj, before: Mapping[str, Any], saved: list[Any],
             kept: Callable[[LossyGroup], tuple[Path, ...]], lost: Callable[[LossyGroup], tuple[Path, ...]],
             groups: tuple[LossyGroup, ...]) -> None:
    """Put saved `lost` values back into `obj` where the unconverted fields (`before`, by dotted path)
    still have the `kept` values saved with them (otherwise a writer of the other version changed
    them: theirs win)."""
    for group in groups:
        lost_keys = {_dotted(p) for p in lost(group)}
        for entry in saved:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("kept"), Mapping) \
                    or not isinstance(entry.get("lost"), Mapping) or set(entry["lost"]) != lost_keys:
                continue
            if entry["kept"] == {_dotted(p): before[_dotted(p)] for p in kept(group)}:
                for path in lost(group):
                    _set(obj, path, entry["lost"][_dotted(path)])


def _differences(before: Mapping[str, Any], after: Obj, back: Obj, here: Callable[[LossyGroup], tuple[Path, ...]],
                 there: Callable[[LossyGroup], tuple[Path, ...]], groups: tuple[LossyGroup, ...]) -> list[dict[str, Any]]:
    """Groups whose values `before` (by dotted path) differ from the same fields converted there
    and `back`."""
    out = []
    for group in groups:
        original = {_dotted(p): before[_dotted(p)] for p in here(group)}
        if original != _values(back, here(group)):
            out.append({"kept": _values(after, there(group)), "lost": original})
    return out


def _lossy_paths(groups: tuple[LossyGroup, ...]) -> tuple[Path, ...]:
    return tuple(p for g in groups for p in (*g.spoke, *g.hub))


# ---------------------------------------------------------------------------------------------
# Phase 3: one object, checked, converted up and/or down.


def _up(obj: Obj, kind: str) -> Obj:
    """A spoke object as the hub, keeping what the hub cannot hold in ANNOTATION_CONVERSION_V1BETA1."""
    return _across(obj, kind, HUB, to_hub=True)


def _down(obj: Obj, kind: str, api_version: str) -> Obj:
    """A hub object as `api_version`, keeping what it cannot hold in ANNOTATION_CONVERSION_V1BETA2."""
    return _across(obj, kind, api_version, to_hub=False)


def _across(obj: Obj, kind: str, api_version: str, *, to_hub: bool) -> Obj:
    """`obj` converted to `api_version` (up to the hub or down to a spoke): what the other side saved
    comes back, and what the target cannot hold is saved in the annotation of the side left.

    `before` holds only the lossy fields' values; `back` only those fields, converted there and back.
    """
    up, down = _MAPPERS[kind]
    forward, backward = (up, down) if to_hub else (down, up)
    saved_here, saved_there = ((c.ANNOTATION_CONVERSION_V1BETA1, c.ANNOTATION_CONVERSION_V1BETA2) if to_hub
                               else (c.ANNOTATION_CONVERSION_V1BETA2, c.ANNOTATION_CONVERSION_V1BETA1))

    def source(g: LossyGroup) -> Any:
        return g.spoke if to_hub else g.hub

    def target(g: LossyGroup) -> Any:
        return g.hub if to_hub else g.spoke
    groups = LOSSY.get(kind, ())
    paths = _lossy_paths(groups)
    saved = _take_saved(obj, saved_there)
    _take_saved(obj, saved_here)  # stale: recomputed below
    before = _values(obj, paths)
    forward(obj)
    obj["apiVersion"] = api_version
    _restore(obj, before, saved, kept=source, lost=target, groups=groups)
    if groups:
        back = _only(obj, paths)
        backward(back)
        _save(obj, saved_here, _differences(before, obj, back, here=source, there=target, groups=groups))
    return obj


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    kind = obj.get("kind")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = meta.get("name"), meta.get("namespace")
    return (kind if isinstance(kind, str) else "", namespace if isinstance(namespace, str) else "",
            name if isinstance(name, str) else "")


def served_versions(kind: str) -> tuple[str, ...]:
    """Every apiVersion `kind` is served in, the hub first; empty for a kind tasq does not serve."""
    return (HUB, *SPOKES[kind]) if kind in SPOKES else ()


def _check(obj: Mapping[str, Any], desired: str) -> tuple[Path, str] | None:
    """(field path, what is wrong) when the object or the desired version cannot be converted."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(kind, str) or kind not in SPOKES:
        return ("kind",), f"must be one of {', '.join(SPOKES)}, not {kind!r}"
    versions = served_versions(kind)
    if api_version not in versions:
        return ("apiVersion",), f"must be one of {', '.join(versions)} for {kind}, not {api_version!r}"
    if desired not in versions:
        return (), f"cannot be converted to {desired!r}: {kind} is served as {', '.join(versions)}"
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        return ("metadata",), f"must be an object, not {type(metadata).__name__}"
    return None


def convert(obj: Mapping[str, Any], desired_api_version: str) -> dict[str, Any] | ConversionFailure:
    """`obj` as `desired_api_version` (a new dict; `obj` is not changed), or why it cannot be."""
    if not isinstance(obj, Mapping):
        return ConversionFailure("", "", "", "", f"must be a JSON object, not {type(obj).__name__}")
    kind, namespace, name = _identity(obj)
    problem = _check(obj, desired_api_version)
    if problem is not None:
        return ConversionFailure(kind, namespace, name, _dotted(problem[0]), problem[1])
    try:
        out: Obj = _copied(obj)
        if out["apiVersion"] == desired_api_version:
            return out
        if out["apiVersion"] != HUB:
            out = _up(out, kind)
        if desired_api_version != HUB:
            out = _down(out, kind, desired_api_version)
    except _Refused as refused:
        return ConversionFailure(kind, namespace, name, _dotted(refused.path), refused.detail)
    except RecursionError:  # copying a value nested deeper than Python's recursion limit
        return ConversionFailure(kind, namespace, name, "", "a value is nested too deeply to convert")
    return out
