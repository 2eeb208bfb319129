"""Fluent builders for Kueue objects and Jobs in tests: ClusterQueue, LocalQueue, ResourceFlavor,
Topology, Workload and batch/v1 Job. Each builder's `obj()` is the manifest dict (as a YAML file or
the API gives it) and, for tasq's kinds, `model()` the parsed pydantic object.
Used by the admission unit tests, the simulate integration tests and the admission benchmark.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Self

from controller.api import constants as c
from controller.api.flavor import ResourceFlavor
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.views import NodeView
from controller.core.admission.cycle import AdmissionState
from controller.core.admission.snapshot import build_snapshot

Quantity = str | int


def _quotas(quotas: dict[str, Quantity]) -> list[dict[str, Any]]:
    return [{"name": r, "nominalQuota": str(q)} for r, q in quotas.items()]


class ClusterQueueBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE, "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": []},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]
        return spec

    def cohort(self, name: str) -> Self:
        self._spec["cohort"] = name
        return self

    def strategy(self, strategy: str) -> Self:
        self._spec["queueingStrategy"] = strategy
        return self

    def when_can_borrow(self, policy: str) -> Self:
        self._spec["flavorFungibility"] = {"whenCanBorrow": policy}
        return self

    def namespace_selector(self, selector: dict[str, Any] | None) -> Self:
        if selector is None:
            self._spec.pop("namespaceSelector", None)
        else:
            self._spec["namespaceSelector"] = selector
        return self

    def group(self, *covered: str) -> Self:
        """Start a resource group covering these resources; `flavor` adds to the latest group."""
        self._spec["resourceGroups"].append({"coveredResources": list(covered), "flavors": []})
        return self

    def flavor(self, name: str, quotas: dict[str, Quantity]) -> Self:
        """A flavor with nominal quotas; opens a group covering its resources when none is open."""
        if not self._spec["resourceGroups"]:
            self.group(*quotas)
        self._spec["resourceGroups"][-1]["flavors"].append({"name": name, "resources": _quotas(quotas)})
        return self

    def limits(self, flavor: str, resource: str, borrowing: Quantity | None = None,
               lending: Quantity | None = None) -> Self:
        for group in self._spec["resourceGroups"]:
            for fl in group["flavors"]:
                for r in fl["resources"]:
                    if fl["name"] == flavor and r["name"] == resource:
                        if borrowing is not None:
                            r["borrowingLimit"] = str(borrowing)
                        if lending is not None:
                            r["lendingLimit"] = str(lending)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def model(self) -> ClusterQueue:
        return ClusterQueue.from_dict(self.obj())


class LocalQueueBuilder:
    def __init__(self, name: str, cluster_queue: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": c.API_VERSION, "kind": c.KIND_LOCAL_QUEUE,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue},
        }

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def model(self) -> LocalQueue:
        return LocalQueue.from_dict(self.obj())


class ResourceFlavorBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
                                     "metadata": {"name": name}, "spec": {}}

    def node_labels(self, labels: dict[str, str]) -> Self:
        self._obj["spec"]["nodeLabels"] = dict(labels)
        return self

    def topology_name(self, name: str) -> Self:
        self._obj["spec"]["topologyName"] = name
        return self

    def levels(self, *levels: str) -> Self:
        """The KEP's inline form."""
        self._obj["spec"]["topology"] = {"levels": list(levels)}
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self._obj["spec"].setdefault("nodeTaints", []).append(taint)
        return self

    def toleration(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        tol = {"key": key, "operator": "Equal" if value else "Exists", "effect": effect}
        if value:
            tol["value"] = value
        self._obj["spec"].setdefault("tolerations", []).append(tol)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def model(self) -> ResourceFlavor:
        return ResourceFlavor.from_dict(self.obj())


class TopologyBuilder:
    def __init__(self, name: str, *levels: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": f"{c.GROUP}/{c.VERSION_V1ALPHA1}", "kind": c.KIND_TOPOLOGY, "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        }

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def model(self) -> Topology:
        return Topology.from_dict(self.obj())


def _container(requests: dict[str, Quantity]) -> dict[str, Any]:
    return {"name": "main", "image": "registry.example.com/app:1",
            "resources": {"requests": {r: str(q) for r, q in requests.items()}}}


class WorkloadBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"podSets": []},
        }

    def queue(self, name: str) -> Self:
        self._obj["spec"]["queueName"] = name
        return self

    def priority(self, value: int) -> Self:
        self._obj["spec"]["priority"] = value
        return self

    def created(self, timestamp: str) -> Self:
        self._obj["metadata"]["creationTimestamp"] = timestamp
        return self

    def pod_set(self, name: str, count: int, requests: dict[str, Quantity],
                required: str | None = None, preferred: str | None = None,
                node_selector: dict[str, str] | None = None) -> Self:
        spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [_container(requests)]}
        if node_selector:
            spec["nodeSelector"] = dict(node_selector)
        ps: dict[str, Any] = {"name": name, "count": count, "template": {"spec": spec}}
        if required is not None:
            ps["topologyRequest"] = {"required": required}
        elif preferred is not None:
            ps["topologyRequest"] = {"preferred": preferred}
        self._obj["spec"]["podSets"].append(ps)
        return self

    def admitted(self, cluster_queue: str, pod_set: str, count: int, flavors: dict[str, str],
                 usage: dict[str, Quantity], slices: Sequence[tuple[dict[str, str], int]] = ()) -> Self:
        """Admitted (QuotaReserved and Admitted) before anyone looked: one pod set's assignment, its
        topology slices given as (nodeLabels, count)."""
        psa: dict[str, Any] = {"name": pod_set, "count": count, "flavors": dict(flavors),
                               "resourceUsage": {r: str(q) for r, q in usage.items()}}
        if slices:
            psa["topologyAssignment"] = {"slices": [{"nodeLabels": dict(labels), "count": n} for labels, n in slices]}
        status = self._obj.setdefault("status", {})
        status["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [psa]}
        status.setdefault("conditions", []).extend(
            {"type": kind, "status": "True", "reason": kind, "message": "admitted earlier",
             "lastTransitionTime": "2025-12-31T00:00:00Z"} for kind in (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED))
        return self

    def finished(self, succeeded: bool = True) -> Self:
        self._obj.setdefault("status", {}).setdefault("conditions", []).append({
            "type": c.CONDITION_FINISHED, "status": "True",
            "reason": c.REASON_SUCCEEDED if succeeded else c.REASON_FAILED, "message": "done",
            "lastTransitionTime": "2026-01-01T00:00:00Z"})
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


class JobBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
            "spec": {"parallelism": 1, "completions": 1, "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never", "containers": [_container({})]}}},
        }

    @property
    def _pod_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]["template"]["spec"]
        return spec

    def queue(self, name: str) -> Self:
        self._obj["metadata"]["labels"][c.LABEL_QUEUE_NAME] = name
        return self

    def parallelism(self, n: int | None) -> Self:
        if n is None:
            self._obj["spec"].pop("parallelism", None)
        else:
            self._obj["spec"]["parallelism"] = self._obj["spec"]["completions"] = n
        return self

    def requests(self, requests: dict[str, Quantity]) -> Self:
        self._pod_spec["containers"] = [_container(requests)]
        return self

    def init_container(self, requests: dict[str, Quantity], sidecar: bool = False) -> Self:
        """An init container; `sidecar` makes it a restartable one (restartPolicy: Always)."""
        inits = self._pod_spec.setdefault("initContainers", [])
        container = {**_container(requests), "name": f"init-{len(inits)}"}
        if sidecar:
            container["restartPolicy"] = "Always"
        inits.append(container)
        return self

    def limits(self, limits: dict[str, Quantity]) -> Self:
        """Limits on the (first) app container, which stand in for absent requests."""
        resources = self._pod_spec["containers"][0]["resources"]
        resources["limits"] = {r: str(q) for r, q in limits.items()}
        return self

    def overhead(self, overhead: dict[str, Quantity]) -> Self:
        """The pod overhead a RuntimeClass adds (kube-scheduler adds it to the requests)."""
        self._pod_spec["overhead"] = {r: str(q) for r, q in overhead.items()}
        return self

    def annotate(self, key: str, value: str) -> Self:
        self._obj["metadata"]["annotations"][key] = value
        return self

    def template_annotate(self, key: str, value: str) -> Self:
        self._obj["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self

    def priority(self, value: int | None = None, class_name: str | None = None) -> Self:
        if value is not None:
            self._pod_spec["priority"] = value
        if class_name is not None:
            self._pod_spec["priorityClassName"] = class_name
        return self

    def created(self, timestamp: str) -> Self:
        self._obj["metadata"]["creationTimestamp"] = timestamp
        return self

    def uid(self, uid: str) -> Self:
        self._obj["metadata"]["uid"] = uid
        return self

    def complete(self) -> Self:
        self._obj["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded":
                               self._obj["spec"].get("parallelism", 1)}
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


def make_cluster_queue(name: str) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name)


def make_local_queue(name: str, cluster_queue: str, namespace: str = "default") -> LocalQueueBuilder:
    return LocalQueueBuilder(name, cluster_queue, namespace)


def make_flavor(name: str) -> ResourceFlavorBuilder:
    return ResourceFlavorBuilder(name)


def make_topology(name: str, *levels: str) -> TopologyBuilder:
    return TopologyBuilder(name, *levels)


def make_workload(name: str, namespace: str = "default") -> WorkloadBuilder:
    return WorkloadBuilder(name, namespace)


def make_job(name: str, namespace: str = "default") -> JobBuilder:
    return JobBuilder(name, namespace)


def make_admission_state(cluster_queues: list[ClusterQueueBuilder], flavors: list[ResourceFlavorBuilder],
                         nodes: list[NodeView] | None = None, topologies: list[TopologyBuilder] | None = None,
                         local_queues: list[LocalQueueBuilder] | None = None,
                         namespaces: dict[str, dict[str, str]] | None = None) -> AdmissionState:
    """An AdmissionState over these objects; by default one LocalQueue `lq-<cq>` per ClusterQueue
    in namespace `default`."""
    if local_queues is None:
        local_queues = [make_local_queue(f"lq-{cq.model().name}", cq.model().name) for cq in cluster_queues]
    snapshot = build_snapshot([cq.model() for cq in cluster_queues], [lq.model() for lq in local_queues],
                              [f.model() for f in flavors], [t.model() for t in topologies or []],
                              nodes or [], [], namespaces)
    return AdmissionState(snapshot)
