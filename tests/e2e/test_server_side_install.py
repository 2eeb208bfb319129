"""The README's install line, `kubectl apply --server-side -f <bundle>`, through the real kubectl on
the devcluster (what `tasq dev` serves) and on the real control plane: the whole bundle as a server
dry run, then its cluster-safe part (RBAC, Services, the PodDisruptionBudget) applied for real twice,
the second time changing nothing. CRDs, webhooks and the Deployment are left to the dry run: other
modules share the real control plane, and a webhook with no server behind it would refuse their
objects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Kubectl
from tests.e2e.test_install import rendered_bundle

pytestmark = [pytest.mark.e2e]
SAFE_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Service",
              "PodDisruptionBudget")


@pytest.fixture
def bundle(tmp_path: Path, kubectl: Kubectl) -> Iterator[list[dict[str, Any]]]:
    objects = rendered_bundle()
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(namespaces))
    try:
        yield objects
    finally:
        safe = [o for o in objects if o["kind"] in SAFE_KINDS]
        kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=yaml.safe_dump_all(safe), check=False)


def test_the_readme_install_line_is_served(kubectl: Kubectl, bundle: list[dict[str, Any]]) -> None:
    dry = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(bundle))
    lines = dry.stdout.splitlines()
    assert len(lines) == len(bundle) and all(line.endswith("serverside-applied (server dry run)") for line in lines)

    safe = yaml.safe_dump_all([o for o in bundle if o["kind"] in SAFE_KINDS])
    first = kubectl("apply", "--server-side", "-o", "json", "-f", "-", stdin=safe)
    again = kubectl("apply", "--server-side", "-o", "json", "-f", "-", stdin=safe)
    before = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
              for o in json.loads(first.stdout)["items"]}
    after = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
             for o in json.loads(again.stdout)["items"]}
    assert len(before) == sum(o["kind"] in SAFE_KINDS for o in bundle)
    # re-applying the same manifest is a no-op write (the disruption controller writes the PDB's status
    # meanwhile on the real control plane, so its resourceVersion moves on by itself)
    pdb = ("PodDisruptionBudget", "tasq-controller-manager")
    assert {k: v for k, v in after.items() if k != pdb} == {k: v for k, v in before.items() if k != pdb}
