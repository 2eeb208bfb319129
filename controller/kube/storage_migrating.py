"""Moving every stored tasq object to its kind's storage version after an upgrade (`tasq migrate-storage`).

Per kind of `crds.KINDS`: its CRD must be installed, store this tasq's storage version and be able to
convert what it stored before (`check_crd`, pure); every object is rewritten with a no-op update (the
API server encodes it anew in the storage version, as kube-storage-version-migrator and Kueue's
migration script do); then the CRD's `status.storedVersions` becomes the storage version alone.
Conflicts re-read the object and try again; a dry run lists what would be rewritten and writes
nothing. Called by controller/commands/migrate_storage.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controller.api import constants as c
from controller.api.crds import KINDS, KindSpec
from controller.kube.api import ApiError, KubeApi, path, retrying

CRDS: Final = ("apiextensions.k8s.io/v1", "customresourcedefinitions")
PAGE_SIZE: Final = 500
"""Objects per list request (the API server's continue token pages through the rest)."""
PARALLEL_WRITES: Final = 8
"""No-op updates in flight at once."""
CONFLICT_ATTEMPTS: Final = 5
"""Tries of one object's update when each finds it changed since it was read (409)."""

REASON_NOT_INSTALLED: Final = "CRDNotInstalled"
REASON_OTHER_STORAGE: Final = "StorageVersionDiffers"
REASON_CANNOT_CONVERT: Final = "NoConversion"
REASON_FORBIDDEN: Final = "Forbidden"
REASON_FAILED: Final = "RequestFailed"
REASON_REFUSED: Final = "ObjectsRefused"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a kind was not migrated: a PascalCase reason and a message naming the CRD and what to do."""

    reason: str
    message: str


@dataclass(slots=True)
class KindMigration:
    """What happened to one kind: the storedVersions found, the objects rewritten (or, in a dry run,
    that would be: `names`), those deleted meanwhile, conflicts retried, the storedVersions left."""

    kind: str
    crd: str
    storage: str
    stored_before: list[str] = field(default_factory=list)
    rewritten: int = 0
    gone: int = 0
    conflicts: int = 0
    refused: list[str] = field(default_factory=list)
    """`namespace/name: why` of each object the API server refused to rewrite (the others go on)."""
    names: list[str] = field(default_factory=list)
    stored_after: list[str] = field(default_factory=list)
    problem: Problem | None = None


Progress = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# Phase 1 (pure): is this CRD one this tasq can migrate, and is there anything to do?


def _schema_without_descriptions(node: Any) -> Any:
    """A schema with its descriptions dropped: two versions that differ only there hold the same fields."""
    if isinstance(node, Mapping):
        return {k: _schema_without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_schema_without_descriptions(v) for v in node]
    return node


def check_crd(spec: KindSpec, crd: Mapping[str, Any]) -> Problem | None:
    """Why the installed CRD of `spec` cannot be migrated, or None. It must store this tasq's storage
    version, and every other version it stored objects in must either have the storage version's
    fields or be converted by a webhook: with strategy None the API server only relabels apiVersion,
    so a renamed field (v1beta1 `cohort`) would be dropped on the rewrite."""
    name = spec.crd_name
    versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or []}
    storage = next((n for n, v in versions.items() if v.get("storage")), None)
    if storage != spec.storage_version:
        return Problem(REASON_OTHER_STORAGE,
                       f"CRD {name} stores {storage}, this tasq stores {spec.storage_version}: install this "
                       "tasq's CRDs first (kubectl apply --server-side -k config/crd)")
    strategy = ((crd.get("spec") or {}).get("conversion") or {}).get("strategy", "None")
    if strategy == "Webhook":
        return None
    fields = _schema_without_descriptions((versions[storage].get("schema") or {}).get("openAPIV3Schema"))
    for stored in (crd.get("status") or {}).get("storedVersions") or []:
        other = versions.get(stored)
        if stored != storage and (other is None or _schema_without_descriptions(
                (other.get("schema") or {}).get("openAPIV3Schema")) != fields):
            return Problem(REASON_CANNOT_CONVERT,
                           f"CRD {name} has objects stored as {stored} but conversion strategy {strategy}: their "
                           f"fields that {storage} renamed would be lost; run tasq (its conversion webhook) "
                           "with this version's configuration first")
    return None


def needs_rewrite(spec: KindSpec, crd: Mapping[str, Any]) -> bool:
    """Whether objects may still be stored in another version than the storage version."""
    stored = list((crd.get("status") or {}).get("storedVersions") or [])
    return stored != [spec.storage_version]


# ---------------------------------------------------------------------------------------------
# Phase 2: the API: read the CRD, page through the objects, rewrite each, set storedVersions.


def _api_problem(error: ApiError, what: str) -> Problem:
    if error.forbidden:
        return Problem(REASON_FORBIDDEN, f"not allowed to {what}: {error.message}")
    return Problem(REASON_FAILED, f"{what}: {error.message}")


def _object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


async def _page(api: KubeApi, resource: tuple[str, str], token: str) -> dict[str, Any]:
    """One list request of PAGE_SIZE objects, from `token` (the previous page's continue token)."""
    query = {"limit": str(PAGE_SIZE), **({"continue": token} if token else {})}
    return await retrying(lambda: api.request("GET", path(*resource), query=query))


async def _pages(api: KubeApi, resource: tuple[str, str]) -> AsyncIterator[list[dict[str, Any]]]:
    """Each page of the collection, its items with apiVersion and kind set."""
    token = ""
    while True:
        answer = await _page(api, resource, token)
        kind = str(answer.get("kind", "")).removesuffix("List")
        yield [{**item, "apiVersion": resource[0], "kind": kind} for item in answer.get("items") or []]
        token = str((answer.get("metadata") or {}).get("continue") or "")
        if not token:
            return


async def _replace(api: KubeApi, resource: tuple[str, str], obj: dict[str, Any]) -> None:
    """PUT `obj` as it is (its resourceVersion included), transient failures retried."""
    meta = obj["metadata"]
    await retrying(lambda: api.replace(resource, meta.get("namespace"), meta["name"], obj))


async def _rewrite(api: KubeApi, resource: tuple[str, str], obj: dict[str, Any], result: KindMigration) -> None:
    """One no-op update of `obj` with its resourceVersion; on a conflict the object is read again
    and the update tried again with what was read. An object deleted meanwhile counts as gone."""
    meta = obj["metadata"]
    namespace, name = meta.get("namespace"), meta["name"]
    for _ in range(CONFLICT_ATTEMPTS):
        try:
            await _replace(api, resource, obj)
            result.rewritten += 1
            return
        except ApiError as e:
            if e.not_found:
                result.gone += 1
                return
            if e.status in (400, 422):  # this object is refused (a webhook, a rule): the others go on
                result.refused.append(f"{_object_name(obj)}: {e.message}")
                return
            if not e.conflict:
                raise
        result.conflicts += 1
        try:
            obj = {**await retrying(lambda: api.get(resource, namespace, name)),
                   "apiVersion": resource[0], "kind": obj["kind"]}
        except ApiError as e:
            if e.not_found:
                result.gone += 1
                return
            raise
    raise ApiError(409, f"{_object_name(obj)} changed on each of {CONFLICT_ATTEMPTS} updates; run again")


async def _rewrite_all(api: KubeApi, spec: KindSpec, result: KindMigration, dry_run: bool,
                       progress: Progress) -> None:
    """Every object of the kind rewritten (or listed, in a dry run), PARALLEL_WRITES at a time."""
    resource = (f"{c.GROUP}/{spec.storage_version}", spec.plural)
    limit = asyncio.Semaphore(PARALLEL_WRITES)

    async def one(obj: dict[str, Any]) -> None:
        async with limit:
            await _rewrite(api, resource, obj, result)

    async for page in _pages(api, resource):
        if dry_run:
            result.names.extend(_object_name(obj) for obj in page)
            continue
        await _gather(one(obj) for obj in page)
        progress(f"{spec.kind}: {result.rewritten} rewritten so far")


async def _gather(tasks: Any) -> None:
    """Run every awaitable; the first failure is raised once all have ended (none left running)."""
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome


async def _patch_stored_versions(api: KubeApi, spec: KindSpec, crd: Mapping[str, Any]) -> dict[str, Any]:
    """One merge patch of the CRD's status: storedVersions = [storage version], at `crd`'s resourceVersion."""
    patch = {"metadata": {"resourceVersion": crd["metadata"]["resourceVersion"]},
             "status": {"storedVersions": [spec.storage_version]}}
    return await retrying(lambda: api.merge_patch(CRDS, None, spec.crd_name, patch, subresource="status"))


async def _set_stored_versions(api: KubeApi, spec: KindSpec, crd: dict[str, Any]) -> list[str]:
    """`status.storedVersions` = [storage version], with the CRD's resourceVersion (re-read on a conflict)."""
    for _ in range(CONFLICT_ATTEMPTS):
        try:
            answer = await _patch_stored_versions(api, spec, crd)
            return list((answer.get("status") or {}).get("storedVersions") or [])
        except ApiError as e:
            if not e.conflict:
                raise
        crd = await retrying(lambda: api.get(CRDS, None, spec.crd_name))
    raise ApiError(409, f"CRD {spec.crd_name} changed on each of {CONFLICT_ATTEMPTS} updates; run again")


async def migrate_kind(api: KubeApi, spec: KindSpec, dry_run: bool, progress: Progress) -> KindMigration:
    """One kind: checked, its objects rewritten, its storedVersions set (see the module docstring)."""
    result = KindMigration(spec.kind, spec.crd_name, spec.storage_version)
    try:
        crd = await retrying(lambda: api.get(CRDS, None, spec.crd_name))
    except ApiError as e:
        result.problem = Problem(REASON_NOT_INSTALLED, f"CRD {spec.crd_name} is not installed: install tasq's "
                                 "CRDs first (kubectl apply --server-side -k config/crd)") \
            if e.not_found else _api_problem(e, f"read CRD {spec.crd_name}")
        return result
    result.stored_before = result.stored_after = list((crd.get("status") or {}).get("storedVersions") or [])
    result.problem = check_crd(spec, crd)
    if result.problem is not None or not needs_rewrite(spec, crd):
        return result
    try:
        await _rewrite_all(api, spec, result, dry_run, progress)
        if result.refused:
            result.problem = Problem(REASON_REFUSED, f"{len(result.refused)} object(s) could not be rewritten, so "
                                     f"storedVersions is left as it is; the first: {result.refused[0]}")
        elif not dry_run:
            result.stored_after = await _set_stored_versions(api, spec, crd)
    except ApiError as e:
        result.problem = _api_problem(e, f"rewrite {spec.plural}.{c.GROUP} and update CRD {spec.crd_name}")
    return result


async def migrate_storage(api: KubeApi, dry_run: bool, progress: Progress,
                          kinds: tuple[KindSpec, ...] = KINDS) -> list[KindMigration]:
    """Every kind in turn; a kind that fails does not stop the others."""
    results = []
    for spec in kinds:
        progress(f"{spec.kind}: checking CRD {spec.crd_name}")
        results.append(await migrate_kind(api, spec, dry_run, progress))
    return results


