"""tasq's admission handlers as a table of its own: thin adapters from a review's request to the pure rules.

`handler_table(group_members)` lists, for every integrated kind in the registry
(controller.core.jobs.integrations), one `Handler` per webhook rule its adapter names, built from the
rule's action (`ACTIONS`: suspend a queued object, gate and finalize a queued plain pod; validate,
with a running Job's or a group member's extra checks; `webhooks.defaulting`, `webhooks.validation`,
`webhooks.running_jobs`); then the topology gate on pods of admitted pod sets and the validators of
tasq's kinds. Each handler reads an `AdmissionRequest` and returns its verdict as a value: a `Denial`
(message and code) or the RFC 6902 operations it asks for (empty: allowed as it is). A handler's
path is the URL path the webhook configurations call. Read by webhooks.reviewing and tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controller.api import constants as c
from controller.core.jobs.framework import GroupVersionKind, WebhookAction
from controller.core.jobs.integrations import ALL_INTEGRATIONS, POD_GROUP
from webhooks import defaulting, running_jobs
from webhooks.validation import FieldError, validate, validate_update
from webhooks.validation.pods import conflicts_with_group

DENIAL_CODE: Final = 422  # kube-apiserver's code for an invalid object (StatusReasonInvalid)
_CREATE_UPDATE: Final = ("CREATE", "UPDATE")
ANY_SUBRESOURCE: Final = "*"

# The validated kinds of tasq's group: (plural, handler id, Kind as kube-apiserver names it).
TASQ_KINDS: Final = (
    (c.PLURAL_TOPOLOGIES, c.WEBHOOK_VALIDATE_TOPOLOGY, c.KIND_TOPOLOGY),
    (c.PLURAL_RESOURCE_FLAVORS, c.WEBHOOK_VALIDATE_RESOURCE_FLAVOR, c.KIND_RESOURCE_FLAVOR),
    (c.PLURAL_CLUSTER_QUEUES, c.WEBHOOK_VALIDATE_CLUSTER_QUEUE, c.KIND_CLUSTER_QUEUE),
    (c.PLURAL_LOCAL_QUEUES, c.WEBHOOK_VALIDATE_LOCAL_QUEUE, c.KIND_LOCAL_QUEUE),
    (c.PLURAL_WORKLOADS, c.WEBHOOK_VALIDATE_WORKLOAD, c.KIND_WORKLOAD),
    (c.PLURAL_COHORTS, c.WEBHOOK_VALIDATE_COHORT, c.KIND_COHORT),
)


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """What a handler reads of a review: the operation, the object (the new one; the old one on a
    DELETE without it) and, on an UPDATE, the old one."""

    operation: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Denial:
    """A handler's refusal: the status message kube-apiserver shows the user, and its HTTP code."""

    message: str
    code: int = DENIAL_CODE


Verdict = Denial | defaulting.JsonPatch
"""A handler's answer: a denial, or the JSON patch it asks for (empty: allowed unchanged)."""

HandlerFn = Callable[[AdmissionRequest], Verdict]


@dataclass(frozen=True, slots=True)
class Handler:
    """One admission handler: its path, the resource it serves, mutating or validating, on which
    operations (the configurations' rule) and subresource (ANY_SUBRESOURCE, or None: the main
    resource only), and the function."""

    path: str
    group: str
    version: str
    plural: str
    mutating: bool
    operations: tuple[str, ...]
    subresource: str | None
    fn: HandlerFn

    @property
    def resource(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)


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


def check(kind: str, group: str, request: AdmissionRequest, extra: list[FieldError] | None = None) -> Verdict:
    """A denial with every error (code 422), or allowed unchanged: the one place errors become a verdict."""
    body, old = request.obj, request.old
    errors = validate_update(old, body) if request.operation == "UPDATE" and old is not None else validate(body)
    errors += extra or []
    if errors:
        return Denial(denial_message(kind, group, _name(body), errors))
    return []


def _suspend(request: AdmissionRequest) -> Verdict:
    return defaulting.suspend_job(request.obj)  # a Job and a JobSet both suspend by spec.suspend


def _mutate_pod(request: AdmissionRequest) -> Verdict:
    return defaulting.gate_pod(request.obj)


def _mutate_queued_pod(request: AdmissionRequest) -> Verdict:
    return defaulting.manage_pod(request.obj)


GroupMembers = Callable[[str], Sequence[Mapping[str, Any]]]
"""The pods a process knows in one group, by its Workload key (`namespace/name`): the operator's cache."""


def _pod_validator(gvk: GroupVersionKind, group_members: GroupMembers | None) -> HandlerFn:
    """Queued pods: their own metadata and, where the process keeps a cache, on creation the
    conflicts with the pods of their group it holds (a process serving webhooks only checks the
    first; the job reconciler refuses such a group with an Event either way)."""
    def validate_queued_pod(request: AdmissionRequest) -> Verdict:
        extra: list[FieldError] = []
        key = POD_GROUP.member_key(request.obj)
        if request.operation == "CREATE" and group_members is not None and key is not None:
            extra = conflicts_with_group(request.obj, group_members(key))
        return check(gvk.kind, gvk.group, request, extra)
    return validate_queued_pod


def _running_job_validator(gvk: GroupVersionKind, group_members: GroupMembers | None) -> HandlerFn:
    del group_members

    def validate_job(request: AdmissionRequest) -> Verdict:
        old = request.old
        extra = running_jobs.validate_running_update(old, request.obj) \
            if request.operation == "UPDATE" and old is not None else []
        return check(gvk.kind, gvk.group, request, extra)
    return validate_job


def _kind_validator(gvk: GroupVersionKind, group_members: GroupMembers | None) -> HandlerFn:
    del group_members

    def validate_kind(request: AdmissionRequest) -> Verdict:
        return check(gvk.kind, gvk.group, request)
    return validate_kind


def _fixed(fn: HandlerFn) -> Callable[[GroupVersionKind, GroupMembers | None], HandlerFn]:
    return lambda gvk, group_members: fn


ACTIONS: Final[Mapping[WebhookAction, Callable[[GroupVersionKind, GroupMembers | None], HandlerFn]]] = {
    WebhookAction.SUSPEND: _fixed(_suspend),
    WebhookAction.MANAGE_POD: _fixed(_mutate_queued_pod),
    WebhookAction.VALIDATE: _kind_validator,
    WebhookAction.VALIDATE_RUNNING_JOB: _running_job_validator,
    WebhookAction.VALIDATE_GROUP_MEMBER: _pod_validator,
}
"""Each webhook action an integration's rule may name -> the handler for a kind (its identity, and
where a group's members are found)."""


def _validator(kind: str) -> HandlerFn:
    def handler(request: AdmissionRequest) -> Verdict:
        return check(kind, c.GROUP, request)
    handler.__name__ = f"validate_{kind.lower()}"
    return handler


SERVED_VERSIONS: dict[str, tuple[str, ...]] = {
    c.PLURAL_TOPOLOGIES: (c.VERSION_V1BETA2, c.VERSION_V1BETA1, c.VERSION_V1ALPHA1),
    c.PLURAL_COHORTS: (c.VERSION_V1BETA2,)}
"""Versions each kind is served in (as the CRDs declare them); the others: v1beta2 and v1beta1."""


def handler_table(group_members: GroupMembers | None = None) -> tuple[Handler, ...]:
    """Every admission handler, in a fixed order (each webhook path is its handler id; a kind of
    tasq's group has one entry per served version, as each version is a resource of its own).
    `group_members`: where the queued-pod validator finds a new pod's group (None: not checked)."""
    table: list[Handler] = []
    for job in ALL_INTEGRATIONS:
        gvk = job.gvk
        for rule in job.webhooks:
            table.append(Handler(rule.handler_id, gvk.group, gvk.version, gvk.plural, rule.action.mutating,
                                 tuple(rule.operations), None, ACTIONS[rule.action](gvk, group_members)))
    table.append(Handler(c.WEBHOOK_MUTATE_POD, "", "v1", "pods", True, ("CREATE",), None, _mutate_pod))
    for plural, handler_id, kind in TASQ_KINDS:
        fn = _validator(kind)
        for version in SERVED_VERSIONS.get(plural, (c.VERSION_V1BETA2, c.VERSION_V1BETA1)):
            # a Workload's status writes come to the same path (the configuration routes them here)
            subresource = ANY_SUBRESOURCE if plural == c.PLURAL_WORKLOADS else None
            table.append(Handler(handler_id, c.GROUP, version, plural, False, _CREATE_UPDATE, subresource, fn))
    return tuple(table)
