"""Fluent builders for the core objects tests need: Nodes and Pods, as API dicts or as views.

`make_node("x1").label("cloud.com/rack", "r1").allocatable({"nvidia.com/gpu": "8"}, cpu="64").build()`
gives the Node dict the API would return; `.view()` gives the NodeView. `make_pod(...)` likewise.
Shared by every test package (topology, admission, cache, devcluster): keep them general.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from controller.api import constants as c
from controller.api.views import NodeView, PodView
from tests.builders.manifest import Manifest, taint
from webhooks.validation.pod_specs import overcommit_allowed


def _merge(resources: Mapping[str, str | int] | None, kwargs: Mapping[str, str | int]) -> dict[str, str]:
    out = {k: str(v) for k, v in (resources or {}).items()}
    out.update({k: str(v) for k, v in kwargs.items()})
    return out


class NodeBuilder(Manifest):
    """A Ready, schedulable node labelled with its hostname and allocatable `pods: 110`."""

    def __init__(self, name: str) -> None:
        super().__init__({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {c.LABEL_HOSTNAME: name}},
            "spec": {},
            "status": {
                "allocatable": {c.RESOURCE_PODS: "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        })

    def labels(self, labels: Mapping[str, str]) -> NodeBuilder:
        self._obj["metadata"]["labels"].update(labels)
        return self

    def without_label(self, key: str) -> NodeBuilder:
        self._obj["metadata"]["labels"].pop(key, None)
        return self

    def allocatable(self, resources: Mapping[str, str | int] | None = None, **kwargs: str | int) -> NodeBuilder:
        """Set (add or override) allocatable quantities: `.allocatable({"nvidia.com/gpu": 8}, cpu="64")`."""
        self._obj["status"]["allocatable"].update(_merge(resources, kwargs))
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._obj["spec"].setdefault("taints", []).append(taint(key, value, effect))
        return self

    def not_ready(self, since: str | None = None, status: str = "False") -> NodeBuilder:
        """Ready False (or Unknown), since `since` (the condition's lastTransitionTime) when given."""
        condition = {"type": "Ready", "status": status}
        if since is not None:
            condition["lastTransitionTime"] = since
        self._obj["status"]["conditions"] = [condition]
        return self

    def unschedulable(self) -> NodeBuilder:
        self._obj["spec"]["unschedulable"] = True
        return self

    def view(self) -> NodeView:
        return NodeView.from_dict(self._obj)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


class PodBuilder(Manifest):
    """A pending pod with one container `main` and no requests; bind it with `.on(node)`."""

    def __init__(self, name: str, namespace: str = "default") -> None:
        super().__init__({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                         "labels": {}, "annotations": {}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Pending"},
        })

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]
        return spec

    def annotation(self, key: str, value: str) -> PodBuilder:
        return self.annotate(key, value)

    def requests(self, resources: Mapping[str, str | int] | None = None, **kwargs: str | int) -> PodBuilder:
        """Requests of the (first) container `main`; extended resources (GPUs) get an equal limit, which
        kube-apiserver requires."""
        ctr = self._spec["containers"][0]
        amounts = _merge(resources, kwargs)
        ctr.setdefault("resources", {}).setdefault("requests", {}).update(amounts)
        limits = {name: value for name, value in amounts.items() if not overcommit_allowed(name)}
        if limits:
            ctr["resources"].setdefault("limits", {}).update(limits)
        return self

    def limits(self, resources: Mapping[str, str | int] | None = None, **kwargs: str | int) -> PodBuilder:
        ctr = self._spec["containers"][0]
        ctr.setdefault("resources", {}).setdefault("limits", {}).update(_merge(resources, kwargs))
        return self

    def container(self, name: str, requests: Mapping[str, str | int] | None = None) -> PodBuilder:
        """Another app container."""
        ctr: dict[str, Any] = {"name": name, "image": "busybox"}
        if requests:
            ctr["resources"] = _resources(requests)
        self._spec["containers"].append(ctr)
        return self

    def init_container(self, name: str, requests: Mapping[str, str | int] | None = None,
                       sidecar: bool = False) -> PodBuilder:
        """An init container; `sidecar=True` makes it restartable (restartPolicy: Always)."""
        ctr: dict[str, Any] = {"name": name, "image": "busybox"}
        if requests:
            ctr["resources"] = _resources(requests)
        if sidecar:
            ctr["restartPolicy"] = "Always"
        self._spec.setdefault("initContainers", []).append(ctr)
        return self

    def overhead(self, resources: Mapping[str, str | int] | None = None, **kwargs: str | int) -> PodBuilder:
        self._spec["overhead"] = _merge(resources, kwargs)
        return self

    def on(self, node: str, phase: str = "Running") -> PodBuilder:
        """Bound to `node` (spec.nodeName) in `phase`."""
        self._spec["nodeName"] = node
        self._obj["status"]["phase"] = phase
        return self

    def node_selector(self, selector: Mapping[str, str]) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update(selector)
        return self

    def toleration(self, key: str = "", value: str = "", effect: str = "",
                   operator: str = "Equal") -> PodBuilder:
        tol: dict[str, str] = {"operator": operator}
        for field_name, field_value in (("key", key), ("value", value), ("effect", effect)):
            if field_value:
                tol[field_name] = field_value
        self._spec.setdefault("tolerations", []).append(tol)
        return self

    def node_affinity(self, *terms: Sequence[tuple[str, str, Sequence[str]]]) -> PodBuilder:
        """Required node affinity: each term a list of (key, operator, values), terms ORed."""
        selector_terms = [{"matchExpressions": [{"key": k, "operator": op, "values": list(vals)}
                                                for k, op, vals in term]} for term in terms]
        self._spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": selector_terms}}}
        return self

    def gate(self, name: str = c.SCHEDULING_GATE_TOPOLOGY) -> PodBuilder:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def template(self) -> dict[str, Any]:
        """The pod template form (`metadata` + `spec`) a Job or Workload pod set carries."""
        return {"metadata": copy.deepcopy({k: v for k, v in self._obj["metadata"].items()
                                           if k in ("labels", "annotations")}),
                "spec": copy.deepcopy(self._spec)}

    def view(self) -> PodView:
        return PodView.from_dict(self._obj)


def _resources(requests: Mapping[str, str | int]) -> dict[str, Any]:
    """Requests, and an equal limit for each extended resource (kube-apiserver requires one)."""
    amounts = _merge(requests, {})
    limits = {name: value for name, value in amounts.items() if not overcommit_allowed(name)}
    return {"requests": amounts, **({"limits": limits} if limits else {})}


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)
