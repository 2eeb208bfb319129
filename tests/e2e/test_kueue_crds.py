"""tasq refuses to take over an installed Kueue's CRDs, on either control plane: with `workloads`'s CRD
marked as Kueue's build marks it (controller-gen's version annotation), `tasq run --local-webhooks`,
which would point the CRDs' conversion at itself, exits 1 with one line naming the CRD, the mark and
the migration guide, and leaves no webhook configuration behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controller.api import constants as c
from controller.api.crd_ownership import ANNOTATION_CONTROLLER_GEN
from controller.commands.crds import DEFAULT_DIR
from tests.e2e.conftest import Kubectl, wait_for

pytestmark = pytest.mark.e2e

TASQ = Path(sys.executable).parent / "tasq"
WORKLOADS_CRD = DEFAULT_DIR / f"{c.GROUP}_{c.PLURAL_WORKLOADS}.yaml"


@pytest.fixture
def kueue_workloads_crd(kubectl: Kubectl) -> Iterator[None]:
    """tasq's CRDs, the Workload one as Kueue's release would have it installed; tasq's again after."""
    kubectl("apply", "-f", str(DEFAULT_DIR))
    crd = yaml.safe_load(WORKLOADS_CRD.read_text())
    crd["metadata"].setdefault("annotations", {})[ANNOTATION_CONTROLLER_GEN] = "v0.16.5"
    kubectl("apply", "-f", "-", stdin=json.dumps(crd))
    try:
        yield
    finally:
        kubectl("apply", "-f", str(WORKLOADS_CRD))


def test_tasq_run_with_local_webhooks_refuses_an_installed_kueues_crds(
        kueue_workloads_crd: None, kubeconfig: Path, kubectl: Kubectl, tmp_path: Path) -> None:
    assert WORKLOADS_CRD.exists()
    proc = subprocess.run([str(TASQ), "run", "--kubeconfig", str(kubeconfig), "--local-webhooks", "--lease-namespace",
                           "default", "--metrics-port", "-1", "--probe-port", "-1"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"tasq run: CRD {c.PLURAL_WORKLOADS}.{c.GROUP} belongs to an installed Kueue (annotation "
        f"{ANNOTATION_CONTROLLER_GEN}=v0.16.5); tasq will not replace Kueue's CRDs: migrate from Kueue first, as "
        "docs/migrating-from-kueue.md explains")
    assert "Traceback" not in proc.stderr
    for path in sorted(DEFAULT_DIR.glob("*.yaml")):  # nothing changed, not even tasq's own CRDs' conversion
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        crd = json.loads(kubectl("get", "crd", name, "-o", "json").stdout)
        assert (crd["spec"].get("conversion") or {}).get("strategy", "None") == "None", name
    wait_for(lambda: kubectl("get", "mutatingwebhookconfiguration", c.MUTATING_WEBHOOK_CONFIGURATION,
                             check=False).returncode != 0, 30, "no webhook configuration left behind")


@pytest.mark.real  # helm's lookup reads the cluster it installs into
def test_helm_install_refuses_an_installed_kueues_crds(kueue_workloads_crd: None, kubeconfig: Path) -> None:
    from tests.install.test_chart import CA_BUNDLE, CHART, NAMESPACE, helm, values_flags

    own_certificate = values_flags({"certificates": {"certManager": {"enabled": False}, "caBundle": CA_BUNDLE}})
    refused = helm("install", "tasq", str(CHART), "-n", NAMESPACE, "--kubeconfig", str(kubeconfig),
                   "--dry-run=server", *own_certificate, check=False)
    assert refused.returncode != 0
    assert (f"CRD {c.PLURAL_WORKLOADS}.{c.GROUP} belongs to an installed Kueue (annotation "
            f"{ANNOTATION_CONTROLLER_GEN}=v0.16.5); tasq will not replace Kueue's CRDs") in refused.stderr
