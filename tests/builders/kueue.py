"""Fluent builders for Kueue objects and Jobs in tests: ClusterQueue, Cohort, LocalQueue, ResourceFlavor,
Topology, Workload, WorkloadPriorityClass and batch/v1 Job. Each builder's `obj()` is the manifest dict (as a YAML file or
the API gives it) and, for tasq's kinds, `model()` the parsed pydantic object.
Used by the admission, API-model and validator unit tests and the simulate integration tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from controller.api import constants as c
from controller.api.cohort import Cohort
from controller.api.flavor import ResourceFlavor
from controller.api.priority_class import WorkloadPriorityClass
from controller.api.queues import ClusterQueue, LocalQueue
from controller.api.topology import Topology
from controller.api.topology_assignment import AssignedDomain, TopologyAssignment, encode
from controller.api.views import NodeView
from controller.api.workload import Workload
from controller.core.admission.cycle import AdmissionState
from controller.core.admission.snapshot import build_snapshot
from tests.builders.manifest import Manifest, taint
from webhooks.validation.pod_specs import overcommit_allowed

Quantity = str | int


def label_slices(topology_assignment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A written TopologyAssignment's domains in order, as `{"nodeLabels", "count"}` (what tests
    compare; the wire form is compact)."""
    return [{"nodeLabels": dict(d.node_labels), "count": d.count}
            for d in TopologyAssignment.model_validate(topology_assignment).domains()]


def _quotas(quotas: Mapping[str, Quantity], borrowing: Mapping[str, Quantity]) -> list[dict[str, Any]]:
    """Resource quotas in the given order, with a borrowingLimit where one is given."""
    out: list[dict[str, Any]] = []
    for r, q in quotas.items():
        out.append({"name": r, "nominalQuota": str(q)})
        if r in borrowing:
            out[-1]["borrowingLimit"] = str(borrowing[r])
    return out


class _QuotaBuilder(Manifest):
    """Resource groups, flavors and limits: what a ClusterQueue and a Cohort share."""

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]
        return spec

    def group(self, *covered: str) -> Self:
        """Start a resource group covering these resources; `flavor` adds to the latest group."""
        self._spec.setdefault("resourceGroups", []).append({"coveredResources": list(covered), "flavors": []})
        return self

    def flavor(self, name: str, quotas: Mapping[str, Quantity],
               borrowing: Mapping[str, Quantity] | None = None) -> Self:
        """A flavor with nominal quotas (and borrowing limits) in the given order, in the latest
        group; opens a group covering its resources when none is open."""
        if not self._spec.get("resourceGroups"):
            self.group(*quotas)
        self._spec["resourceGroups"][-1]["flavors"].append({"name": name,
                                                            "resources": _quotas(quotas, borrowing or {})})
        return self

    def limits(self, flavor: str, resource: str, borrowing: Quantity | None = None,
               lending: Quantity | None = None) -> Self:
        for group in self._spec.get("resourceGroups", []):
            for fl in group["flavors"]:
                for r in fl["resources"]:
                    if fl["name"] == flavor and r["name"] == resource:
                        if borrowing is not None:
                            r["borrowingLimit"] = str(borrowing)
                        if lending is not None:
                            r["lendingLimit"] = str(lending)
        return self


class ClusterQueueBuilder(_QuotaBuilder):
    def __init__(self, name: str) -> None:
        super().__init__({
            "apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE, "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": []},
        })

    def cohort(self, name: str) -> Self:
        self._spec["cohortName"] = name
        return self

    def strategy(self, strategy: str) -> Self:
        self._spec["queueingStrategy"] = strategy
        return self

    def when_can_borrow(self, policy: str) -> Self:
        self._spec["flavorFungibility"] = {"whenCanBorrow": policy}
        return self

    def preemption(self, within: str | None = None, reclaim: str | None = None, borrow: str | None = None,
                   threshold: int | None = None) -> Self:
        """spec.preemption: withinClusterQueue, reclaimWithinCohort, borrowWithinCohort (policy and
        maxPriorityThreshold); only the fields given are written."""
        preemption: dict[str, Any] = {}
        if within is not None:
            preemption["withinClusterQueue"] = within
        if reclaim is not None:
            preemption["reclaimWithinCohort"] = reclaim
        if borrow is not None:
            preemption["borrowWithinCohort"] = {"policy": borrow}
            if threshold is not None:
                preemption["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
        self._spec["preemption"] = preemption
        return self

    def when_can_preempt(self, policy: str) -> Self:
        self._spec.setdefault("flavorFungibility", {})["whenCanPreempt"] = policy
        return self

    def deleted(self, at: str = "2026-01-01T00:00:00Z") -> Self:
        """Being deleted: a deletionTimestamp, held by the resource-in-use finalizer."""
        self._obj["metadata"].update(deletionTimestamp=at, finalizers=[c.FINALIZER_RESOURCE_IN_USE])
        return self

    def namespace_selector(self, selector: dict[str, Any] | None) -> Self:
        if selector is None:
            self._spec.pop("namespaceSelector", None)
        else:
            self._spec["namespaceSelector"] = selector
        return self

    def model(self) -> ClusterQueue:
        return ClusterQueue.from_dict(self.obj())


class CohortBuilder(_QuotaBuilder):
    def __init__(self, name: str) -> None:
        super().__init__({"apiVersion": f"{c.GROUP}/{c.VERSION_V1BETA2}", "kind": c.KIND_COHORT,
                          "metadata": {"name": name}, "spec": {}})

    def parent(self, name: str) -> Self:
        self._spec["parentName"] = name
        return self

    def model(self) -> Cohort:
        return Cohort.from_dict(self.obj())


class WorkloadPriorityClassBuilder(Manifest):
    def __init__(self, name: str, value: int, version: str = "v1beta2") -> None:
        super().__init__({"apiVersion": f"{c.GROUP}/{version}", "kind": c.KIND_WORKLOAD_PRIORITY_CLASS,
                          "metadata": {"name": name}, "value": value})

    def description(self, text: str) -> Self:
        self._obj["description"] = text
        return self

    def model(self) -> WorkloadPriorityClass:
        return WorkloadPriorityClass.from_dict(self.obj())


class LocalQueueBuilder(Manifest):
    def __init__(self, name: str, cluster_queue: str, namespace: str = "default") -> None:
        super().__init__({
            "apiVersion": c.API_VERSION, "kind": c.KIND_LOCAL_QUEUE,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue},
        })

    def model(self) -> LocalQueue:
        return LocalQueue.from_dict(self.obj())


class ResourceFlavorBuilder(Manifest):
    def __init__(self, name: str) -> None:
        super().__init__({"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR,
                          "metadata": {"name": name}, "spec": {}})

    def node_labels(self, labels: dict[str, str]) -> Self:
        self._obj["spec"]["nodeLabels"] = dict(labels)
        return self

    def node_label(self, key: str, value: str) -> Self:
        self._obj["spec"].setdefault("nodeLabels", {})[key] = value
        return self

    def topology_name(self, name: str) -> Self:
        self._obj["spec"]["topologyName"] = name
        return self

    def levels(self, *levels: Any) -> Self:
        """The KEP's inline form."""
        self._obj["spec"]["topology"] = {"levels": list(levels)}
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        self._obj["spec"].setdefault("nodeTaints", []).append(taint(key, value, effect))
        return self

    def toleration(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        tol = {"key": key, "operator": "Equal" if value else "Exists", "effect": effect}
        if value:
            tol["value"] = value
        self._obj["spec"].setdefault("tolerations", []).append(tol)
        return self

    def raw_toleration(self, **fields: Any) -> Self:
        """A toleration exactly as given (odd shapes for the validator tests)."""
        self._obj["spec"].setdefault("tolerations", []).append(fields)
        return self

    def model(self) -> ResourceFlavor:
        return ResourceFlavor.from_dict(self.obj())


class TopologyBuilder(Manifest):
    def __init__(self, name: str, *levels: str) -> None:
        super().__init__({
            "apiVersion": f"{c.GROUP}/{c.VERSION_V1ALPHA1}", "kind": c.KIND_TOPOLOGY, "metadata": {"name": name},
            "spec": {},
        })
        self.levels(*levels)

    def levels(self, *labels: Any) -> Self:
        """Replace the levels (widest first)."""
        self._obj["spec"]["levels"] = [{"nodeLabel": label} for label in labels]
        return self

    def model(self) -> Topology:
        return Topology.from_dict(self.obj())


def _container(requests: Mapping[str, Quantity]) -> dict[str, Any]:
    """Container `main`; extended resources (GPUs) get a limit equal to the request, which
    kube-apiserver requires of a Pod or Job."""
    amounts = {r: str(q) for r, q in requests.items()}
    resources: dict[str, Any] = {"requests": amounts}
    limits = {r: q for r, q in amounts.items() if not overcommit_allowed(r)}
    if limits:
        resources["limits"] = limits
    return {"name": "main", "image": "registry.example.com/app:1", "resources": resources}


def pod_template(requests: Mapping[str, Quantity] | None = None) -> dict[str, Any]:
    """A pod template of one container `main` (requests default to 1 cpu), restartPolicy Never."""
    return {"spec": {"restartPolicy": "Never",
                     "containers": [_container({"cpu": "1"} if requests is None else requests)]}}


class WorkloadBuilder(Manifest):
    def __init__(self, name: str, namespace: str = "default") -> None:
        super().__init__({
            "apiVersion": c.API_VERSION, "kind": c.KIND_WORKLOAD,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"podSets": []},
        })

    def queue(self, name: str) -> Self:
        self._obj["spec"]["queueName"] = name
        return self

    def priority(self, value: int) -> Self:
        self._obj["spec"]["priority"] = value
        return self

    def pod_set(self, name: str, count: int = 1, requests: Mapping[str, Quantity] | None = None,
                required: str | None = None, preferred: str | None = None,
                node_selector: dict[str, str] | None = None, **fields: Any) -> Self:
        """A pod set of `count` pods (requests default to 1 cpu); `fields` are further PodSet fields
        as written (`minCount=2`, `topologyRequest={...}`)."""
        template = pod_template(requests)
        if node_selector:
            template["spec"]["nodeSelector"] = dict(node_selector)
        ps: dict[str, Any] = {"name": name, "count": count, "template": template}
        if required is not None:
            ps["topologyRequest"] = {"required": required}
        elif preferred is not None:
            ps["topologyRequest"] = {"preferred": preferred}
        self._obj["spec"].setdefault("podSets", []).append({**ps, **fields})
        return self

    def admitted(self, cluster_queue: str = "team-a") -> Self:
        """QuotaReserved=True, a complete metav1.Condition as the admission cycle writes it."""
        self._obj.setdefault("status", {})["conditions"] = [{
            "type": c.CONDITION_QUOTA_RESERVED, "status": "True", "reason": c.REASON_QUOTA_RESERVED,
            "message": f"Quota reserved in ClusterQueue {cluster_queue}",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        return self

    def assignment(self, name: str, count: int | None, *slices: tuple[dict[str, str], int],
                   cluster_queue: str = "team-a", legacy: bool = False, **fields: Any) -> Self:
        """Add a PodSetAssignment to status.admission; `slices` are (nodeLabels, count) pairs of its
        topologyAssignment (levels: the first pair's keys), encoded as tasq writes it, or with
        `legacy` in the KEP's nodeLabels form; left out when none are given; `fields` as written
        (`flavors={...}`)."""
        admission = self._obj.setdefault("status", {}).setdefault(
            "admission", {"clusterQueue": cluster_queue, "podSetAssignments": []})
        item: dict[str, Any] = {"name": name, **fields}
        if count is not None:
            item["count"] = count
        if slices:
            item["topologyAssignment"] = (
                {"slices": [{"nodeLabels": labels, "count": n} for labels, n in slices]} if legacy
                else encode(list(slices[0][0]), [AssignedDomain(tuple(labels[k] for k in slices[0][0]), n)
                                                 for labels, n in slices]).to_dict())
        admission["podSetAssignments"].append(item)
        return self

    def model(self) -> Workload:
        return Workload.from_dict(self.obj())


class JobBuilder(Manifest):
    def __init__(self, name: str, namespace: str = "default") -> None:
        super().__init__({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {}, "annotations": {}},
            "spec": {"parallelism": 1, "completions": 1, "completionMode": "Indexed",
                     "template": {"spec": {"restartPolicy": "Never", "containers": [_container({})]}}},
        })

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

    def template_annotate(self, key: str, value: str) -> Self:
        self._obj["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self

    def priority(self, value: int | None = None, class_name: str | None = None) -> Self:
        if value is not None:
            self._pod_spec["priority"] = value
        if class_name is not None:
            self._pod_spec["priorityClassName"] = class_name
        return self

    def suspended(self, suspend: bool = True) -> Self:
        self._obj["spec"]["suspend"] = suspend
        return self

    def run_seconds(self, seconds: float) -> Self:
        """How long each pod runs on the test clusters (devcluster's kubelet, kwok's stages)."""
        return self.template_annotate(c.ANNOTATION_DEVCLUSTER_RUN_SECONDS, str(seconds))

    def topology_gated(self) -> Self:
        """Pods created with tasq's scheduling gate, as tasq's Pod webhook would store them (for a
        test that runs the operator without its webhooks)."""
        self._pod_spec["schedulingGates"] = [{"name": c.SCHEDULING_GATE_TOPOLOGY}]
        return self


def make_cluster_queue(name: str) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name)


def make_cohort(name: str) -> CohortBuilder:
    return CohortBuilder(name)


def make_priority_class(name: str, value: int, version: str = "v1beta2") -> WorkloadPriorityClassBuilder:
    """A WorkloadPriorityClass (kueue.x-k8s.io)."""
    return WorkloadPriorityClassBuilder(name, value, version)


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
                         namespaces: dict[str, dict[str, str]] | None = None,
                         cohorts: list[CohortBuilder] | None = None) -> AdmissionState:
    """An AdmissionState over these objects; by default one LocalQueue `lq-<cq>` per ClusterQueue
    in namespace `default`."""
    queues = [cq.model() for cq in cluster_queues]
    if local_queues is None:
        local_queues = [make_local_queue(f"lq-{cq.name}", cq.name) for cq in queues]
    snapshot = build_snapshot(queues, [lq.model() for lq in local_queues],
                              [f.model() for f in flavors], [t.model() for t in topologies or []],
                              nodes or [], [], namespaces, cohorts=[co.model() for co in cohorts or []])
    return AdmissionState(snapshot)
