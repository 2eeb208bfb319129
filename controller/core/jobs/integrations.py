"""The registry of integrated kinds: the one place that lists them.

The operator watches each single-object integration's kind (controller.kube.watching), the router
wakes the job reconciler for it (controller.kube.routing), the reconciler picks its adapter by kind
(controller.kube.job_reconciling); the webhook configurations and the handler registrations are
built from every integration's webhook rules (webhooks.configurations, webhooks.handlers). Adding a
kind is one adapter module (with its webhook rules), its validator in webhooks.validation and one
entry here.
"""

from __future__ import annotations

from typing import Any, Final

from controller.core.jobs.batch_job import BATCH_JOB
from controller.core.jobs.framework import ComposableJob, GenericJob
from controller.core.jobs.jobset import JOBSET
from controller.core.jobs.pod_group import POD_GROUP

INTEGRATIONS: Final[tuple[GenericJob, ...]] = (JOBSET, BATCH_JOB)
"""In the order a pod's owner is looked up: a JobSet's pods are claimed by their JobSet (by its name
label) before the batch/v1 Job that controls them, which the JobSet integration manages."""

COMPOSABLE_INTEGRATIONS: Final[tuple[ComposableJob[Any], ...]] = (POD_GROUP,)
"""The composable kinds (many objects, one Workload): plain pod groups."""

ALL_INTEGRATIONS: Final[tuple[GenericJob | ComposableJob[Any], ...]] = (*INTEGRATIONS, *COMPOSABLE_INTEGRATIONS)
"""Every integrated kind, single-object and composable: the webhooks serve each one's rules."""
