"""Deletion and garbage collection: finalizers, deletionTimestamp, owner references, namespaces, CRDs.

Used by the request pipeline (`devcluster.server.apiserver`) after admission: `delete_object` marks or
removes an object, `write` persists an update (removing an object whose last finalizer went away),
and every removal runs the garbage collector, as kube-controller-manager's GC and namespace
controller would, but synchronously so tests see a settled state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devcluster.server import crds
from devcluster.server.clock import Clock, timestamp
from devcluster.server.patching import clone
from devcluster.server.resources import ResourceRegistry, ResourceType
from devcluster.server.store import StorageKey, Store, object_key

FINALIZER_FOREGROUND = "foregroundDeletion"
FINALIZER_ORPHAN = "orphan"
POLICY_BACKGROUND = "Background"
POLICY_FOREGROUND = "Foreground"
POLICY_ORPHAN = "Orphan"
NAMESPACES_KEY: StorageKey = ("", "namespaces")


def default_policy(r: ResourceType, obj: Mapping[str, Any]) -> str:
    """The propagation policy when the request names none: the object's own GC finalizers, else
    Background (Orphan for batch/v1 Jobs)."""
    finalizers = obj["metadata"].get("finalizers") or []
    if FINALIZER_ORPHAN in finalizers:
        return POLICY_ORPHAN
    if FINALIZER_FOREGROUND in finalizers:
        return POLICY_FOREGROUND
    # batch/v1 Jobs default to orphaning their pods (kept for compatibility in Kubernetes).
    return POLICY_ORPHAN if (r.group, r.kind) == ("batch", "Job") else POLICY_BACKGROUND


def same_content(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Equal but for resourceVersion: such a write is a no-op (etcd3 storage skips it)."""
    strip = ("resourceVersion",)
    old_meta = {k: v for k, v in old["metadata"].items() if k not in strip}
    new_meta = {k: v for k, v in new["metadata"].items() if k not in strip}
    if old_meta != new_meta:
        return False
    keys = (set(old) | set(new)) - {"metadata", "apiVersion", "kind"}
    return all(old.get(k) == new.get(k) for k in keys)


class GarbageCollector:
    """Deletion phases over one store: mark with finalizers, remove, then collect what depended on it."""

    def __init__(self, store: Store, registry: ResourceRegistry, now: Clock) -> None:
        self.store = store
        self.registry = registry
        self.now = now

    async def write(self, r: ResourceType, new: dict[str, Any]) -> dict[str, Any]:
        """Persist; an object being deleted whose last finalizer went away is removed instead."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            removed = self.store.remove(r.storage_key, object_key(new))
            assert removed is not None
            await self._after_removal(r, removed, POLICY_BACKGROUND)
            return removed
        stored = self.store.put(r.storage_key, new)
        if r.storage_key == crds.CRD_KEY:
            crds.register(self.registry, stored)
        return stored

    async def delete_object(self, r: ResourceType, obj: dict[str, Any], policy: str) -> dict[str, Any]:
        """Phase 1 of deletion: mark (deletionTimestamp + finalizers) or remove right away."""
        meta = obj["metadata"]
        uid = str(meta.get("uid", ""))
        finalizers = list(meta.get("finalizers") or [])
        has_dependents = bool(self.store.dependents(uid))
        if policy == POLICY_FOREGROUND and has_dependents and FINALIZER_FOREGROUND not in finalizers:
            finalizers.append(FINALIZER_FOREGROUND)
        if policy == POLICY_ORPHAN and has_dependents and FINALIZER_ORPHAN not in finalizers:
            finalizers.append(FINALIZER_ORPHAN)
        if r.storage_key == NAMESPACES_KEY:
            return await self._delete_namespace(r, obj)
        if not finalizers:
            removed = self.store.remove(r.storage_key, object_key(obj))
            assert removed is not None
            await self._after_removal(r, removed, policy)
            return removed
        new = clone(obj)
        new["metadata"]["finalizers"] = finalizers
        if not meta.get("deletionTimestamp"):
            new["metadata"]["deletionTimestamp"] = timestamp(self.now())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
        stored = obj if same_content(obj, new) else self.store.put(r.storage_key, new)
        if FINALIZER_ORPHAN in finalizers:
            await self._orphan_dependents(uid)
            stored = await self._drop_finalizer(r, stored, FINALIZER_ORPHAN)
        elif FINALIZER_FOREGROUND in finalizers:
            await self._delete_dependents(uid, POLICY_BACKGROUND)
            stored = await self._finish_foreground(r, stored)
        return stored

    async def collect_if_ownerless(self, r: ResourceType, obj: dict[str, Any]) -> None:
        """A just-created object whose every owner is gone is deleted, as kube-controller-manager's
        GC deletes a dependent whose owners are all absent: a controller acting on a stale view (a Job
        controller creating pods for a Job deleted meanwhile) leaves nothing behind."""
        refs = obj["metadata"].get("ownerReferences") or []
        if not refs or any(self.store.by_uid(str(ref.get("uid"))) is not None for ref in refs):
            return
        finalizers = obj["metadata"].get("finalizers") or []
        policy = (POLICY_ORPHAN if FINALIZER_ORPHAN in finalizers else
                  POLICY_FOREGROUND if FINALIZER_FOREGROUND in finalizers else POLICY_BACKGROUND)
        await self.delete_object(r, obj, policy)

    async def _delete_namespace(self, r: ResourceType, ns: dict[str, Any]) -> dict[str, Any]:
        """Namespace deletion: Terminating, delete its content, remove it once empty."""
        name = ns["metadata"]["name"]
        if not ns["metadata"].get("deletionTimestamp"):
            new = clone(ns)
            new["metadata"]["deletionTimestamp"] = timestamp(self.now())
            new.setdefault("status", {})["phase"] = "Terminating"
            ns = self.store.put(r.storage_key, new)
        for res in list(self.registry):
            if res.namespaced and res.storage_version:
                for obj in list(self.store.items(res.storage_key, name)):
                    current = self.store.get(res.storage_key, object_key(obj))
                    if current is not None and not current["metadata"].get("deletionTimestamp"):
                        await self.delete_object(res, current, POLICY_BACKGROUND)
        return await self._finish_namespace(name) or ns

    async def _finish_namespace(self, name: str) -> dict[str, Any] | None:
        ns = self.store.get(NAMESPACES_KEY, ("", name))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        if any(self.store.count(key, name) for key in self.store.storage_keys()):
            return None
        return self.store.remove(NAMESPACES_KEY, ("", name))

    async def _drop_finalizer(self, r: ResourceType, obj: dict[str, Any], finalizer: str) -> dict[str, Any]:
        new = clone(obj)
        new["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        return await self.write(r, new)

    async def _finish_foreground(self, r: ResourceType, owner: dict[str, Any]) -> dict[str, Any]:
        """A foreground-deleted owner goes away once no dependent remains."""
        if self.store.dependents(str(owner["metadata"].get("uid"))):
            return owner
        current = self.store.get(r.storage_key, object_key(owner))
        if current is None or FINALIZER_FOREGROUND not in (current["metadata"].get("finalizers") or []):
            return owner
        return await self._drop_finalizer(r, current, FINALIZER_FOREGROUND)

    async def _orphan_dependents(self, owner_uid: str) -> None:
        for key, dep in self.store.dependents(owner_uid):
            new = clone(dep)
            refs = [ref for ref in dep["metadata"].get("ownerReferences") or [] if ref.get("uid") != owner_uid]
            new["metadata"]["ownerReferences"] = refs
            if not refs:
                del new["metadata"]["ownerReferences"]
            self.store.put(key, new)

    async def _delete_dependents(self, owner_uid: str, policy: str) -> None:
        """The garbage collector: dependents with no remaining live owner are deleted, others unlinked."""
        for key, dep in self.store.dependents(owner_uid):
            res = self.registry.storage_resource(*key)
            if res is None:
                continue
            refs = dep["metadata"].get("ownerReferences") or []
            others = [ref for ref in refs if ref.get("uid") != owner_uid and self.store.by_uid(str(ref.get("uid")))]
            if others:
                new = clone(dep)
                new["metadata"]["ownerReferences"] = [ref for ref in refs if ref.get("uid") != owner_uid]
                self.store.put(key, new)
            elif not dep["metadata"].get("deletionTimestamp"):
                await self.delete_object(res, dep, policy)

    async def _after_removal(self, r: ResourceType, removed: dict[str, Any], policy: str) -> None:
        """Phase 2 of deletion: GC of dependents, waiting foreground owners, namespaces, CRDs."""
        meta = removed["metadata"]
        if policy != POLICY_ORPHAN:
            await self._delete_dependents(str(meta.get("uid", "")), POLICY_BACKGROUND)
        for ref in meta.get("ownerReferences") or []:
            found = self.store.by_uid(str(ref.get("uid")))
            if found is not None:
                owner_r = self.registry.storage_resource(*found[0])
                if owner_r is not None and found[1]["metadata"].get("deletionTimestamp"):
                    await self._finish_foreground(owner_r, found[1])
        if r.namespaced and meta.get("namespace"):
            await self._finish_namespace(meta["namespace"])
        if r.storage_key == crds.CRD_KEY:
            group, plural = crds.group_plural(removed)
            for obj in list(self.store.items((group, plural))):
                self.store.remove((group, plural), object_key(obj))
            self.store.drop((group, plural))
            self.registry.remove_group_resource(group, plural)
