"""Discovery documents: /version, /api, /apis, /apis/<group> and the per-version resource lists.

Built fresh from the registry on each request (CRDs come and go), by the HTTP layer. The shapes
are metav1.APIVersions, APIGroupList, APIGroup and APIResourceList (legacy, unaggregated discovery,
which kubectl falls back to when the response is plain application/json).
"""

from __future__ import annotations

from typing import Any

from devcluster.server.resources import ResourceRegistry

KUBERNETES_VERSION = ("1", "37", "v1.37.0-tasq")


def version() -> dict[str, Any]:
    major, minor, git = KUBERNETES_VERSION
    return {"major": major, "minor": minor, "gitVersion": git, "gitCommit": "0" * 40, "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc",
            "platform": "linux/amd64", "emulationMajor": major, "emulationMinor": minor}


def core_versions(address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def _group(registry: ResourceRegistry, group: str) -> dict[str, Any]:
    preferred = registry.preferred_version(group)
    versions = sorted(registry.versions(group), key=lambda v: (v != preferred, v))
    return {"name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred}}


def group_list(registry: ResourceRegistry) -> dict[str, Any]:
    groups = [_group(registry, g) for g in registry.groups() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: ResourceRegistry, name: str) -> dict[str, Any] | None:
    if not name or name not in registry.groups():
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(registry, name)}


def resource_list(registry: ResourceRegistry, group_name: str, version_name: str) -> dict[str, Any] | None:
    resources = registry.resources(group_name, version_name)
    if not resources:
        return None
    gv = f"{group_name}/{version_name}" if group_name else version_name
    entries = [entry for r in sorted(resources, key=lambda r: r.plural) for entry in r.discovery()]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}
