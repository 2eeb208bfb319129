"""The storage layer: objects per resource, one global resourceVersion, watch history.

Plays etcd's role for the request pipeline (`devcluster.server.apiserver`): every write gets the next
revision, lands in a bounded per-resource history (older revisions are compacted: watches from
them get 410 Gone) and is pushed synchronously to subscribers. It knows nothing of validation.
Stored objects are never mutated in place: a write stores a new dict, so events can share them.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from devcluster.server.errors import ETCD_MAX_REQUEST_BYTES, etcd_request_too_large

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
HISTORY_LIMIT = 20_000  # events retained per resource before older revisions are compacted

StorageKey = tuple[str, str]  # (group, plural)
ObjectKey = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One committed write; `old` is the previous object (None for ADDED) for selector transitions."""

    type: str
    object: dict[str, Any]
    old: dict[str, Any] | None
    revision: int


class Compacted(Exception):
    """The requested revision is older than the retained history (becomes 410 Gone)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(requested, oldest)
        self.requested = requested
        self.oldest = oldest


Subscriber = Callable[[StoredEvent], None]


@dataclass
class _Bucket:
    """All objects of one storage key, its history and its subscribers."""

    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    history: deque[StoredEvent] = field(default_factory=deque)
    floor: int = 0  # events with revision > floor are retained
    subscribers: list[Subscriber] = field(default_factory=list)
    per_namespace: dict[str, int] = field(default_factory=dict)  # object counts, for namespace cleanup


_TXN_OVERHEAD = 64
"""Bytes of an etcd write besides its value and its key's three mentions (compare, put, get on
failure): the raft and gRPC framing kube-apiserver's guarded update adds, about."""


def etcd_request_bytes(key: StorageKey, obj: dict[str, Any]) -> int:
    """About what kube-apiserver sends etcd for this write: the object as compact JSON (tasq's kinds
    are stored as JSON; built-in kinds as protobuf, smaller, so this errs high for them) and the key
    `/registry/<group>/<plural>/<namespace>/<name>` three times."""
    namespace, name = object_key(obj)
    group, plural = key
    etcd_key = "/".join(part for part in ("/registry", group, plural, namespace, name) if part)
    value = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    return len(value) + 3 * len(etcd_key.encode()) + _TXN_OVERHEAD


def object_key(obj: dict[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Store:
    """Objects by storage key and (namespace, name), with a global revision counter."""

    def __init__(self, history_limit: int = HISTORY_LIMIT) -> None:
        self.revision = 1
        self.history_limit = history_limit
        self._buckets: dict[StorageKey, _Bucket] = {}
        # owner uid -> keys of objects whose ownerReferences name it (for garbage collection)
        self._dependents: dict[str, set[tuple[StorageKey, ObjectKey]]] = {}
        self._by_uid: dict[str, tuple[StorageKey, ObjectKey]] = {}

    def _bucket(self, key: StorageKey) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket()
        return bucket

    # ---------------------------------------------------------------- reads

    def get(self, key: StorageKey, obj_key: ObjectKey) -> dict[str, Any] | None:
        bucket = self._buckets.get(key)
        return bucket.objects.get(obj_key) if bucket else None

    def items(self, key: StorageKey, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        bucket = self._buckets.get(key)
        if not bucket:
            return iter(())
        if namespace is None:
            return iter(list(bucket.objects.values()))
        return iter([o for (ns, _n), o in bucket.objects.items() if ns == namespace])

    def count(self, key: StorageKey, namespace: str | None = None) -> int:
        """Objects of one resource (in one namespace), in O(1)."""
        bucket = self._buckets.get(key)
        if not bucket:
            return 0
        return len(bucket.objects) if namespace is None else bucket.per_namespace.get(namespace, 0)

    def storage_keys(self) -> list[StorageKey]:
        return list(self._buckets)

    def dependents(self, owner_uid: str) -> list[tuple[StorageKey, dict[str, Any]]]:
        """Objects whose ownerReferences include `owner_uid`."""
        out = []
        for key, obj_key in sorted(self._dependents.get(owner_uid, ())):
            obj = self.get(key, obj_key)
            if obj is not None:
                out.append((key, obj))
        return out

    def by_uid(self, uid: str) -> tuple[StorageKey, dict[str, Any]] | None:
        """The live object with this uid, if any (owner lookups of the garbage collector)."""
        where = self._by_uid.get(uid)
        if where is None:
            return None
        obj = self.get(*where)
        return (where[0], obj) if obj is not None else None

    def events_since(self, key: StorageKey, revision: int) -> list[StoredEvent]:
        """Retained events after `revision`; Compacted if history no longer reaches back that far."""
        bucket = self._bucket(key)
        if revision < bucket.floor:
            raise Compacted(revision, bucket.floor)
        return [e for e in bucket.history if e.revision > revision]

    def oldest_revision(self, key: StorageKey) -> int:
        return self._bucket(key).floor

    # ---------------------------------------------------------------- writes

    def put(self, key: StorageKey, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` under the next revision (written into metadata.resourceVersion); refused as etcd
        refuses it (nothing stored) when the write would exceed etcd's request limit."""
        size = etcd_request_bytes(key, obj)
        if size > ETCD_MAX_REQUEST_BYTES:
            raise etcd_request_too_large(size)
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        bucket = self._bucket(key)
        obj_key = object_key(obj)
        old = bucket.objects.get(obj_key)
        bucket.objects[obj_key] = obj
        if old is None:
            bucket.per_namespace[obj_key[0]] = bucket.per_namespace.get(obj_key[0], 0) + 1
        self._reindex(key, obj_key, old, obj)
        self._emit(bucket, StoredEvent(ADDED if old is None else MODIFIED, obj, old, self.revision))
        return obj

    def remove(self, key: StorageKey, obj_key: ObjectKey) -> dict[str, Any] | None:
        """Delete an object; its DELETED event carries the final state at a new revision."""
        bucket = self._buckets.get(key)
        old = bucket.objects.pop(obj_key, None) if bucket else None
        if old is None or bucket is None:
            return None
        bucket.per_namespace[obj_key[0]] -= 1
        self.revision += 1
        final = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.revision)}}
        self._reindex(key, obj_key, old, None)
        self._emit(bucket, StoredEvent(DELETED, final, old, self.revision))
        return final

    def drop(self, key: StorageKey) -> None:
        """Forget a whole resource (its CRD was deleted), without events."""
        bucket = self._buckets.pop(key, None)
        if bucket:
            for obj_key, obj in bucket.objects.items():
                self._reindex(key, obj_key, obj, None)

    def compact(self, key: StorageKey | None = None) -> None:
        """Drop retained history (all resources, or one): watches from older revisions get 410."""
        for k in [key] if key else list(self._buckets):
            bucket = self._bucket(k)
            bucket.history.clear()
            bucket.floor = self.revision

    def compact_to(self, revision: int) -> None:
        """etcd's compaction: history at or before `revision` is dropped in every resource, so a watch
        from an older revision gets 410 Gone while one from a later revision resumes."""
        for bucket in self._buckets.values():
            while bucket.history and bucket.history[0].revision <= revision:
                bucket.history.popleft()
            bucket.floor = max(bucket.floor, revision)

    def subscribe(self, key: StorageKey, subscriber: Subscriber) -> Callable[[], None]:
        bucket = self._bucket(key)
        bucket.subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in bucket.subscribers:
                bucket.subscribers.remove(subscriber)
        return unsubscribe

    def _emit(self, bucket: _Bucket, event: StoredEvent) -> None:
        bucket.history.append(event)
        while len(bucket.history) > self.history_limit:
            bucket.floor = bucket.history.popleft().revision
        for subscriber in list(bucket.subscribers):
            subscriber(event)

    def _reindex(self, key: StorageKey, obj_key: ObjectKey, old: dict[str, Any] | None,
                 new: dict[str, Any] | None) -> None:
        if new is None and old is not None:
            self._by_uid.pop(str(old["metadata"].get("uid", "")), None)
        elif new is not None:
            self._by_uid[str(new["metadata"].get("uid", ""))] = (key, obj_key)
        for uid in _owner_uids(old) - _owner_uids(new):
            entries = self._dependents.get(uid)
            if entries is not None:
                entries.discard((key, obj_key))
                if not entries:
                    del self._dependents[uid]
        for uid in _owner_uids(new) - _owner_uids(old):
            self._dependents.setdefault(uid, set()).add((key, obj_key))


def _owner_uids(obj: dict[str, Any] | None) -> set[str]:
    if not obj:
        return set()
    return {str(r.get("uid")) for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid")}
