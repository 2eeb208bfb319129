"""The resource registry: which kinds the server serves, under which group/version/plural.

Holds the built-in kinds tasq touches and the kinds registered from CustomResourceDefinitions.
Used by the request pipeline (lookups by path or kind), discovery and the Table printer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served group/version/resource. Storage is shared by all versions of a (group, plural)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False
    # CRD-only: the version's openAPIV3Schema and additionalPrinterColumns.
    schema: Mapping[str, Any] | None = None
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    custom: bool = False
    # CRD-only: whether the schema carries x-kubernetes-validations rules (CEL) anywhere.
    has_rules: bool = False
    # Field selectors this resource accepts besides metadata.name / metadata.namespace.
    selectable_fields: tuple[str, ...] = ()
    storage_version: bool = True
    extra_subresources: tuple[str, ...] = ()
    # The group whose storage this resource is served from, when it is another one's (see converting.py).
    storage_group: str | None = None
    # What discovery advertises; create-only kinds (access reviews) are answered, never stored.
    verbs: tuple[str, ...] = ALL_VERBS

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> tuple[str, str]:
        return (self.group if self.storage_group is None else self.storage_group, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def discovery(self) -> list[dict[str, Any]]:
        """APIResource entries for this resource and its subresources (metav1.APIResource)."""
        main: dict[str, Any] = {
            "name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
            "kind": self.kind, "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        subs = (("status",) if self.has_status else ()) + self.extra_subresources
        for sub in subs:
            verbs = (["create"] if sub in ("binding", "eviction", "token") else ["get"] if sub == "log"
                     else ["get", "patch", "update"])
            kind = {"binding": "Binding", "eviction": "Eviction", "token": "TokenRequest"}.get(sub, self.kind)
            group = {"eviction": "policy", "token": "authentication.k8s.io"}.get(sub, "")
            entry: dict[str, Any] = {"name": f"{self.plural}/{sub}", "singularName": "",
                                     "namespaced": self.namespaced, "kind": kind, "verbs": verbs}
            if group:
                entry["group"], entry["version"] = group, "v1"
            out.append(entry)
        return out


def _b(group: str, version: str, plural: str, kind: str, namespaced: bool, short: tuple[str, ...] = (),
       status: bool = False, fields: tuple[str, ...] = (), cats: tuple[str, ...] = (),
       subs: tuple[str, ...] = ()) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, short, cats, status,
                        selectable_fields=fields, extra_subresources=subs)


EVENT_FIELDS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")

BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    _b("", "v1", "namespaces", "Namespace", False, ("ns",), status=True, fields=("status.phase",)),
    _b("", "v1", "nodes", "Node", False, ("no",), status=True, fields=("spec.unschedulable",)),
    _b("", "v1", "pods", "Pod", True, ("po",), status=True, cats=("all",),
       fields=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
               "status.phase", "status.podIP", "status.nominatedNodeName"), subs=("binding", "eviction", "log")),
    _b("", "v1", "events", "Event", True, ("ev",), fields=EVENT_FIELDS),
    _b("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    _b("", "v1", "secrets", "Secret", True, (), fields=("type",)),
    _b("", "v1", "services", "Service", True, ("svc",), status=True, cats=("all",)),
    _b("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",), subs=("token",)),
    _b("batch", "v1", "jobs", "Job", True, (), status=True, cats=("all",), fields=("status.successful",)),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, ("ev",),
                 selectable_fields=("regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
                                    "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
                                    "reason", "reportingController", "type"),
                 storage_version=False, storage_group=""),
    _b("coordination.k8s.io", "v1", "leases", "Lease", True),
    _b("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    _b("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
       ("crd", "crds"), status=True),
    _b("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
       "MutatingWebhookConfiguration", False),
    _b("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration", False),
    # Stored for install bundles (kubectl apply -k); the devcluster authorizes every request, so RBAC
    # objects are kept and listed but never enforced, no controller rolls Deployments out and no
    # eviction consults a PodDisruptionBudget.
    _b("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _b("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _b("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _b("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _b("apps", "v1", "deployments", "Deployment", True, ("deploy",), status=True, cats=("all",)),
    _b("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), status=True),
    # Stored only: no aggregator here, so an APIService is never called (nor its status set).
    _b("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, status=True),
    ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
                 verbs=("create",)),
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=("create",)),
)

# Kinds that are answered on create and never stored.
REVIEW_KINDS = frozenset({"SelfSubjectAccessReview", "SelfSubjectRulesReview", "SubjectAccessReview", "TokenReview"})

# Preferred version per group, for /apis (the first registered version otherwise).
_PREFERRED_BUILTIN = {r.group: r.version for r in BUILTIN_RESOURCES}


@dataclass
class ResourceRegistry:
    """Served resources by (group, version, plural); CRD kinds are added and removed at runtime.

    All versions of one kind share storage; events.k8s.io/v1 Events are served from the core/v1
    Events' storage (converted by `devcluster.server.converting`), as Kubernetes does.
    """

    _by_gvr: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _group_order: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def with_builtins(cls) -> ResourceRegistry:
        registry = cls()
        for r in BUILTIN_RESOURCES:
            registry.add(r)
        return registry

    def add(self, r: ResourceType) -> None:
        self._by_gvr[(r.group, r.version, r.plural)] = r
        versions = self._group_order.setdefault(r.group, [])
        if r.version not in versions:
            versions.append(r.version)

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_gvr if k[0] == group and k[2] == plural]:
            del self._by_gvr[key]
        remaining = {v for (g, v, _p) in self._by_gvr if g == group}
        if group in self._group_order:
            self._group_order[group] = [v for v in self._group_order[group] if v in remaining]
            if not self._group_order[group]:
                del self._group_order[group]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def storage_versions(self, group: str, plural: str) -> list[ResourceType]:
        return [r for (g, _v, p), r in self._by_gvr.items() if g == group and p == plural]

    def storage_resource(self, group: str, plural: str) -> ResourceType | None:
        """The version objects are stored in (the CRD's storage version; the only one for built-ins)."""
        versions = self.storage_versions(group, plural)
        for r in versions:
            if r.storage_version:
                return r
        return versions[0] if versions else None

    def groups(self) -> list[str]:
        return list(self._group_order)

    def versions(self, group: str) -> list[str]:
        return list(self._group_order.get(group, []))

    def preferred_version(self, group: str) -> str:
        preferred = _PREFERRED_BUILTIN.get(group)
        versions = self.versions(group)
        if preferred in versions:
            return preferred
        return _highest_version(versions)

    def resources(self, group: str, version: str) -> list[ResourceType]:
        return [r for (g, v, _p), r in self._by_gvr.items() if g == group and v == version]

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_gvr.values()))


def _version_rank(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA > beta > alpha, then by numbers (v1 > v1beta2 > v1beta1)."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (-1, 0, 0)
    stability = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stability, int(m.group(1)), int(m.group(3) or 0))


def _highest_version(versions: list[str]) -> str:
    return max(versions, key=_version_rank) if versions else ""
