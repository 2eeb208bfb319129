"""Seeding a fresh devcluster with the CustomResourceDefinitions found in a directory of YAML files.

Used by `tasq dev` (and later `tasq demo`) right after the server starts (sample nodes come from
`devcluster.simulated.nodes`); goes through the in-process API, so CRDs are validated and watched like any client's.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from devcluster.server.apiserver import ApiServer
from devcluster.server.errors import ApiError


async def apply_crds(api: ApiServer, directory: Path) -> list[str]:
    """Create (or replace) every CustomResourceDefinition found in directory/*.yaml; returns their names."""
    r = api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions")
    names = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            try:
                await api.create(r, "", doc, copy=False)
            except ApiError as e:
                if e.code != 409:
                    raise
                current = await api.get(r, "", doc["metadata"]["name"])
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await api.update(r, "", doc["metadata"]["name"], doc, copy=False)
            names.append(str(doc["metadata"]["name"]))
    return names
