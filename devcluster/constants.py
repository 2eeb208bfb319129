"""Well-known Kubernetes names the devcluster reads and writes: labels, annotations, conditions, resources.

Kept apart from tasq's own `controller.api.constants` on purpose: the cluster the product is tested
against spells Kubernetes' names itself, so a typo in the product cannot hide by being shared.
"""

from __future__ import annotations

from typing import Final

# Labels (k8s.io/api well_known_labels.go, batch/v1 Job labels).
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_JOB_NAME: Final = "batch.kubernetes.io/job-name"
LABEL_CONTROLLER_UID: Final = "batch.kubernetes.io/controller-uid"
LABEL_JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"

# Job conditions.
CONDITION_JOB_COMPLETE: Final = "Complete"
CONDITION_JOB_FAILED: Final = "Failed"

# Pod phases that never change again.
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})

# Resource names.
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
RESOURCE_PODS: Final = "pods"

# Taints.
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"

# The devcluster's own pod annotations: how long a pod runs, and whether it fails.
ANNOTATION_DEVCLUSTER_RUN_SECONDS: Final = "devcluster.tasq.io/run-seconds"
ANNOTATION_DEVCLUSTER_FAIL: Final = "devcluster.tasq.io/fail"
# A pod that runs but never passes its readiness (Ready=False while Running), when "true".
ANNOTATION_DEVCLUSTER_NOT_READY: Final = "devcluster.tasq.io/not-ready"
