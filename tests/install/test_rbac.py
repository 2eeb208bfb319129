"""config/rbac grants exactly the API calls tasq makes: derived from the code, compared both ways.

Every request tasq sends goes through one of two doors, each read here from the source:
- `controller.kube.api.KubeApi` methods called with a resource constant of that module (the
  operator's reads and writes, Leases, the ungater's raw pod patches), or with the job
  reconciler's `_integrated_resource(adapter)`, which stands for every integrated kind
  (controller.core.jobs.integrations);
  `functools.partial(api.merge_patch, ...)` counts the same;
- the watch streams, one per entry of `controller.kube.watching.RESOURCES` (list + watch), plus the
  CRD observer kopf runs in every operator (list + watch customresourcedefinitions).
The typed `kubernetes.aio` clients (`read_namespaced_lease`, `patch_namespaced_pod`...) would be a
third; a test checks that no module uses them.
The admissionregistration calls and the CRD get/update are `tasq run --local-webhooks` only (a
developer's admin credentials, a control plane on the same machine); in a cluster the configurations
come from config/webhook and the CRDs' conversion from config/crd, so the ServiceAccount must not
hold them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.aio.client
import yaml

from controller.api import constants as c
from controller.core.jobs.integrations import INTEGRATIONS
from controller.kube import api as kube_api
from controller.kube.watching import RESOURCES

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(REPO / "controller" / "kube").glob("*.py"), *(REPO / "webhooks").glob("*.py")])
KUBEAPI_VERBS = {"get": "get", "list": "list", "create": "create", "replace": "update", "merge_patch": "patch",
                 "patch_raw": "patch", "delete": "delete"}
TYPED = re.compile(r"^(read|list|create|replace|patch|delete)_(namespaced_)?([a-z_]+?)(_status)?"
                   r"(_with_http_info|_without_preload_content)?$")
TYPED_VERBS = {"read": "get", "list": "list", "create": "create", "replace": "update", "patch": "patch",
               "delete": "delete"}
LOCAL_ONLY_GROUPS = {"admissionregistration.k8s.io"}
LOCAL_ONLY = {("apiextensions.k8s.io", "customresourcedefinitions", "get"),
              ("apiextensions.k8s.io", "customresourcedefinitions", "update")}
"""`--local-webhooks` points the CRDs' conversion at the local server; in a cluster config/crd does."""
KOPF_OBSERVER = {("apiextensions.k8s.io", "customresourcedefinitions", "list"),
                 ("apiextensions.k8s.io", "customresourcedefinitions", "watch")}

SERVICE_ACCOUNT = "tasq-controller-manager"

Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _resources(node: ast.expr) -> list[tuple[str, str]]:
    """The (apiVersion, plural) a KubeApi call's resource argument names: a constant of
    controller.kube.api, or the job reconciler's `_integrated_resource(adapter)`, which is any integrated kind."""
    if isinstance(node, ast.Name):
        value = getattr(kube_api, node.id, None)
        if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
            return [(value[0], value[1])]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_integrated_resource":
        return [(job.gvk.api_version, job.gvk.plural) for job in INTEGRATIONS]
    return []


def _kubeapi_call(call: ast.Call) -> Iterator[Permission]:
    func, args = call.func, list(call.args)
    if isinstance(func, ast.Attribute) and func.attr == "partial" and args and isinstance(args[0], ast.Attribute):
        func, args = args[0], args[1:]  # functools.partial(api.merge_patch, RESOURCE, ...)
    if not isinstance(func, ast.Attribute) or func.attr not in KUBEAPI_VERBS or not args:
        return
    sub = args[4] if len(args) > 4 else next((k.value for k in call.keywords if k.arg == "subresource"), None)
    suffix = f"/{sub.value}" if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value else ""
    for api_version, plural in _resources(args[0]):
        yield _group(api_version), plural + suffix, KUBEAPI_VERBS[func.attr]


def _typed_class_group(method: str) -> str | None:
    for name in dir(kubernetes.aio.client):
        cls = getattr(kubernetes.aio.client, name)
        if name.endswith("Api") and isinstance(cls, type) and hasattr(cls, method):
            match = re.match(r"^(Core|[A-Z][a-z]+)(V\d\w*)Api$", name)
            if match is None:
                continue
            prefix = match.group(1)
            return "" if prefix == "Core" else f"{prefix.lower()}.k8s.io"
    return None


def _typed_access(attr: str) -> Iterator[Permission]:
    match = TYPED.match(attr)
    if match is None:
        return
    group = _typed_class_group(attr)
    if group is None:
        return
    verb, _, singular, status, _ = match.groups()
    plural = singular.replace("_", "") + ("es" if singular.endswith("s") else "s")
    yield group, plural + ("/status" if status else ""), TYPED_VERBS[verb]


def typed_client_calls() -> set[tuple[str, Permission]]:
    """(file, permission) of every typed `kubernetes.aio` client method the sources name."""
    found: set[tuple[str, Permission]] = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                found |= {(path.name, p) for p in _typed_access(node.attr)}
    return found


def derived_permissions() -> set[Permission]:
    """Every (group, resource, verb) the code can request in a cluster."""
    found: set[Permission] = set(KOPF_OBSERVER)
    for group, _version, plural in RESOURCES.values():
        found |= {(group, plural, "list"), (group, plural, "watch")}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                found |= set(_kubeapi_call(node))
    found |= {permission for _, permission in typed_client_calls()}
    return {p for p in found if p[0] not in LOCAL_ONLY_GROUPS and p not in LOCAL_ONLY}


def rbac_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted((REPO / "config" / "rbac").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict) and doc.get("apiVersion", "").startswith("rbac.authorization.k8s.io/")]


def roles_bound_to_tasq() -> set[tuple[str, str]]:
    """(kind, name) of every role a binding in config/rbac gives tasq's ServiceAccount."""
    return {(doc["roleRef"]["kind"], doc["roleRef"]["name"]) for doc in rbac_documents()
            if doc["kind"] in {"ClusterRoleBinding", "RoleBinding"}
            and {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": c.TASQ_NAMESPACE} in doc["subjects"]}


BUILT_IN_ROLES: dict[tuple[str, str], set[Permission]] = {
    # kube-apiserver's own Role in kube-system (its bootstrap policy): get, list and watch of the
    # ConfigMap extension-apiserver-authentication, where tasq reads the aggregator's request-header CA.
    ("Role", "extension-apiserver-authentication-reader"): {("", "configmaps", v) for v in ("get", "list", "watch")},
}


def granted_permissions() -> set[Permission]:
    """What tasq's ServiceAccount holds (roles bound to others, like the metrics reader, do not count)."""
    bound = roles_bound_to_tasq()
    granted: set[Permission] = set().union(*(rules for role, rules in BUILT_IN_ROLES.items() if role in bound))
    for doc in rbac_documents():
        if (doc["kind"], doc["metadata"]["name"]) in bound:
            for rule in doc["rules"]:
                assert "nonResourceURLs" not in rule, f"{doc['metadata']['name']}: tasq requests no non-resource URL"
                granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return granted


def test_the_code_is_read_through_every_door() -> None:
    derived = derived_permissions()
    # one of each door, so a scanner that silently finds nothing cannot pass
    assert ("kueue.x-k8s.io", "workloads/status", "patch") in derived  # KubeApi via functools.partial
    assert ("batch", "jobs", "patch") in derived  # KubeApi method call on an integrated kind's resource
    assert ("coordination.k8s.io", "leases", "update") in derived  # KubeApi.replace
    assert ("", "pods", "patch") in derived  # KubeApi.patch_raw
    assert ("", "nodes", "watch") in derived  # a watch stream
    assert ("authentication.k8s.io", "tokenreviews", "create") in derived  # KubeApi.create, metrics scrapes


def test_no_module_uses_a_typed_client_past_the_door() -> None:
    assert {p for p in _typed_access("read_namespaced_lease")} == {("coordination.k8s.io", "leases", "get")}  # the probe works
    assert typed_client_calls() == set()


def test_the_roles_grant_every_call_the_code_makes() -> None:
    missing = derived_permissions() - granted_permissions()
    assert not missing, f"config/rbac lacks: {sorted(missing)}"


def test_the_roles_grant_nothing_the_code_does_not_use() -> None:
    # a built-in Role grants what Kubernetes chose; only tasq's own roles are held to this
    built_in: set[Permission] = set().union(*BUILT_IN_ROLES.values())
    unused = granted_permissions() - derived_permissions() - built_in
    assert not unused, f"config/rbac grants what tasq never calls: {sorted(unused)}"


def test_leases_are_granted_only_in_tasqs_namespace() -> None:
    for path in sorted((REPO / "config" / "rbac").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "ClusterRole":
                assert all("coordination.k8s.io" not in rule.get("apiGroups", ()) for rule in doc["rules"])


PENDING_WORKLOADS_VIEWERS = {"tasq-pending-workloads-cq-viewer", "tasq-pending-workloads-lq-viewer"}


def test_every_role_but_the_readers_roles_is_bound_to_tasq() -> None:
    roles = {(d["kind"], d["metadata"]["name"]) for d in rbac_documents() if d["kind"] in {"ClusterRole", "Role"}}
    assert roles - roles_bound_to_tasq() == {("ClusterRole", c.METRICS_READER_ROLE),
                                              *(("ClusterRole", name) for name in PENDING_WORKLOADS_VIEWERS)}


def test_the_pending_workloads_viewers_may_get_one_subresource_each() -> None:
    viewers = {d["metadata"]["name"]: d["rules"] for d in rbac_documents()
               if d["metadata"]["name"] in PENDING_WORKLOADS_VIEWERS}
    assert viewers == {f"tasq-pending-workloads-{short}-viewer": [{
        "apiGroups": ["visibility.kueue.x-k8s.io"], "resources": [f"{plural}/pendingworkloads"], "verbs": ["get"]}]
        for short, plural in (("cq", "clusterqueues"), ("lq", "localqueues"))}


def test_the_metrics_reader_may_get_metrics_and_nothing_else() -> None:
    (reader,) = [d for d in rbac_documents() if d["metadata"]["name"] == c.METRICS_READER_ROLE]
    assert reader["rules"] == [{"nonResourceURLs": [c.PROBE_PATH_METRICS], "verbs": ["get"]}]
