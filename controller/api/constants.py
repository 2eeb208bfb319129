"""Every label, annotation, gate, finalizer, condition type and reason string tasq uses.

The one place these strings live; every other module imports them from here.
Values follow Kueue (v1beta2, and v1beta1 where served) and the original TAS KEP so Kueue manifests
work unchanged.
"""

from typing import Final

GROUP: Final = "kueue.x-k8s.io"
VERSION_V1BETA2: Final = "v1beta2"
VERSION_V1BETA1: Final = "v1beta1"
VERSION_V1ALPHA1: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION_V1BETA2}"
"""The hub: the version tasq's code reads and writes, and the CRDs' storage version."""
API_VERSION_V1BETA1: Final = f"{GROUP}/{VERSION_V1BETA1}"
API_VERSION_V1ALPHA1: Final = f"{GROUP}/{VERSION_V1ALPHA1}"

# Kinds and their REST resources.
KIND_TOPOLOGY: Final = "Topology"
KIND_RESOURCE_FLAVOR: Final = "ResourceFlavor"
KIND_CLUSTER_QUEUE: Final = "ClusterQueue"
KIND_LOCAL_QUEUE: Final = "LocalQueue"
KIND_WORKLOAD: Final = "Workload"
KIND_COHORT: Final = "Cohort"
PLURAL_TOPOLOGIES: Final = "topologies"
PLURAL_RESOURCE_FLAVORS: Final = "resourceflavors"
PLURAL_CLUSTER_QUEUES: Final = "clusterqueues"
PLURAL_LOCAL_QUEUES: Final = "localqueues"
PLURAL_WORKLOADS: Final = "workloads"
PLURAL_COHORTS: Final = "cohorts"
PLURAL_WORKLOAD_PRIORITY_CLASSES: Final = "workloadpriorityclasses"
# The batch/v1 Job, the one workload kind tasq integrates (owner of the Workloads it builds).
JOB_API_VERSION: Final = "batch/v1"
KIND_JOB: Final = "Job"
# JobSet (sigs.k8s.io/jobset): the kind, its Jobs' index label, its terminal conditions.
KIND_JOBSET: Final = "JobSet"
JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_VERSION: Final = "v1alpha2"
PLURAL_JOBSETS: Final = "jobsets"
LABEL_JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
LABEL_JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
CONDITION_JOBSET_COMPLETED: Final = "Completed"
CONDITION_JOBSET_FAILED: Final = "Failed"
# The core kinds tasq reads besides Jobs (Nodes and Pods for capacity, Namespaces for selectors).
KIND_NODE: Final = "Node"
KIND_POD: Final = "Pod"
KIND_NAMESPACE: Final = "Namespace"
KIND_PRIORITY_CLASS: Final = "PriorityClass"
CORE_API_VERSION: Final = "v1"
PRIORITY_CLASS_API_VERSION: Final = "scheduling.k8s.io/v1"
# A v1beta1 Workload's spec.priorityClassSource: which kind its priorityClassName names.
PRIORITY_SOURCE_WORKLOAD: Final = "kueue.x-k8s.io/workloadpriorityclass"
PRIORITY_SOURCE_POD: Final = "scheduling.k8s.io/priorityclass"
# A v1beta2 Workload's spec.priorityClassRef: group and kind of the class it names.
KIND_WORKLOAD_PRIORITY_CLASS: Final = "WorkloadPriorityClass"
PRIORITY_CLASS_GROUP: Final = "scheduling.k8s.io"
POD_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CONDITION_STATUSES: Final = ("True", "False", "Unknown")
JOB_COMPLETION_MODES: Final = ("NonIndexed", "Indexed")
"""Values Kubernetes accepts where its schema says only "string" (checked by api.kube_objects)."""

# Labels on Jobs and pods.
LABEL_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS: Final = "kueue.x-k8s.io/priority-class"
"""Names the WorkloadPriorityClass of a Job's Workload; wins over the pod template's PriorityClass."""
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
LABEL_JOB_NAME: Final = "batch.kubernetes.io/job-name"
LABEL_CONTROLLER_UID: Final = "batch.kubernetes.io/controller-uid"
LABEL_NAMESPACE_NAME: Final = "kubernetes.io/metadata.name"
"""The API server labels every Namespace with its own name; namespaceSelectors commonly use it."""

# Job annotations of the original TAS KEP (value: a level label; `auto` for prefer only).
ANNOTATION_REQUIRE_TOPOLOGY: Final = "kueue.x-k8s.io/require-topology"
ANNOTATION_PREFER_TOPOLOGY: Final = "kueue.x-k8s.io/prefer-topology"
TOPOLOGY_AUTO: Final = "auto"

# Kueue's pod-template annotations.
ANNOTATION_PODSET_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_PODSET_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-unconstrained-topology"

# What admission writes on the pod template (the KEP's names).
ANNOTATION_TOPOLOGY_WORKLOAD: Final = "kueue.x-k8s.io/topology-workload"
ANNOTATION_TOPOLOGY_PODSET: Final = "kueue.x-k8s.io/topology-podset"

# The scheduling gate that holds pods until the TopologyUngater releases them.
SCHEDULING_GATE_TOPOLOGY: Final = "kueue.x-k8s.io/topology"
# tasq's own label on admitted pod templates: the Pod webhook's objectSelector matches only it, so
# a tasq outage can never block pods tasq does not manage (Kueue used `kueue.x-k8s.io/tas` until 0.14).
LABEL_TAS: Final = "tasq.io/tas"
LABEL_TAS_VALUE: Final = "true"

# Plain pods (Kueue's pod integration): a pod labelled with a queue is gated at creation by the
# admission gate and marked managed; pods sharing a group name form one Workload once the total
# count of them exists (single pods are a group of one). The coscheduling plugin's labels name a
# group too (its legacy label pair, and the later PodGroup-CRD label of scheduler-plugins).
SCHEDULING_GATE_ADMISSION: Final = "kueue.x-k8s.io/admission"
LABEL_MANAGED: Final = "kueue.x-k8s.io/managed"
LABEL_MANAGED_VALUE: Final = "true"
LABEL_POD_GROUP_NAME: Final = "kueue.x-k8s.io/pod-group-name"
ANNOTATION_POD_GROUP_TOTAL_COUNT: Final = "kueue.x-k8s.io/pod-group-total-count"
ANNOTATION_ROLE_HASH: Final = "kueue.x-k8s.io/role-hash"
ANNOTATION_RETRIABLE_IN_GROUP: Final = "kueue.x-k8s.io/retriable-in-group"
ANNOTATION_IS_GROUP_WORKLOAD: Final = "kueue.x-k8s.io/is-group-workload"
LABEL_COSCHEDULING_NAME: Final = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_COSCHEDULING_MIN_AVAILABLE: Final = "pod-group.scheduling.sigs.k8s.io/min-available"
LABEL_SCHEDULING_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
POD_CONDITION_TERMINATION_TARGET: Final = "TerminationTarget"
"""The pod condition Kueue sets (reason: why) on each pod of a group it stops before deleting it."""

# tasq's admission webhooks: handler paths (webhooks.handlers), which are the URL paths the configurations
# call (`https://HOST:PORT/<id>`), and the objects of a real-cluster install (config/webhook/).
WEBHOOK_MUTATE_JOB: Final = "mutate-batch-v1-job"
WEBHOOK_MUTATE_POD: Final = "mutate-core-v1-pod"
WEBHOOK_MUTATE_QUEUED_POD: Final = "mutate-core-v1-pod-queued"
WEBHOOK_VALIDATE_QUEUED_POD: Final = "validate-core-v1-pod-queued"
WEBHOOK_VALIDATE_JOB: Final = "validate-batch-v1-job"
WEBHOOK_MUTATE_JOBSET: Final = "mutate-jobset-x-k8s-io-v1alpha2-jobset"
WEBHOOK_VALIDATE_JOBSET: Final = "validate-jobset-x-k8s-io-v1alpha2-jobset"
WEBHOOK_VALIDATE_TOPOLOGY: Final = "validate-kueue-x-k8s-io-topology"
WEBHOOK_VALIDATE_RESOURCE_FLAVOR: Final = "validate-kueue-x-k8s-io-v1beta2-resourceflavor"
WEBHOOK_VALIDATE_CLUSTER_QUEUE: Final = "validate-kueue-x-k8s-io-v1beta2-clusterqueue"
WEBHOOK_VALIDATE_LOCAL_QUEUE: Final = "validate-kueue-x-k8s-io-v1beta2-localqueue"
WEBHOOK_VALIDATE_WORKLOAD: Final = "validate-kueue-x-k8s-io-v1beta2-workload"
WEBHOOK_VALIDATE_COHORT: Final = "validate-kueue-x-k8s-io-v1beta2-cohort"
WEBHOOK_NAME_DOMAIN: Final = "tasq.io"
MUTATING_WEBHOOK_CONFIGURATION: Final = "tasq-mutating-webhook-configuration"
ANNOTATION_LOCAL_WEBHOOK_SERVERS: Final = "tasq.io/local-webhook-servers"
"""On a locally registered webhook configuration: the `tasq run --local-webhooks` servers sharing it
(JSON list of {"url", "caBundle"}, the one it points at last)."""
VALIDATING_WEBHOOK_CONFIGURATION: Final = "tasq-validating-webhook-configuration"
TASQ_NAMESPACE: Final = "tasq-system"
WEBHOOK_SERVICE: Final = "tasq-webhook-service"
WEBHOOK_SERVICE_PORT: Final = 443
WEBHOOK_CONTAINER_PORT: Final = 9443
WEBHOOK_CERT_SECRET: Final = "tasq-webhook-server-cert"
WEBHOOK_CERT_FILE: Final = "tls.crt"
WEBHOOK_KEY_FILE: Final = "tls.key"
WEBHOOK_CA_FILE: Final = "ca.crt"

# Conversion between API versions: what one version cannot hold of an object written in another,
# kept on the object (JSON) so a round trip through the other version loses nothing.
ANNOTATION_CONVERSION_V1BETA1: Final = "conversion.tasq.io/v1beta1-fields"
"""On a v1beta2 object: the v1beta1 values v1beta2 cannot express (e.g. `whenCanBorrow: Borrow`)."""
ANNOTATION_CONVERSION_V1BETA2: Final = "conversion.tasq.io/v1beta2-fields"
"""On a v1beta1 object: the v1beta2 values v1beta1 cannot express (e.g. a priorityClassRef of
another group and kind)."""

# Finalizers.
FINALIZER_RESOURCE_IN_USE: Final = "kueue.x-k8s.io/resource-in-use"

# Workload condition types (Kueue's).
CONDITION_QUOTA_RESERVED: Final = "QuotaReserved"
CONDITION_ADMITTED: Final = "Admitted"
CONDITION_EVICTED: Final = "Evicted"
CONDITION_FINISHED: Final = "Finished"
CONDITION_PREEMPTED: Final = "Preempted"
CONDITION_REQUEUED: Final = "Requeued"
# waitForPodsReady (Kueue's): whether every admitted pod is ready or succeeded, and the condition
# that says why a Workload is about to be deactivated.
CONDITION_PODS_READY: Final = "PodsReady"
CONDITION_DEACTIVATION_TARGET: Final = "DeactivationTarget"

# batch/v1 Job condition types that mean the Job is over.
CONDITION_JOB_COMPLETE: Final = "Complete"
CONDITION_JOB_FAILED: Final = "Failed"
# The Job condition its controller sets once a suspended Job's pods are being removed.
CONDITION_JOB_SUSPENDED: Final = "Suspended"

# ClusterQueue / LocalQueue condition type.
CONDITION_ACTIVE: Final = "Active"

# Condition reasons (PascalCase, Kueue's where Kueue has one).
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_ADMITTED: Final = "Admitted"
REASON_PENDING: Final = "Pending"
REASON_INADMISSIBLE: Final = "Inadmissible"
REASON_POD_SET_TOPOLOGY_UNFIT: Final = "PodSetTopologyUnfit"
REASON_TOPOLOGY_LEVEL_MISSING: Final = "TopologyLevelMissing"
REASON_QUOTA_EXCEEDED: Final = "QuotaExceeded"
REASON_FLAVOR_NOT_FOUND: Final = "FlavorNotFound"
REASON_TOPOLOGY_NOT_FOUND: Final = "TopologyNotFound"
REASON_CLUSTER_QUEUE_NOT_FOUND: Final = "ClusterQueueNotFound"
REASON_LOCAL_QUEUE_NOT_FOUND: Final = "LocalQueueNotFound"
REASON_NAMESPACE_MISMATCH: Final = "NamespaceMismatch"
REASON_STRICT_FIFO_BLOCKED: Final = "StrictFIFOBlocked"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_FAILED: Final = "Failed"
# Evicted because `spec.active` is false, and the Admitted reason once the reservation is gone (Kueue's).
REASON_DEACTIVATED: Final = "Deactivated"
REASON_NO_RESERVATION: Final = "NoReservation"
REASON_READY: Final = "Ready"
# Evicted because another workload preempted it (Evicted reason), and why (Preempted reasons; Kueue's).
REASON_PREEMPTED: Final = "Preempted"
REASON_IN_CLUSTER_QUEUE: Final = "InClusterQueue"
REASON_IN_COHORT_RECLAMATION: Final = "InCohortReclamation"
REASON_IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"
# waitForPodsReady (Kueue's): PodsReady reasons, the Evicted reason of a timeout, the Requeued reasons
# once it may be admitted again, and the DeactivationTarget reason once its requeues are used up.
REASON_WAIT_FOR_START: Final = "WaitForStart"
REASON_STARTED: Final = "Started"
REASON_WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
REASON_RECOVERED: Final = "Recovered"
REASON_PODS_READY_TIMEOUT: Final = "PodsReadyTimeout"
REASON_BACKOFF_FINISHED: Final = "BackoffFinished"
REASON_REACTIVATED: Final = "Reactivated"
REASON_REQUEUING_LIMIT_EXCEEDED: Final = "RequeuingLimitExceeded"
# Evicted because a node of its topology assignment failed and no replacement exists (Kueue's).
REASON_NODE_FAILURES: Final = "NodeFailures"
# Evicted because its LocalQueue or ClusterQueue is stopped with HoldAndDrain (Evicted reasons; the
# Requeued=False reason once its reservation is released), and the Requeued=True reasons once that
# queue runs again (Kueue's).
REASON_LOCAL_QUEUE_STOPPED: Final = "LocalQueueStopped"
REASON_CLUSTER_QUEUE_STOPPED: Final = "ClusterQueueStopped"
REASON_LOCAL_QUEUE_RESTARTED: Final = "LocalQueueRestarted"
REASON_CLUSTER_QUEUE_RESTARTED: Final = "ClusterQueueRestarted"
# The preemptor's QuotaReserved=False detail while its victims are being evicted (tasq's).
REASON_PREEMPTING: Final = "Preempting"
# ClusterQueue / LocalQueue Active condition reasons (Kueue's).
REASON_STOPPED: Final = "Stopped"
REASON_TERMINATING: Final = "Terminating"
REASON_CLUSTER_QUEUE_DOES_NOT_EXIST: Final = "ClusterQueueDoesNotExist"
REASON_CLUSTER_QUEUE_IS_INACTIVE: Final = "ClusterQueueIsInactive"
# A ClusterQueue or Cohort in (or under) a cycle of cohorts (Kueue's ErrCohortHasCycle), and a Cohort
# whose parentName names no Cohort object (it then hangs under an empty implicit root, as in Kueue).
REASON_COHORT_HAS_CYCLE: Final = "CohortHasCycle"
REASON_PARENT_NOT_FOUND: Final = "ParentNotFound"

# Queueing strategies.
QUEUEING_BEST_EFFORT_FIFO: Final = "BestEffortFIFO"
QUEUEING_STRICT_FIFO: Final = "StrictFIFO"
# Queue policies admission reads: stopPolicy "None" (or unset) admits, "Hold" admits nothing new,
# "HoldAndDrain" also evicts what is admitted (a ClusterQueue's or a LocalQueue's); whenCanBorrow
# TryNextFlavor looks for a flavor that fits without borrowing first.
STOP_POLICY_NONE: Final = "None"
STOP_POLICY_HOLD: Final = "Hold"
STOP_POLICY_HOLD_AND_DRAIN: Final = "HoldAndDrain"
FUNGIBILITY_TRY_NEXT_FLAVOR: Final = "TryNextFlavor"
# ClusterQueue spec.preemption policies (Kueue's; Never is the default of each).
PREEMPTION_NEVER: Final = "Never"
PREEMPTION_LOWER_PRIORITY: Final = "LowerPriority"
PREEMPTION_LOWER_OR_NEWER_EQUAL_PRIORITY: Final = "LowerOrNewerEqualPriority"
PREEMPTION_ANY: Final = "Any"

# Resources with special meaning.
RESOURCE_PODS: Final = "pods"
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"

# Events the operator posts: Kueue's job-integration reasons, plus the Workload condition reasons
# above for Admitted and each new pending cause; sent as this component.
EVENT_TYPE_NORMAL: Final = "Normal"
EVENT_TYPE_WARNING: Final = "Warning"
EVENT_REASON_CREATED_WORKLOAD: Final = "CreatedWorkload"
EVENT_REASON_STARTED: Final = "Started"
EVENT_REASON_STOPPED: Final = "Stopped"
EVENT_REASON_FINISHED_WORKLOAD: Final = "FinishedWorkload"
EVENT_REASON_EVICTED_DEACTIVATED: Final = "EvictedDueToDeactivated"
EVENT_REASON_EVICTED_PODS_READY_TIMEOUT: Final = "EvictedDueToPodsReadyTimeout"
# A preemption (Kueue's): on the victim ("Preempted", "EvictedDueToPreempted") and the preemptor.
EVENT_REASON_PREEMPTED: Final = "Preempted"
EVENT_REASON_EVICTED_PREEMPTED: Final = "EvictedDueToPreempted"
EVENT_REASON_PREEMPTED_WORKLOAD: Final = "PreemptedWorkload"
# A failed node of a topology assignment: replaced (tasq's), or the Workload evicted (Kueue's).
EVENT_REASON_NODE_REPLACED: Final = "NodeReplaced"
EVENT_REASON_EVICTED_NODE_FAILURES: Final = "EvictedDueToNodeFailures"
# A Workload evicted because its LocalQueue or ClusterQueue is stopped with HoldAndDrain (tasq's,
# named as the other evictions' Events).
EVENT_REASON_EVICTED_LOCAL_QUEUE_STOPPED: Final = "EvictedDueToLocalQueueStopped"
EVENT_REASON_EVICTED_CLUSTER_QUEUE_STOPPED: Final = "EvictedDueToClusterQueueStopped"
EVENT_REASON_ERR_WORKLOAD_COMPOSE: Final = "ErrWorkloadCompose"
EVENT_REASON_EXCESS_PODS_DELETED: Final = "ExcessPodsDeleted"
"""Pods of a group beyond its total count were deleted (Kueue deletes them rather than leave them gated)."""
EVENT_REASON_WORKLOAD_PRIORITY_CLASS_NOT_FOUND: Final = "WorkloadPriorityClassNotFound"
EVENT_COMPONENT: Final = "tasq-controller"

# The devcluster's kubelet reads how long a pod runs from this annotation.
ANNOTATION_DEVCLUSTER_RUN_SECONDS: Final = "devcluster.tasq.io/run-seconds"
# ... and fails a pod (phase Failed, exit code 1) when this annotation is "true".
ANNOTATION_DEVCLUSTER_FAIL: Final = "devcluster.tasq.io/fail"
# ... and keeps a running pod unready (Ready=False, as a failing readiness probe) when this one is "true".
ANNOTATION_DEVCLUSTER_NOT_READY: Final = "devcluster.tasq.io/not-ready"

# The Kueue release whose API (v1beta2, v1beta1 still served) tasq follows; `tasq version` prints it.
KUEUE_VERSION_FOLLOWED: Final = "0.20"

# Leader election: the Lease only the leader renews (in the operator's namespace).
LEADER_LEASE_NAME: Final = "tasq-controller-leader"
LEASE_API_VERSION: Final = "coordination.k8s.io/v1"
KIND_LEASE: Final = "Lease"
# The content type of a strategic merge patch (the pod ungate patch).
CONTENT_TYPE_STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"

# Metrics: Kueue 0.19's names and labels (its pkg/metrics), controller-runtime's for the webhooks,
# tasq's own under tasq_ (docs/operations.md lists them); then the probe paths.
METRIC_BUILD_INFO: Final = "kueue_build_info"
METRIC_ADMISSION_ATTEMPTS: Final = "kueue_admission_attempts_total"
METRIC_ADMISSION_ATTEMPT_DURATION: Final = "kueue_admission_attempt_duration_seconds"
METRIC_PENDING_WORKLOADS: Final = "kueue_pending_workloads"
METRIC_RESERVING_ACTIVE_WORKLOADS: Final = "kueue_reserving_active_workloads"
METRIC_ADMITTED_ACTIVE_WORKLOADS: Final = "kueue_admitted_active_workloads"
METRIC_QUOTA_RESERVED_WORKLOADS: Final = "kueue_quota_reserved_workloads_total"
METRIC_QUOTA_RESERVED_WAIT_TIME: Final = "kueue_quota_reserved_wait_time_seconds"
METRIC_ADMITTED_WORKLOADS: Final = "kueue_admitted_workloads_total"
METRIC_ADMISSION_WAIT_TIME: Final = "kueue_admission_wait_time_seconds"
METRIC_CLUSTER_QUEUE_STATUS: Final = "kueue_cluster_queue_status"
METRIC_CLUSTER_QUEUE_RESOURCE_USAGE: Final = "kueue_cluster_queue_resource_usage"
METRIC_CLUSTER_QUEUE_RESOURCE_RESERVATION: Final = "kueue_cluster_queue_resource_reservation"
METRIC_CLUSTER_QUEUE_NOMINAL_QUOTA: Final = "kueue_cluster_queue_nominal_quota"
METRIC_WEBHOOK_REQUESTS: Final = "controller_runtime_webhook_requests_total"
METRIC_WEBHOOK_LATENCY: Final = "controller_runtime_webhook_latency_seconds"
METRIC_GATE_REMOVAL_LATENCY: Final = "tasq_gate_removal_latency_seconds"
METRIC_TOPOLOGY_FRAGMENTED_GPUS: Final = "tasq_topology_fragmented_free_gpus"
METRIC_LARGEST_PENDING_GANG_GPUS: Final = "tasq_largest_pending_gang_gpus"
METRIC_LEADER: Final = "tasq_leader"
METRIC_CERTIFICATE_EXPIRY: Final = "tasq_certificate_expiry_timestamp_seconds"
PENDING_STATUS_ACTIVE: Final = "active"
PENDING_STATUS_INADMISSIBLE: Final = "inadmissible"
CLUSTER_QUEUE_STATUSES: Final = ("pending", "active", "terminating")
REPLICA_ROLE_LEADER: Final = "leader"
REPLICA_ROLE_FOLLOWER: Final = "follower"
REPLICA_ROLE_STANDALONE: Final = "standalone"
GPU_RESOURCE: Final = "nvidia.com/gpu"
METRIC_PREEMPTED_WORKLOADS: Final = "kueue_preempted_workloads_total"
METRIC_EVICTED_WORKLOADS: Final = "kueue_evicted_workloads_total"
ADMISSION_RESULT_SUCCESS: Final = "success"
ADMISSION_RESULT_INADMISSIBLE: Final = "inadmissible"
PROBE_PATH_METRICS: Final = "/metrics"
PROBE_PATH_HEALTHZ: Final = "/healthz"
PROBE_PATH_READYZ: Final = "/readyz"
METRICS_PORT: Final = 8443  # HTTPS, authenticated (Kueue's metrics port)
PROBE_PORT: Final = 8081  # plain HTTP, /healthz and /readyz (Kueue's probe port)
METRICS_READER_ROLE: Final = "tasq-metrics-reader"

# Kueue's pod-set slice and group annotations (TAS, Kueue 0.19) and the reason for a slice request
# the flavor's topology cannot express (a slice level above the pod set's level, an inner layer
# that is not below the outer one).
ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-slice-required-topology"
ANNOTATION_PODSET_SLICE_SIZE: Final = "kueue.x-k8s.io/podset-slice-size"
ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: Final = \
    "kueue.x-k8s.io/podset-slice-required-topology-constraints"
ANNOTATION_PODSET_GROUP_NAME: Final = "kueue.x-k8s.io/podset-group-name"
REASON_SLICE_TOPOLOGY_INVALID: Final = "SliceTopologyInvalid"
MAX_SLICE_LAYERS: Final = 3
"""Kueue's limit on the layers of `podset-slice-required-topology-constraints`."""

# Kueue's feature gates that change placement (`--feature-gates=Name=true,...`).
FEATURE_TAS_BALANCED_PLACEMENT: Final = "TASBalancedPlacement"
FEATURE_TAS_MULTI_LAYER_TOPOLOGY: Final = "TASMultiLayerTopology"
FEATURE_PARTIAL_ADMISSION: Final = "PartialAdmission"

# Kueue's partial admission of a batch/v1 Job: the fewest pods it may run with (its pod set's
# minCount), and (Indexed Jobs) that `completions` follows the admitted parallelism.
ANNOTATION_JOB_MIN_PARALLELISM: Final = "kueue.x-k8s.io/job-min-parallelism"
ANNOTATION_JOB_COMPLETIONS_EQUAL_PARALLELISM: Final = "kueue.x-k8s.io/job-completions-equal-parallelism"
