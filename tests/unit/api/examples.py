"""Example objects of every tasq kind as the API server stores them, every modelled field set.

Shared by the model round-trip tests and the CRD schema tests, so both check the same wire
shapes. Functions return fresh dicts, so a test may mutate what it gets.
"""

from __future__ import annotations

from typing import Any

from controller.api import constants as c

TIME = "2026-01-02T03:04:05Z"


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "resourceVersion": "42", "generation": 3,
                            "creationTimestamp": TIME}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": TIME, "observedGeneration": 3}


def topology() -> dict[str, Any]:
    return {
        "apiVersion": f"{c.GROUP}/{c.VERSION_V1ALPHA1}", "kind": c.KIND_TOPOLOGY,
        "metadata": _meta("gpu-racks"),
        "spec": {"levels": [{"nodeLabel": "cloud.com/block"}, {"nodeLabel": "cloud.com/rack"},
                            {"nodeLabel": c.LABEL_HOSTNAME}]},
    }


def flavor_kueue_form() -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
        "metadata": _meta("h100", finalizers=[c.FINALIZER_RESOURCE_IN_USE]),
        "spec": {
            "nodeLabels": {"cloud.com/gpu": "h100"},
            "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule",
                            "timeAdded": TIME}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoExecute",
                             "tolerationSeconds": 30}],
            "topologyName": "gpu-racks",
        },
    }


def flavor_inline_form() -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
        "metadata": _meta("tas-flavor"),
        "spec": {"nodeLabels": {"cloud.com/gpu": "h100"},
                 "topology": {"levels": ["cloud.com/block", "cloud.com/rack", c.LABEL_HOSTNAME]}},
    }


def cluster_queue() -> dict[str, Any]:
    usage = [{"name": "h100", "resources": [{"name": "cpu", "total": "12", "borrowed": "2"},
                                            {"name": "nvidia.com/gpu", "total": "64", "borrowed": "0"}]}]
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE,
        "metadata": _meta("team-a", finalizers=[c.FINALIZER_RESOURCE_IN_USE]),
        "spec": {
            "resourceGroups": [{
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [{"name": "h100", "resources": [
                    {"name": "cpu", "nominalQuota": "10", "borrowingLimit": "5", "lendingLimit": "2"},
                    {"name": "nvidia.com/gpu", "nominalQuota": "64"}]}],
            }],
            "cohortName": "research",
            "queueingStrategy": c.QUEUEING_STRICT_FIFO,
            "namespaceSelector": {"matchLabels": {"team": "a"},
                                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
                           "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "stopPolicy": "None",
        },
        "status": {
            "pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
            "flavorsReservation": usage, "flavorsUsage": usage,
            "conditions": [_condition(c.CONDITION_ACTIVE, "True", "Ready", "Can admit new workloads")],
        },
    }


def local_queue() -> dict[str, Any]:
    usage = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "64"}]}]
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_LOCAL_QUEUE,
        "metadata": _meta("team-a-queue", "team-a"),
        "spec": {"clusterQueue": "team-a", "stopPolicy": "Hold"},
        "status": {"pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
                   "conditions": [_condition(c.CONDITION_ACTIVE, "True", "Ready", "Can submit new workloads")],
                   "flavorsReservation": usage, "flavorsUsage": usage},
    }


def workload() -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "train"}},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "main", "image": "registry.example.com/train:1",
                     "resources": {"requests": {"cpu": "1500m", "nvidia.com/gpu": "8"}},
                     "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
                    "volumes": [{"name": "scratch", "emptyDir": {}}]}}
    return {
        "apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD,
        "metadata": _meta(
            "job-train-1a2b3", "team-a",
            labels={c.LABEL_QUEUE_NAME: "team-a-queue"},
            annotations={"note": "example"},
            ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train",
                              "controller": True, "blockOwnerDeletion": True}],
            finalizers=[c.FINALIZER_RESOURCE_IN_USE],
            managedFields=[{"manager": "tasq", "operation": "Update", "apiVersion": c.API_VERSION}],
        ),
        "spec": {
            "podSets": [
                {"name": "main", "count": 8, "minCount": 4, "template": template,
                 "topologyRequest": {"required": "cloud.com/rack",
                                     "podIndexLabel": c.LABEL_JOB_COMPLETION_INDEX,
                                     "podSetSliceRequiredTopology": c.LABEL_HOSTNAME, "podSetSliceSize": 4}},
                {"name": "launcher", "count": 1, "template": {"spec": {"containers": []}},
                 "topologyRequest": {"unconstrained": True}},
            ],
            "queueName": "team-a-queue",
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"},
            "priority": 1000,
            "active": True,
        },
        "status": {
            "admission": {"clusterQueue": "team-a", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"},
                 "resourceUsage": {"cpu": "12", "nvidia.com/gpu": "64"}, "count": 8,
                 "topologyAssignment": {"levels": ["cloud.com/block", "cloud.com/rack"], "slices": [
                     {"domainCount": 2,
                      "valuesPerLevel": [{"universal": "b1"}, {"individual": {"prefix": "r", "roots": ["3", "4"]}}],
                      "podCounts": {"individual": [6, 2]}}]}},
                {"name": "launcher", "flavors": {"cpu": "h100"}, "resourceUsage": {"cpu": "500m"}, "count": 1},
            ]},
            "conditions": [
                _condition(c.CONDITION_QUOTA_RESERVED, "True", c.REASON_QUOTA_RESERVED,
                           'Quota reserved in ClusterQueue "team-a"'),
                _condition(c.CONDITION_ADMITTED, "True", c.REASON_ADMITTED,
                           "The workload is admitted"),
            ],
            "requeueState": {"count": 1, "requeueAt": TIME},
        },
    }
