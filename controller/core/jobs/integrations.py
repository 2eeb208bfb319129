"""The registry of integrated kinds: the one place that lists them.

The operator watches each single-object integration's kind (controller.kube.watching), the router
wakes the job reconciler for it (controller.kube.routing), the reconciler picks its adapter by kind
(controller.kube.job_reconciling); the webhook configurations and the handler registrations are
built from every integration's webhook rules (webhooks.configurations, webhooks.handlers). Adding a
kind is one adapter module (with its webhook rules and the pod controllers it claims), its
validator in webhooks.validation and one entry here.
"""

from __future__ import annotations

from typing import Any, Final

from controller.core.jobs.batch_job import BATCH_JOB
from controller.core.jobs.framework import ComposableJob, GenericJob
from controller.core.jobs.jobset import JOBSET
from controller.core.jobs.pod_group import PodGroupJob

INTEGRATIONS: Final[tuple[GenericJob, ...]] = (JOBSET, BATCH_JOB)
"""In the order a pod's owner is looked up: a JobSet's pods are claimed by their JobSet (by its name
label) before the batch/v1 Job that controls them, which the JobSet integration manages."""

INTEGRATED_KINDS: Final = frozenset((integration.gvk.group, integration.gvk.kind) for integration in INTEGRATIONS)
"""(API group, kind) of every single-object integration: an object one of them controls (a JobSet's
child Job carrying the queue label) belongs to its controller, not queued on its own."""

INTEGRATED_POD_OWNERS: Final = frozenset(kind for integration in INTEGRATIONS for kind in integration.pod_owner_kinds)
"""(API group, kind) of every pod controller a single-object integration claims: a queued pod one
of them controls is not a plain pod."""

POD_GROUP: Final = PodGroupJob(INTEGRATED_POD_OWNERS)
"""The plain-pod integration, told which pods the other integrations claim."""

COMPOSABLE_INTEGRATIONS: Final[tuple[ComposableJob[Any], ...]] = (POD_GROUP,)
"""The composable kinds (many objects, one Workload): plain pod groups."""

ALL_INTEGRATIONS: Final[tuple[GenericJob | ComposableJob[Any], ...]] = (*INTEGRATIONS, *COMPOSABLE_INTEGRATIONS)
"""Every integrated kind, single-object and composable: the webhooks serve each one's rules."""
