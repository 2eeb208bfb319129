"""Server-side apply and field ownership: what kube-apiserver's field manager does on every write.

Pure functions over JSON objects, called by the request pipeline (`devcluster.server.apiserver`):
an apply merges the applied configuration into the live object, removes what its manager applied
before and no longer does, refuses fields other managers own (409, unless forced) and records the
applier's fields; an update (PUT, PATCH, POST) records the fields it added or changed. Ownership is
kept in `metadata.managedFields` as `fieldsV1` (see `fieldsets`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devcluster.server import fieldsets
from devcluster.server.errors import CONFLICT, INVALID, ApiError, Cause, bad_request, field_error
from devcluster.server.fieldsets import FieldSet, Path
from devcluster.server.patching import clone
from devcluster.server.shapes import MAP, SET, Shape

APPLY, UPDATE = "Apply", "Update"
CAUSE_MANAGER_CONFLICT = "FieldManagerConflict"
# Fields no manager owns: identity and server-set metadata (the field manager's strip set).
_STRIPPED_META = frozenset({"name", "namespace", "creationTimestamp", "selfLink", "uid", "generation",
                            "managedFields", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"})


class ApplyError(Exception):
    """An applied configuration that cannot be typed (kube-apiserver answers these with a 500)."""


@dataclass(frozen=True, slots=True, order=True)
class Manager:
    """Who owns a set: a manager's name, operation, subresource and, for updates, the API version."""

    manager: str
    operation: str
    api_version: str = ""
    subresource: str = ""

    def identity(self) -> str:
        """The manager as structured-merge-diff keys it (conflicts are ordered by this text)."""
        out: dict[str, str] = {"manager": self.manager, "operation": self.operation}
        if self.operation == UPDATE:
            out["apiVersion"] = self.api_version
        if self.subresource:
            out["subresource"] = self.subresource
        return json.dumps(out, separators=(",", ":"))

    def printed(self) -> str:
        """`"alice"`, `"carol" using v1`, `"st" with subresource "status"`, as conflict messages name it."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


@dataclass(frozen=True, slots=True)
class Owned:
    fields: FieldSet
    api_version: str
    time: str


Managers = dict[Manager, Owned]


# ---------------------------------------------------------------- managedFields


def read_managers(entries: Any) -> Managers:
    """`metadata.managedFields` as sets per manager; entries that cannot be read are dropped."""
    out: Managers = {}
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, Mapping) or (not e.get("manager") and not e.get("operation")):
            continue
        operation = str(e.get("operation") or UPDATE)
        api_version = str(e.get("apiVersion") or "")
        who = Manager(str(e.get("manager") or ""), operation, api_version if operation == UPDATE else "",
                      str(e.get("subresource") or ""))
        try:
            fields = fieldsets.decode(e.get("fieldsV1") or {})
        except ValueError:
            continue
        out[who] = Owned(fields, api_version, str(e.get("time") or ""))
    return out


def written_managers(managers: Managers) -> list[dict[str, Any]]:
    """The entries as kube-apiserver writes them: Apply before Update, then by time, manager, version."""
    entries = []
    for who, owned in managers.items():
        if not owned.fields:
            continue
        entry: dict[str, Any] = {"manager": who.manager, "operation": who.operation,
                                 "apiVersion": owned.api_version, "time": owned.time,
                                 "fieldsType": "FieldsV1", "fieldsV1": fieldsets.encode(owned.fields)}
        if who.subresource:
            entry["subresource"] = who.subresource
        entries.append(entry)
    entries.sort(key=lambda e: (e["operation"], e["time"], e["manager"], e["apiVersion"], e.get("subresource", "")))
    return entries


def owned_paths(paths: FieldSet, subresource: str, has_status: bool) -> FieldSet:
    """Paths a write may own: no identity or server metadata, and only its half of a kind with a
    status subresource (the main resource ignores status, /status everything else)."""
    def kept(p: Path) -> bool:
        top = p[0].text
        if top in ("apiVersion", "kind"):
            return False
        if top == "metadata" and (len(p) == 1 or p[1].text in _STRIPPED_META):
            return False
        if subresource == "status":
            return top == "status"
        return not (has_status and top == "status")
    return frozenset(p for p in paths if kept(p))


# ---------------------------------------------------------------- the applied configuration


def applied_configuration(body: Any, group_version: str, kind: str, name: str) -> dict[str, Any]:
    """The body of an apply patch, checked as kube-apiserver does before merging (400s)."""
    if not isinstance(body, Mapping):
        raise bad_request("the body of the request was in an unknown format")
    if body.get("apiVersion") != group_version or body.get("kind") != kind:
        group, _, version = str(body.get("apiVersion") or "").rpartition("/")
        raise bad_request(f"invalid object type: {group}/{version}, Kind={body.get('kind') or ''}")
    raw_meta = body.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    if meta.get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    if meta.get("name", name) != name:
        raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    return clone(dict(body))


def config_fields(cfg: Mapping[str, Any], shape: Shape) -> FieldSet:
    """The paths an applied configuration sets (structured-merge-diff's ToFieldSet): leaves, empty
    maps, atomic values, each keyed item and set member; ApplyError where the schema forbids a field
    or a keyed list's items cannot be keyed."""
    out: set[Path] = set()
    _collect(cfg, shape, (), out)
    return frozenset(out)


def _collect(node: Any, shape: Shape, prefix: Path, out: set[Path]) -> None:
    if isinstance(node, Mapping) and not shape.atomic_map:
        for name, v in node.items():
            child = shape.child(name)
            path = (*prefix, fieldsets.field(name))
            if child is None:
                raise ApplyError(f"{fieldsets.printed(path)}: field not declared in schema")
            if v is None or v == {} or not isinstance(v, (Mapping, list)) or not shape.declares(name):
                out.add(path)
            _collect(v, child, path, out)
    elif isinstance(node, list):
        kind = shape.list_type()
        if kind == SET:
            out.update((*prefix, fieldsets.value(v)) for v in node)
        elif kind == MAP:
            for element, item in _keyed_items(node, shape, prefix):
                path = (*prefix, element)
                out.add(path)
                _collect(item, shape.item(), path, out)
        else:
            out.add(prefix)
    elif isinstance(node, Mapping):
        out.add(prefix)


def _keyed_items(items: list[Any], shape: Shape, prefix: Path) -> list[tuple[fieldsets.Element, Any]]:
    """Each item of a map list with its key element (ApplyError for a duplicate or a keyless item)."""
    keys, defaults = shape.list_keys(items)
    seen: set[fieldsets.Element] = set()
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ApplyError(f"{fieldsets.printed(prefix)}: element {i}: associative list with keys has an "
                             "element that is not a map")
        values = {k: item.get(k, defaults.get(k)) for k in keys if k in item or k in defaults}
        if not values:
            raise ApplyError(f"{fieldsets.printed(prefix)}: element {i}: associative list with keys has an element "
                             f"that omits all key fields {json.dumps(list(keys))} (and doesn't have default values "
                             "for any key fields)")
        element = fieldsets.key(values)
        if element in seen:
            raise ApplyError(f"{fieldsets.printed(prefix)}: duplicate entries for key {element.printed()}")
        seen.add(element)
        out.append((element, item))
    return out


def item_key(item: Any, keys: tuple[str, ...], defaults: Mapping[str, Any]) -> fieldsets.Element | None:
    """A keyed list item's path element (None for an item that is not a map or has no key field)."""
    if not isinstance(item, Mapping):
        return None
    values = {k: item.get(k, defaults.get(k)) for k in keys if k in item or k in defaults}
    return fieldsets.key(values) if values else None


# ---------------------------------------------------------------- merging


def merged(live: Any, cfg: Any, shape: Shape) -> Any:
    """The applied configuration merged into the live value: maps field by field, keyed lists item by
    item, sets member by member; scalars, atomic maps and atomic lists are replaced whole."""
    if isinstance(live, Mapping) and isinstance(cfg, Mapping) and not shape.atomic_map:
        out = dict(live)
        for name, v in cfg.items():
            child = shape.child(name) or Shape(untyped=True)
            out[name] = merged(live[name], v, child) if name in live else clone(v)
        return out
    if isinstance(live, list) and isinstance(cfg, list):
        kind = shape.list_type()
        if kind == SET:
            return _ordered_union(live, cfg, lambda v: fieldsets.value(v), lambda _a, b: clone(b))
        if kind == MAP:
            keys, defaults = shape.list_keys(live + cfg)
            item_shape = shape.item()
            return _ordered_union(live, cfg, lambda v: item_key(v, keys, defaults),
                                  lambda a, b: merged(a, b, item_shape))
    return clone(cfg)


def _ordered_union(live: list[Any], cfg: list[Any], key_of: Any, merge: Any) -> list[Any]:
    """Items of both lists: the configuration's in its order (merged with their live twins), each
    live-only item right after the shared item it followed in the live list (first if none), as
    kube-apiserver orders a merged list."""
    cfg_by_key = {key_of(v): v for v in cfg}
    live_by_key = {key_of(v): v for v in live}
    leading: list[Any] = []
    after: dict[Any, list[Any]] = {}
    anchor = None
    for item in live:
        k = key_of(item)
        if k in cfg_by_key:
            anchor = k
        elif anchor is None:
            leading.append(item)
        else:
            after.setdefault(anchor, []).append(item)
    out = list(leading)
    for item in cfg:
        k = key_of(item)
        out.append(merge(live_by_key[k], item) if k in live_by_key else clone(item))
        out.extend(after.pop(k, []))
    for rest in after.values():
        out.extend(rest)
    return out


# ---------------------------------------------------------------- comparing and removing


@dataclass(frozen=True, slots=True)
class Comparison:
    added: FieldSet
    modified: FieldSet
    removed: FieldSet

    @property
    def changed(self) -> bool:
        return bool(self.added or self.modified or self.removed)


def compared(old: Any, new: Any, shape: Shape) -> Comparison:
    """Which paths a write added, changed or removed; an added map, list or item counts itself (the
    `.` of an update's fieldsV1) as well as its leaves."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()
    _compare(old, new, shape, (), added, modified, removed)
    return Comparison(frozenset(added), frozenset(modified), frozenset(removed))


def _compare(old: Any, new: Any, shape: Shape, prefix: Path, added: set[Path], modified: set[Path],
             removed: set[Path]) -> None:
    if old is new or old == new:
        return  # equal subtrees (most of an object on most writes) are compared at C speed, not walked
    if old is None and new is not None:
        if prefix:
            added.add(prefix)
        _compare_children({}, new, shape, prefix, added, modified, removed, adding=True)
    elif new is None and old is not None:
        if prefix:
            removed.add(prefix)
    elif _granular(old, new, shape):
        _compare_children(old, new, shape, prefix, added, modified, removed, adding=False)
    elif old != new:
        modified.add(prefix)


def _granular(old: Any, new: Any, shape: Shape) -> bool:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return not shape.atomic_map
    return isinstance(old, list) and isinstance(new, list) and shape.list_type() in (SET, MAP)


def _compare_children(old: Any, new: Any, shape: Shape, prefix: Path, added: set[Path], modified: set[Path],
                      removed: set[Path], adding: bool) -> None:
    """Children of two maps or granular lists, matched by field name, item key or set member."""
    if isinstance(new, Mapping) and not shape.atomic_map:
        olds = old if isinstance(old, Mapping) else {}
        for name in {*olds, *new}:
            child = shape.child(name) or Shape(untyped=True)
            _compare(olds.get(name), new.get(name), child, (*prefix, fieldsets.field(name)), added, modified, removed)
    elif isinstance(new, list) and shape.list_type() == SET:
        before = {fieldsets.value(v) for v in (old if isinstance(old, list) else [])}
        after = {fieldsets.value(v) for v in new}
        added.update((*prefix, e) for e in after - before)
        removed.update((*prefix, e) for e in before - after)
    elif isinstance(new, list) and shape.list_type() == MAP:
        olds_list = old if isinstance(old, list) else []
        keys, defaults = shape.list_keys(olds_list + new)
        old_items = {item_key(v, keys, defaults): v for v in olds_list}
        new_items = {item_key(v, keys, defaults): v for v in new}
        for k in {*old_items, *new_items}:
            if k is not None:
                _compare(old_items.get(k), new_items.get(k), shape.item(), (*prefix, k), added, modified, removed)


def without_paths(obj: Any, paths: FieldSet, shape: Shape) -> Any:
    """`obj` less the fields at `paths` (a map field, a keyed item or a set member each); a map or
    list the removals leave empty is removed as well (None)."""
    if not paths:
        return obj
    here = {p[0] for p in paths if len(p) == 1}
    deeper: dict[fieldsets.Element, set[Path]] = {}
    for p in paths:
        if len(p) > 1:
            deeper.setdefault(p[0], set()).add(p[1:])
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for name, v in obj.items():
            element = fieldsets.field(name)
            if element in here:
                continue
            below = deeper.get(element)
            kept = without_paths(v, frozenset(below), shape.child(name) or Shape(untyped=True)) if below else v
            if kept is not None:
                out[name] = kept
        return out or None  # a map emptied by removals goes too, as on kube-apiserver
    if isinstance(obj, list) and shape.list_type() == SET:
        return [v for v in obj if fieldsets.value(v) not in here] or None
    if isinstance(obj, list) and shape.list_type() == MAP:
        keys, defaults = shape.list_keys(obj)
        items = []
        for v in obj:
            k = item_key(v, keys, defaults)
            if k in here:
                continue
            below = deeper.get(k) if k is not None else None
            items.append(without_paths(v, frozenset(below), shape.item()) if below else v)
        return items or None
    return obj


# ---------------------------------------------------------------- the two operations


def applied(live: Mapping[str, Any], cfg: Mapping[str, Any], shape: Shape, managers: Managers, applier: Manager,
            force: bool, subresource: str, has_status: bool, api_version: str,
            now: str) -> tuple[dict[str, Any], Managers]:
    """An apply: the merged object less what `applier` stopped applying (unless another manager owns
    it), and the managers after it; ApiError 409 naming each conflicting manager and field."""
    fields = owned_paths(config_fields(cfg, shape), subresource, has_status)
    last = managers.get(applier)
    new = merged(live, cfg, shape)
    if last is not None:
        # a field the applier applied before and not now goes, unless some manager (the applier's new
        # configuration too) owns it or something below it (a map it applies keys of, an item's field)
        owners = [fields, *(o.fields for who, o in managers.items() if who != applier)]
        dropped = [p for p in last.fields - fields if not any(fieldsets.under(owned, p) for owned in owners)]
        new = without_paths(new, frozenset(dropped), shape)
    change = compared(live, new, shape)
    touched = change.added | change.modified
    conflicts = {who: frozenset(o.fields & touched) for who, o in managers.items()
                 if who != applier and o.fields & touched}
    if conflicts and not force:
        raise conflict_error(conflicts)
    out = {who: Owned(fieldsets.without_below(o.fields - conflicts.get(who, frozenset()), change.removed),
                      o.api_version, o.time) for who, o in managers.items()}
    changed = last is None or last.fields != fields or change.changed
    out[applier] = Owned(fields, api_version, now if changed else last.time if last else now)
    return new, out


def updated(old: Any, new: Any, shape: Shape, managers: Managers, updater: Manager, subresource: str,
            has_status: bool, now: str) -> Managers:
    """An update by `updater`: it now owns what it added or changed, which no other manager owns any
    more; removed fields are nobody's."""
    change = compared(old, new, shape)
    touched = owned_paths(change.added | change.modified, subresource, has_status)
    out = {who: Owned(fieldsets.without_below(o.fields - touched if who != updater else o.fields, change.removed),
                      o.api_version, o.time) for who, o in managers.items()}
    if touched:
        mine = out.get(updater)
        out[updater] = Owned((mine.fields if mine else frozenset()) | touched, updater.api_version, now)
    return {who: o for who, o in out.items() if o.fields}


def conflict_error(conflicts: Mapping[Manager, FieldSet]) -> ApiError:
    """409 Conflict worded as kube-apiserver: one cause per field, the message grouped by manager."""
    ordered = sorted(conflicts.items(), key=lambda item: item[0].identity())
    pairs = [(who, path) for who, paths in ordered for path in fieldsets.ordered(paths)]
    causes = [Cause(fieldsets.printed(path), CAUSE_MANAGER_CONFLICT, f"conflict with {who.printed()}")
              for who, path in pairs]
    if len(pairs) == 1:
        who, path = pairs[0]
        message = f"Apply failed with 1 conflict: conflict with {who.printed()}: {fieldsets.printed(path)}"
    else:
        lines = []
        for who, paths in ordered:
            lines.append(f"conflicts with {who.printed()}:")
            lines.extend(f"- {fieldsets.printed(p)}" for p in fieldsets.ordered(paths))
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return ApiError(409, CONFLICT, message, causes=causes)


def patch_options_error(name: str, reason: str, detail: str) -> ApiError:
    """422 on the PatchOptions (a missing fieldManager, `force` on a non-apply patch)."""
    cause = field_error(name, reason, detail)
    return ApiError(422, INVALID, f'PatchOptions.meta.k8s.io "" is invalid: {cause}', kind="PatchOptions",
                    group="meta.k8s.io", causes=[cause])


def half(cfg: Mapping[str, Any], subresource: str, has_status: bool) -> dict[str, Any]:
    """The part of an applied configuration its endpoint writes: /status only the status, the main
    resource of a kind with a status subresource everything else."""
    if subresource == "status":
        return {k: v for k, v in cfg.items() if k in ("apiVersion", "kind", "status")} | {
            "metadata": {k: v for k, v in (cfg.get("metadata") or {}).items() if k in ("name", "namespace")}}
    return {k: v for k, v in cfg.items() if not (has_status and k == "status")}
