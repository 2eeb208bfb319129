"""The kopf admission handlers: thin adapters from AdmissionReviews to the pure rules.

`register_handlers(registry)` adds to a kopf registry, for every integrated kind in the registry
(controller.core.jobs.integrations), one handler per webhook rule its adapter names, built from the
rule's action (`ACTIONS`: suspend a queued object, gate and finalize a queued plain pod;
validate, with a running Job's or a group member's extra checks; `webhooks.defaulting`,
`webhooks.validation`, `webhooks.running_jobs`); then the topology gate on pods of admitted pod sets
and the validators of tasq's kinds. Handler ids are the URL paths the webhook configurations call.
Called by webhooks.reviewing (the registry is its handler table) and tests.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final

import kopf

from controller.api import constants as c
from controller.core.jobs.framework import GroupVersionKind, WebhookAction
from controller.core.jobs.integrations import ALL_INTEGRATIONS, POD_GROUP
from webhooks import defaulting, running_jobs
from webhooks.validation import FieldError, validate, validate_update
from webhooks.validation.pods import conflicts_with_group

DENIAL_CODE: Final = 422  # kube-apiserver's code for an invalid object (StatusReasonInvalid)
_CREATE_UPDATE: Final = ("CREATE", "UPDATE")

# The validated kinds of tasq's group: (plural, handler id, Kind as kube-apiserver names it).
TASQ_KINDS: Final = (
    (c.PLURAL_TOPOLOGIES, c.WEBHOOK_VALIDATE_TOPOLOGY, c.KIND_TOPOLOGY),
    (c.PLURAL_RESOURCE_FLAVORS, c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, c.KIND_RESOURCE_FLAVOR),
    (c.PLURAL_CLUSTER_QUEUES, c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, c.KIND_CLUSTER_QUEUE),
    (c.PLURAL_LOCAL_QUEUES, c.WEBHOOK_VALIDATE_LOCAL_QUEUE, c.KIND_LOCAL_QUEUE),
    (c.PLURAL_WORKLOADS, c.WEBHOOK_VALIDATE_WORKLOAD, c.KIND_WORKLOAD),
    (c.PLURAL_COHORTS, c.WEBHOOK_VALIDATE_COHORT, c.KIND_COHORT),
)


def denial_message(kind: str, group: str, name: str, errors: list[FieldError]) -> str:
    """The text kube-apiserver prints for an invalid object: `Kind.group "name" is invalid: ...`,
    one error bare, several as a bracketed list, each with its field path."""
    qualified = f"{kind}.{group}" if group else kind
    listed = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    return f'{qualified} "{name}" is invalid: {listed}'


def _name(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not name and isinstance(metadata, Mapping):
        name = metadata.get("generateName")
    return name if isinstance(name, str) else ""


def check(kind: str, group: str, operation: str | None, body: Mapping[str, Any],
          old: Mapping[str, Any] | None, extra: list[FieldError] | None = None) -> None:
    """Deny with every error (code 422) or return: the one place a verdict becomes an exception,
    because kopf reads a denial from the handler's AdmissionError."""
    new = dict(body)
    errors = validate_update(dict(old), new) if operation == "UPDATE" and old is not None else validate(new)
    errors += extra or []
    if errors:
        raise kopf.AdmissionError(denial_message(kind, group, _name(body), errors), code=DENIAL_CODE)


class JsonPatchFn:
    """A transform of kopf's `Patch.fns` (it patches the reviewed object in place) that also carries
    its RFC 6902 operations, so `webhooks.reviewing` sends them as they are instead of diffing a copy."""

    def __init__(self, ops: defaulting.JsonPatch) -> None:
        self.ops = ops

    def __call__(self, body: Any) -> None:  # kopf's RawBody
        new = defaulting.applied(body, self.ops)
        body.clear()
        body.update(new)


def _patch_with(patch: kopf.Patch, ops: defaulting.JsonPatch) -> None:
    """Hand the JSON patch to the reviewer (kopf's Patch: a transform of the reviewed object)."""
    if ops:
        patch.fns.append(JsonPatchFn(ops))


async def _suspend(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _patch_with(patch, defaulting.suspend_job(dict(body)))  # a Job and a JobSet both suspend by spec.suspend


async def _mutate_pod(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _patch_with(patch, defaulting.gate_pod(dict(body)))


async def _mutate_queued_pod(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    _patch_with(patch, defaulting.manage_pod(dict(body)))


GroupMembers = Callable[[str], Sequence[Mapping[str, Any]]]
"""The pods a process knows in one group, by its Workload key (`namespace/name`): the operator's cache."""


Handler = Callable[..., Coroutine[Any, Any, None]]
"""A kopf admission handler (body, patch and kopf's other keyword arguments)."""


def _pod_validator(gvk: GroupVersionKind, group_members: GroupMembers | None) -> Handler:
    """Queued pods: their own metadata and, where the process keeps a cache, on creation the
    conflicts with the pods of their group it holds (a process serving webhooks only checks the
    first; the job reconciler refuses such a group with an Event either way)."""
    async def validate_queued_pod(body: kopf.Body, **kwargs: Any) -> None:
        operation, pod = kwargs.get("operation"), dict(body)
        extra: list[FieldError] = []
        key = POD_GROUP.member_key(pod)
        if operation == "CREATE" and group_members is not None and key is not None:
            extra = conflicts_with_group(pod, group_members(key))
        check(gvk.kind, gvk.group, operation, body, kwargs.get("old"), extra)
    return validate_queued_pod


def _running_job_validator(gvk: GroupVersionKind, group_members: GroupMembers | None) -> Handler:
    del group_members

    async def validate_job(body: kopf.Body, **kwargs: Any) -> None:
        old, operation = kwargs.get("old"), kwargs.get("operation")
        extra = running_jobs.validate_running_update(dict(old), dict(body)) \
            if operation == "UPDATE" and old is not None else []
        check(gvk.kind, gvk.group, operation, body, old, extra)
    return validate_job


def _kind_validator(gvk: GroupVersionKind, group_members: GroupMembers | None) -> Handler:
    del group_members

    async def validate_kind(body: kopf.Body, **kwargs: Any) -> None:
        check(gvk.kind, gvk.group, kwargs.get("operation"), body, kwargs.get("old"))
    return validate_kind


def _fixed(handler: Handler) -> Callable[[GroupVersionKind, GroupMembers | None], Handler]:
    return lambda gvk, group_members: handler


ACTIONS: Final[Mapping[WebhookAction, Callable[[GroupVersionKind, GroupMembers | None], Handler]]] = {
    WebhookAction.SUSPEND: _fixed(_suspend),
    WebhookAction.MANAGE_POD: _fixed(_mutate_queued_pod),
    WebhookAction.VALIDATE: _kind_validator,
    WebhookAction.VALIDATE_RUNNING_JOB: _running_job_validator,
    WebhookAction.VALIDATE_GROUP_MEMBER: _pod_validator,
}
"""Each webhook action an integration's rule may name -> the handler for a kind (its identity, and
where a group's members are found)."""


def _validator(kind: str) -> Handler:
    async def handler(body: kopf.Body, **kwargs: Any) -> None:
        check(kind, c.GROUP, kwargs.get("operation"), body, kwargs.get("old"))
    handler.__name__ = f"validate_{kind.lower()}"
    return handler


SERVED_VERSIONS: dict[str, tuple[str, ...]] = {
    c.PLURAL_TOPOLOGIES: (c.VERSION_V1BETA2, c.VERSION_V1BETA1, c.VERSION_V1ALPHA1),
    c.PLURAL_COHORTS: (c.VERSION_V1BETA2,)}
"""Versions each kind is served in (as the CRDs declare them); the others: v1beta2 and v1beta1."""


def register_handlers(registry: kopf.OperatorRegistry, group_members: GroupMembers | None = None) -> None:
    """Add every admission handler to `registry` (each webhook path is its handler id). They are
    coroutines only so a caller runs them on its loop instead of a thread: they never await.
    `group_members`: where the queued-pod validator finds a new pod's group (None: not checked)."""
    for job in ALL_INTEGRATIONS:
        gvk = job.gvk
        for rule in job.webhooks:
            handler = ACTIONS[rule.action](gvk, group_members)
            if rule.action.mutating:
                kopf.on.mutate(gvk.group, gvk.version, gvk.plural, id=rule.handler_id, operations=list(rule.operations),
                               registry=registry)(handler)
            else:
                kopf.on.validate(gvk.group, gvk.version, gvk.plural, id=rule.handler_id,
                                 operations=list(rule.operations), registry=registry)(handler)
    kopf.on.mutate("", "v1", "pods", id=c.WEBHOOK_MUTATE_POD, operations=["CREATE"],
                   registry=registry)(_mutate_pod)
    for plural, handler_id, kind in TASQ_KINDS:
        # One registration per served version: kopf otherwise knows only the preferred one and
        # refuses reviews of the others (a Kueue manifest's Topology is v1alpha1).
        for version in SERVED_VERSIONS.get(plural, (c.VERSION_V1BETA2, c.VERSION_V1BETA1)):
            # "*": a Workload's status writes come to the same path (the configuration routes them here)
            kopf.on.validate(c.GROUP, version, plural, id=handler_id, operations=_CREATE_UPDATE,
                             subresource="*" if plural == c.PLURAL_WORKLOADS else None,
                             registry=registry)(_validator(kind))
