"""The request pipeline: what kube-apiserver does between decoding a request and writing to storage.

`ApiServer` is the in-process API (async create/get/list/update/patch/delete/watch) used by the
HTTP layer (`devcluster.front.serving`) and directly by simulated components in the same event loop.
Every write goes: fault hooks -> decode/default -> mutating admission -> validation ->
validating admission -> storage, then the garbage collector and finalizer bookkeeping.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from devcluster.server import (
    applying,
    builtins,
    celrules,
    converting,
    crds,
    priority,
    schema,
    shapes,
    validation,
)
from devcluster.server.clock import Clock, timestamp, utc_now
from devcluster.server.collecting import (
    NAMESPACES_KEY,
    POLICY_BACKGROUND,
    POLICY_FOREGROUND,
    POLICY_ORPHAN,
    GarbageCollector,
    default_policy,
    same_content,
)
from devcluster.server.errors import (
    CAUSE_FORBIDDEN,
    CAUSE_INVALID,
    CAUSE_REQUIRED,
    CONFLICT,
    FORBIDDEN,
    INTERNAL_ERROR,
    INVALID,
    NOT_FOUND,
    UNSUPPORTED_MEDIA_TYPE,
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    field_error,
    gone,
    invalid,
    not_found,
    too_large_resource_version,
)
from devcluster.server.patching import PatchError, clone, json_patch, merge_patch, strategic_merge_patch
from devcluster.server.resources import ResourceRegistry, ResourceType
from devcluster.server.selecting import (
    FieldRequirement,
    Requirement,
    SelectorError,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from devcluster.server.store import HISTORY_LIMIT, StorageKey, Store, object_key
from devcluster.server.watching import Watch

PATCH_JSON = "application/json-patch+json"
PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
# Namespaces that exist from the start and can never be deleted (NamespaceLifecycle's immortal set).
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


# The server-owned metadata fields a client write cannot change.
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                "resourceVersion", "name", "namespace")
# How long a read from a future resourceVersion waits for the store (kube-apiserver's watch cache: 3 s),
# and how often it looks.
FRESH_WAIT_SECONDS = 3.0
_FRESH_POLL = 0.01

# Kinds whose create ignores a client-supplied status (their registry strategy resets it).
_STATUS_RESET_ON_CREATE = frozenset({("", "Pod"), ("batch", "Job"), ("", "Service")})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request is about to do; fault hooks see it before any state changes."""

    verb: str  # create, get, list, update, patch, delete, watch
    resource: ResourceType
    namespace: str
    name: str = ""
    subresource: str = ""
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The admission.k8s.io AdmissionRequest essentials, for mutating/validating hooks."""

    operation: str  # CREATE, UPDATE, DELETE
    resource: ResourceType
    subresource: str
    namespace: str
    name: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))


# Hook signatures (the webhook chain and fault injection plug in here). A mutating hook
# returns the (possibly changed) object or an ApiError to deny (for DELETE it gets no object, only
# old_object, and may only deny); a validating hook returns an
# ApiError to deny or None; a fault hook returns an ApiError to fail the request before any change.
MutatingHook = Callable[[AdmissionRequest], Awaitable[dict[str, Any] | ApiError]]
ValidatingHook = Callable[[AdmissionRequest], Awaitable[ApiError | None]]
FaultHook = Callable[[RequestInfo], Awaitable[ApiError | None]]
# A watch hook sees each new watch (after its initial events) and may refuse it or drop it later.
WatchHook = Callable[[RequestInfo, Watch], ApiError | None]


class _Raced(Exception):
    """The stored object changed while a write awaited its hooks; the write is recomputed."""


_MAX_ATTEMPTS = 5
# Computes a write's managedFields from (subresource, old, new) after the merge, before admission.
_Tracking = Callable[[str, dict[str, Any], dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ListOptions:
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""  # "" / "0": any; N: not older than N (waits, then 504 past the store's)


@dataclass(frozen=True, slots=True)
class _Filter:
    namespace: str | None
    labels: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.labels and not labels_match(self.labels, meta.get("labels") or {}):
            return False
        return not self.fields or fields_match(self.fields, obj)


class ApiServer:
    """The emulated kube-apiserver's logic: registry + storage + admission + GC, no HTTP."""

    def __init__(self, now: Clock = utc_now, history_limit: int = HISTORY_LIMIT,
                 uid_factory: Callable[[], str] = lambda: str(uuid.uuid4())) -> None:
        self.registry = ResourceRegistry.with_builtins()
        self.store = Store(history_limit)
        self.now = now
        self.new_uid = uid_factory
        self.fresh_wait = FRESH_WAIT_SECONDS
        self.mutating_hooks: list[MutatingHook] = []
        self.validating_hooks: list[ValidatingHook] = []
        self.fault_hooks: list[FaultHook] = []
        self.watch_hooks: list[WatchHook] = []
        self.crd_converter: converting.CrdConverter | None = None
        """Calls a CRD's conversion webhook (installed by devcluster.webhooking.conversion)."""
        self._name_counter = 0
        self.collector = GarbageCollector(self.store, self.registry, lambda: self.now())  # follows api.now
        for name in (*IMMORTAL_NAMESPACES, "kube-node-lease"):
            self._bootstrap("", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # ---------------------------------------------------------------- lookups

    def resource(self, api_version: str, plural: str) -> ResourceType:
        """The served resource for `apiVersion` + plural (`v1`/`pods`, `batch/v1`/`jobs`), or 404."""
        group, _, version = api_version.rpartition("/")
        r = self.registry.get(group, version, plural)
        if r is None:
            raise ApiError(404, NOT_FOUND, f"the server could not find the requested resource ({plural})")
        return r

    def _present(self, r: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object as served at r's group/version, where no webhook is needed (built-in
        kinds, custom objects in r's version or of a CRD without conversion webhook)."""
        if r.storage_group is not None:
            return converting.from_storage(r.group, obj)
        if obj.get("apiVersion") == r.group_version and obj.get("kind") == r.kind:
            return obj
        return {**obj, "apiVersion": r.group_version, "kind": r.kind}

    async def _convert(self, r: ResourceType, objects: list[dict[str, Any]], api_version: str) -> list[dict[str, Any]]:
        """Custom objects in `api_version`, converted as their CRD says (see converting.py); raises
        ConversionFailed. Objects already in that version are left alone; the others go to the
        webhook in one review per version they are in."""
        if not r.custom or all(o.get("apiVersion") == api_version for o in objects):
            return objects
        crd = self.store.get(crds.CRD_KEY, ("", f"{r.plural}.{r.group}"))
        target = self.registry.get(r.group, api_version.rpartition("/")[2], r.plural)
        if crd is None or converting.crd_conversion(crd).get("strategy") != converting.STRATEGY_WEBHOOK:
            return [o if o.get("apiVersion") == api_version else self._decoded(target, {**o, "apiVersion": api_version})
                    for o in objects]
        out = list(objects)
        by_version: dict[str, list[int]] = {}
        for i, o in enumerate(objects):
            if o.get("apiVersion") != api_version:
                by_version.setdefault(str(o.get("apiVersion")), []).append(i)
        for version, indexes in by_version.items():
            if self.crd_converter is None:
                raise converting.webhook_failed(version, r.kind, "no conversion webhook caller is installed")
            converted = await self.crd_converter(crd, [objects[i] for i in indexes], api_version)
            for i, obj in zip(indexes, converted, strict=True):
                out[i] = self._decoded(target, obj)
        return out

    @staticmethod
    def _decoded(target: ResourceType | None, obj: dict[str, Any]) -> dict[str, Any]:
        """A converted object as decoding in its new version leaves it: pruned and defaulted by that
        version's schema (what the other version has and this one does not is not served)."""
        return schema.prune_and_default(obj, target.schema) if target is not None and target.schema else obj

    async def _served(self, r: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """One stored object as served at r (a get, delete or update's old object); ConversionFailed."""
        if not r.custom:
            return self._present(r, obj)
        (converted,) = await self._convert(r, [obj], r.group_version)
        return converted

    async def _out(self, r: ResourceType, obj: dict[str, Any], copy: bool) -> dict[str, Any]:
        """A stored object as a get or delete answers it (500 as kube-apiserver when it cannot be converted)."""
        try:
            presented = await self._served(r, obj)
        except converting.ConversionFailed as e:
            raise converting.read_failure(obj, r.group, r.plural, e) from None
        return clone(presented) if copy else presented

    async def _to_storage(self, r: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """A written custom object in its CRD's storage version (500 when it cannot be converted)."""
        if not r.custom:
            return obj
        crd = self.store.get(crds.CRD_KEY, ("", f"{r.plural}.{r.group}"))
        storage = converting.storage_api_version(crd) if crd is not None else r.group_version
        try:
            (converted,) = await self._convert(r, [obj], storage or r.group_version)
        except converting.ConversionFailed as e:
            raise converting.write_failure(e) from None
        return converted

    def _current(self, r: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(r.storage_key, (namespace if r.namespaced else "", name))
        if obj is None:
            raise not_found(r.plural, r.group, name)
        return obj

    async def _faults(self, info: RequestInfo) -> None:
        for hook in list(self.fault_hooks):
            error = await hook(info)
            if error is not None:
                raise error

    # ---------------------------------------------------------------- reads

    async def get(self, r: ResourceType, namespace: str, name: str, *, copy: bool = True) -> dict[str, Any]:
        await self._faults(RequestInfo("get", r, namespace, name))
        return await self._out(r, self._current(r, namespace, name), copy)

    def _filter(self, r: ResourceType, namespace: str | None, opts: ListOptions) -> _Filter:
        allowed = ("metadata.name", "metadata.namespace", *r.selectable_fields)
        try:
            labels = parse_label_selector(opts.label_selector)
            fields = tuple(replace(f, field=converting.storage_field(r.group, f.field))
                           for f in parse_field_selector(opts.field_selector, allowed))
        except SelectorError as e:
            raise bad_request(str(e)) from None
        return _Filter(namespace if r.namespaced and namespace else None, labels, fields)

    async def list_objects(self, r: ResourceType, namespace: str | None = None, opts: ListOptions | None = None,
                           *, copy: bool = True) -> dict[str, Any]:
        """A `<Kind>List` sorted by namespace/name, one page when `limit` is set."""
        opts = opts or ListOptions()
        await self._faults(RequestInfo("list", r, namespace or ""))
        flt = self._filter(r, namespace, opts)
        if opts.resource_version not in ("", "0") and not opts.continue_token:
            await self._wait_for_revision(opts.resource_version)
        list_revision, start = self.store.revision, ("", "")
        if opts.continue_token:
            list_revision, start = self._decode_continue(r, opts.continue_token)
        source = self.store.items(r.storage_key, flt.namespace)
        matching = sorted((o for o in source if flt.matches(o)), key=object_key)
        if opts.continue_token:
            matching = [o for o in matching if object_key(o) > start]
        meta: dict[str, Any] = {"resourceVersion": str(list_revision)}
        if opts.limit and len(matching) > opts.limit:
            rest = len(matching) - opts.limit
            matching = matching[:opts.limit]
            meta["continue"] = self._encode_continue(list_revision, object_key(matching[-1]))
            meta["remainingItemCount"] = rest
        items = await self._list_items(r, matching, copy)
        return {"kind": r.list_kind, "apiVersion": r.group_version, "metadata": meta, "items": items}

    async def _list_items(self, r: ResourceType, matching: list[dict[str, Any]], copy: bool) -> list[dict[str, Any]]:
        """The listed objects as served at r: custom objects in other versions converted in one review
        per version (500 naming the first object when that fails, as kube-apiserver's list)."""
        if r.custom:
            try:
                matching = await self._convert(r, matching, r.group_version)
            except converting.ConversionFailed as e:
                first = next(o for o in matching if o.get("apiVersion") != r.group_version)
                raise converting.list_failure(first, r.group, r.plural, e) from None
            return [clone(o) if copy else o for o in matching]
        return [clone(p) if copy else p for p in (self._present(r, o) for o in matching)]

    async def _wait_for_revision(self, resource_version: str) -> None:
        """A read "not older than" a revision the store has not reached waits for it, as the watch cache
        does (`fresh_wait` seconds of real time: it is a networking concern, like watch timeouts)."""
        try:
            wanted = int(resource_version)
        except ValueError:
            raise bad_request(f"invalid resource version: {resource_version!r}") from None
        deadline = time.monotonic() + self.fresh_wait
        while self.store.revision < wanted:
            if time.monotonic() >= deadline:
                raise too_large_resource_version(wanted, self.store.revision)
            await asyncio.sleep(_FRESH_POLL)

    @staticmethod
    def _encode_continue(revision: int, last: tuple[str, str]) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": list(last)})
        return base64.urlsafe_b64encode(raw.encode()).decode()

    def _decode_continue(self, r: ResourceType, token: str) -> tuple[int, tuple[str, str]]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            revision, start = int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
        except (ValueError, KeyError, IndexError, TypeError):
            raise bad_request("continue key is not valid: invalid continue token") from None
        if revision < self.store.oldest_revision(r.storage_key):
            raise gone("The provided continue parameter is too old to display a consistent list result. "
                       "You can start a new list without the continue parameter.")
        return revision, start

    def watch(self, r: ResourceType, namespace: str | None = None, *, resource_version: str = "",
              label_selector: str = "", field_selector: str = "", send_initial_events: bool = False) -> Watch:
        """A watch from `resource_version` ("" or "0": synthetic ADDED events for current objects).
        `send_initial_events` (the streaming-list "WatchList" form client-go uses, e.g. in `kubectl wait`)
        sends the current objects, then a BOOKMARK annotated `k8s.io/initial-events-end`, then changes."""
        flt = self._filter(r, namespace, ListOptions(label_selector, field_selector))
        convert = (lambda obj: self._served(r, obj)) if r.custom else None
        watch = Watch(lambda obj: self._present(r, obj) if convert is None else obj, flt.matches, convert)
        if resource_version in ("", "0") or send_initial_events:
            current = sorted((o for o in self.store.items(r.storage_key, flt.namespace) if flt.matches(o)),
                             key=object_key)
            watch.start_with_objects(current)
            if send_initial_events:
                watch.end_initial_events(r.kind, r.group_version, self.store.revision)
            watch.attach(self.store, r.storage_key)
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise bad_request(f"invalid resource version: {resource_version!r}") from None
            watch.start_from_history(self.store, r.storage_key, since)
        info = RequestInfo("watch", r, namespace if r.namespaced and namespace else "")
        for hook in list(self.watch_hooks):
            error = hook(info, watch)
            if error is not None:
                watch.close()
                raise error
        return watch

    # ---------------------------------------------------------------- create

    async def create(self, r: ResourceType, namespace: str, body: Mapping[str, Any], *, dry_run: bool = False,
                     strict: bool = False, copy: bool = True, manager: str | None = None,
                     managed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """POST: 201 semantics; raises ApiError 409 AlreadyExists / 422 Invalid / 404 namespace.
        `manager` (an HTTP client's fieldManager) is recorded as the owner of every field it sets;
        `managed` is a create-by-apply's managedFields, computed by `apply`."""
        namespace = namespace if r.namespaced else ""
        obj = self._decode(r, namespace, body)
        await self._faults(RequestInfo("create", r, namespace, obj["metadata"].get("name", ""), "", dry_run))
        if obj["metadata"].get("resourceVersion"):
            # refused by the storage layer, which kube-apiserver reports as an internal error
            raise ApiError(500, INTERNAL_ERROR, "Internal error occurred: resourceVersion should not be set on "
                           "objects to be created")
        self._check_namespace(r, namespace)
        obj = self._default_and_prune(r, obj, strict)
        if managed is not None:
            obj["metadata"]["managedFields"] = managed
        elif manager:
            obj["metadata"]["managedFields"] = self._track_update(r, "", {}, obj, manager)
        if (r.group, r.plural) == ("", "pods"):
            priority.admit_pod_priority(obj, self.store.items(priority.PRIORITY_CLASSES_KEY))
        # mutating webhooks see the object as decoded: no uid, timestamps or generated name yet, and the
        # client's status; their output is decoded (defaulted, pruned) again, then the server's fields set
        obj = await self._admit("CREATE", r, "", obj, None, dry_run)
        obj = self._default_and_prune(r, obj, False)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            # after mutating admission (webhooks see no name yet) and before the strategy's
            # PrepareForCreate, as kube-apiserver: a Job's generated labels carry the generated name
            obj = {**obj, "metadata": {**meta, "name": self._generate_name(r, namespace, str(meta["generateName"]))}}
        self._prepare_create(r, obj)
        causes = builtins.name_causes(r, obj["metadata"].get("name", "")) + self._validate(r, obj, None)
        if causes:
            raise invalid(r.kind, r.group, obj["metadata"].get("name", ""), causes)
        await self._validate_admission("CREATE", r, "", obj, None, dry_run)
        if self.store.get(r.storage_key, object_key(obj)) is not None:
            raise already_exists(r.plural, r.group, obj["metadata"]["name"])
        if dry_run:
            return clone(obj) if copy else obj
        stored = self.store.put(r.storage_key, await self._to_storage(r, obj))
        self._after_create(r, stored)
        await self.collector.collect_if_ownerless(r, stored)  # created (201), then collected
        return await self._out(r, stored, copy)

    def _decode(self, r: ResourceType, namespace: str, body: Mapping[str, Any], copy: bool = True) -> dict[str, Any]:
        """Check kind/apiVersion/namespace of a request body. `copy=False` (patch results, which share
        untouched subtrees with the never-mutated stored object) copies only the top level and metadata."""
        if not isinstance(body, Mapping):
            raise bad_request("the body of the request was in an unknown format")
        obj = clone(dict(body)) if copy else dict(body)
        if obj.get("apiVersion", r.group_version) != r.group_version or obj.get("kind", r.kind) != r.kind:
            raise bad_request(f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                              f"expected API version ({r.group_version})")
        obj["apiVersion"], obj["kind"] = r.group_version, r.kind
        if not r.custom and (refused := validation.undecodable(r.kind, obj)) is not None:
            raise bad_request(refused)
        meta = obj.get("metadata")
        meta = obj["metadata"] = dict(meta) if isinstance(meta, dict) else {}
        body_ns = meta.get("namespace")
        if r.namespaced:
            if body_ns and namespace and body_ns != namespace:
                raise bad_request("the namespace of the provided object does not match the namespace sent "
                                  "on the request")
            meta["namespace"] = namespace or body_ns or ""
        else:
            meta.pop("namespace", None)
        return converting.to_storage(r.group, obj) if r.storage_group is not None else obj

    def _check_namespace(self, r: ResourceType, namespace: str) -> None:
        if not r.namespaced:
            return
        ns = self.store.get(NAMESPACES_KEY, ("", namespace))
        if ns is None:
            raise not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(403, FORBIDDEN, f"{r.plural} \"\" is forbidden: unable to create new content in "
                           f"namespace {namespace} because it is being terminated", kind=r.plural, group=r.group)

    def _default_and_prune(self, r: ResourceType, obj: dict[str, Any], strict: bool) -> dict[str, Any]:
        """Decoding's part: API defaults, then unknown fields pruned (400 with fieldValidation=Strict)."""
        builtins.apply_defaults(r, obj)
        return self._prune(r, builtins.convert_string_data(r, obj), strict)

    def _prepare_create(self, r: ResourceType, obj: dict[str, Any]) -> None:
        """Server-set metadata, status reset and server-filled fields (the strategy's PrepareForCreate);
        after mutating admission, so what a webhook sets in `.status` of such a kind is dropped."""
        meta = obj["metadata"]
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            meta.pop(key, None)
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = timestamp(self.now())
        meta["generation"] = 1
        if (r.has_status and r.custom) or (r.group, r.kind) in _STATUS_RESET_ON_CREATE:
            obj.pop("status", None)
        builtins.prepare_for_create(r, obj)
        if r.storage_key == crds.CRD_KEY:
            obj["status"] = crds.initial_status(obj)

    @staticmethod
    def _prune(r: ResourceType, obj: dict[str, Any], strict: bool) -> dict[str, Any]:
        """Prune (and default) by the CRD schema, or drop what a built-in kind's type lacks; with
        fieldValidation=Strict unknown fields are a 400 instead."""
        dropped: list[str] = []
        if r.schema is not None:
            pruned = schema.prune_and_default(obj, r.schema, dropped)
        else:
            pruned, dropped = builtins.prune_unknown_fields(r, obj)
        if strict and dropped:
            unknown = ", ".join(f'unknown field "{path}"' for path in dropped)
            raise bad_request(f"{r.kind} in version \"{r.version}\" cannot be handled as a {r.kind}: "
                              f"strict decoding error: {unknown}")
        return pruned

    def _generate_name(self, r: ResourceType, namespace: str, prefix: str) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        for _ in range(100):
            self._name_counter += 1
            n = uuid.uuid5(uuid.NAMESPACE_OID, f"{prefix}{self._name_counter}{self.store.revision}").int
            suffix = "".join(alphabet[(n >> (5 * i)) % len(alphabet)] for i in range(5))
            name = f"{prefix[:58]}{suffix}"
            if self.store.get(r.storage_key, (namespace, name)) is None:
                return name
        raise ApiError(500, INTERNAL_ERROR, "could not generate a unique name")

    def _validate(self, r: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = builtins.validate_create(r, obj) if old is None else builtins.validate_update(r, old, obj)
        if r.schema is not None:
            schema_causes = schema.validate(obj, r.schema)
            causes += schema_causes
            if r.has_rules and not schema_causes:
                # CEL rules run on schema-valid objects only (their types are then what the rules expect)
                causes += celrules.rule_causes(obj, old, r.schema)
        if r.storage_key == crds.CRD_KEY:
            causes += crds.validate(obj)
        if old is not None:
            causes += _finalizer_causes(old, obj)
        return causes

    async def _admit(self, op: str, r: ResourceType, sub: str, obj: dict[str, Any],
                     old: dict[str, Any] | None, dry_run: bool) -> dict[str, Any]:
        """Mutating admission (the webhook chain plugs in via `mutating_hooks`)."""
        for hook in list(self.mutating_hooks):
            meta = obj["metadata"]
            result = await hook(AdmissionRequest(op, r, sub, meta.get("namespace", ""), meta.get("name", ""),
                                                 obj, old, dry_run))
            if isinstance(result, ApiError):
                raise result
            obj = result
        return obj

    async def _admit_delete(self, r: ResourceType, old: dict[str, Any], dry_run: bool) -> None:
        """Mutating admission of a DELETE, as kube-apiserver runs it: no object, the stored one as
        oldObject; hooks may only deny (what they return is ignored)."""
        meta = old["metadata"]
        for hook in list(self.mutating_hooks):
            result = await hook(AdmissionRequest("DELETE", r, "", meta.get("namespace", ""), meta.get("name", ""),
                                                 None, old, dry_run))
            if isinstance(result, ApiError):
                raise result

    async def _validate_admission(self, op: str, r: ResourceType, sub: str, obj: dict[str, Any] | None,
                                  old: dict[str, Any] | None, dry_run: bool) -> None:
        for hook in list(self.validating_hooks):
            meta = (obj or old or {}).get("metadata") or {}
            error = await hook(AdmissionRequest(op, r, sub, meta.get("namespace", ""), meta.get("name", ""),
                                                obj, old, dry_run))
            if error is not None:
                raise error

    def _after_create(self, r: ResourceType, obj: dict[str, Any]) -> None:
        if r.storage_key == crds.CRD_KEY:
            crds.register(self.registry, obj)

    def _bootstrap(self, group: str, plural: str, body: dict[str, Any]) -> None:
        r = self.registry.storage_resource(group, plural)
        assert r is not None
        obj = self._default_and_prune(r, self._decode(r, "", body), False)
        self._prepare_create(r, obj)
        self.store.put(r.storage_key, obj)

    # ---------------------------------------------------------------- update / patch

    async def update(self, r: ResourceType, namespace: str, name: str, body: Mapping[str, Any], *,
                     subresource: str = "", dry_run: bool = False, strict: bool = False,
                     copy: bool = True, manager: str | None = None) -> dict[str, Any]:
        """PUT on the object or its status subresource; 409 on a stale metadata.resourceVersion."""
        namespace = namespace if r.namespaced else ""
        await self._faults(RequestInfo("update", r, namespace, name, subresource, dry_run))
        new = self._decode(r, namespace, body)
        if new["metadata"].get("name", name) != name:
            raise bad_request("the name of the object does not match the name on the URL")
        new["metadata"]["name"] = name
        for _ in range(_MAX_ATTEMPTS):
            old = self._current(r, namespace, name)
            if r.custom and not new["metadata"].get("resourceVersion"):
                # custom resources allow no unconditional update (built-in kinds mostly do)
                raise invalid(r.kind, r.group, name, [Cause("metadata.resourceVersion", CAUSE_INVALID,
                                                             "Invalid value: 0x0: must be specified for an update")])
            try:
                presented = await self._old_for_update(r, old)
                return await self._write_update(r, old, presented, {**new, "metadata": dict(new["metadata"])},
                                                subresource, dry_run, copy, strict, self._updating(r, manager))
            except _Raced:
                continue
        raise conflict(r.plural, r.group, name)

    async def patch(self, r: ResourceType, namespace: str, name: str, patch_type: str, patch: Any, *,
                    subresource: str = "", dry_run: bool = False, strict: bool = False,
                    copy: bool = True, manager: str | None = None) -> dict[str, Any]:
        """PATCH by content type: JSON patch, JSON merge, strategic merge (built-in kinds only).
        Re-applied to the newer object if another write lands while admission hooks are awaited."""
        namespace = namespace if r.namespaced else ""
        await self._faults(RequestInfo("patch", r, namespace, name, subresource, dry_run))
        for _ in range(_MAX_ATTEMPTS):
            old = self._current(r, namespace, name)
            presented = await self._old_for_update(r, old)
            new = self._apply_patch(r, namespace, name, presented, patch_type, patch)
            try:
                return await self._write_update(r, old, presented, new, subresource, dry_run, copy, strict,
                                                self._updating(r, manager))
            except _Raced:
                continue
        raise conflict(r.plural, r.group, name)

    async def apply(self, r: ResourceType, namespace: str, name: str, body: Any, *, manager: str,
                    force: bool = False, subresource: str = "", dry_run: bool = False, strict: bool = False,
                    copy: bool = True) -> tuple[dict[str, Any], bool]:
        """Server-side apply (PATCH application/apply-patch+yaml): merged as `applying` says, 409 on
        other managers' fields unless `force`; creates the object when there is none. Returns the
        object and whether it was created."""
        namespace = namespace if r.namespaced else ""
        await self._faults(RequestInfo("patch", r, namespace, name, subresource, dry_run))
        if not manager:
            raise applying.patch_options_error("fieldManager", CAUSE_REQUIRED, "is required for apply patch")
        cfg = applying.applied_configuration(body, r.group_version, r.kind, name)
        cfg["metadata"] = {**(cfg.get("metadata") or {}), "name": name}
        if r.namespaced:
            cfg["metadata"]["namespace"] = namespace
        shape = shapes.of_kind(r.schema)
        applier = applying.Manager(manager, applying.APPLY, "", subresource)
        for _ in range(_MAX_ATTEMPTS):
            stored = self.store.get(r.storage_key, (namespace, name))
            live = {} if stored is None else await self._old_for_update(r, stored)
            if stored is not None and cfg["metadata"].get("resourceVersion") not in (
                    None, live["metadata"].get("resourceVersion")):
                raise conflict(r.plural, r.group, name)
            try:
                new, managers = applying.applied(
                    live, applying.half(cfg, subresource, r.has_status), shape,
                    applying.read_managers(live.get("metadata", {}).get("managedFields")), applier, force,
                    subresource, r.has_status, r.group_version, timestamp(self.now()))
            except applying.ApplyError as e:
                gvk = f"{r.group}/{r.version}, Kind={r.kind}"
                at = f"{(body.get('metadata') or {}).get('namespace') or ''}/{name}"  # as the patch names itself
                raise ApiError(500, "", f"failed to create typed patch object ({at}; {gvk}): {e}") from None
            managed = applying.written_managers(managers)
            if stored is None:
                if subresource:
                    raise not_found(r.plural, r.group, name)
                return await self.create(r, namespace, new, dry_run=dry_run, strict=strict, copy=copy,
                                         managed=managed), True
            new = self._decode(r, namespace, new)
            try:
                return await self._write_update(r, stored, live, new, subresource, dry_run, copy, strict,
                                                _fixed(managed)), False
            except _Raced:
                continue
        raise conflict(r.plural, r.group, name)

    def _updating(self, r: ResourceType, manager: str | None) -> _Tracking | None:
        """How an update by `manager` records its fields (None: an in-process write, not tracked)."""
        if not manager:
            return None
        return lambda sub, old, new: self._track_update(r, sub, old, new, manager)

    def _track_update(self, r: ResourceType, subresource: str, old: dict[str, Any], new: dict[str, Any],
                      manager: str) -> list[dict[str, Any]]:
        """`new`'s managedFields after an Update by `manager` from `old` (an empty object on create)."""
        who = applying.Manager(manager, applying.UPDATE, r.group_version, subresource)
        managers = applying.updated(old, new, shapes.of_kind(r.schema),
                                    applying.read_managers(new["metadata"].get("managedFields")), who,
                                    subresource, r.has_status, timestamp(self.now()))
        return applying.written_managers(managers)

    async def _old_for_update(self, r: ResourceType, stored: dict[str, Any]) -> dict[str, Any]:
        """The stored object in the request's version, which an update or patch is computed on."""
        try:
            return await self._served(r, stored)
        except converting.ConversionFailed as e:
            raise converting.update_failure(stored, e) from None

    def _apply_patch(self, r: ResourceType, namespace: str, name: str, presented: dict[str, Any], patch_type: str,
                     patch: Any) -> dict[str, Any]:
        """The patch applied to the stored object as served at r (`presented`)."""
        try:
            if patch_type == PATCH_JSON:
                patched = json_patch(presented, patch)
            elif patch_type == PATCH_MERGE:
                patched = merge_patch(presented, patch)
            elif patch_type == PATCH_STRATEGIC:
                if r.custom:
                    raise ApiError(415, UNSUPPORTED_MEDIA_TYPE,
                                   f"the body of the request was in an unknown format - accepted media types "
                                   f"include: {PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}")
                patched = strategic_merge_patch(presented, patch)
            else:
                raise ApiError(415, UNSUPPORTED_MEDIA_TYPE,
                               f"the body of the request was in an unknown format - accepted media types "
                               f"include: {PATCH_JSON}, {PATCH_MERGE}, {PATCH_STRATEGIC}")
        except PatchError as e:
            raise ApiError(422, INVALID, str(e)) from None
        if not isinstance(patched, dict):
            raise bad_request("the patched object is not a JSON object")
        new = self._decode(r, namespace, patched, copy=patch_type == PATCH_JSON)
        if new["metadata"].get("name") != name:
            raise bad_request("the name of the object does not match the name on the URL")
        return new

    def _merge_update(self, r: ResourceType, old: dict[str, Any], new: dict[str, Any],
                      subresource: str) -> dict[str, Any]:
        """What an update may change: status only via /status, no status via the main resource."""
        if subresource == "status":
            merged = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                merged["status"] = new["status"]
            merged["metadata"] = dict(old["metadata"])
            return merged  # shares subtrees with `old`: stored objects are never mutated in place
        if r.has_status:
            new = {k: v for k, v in new.items() if k != "status"}
            if "status" in old:
                new["status"] = old["status"]
        meta = new["metadata"]
        for key in _SERVER_META:
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        # managedFields left out of a write are kept; `[{}]` clears them; others replace them
        requested = meta.get("managedFields")
        if not requested and "managedFields" in old["metadata"]:
            meta["managedFields"] = old["metadata"]["managedFields"]
        elif isinstance(requested, list) and all(not e for e in requested):
            meta.pop("managedFields", None)
        return new

    async def _write_update(self, r: ResourceType, stored: dict[str, Any], old: dict[str, Any], new: dict[str, Any],
                            subresource: str, dry_run: bool, copy: bool, strict: bool = False,
                            tracking: _Tracking | None = None) -> dict[str, Any]:
        """The common tail of PUT and PATCH: precondition, merge, prune, admission, validation, storage.
        `old` is the `stored` object in r's version: the update is computed and checked in r's version,
        then stored in the storage version."""
        if subresource not in ("", "status") or (subresource == "status" and not r.has_status):
            raise ApiError(404, NOT_FOUND, f"the server could not find the requested resource ({subresource})")
        wanted_rv = new["metadata"].get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise conflict(r.plural, r.group, old["metadata"]["name"])
        new = self._merge_update(r, old, new, subresource)
        if r.kind in builtins.WEBHOOK_CONFIGURATION_KINDS and not r.custom:
            builtins.default_webhooks(r, new)  # a patch may add a webhook: decoding defaults it
        new = self._prune(r, builtins.convert_string_data(r, new), strict)
        if tracking is not None:
            new["metadata"] = {**new["metadata"], "managedFields": tracking(subresource, old, new)}
        if not new["metadata"].get("managedFields"):
            new["metadata"].pop("managedFields", None)
        new = await self._admit("UPDATE", r, subresource, new, old, dry_run)
        causes = self._validate(r, new, old)
        if causes:
            raise invalid(r.kind, r.group, old["metadata"]["name"], causes)
        await self._validate_admission("UPDATE", r, subresource, new, old, dry_run)
        if self.store.get(r.storage_key, object_key(old)) is not stored:
            raise _Raced  # written meanwhile (hooks await): recompute on the newer object
        if _spec_changed(old, new, counts_status=r.custom and not r.has_status):
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if r.storage_key == crds.CRD_KEY:
            crds.record_storage_version(new)
        if same_content(old, new):
            return clone(old) if copy else old  # no-op writes do not bump resourceVersion (as etcd3 storage)
        if dry_run:
            out = {**new, "metadata": {**new["metadata"]}}
            return clone(out) if copy else out
        written = await self.collector.write(r, await self._to_storage(r, new))
        return await self._out(r, written, copy)

    # ---------------------------------------------------------------- binding

    async def bind(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST pods/<name>/binding: sets spec.nodeName once, refused while scheduling gates remain."""
        r = self.resource("v1", "pods")
        await self._faults(RequestInfo("create", r, namespace, name, "binding"))
        pod = self._current(r, namespace, name)
        node = str(((body.get("target") or {}).get("name")) or "")
        if not node:
            raise invalid("Binding", "", name, [field_error("target.name", CAUSE_REQUIRED)])
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            raise ApiError(409, CONFLICT, f'Operation cannot be fulfilled on pods/binding "{name}": pod '
                           f'{name} is already assigned to node "{spec["nodeName"]}"', kind="pods/binding", name=name)
        if spec.get("schedulingGates"):
            raise ApiError(409, CONFLICT, f'Operation cannot be fulfilled on pods/binding "{name}": pod '
                           f"{name} has non-empty .spec.schedulingGates", kind="pods/binding", name=name)
        new = clone(pod)
        new["spec"]["nodeName"] = node
        conditions = [c for c in new.setdefault("status", {}).get("conditions") or []
                      if c.get("type") != builtins.CONDITION_POD_SCHEDULED]
        conditions.append({"type": builtins.CONDITION_POD_SCHEDULED, "status": "True",
                           "lastTransitionTime": timestamp(self.now())})
        new["status"]["conditions"] = conditions
        self.store.put(r.storage_key, new)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    async def evict(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST pods/<name>/eviction: a delete with the Eviction's options (no PodDisruptionBudgets here)."""
        r = self.resource("v1", "pods")
        await self._faults(RequestInfo("create", r, namespace, name, "eviction"))
        options = body.get("deleteOptions") or {}
        await self.delete(r, namespace, name, propagation=options.get("propagationPolicy"),
                          preconditions=options.get("preconditions"), dry_run="All" in (options.get("dryRun") or []),
                          copy=False)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # ---------------------------------------------------------------- delete

    async def delete(self, r: ResourceType, namespace: str, name: str, *, propagation: str | None = None,
                     preconditions: Mapping[str, Any] | None = None, dry_run: bool = False,
                     copy: bool = True) -> dict[str, Any]:
        """DELETE: immediate, or deletionTimestamp + finalizers (foreground/orphan add their own)."""
        namespace = namespace if r.namespaced else ""
        await self._faults(RequestInfo("delete", r, namespace, name, "", dry_run))
        obj = self._current(r, namespace, name)
        if r.storage_key == NAMESPACES_KEY and name in IMMORTAL_NAMESPACES:
            # kube-apiserver's NamespaceLifecycle admission plugin refuses these outright
            raise ApiError(403, FORBIDDEN, f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                           kind="namespaces", name=name)
        pre = preconditions or {}
        if (pre.get("uid") and pre["uid"] != obj["metadata"].get("uid")) or (
                pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]):
            raise conflict(r.plural, r.group, name)
        policy = propagation or default_policy(r, obj)
        if policy not in (POLICY_BACKGROUND, POLICY_FOREGROUND, POLICY_ORPHAN):
            raise bad_request(f"propagationPolicy: Unsupported value: {policy!r}")
        presented = await self._out(r, obj, copy=False)  # admission sees it in the request's version
        await self._admit_delete(r, presented, dry_run)
        await self._validate_admission("DELETE", r, "", None, presented, dry_run)
        current = self._current(r, namespace, name)  # hooks await: act on what is stored now
        if current["metadata"].get("uid") != obj["metadata"].get("uid"):
            raise not_found(r.plural, r.group, name)
        obj = current
        if dry_run:
            return await self._out(r, obj, copy)
        return await self._out(r, await self.collector.delete_object(r, obj, policy), copy)

    # ---------------------------------------------------------------- helpers for components

    def compact(self, storage_key: StorageKey | None = None) -> None:
        """Drop watch history (all resources or one) so watches from older revisions get 410 Gone."""
        self.store.compact(storage_key)


def _fixed(managed: list[dict[str, Any]]) -> _Tracking:
    """An apply's tracking: its managedFields were computed with the merge."""
    return lambda _sub, _old, _new: managed


def _spec_changed(old: Mapping[str, Any], new: Mapping[str, Any], counts_status: bool) -> bool:
    """generation counts changes to anything but metadata, and status only for custom resources
    without a status subresource (where status is ordinary content)."""
    ignored = {"metadata", "apiVersion", "kind"} | (set() if counts_status else {"status"})
    keys = (set(old) | set(new)) - ignored
    return any(old.get(k) != new.get(k) for k in keys)


def _finalizer_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Cause]:
    if not old["metadata"].get("deletionTimestamp"):
        return []
    before = set(old["metadata"].get("finalizers") or [])
    added = sorted(set(new["metadata"].get("finalizers") or []) - before)
    if added:
        return [field_error("metadata.finalizers", CAUSE_FORBIDDEN,
                            f"no new finalizers can be added if the object is being deleted, found new "
                            f"finalizers {json.dumps(added)}")]
    return []
