"""`kubectl explain` (the real kubectl, OpenAPI v3) on tasq's kinds, on either control plane: it
explains v1beta2, the preferred version, with the descriptions of crds/, every field of each kind's
spec described; v1beta1's own fields (`cohort`) are explained when that version is asked for."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from controller.api import constants as c
from controller.api.crds import KINDS, KindSpec
from tests.e2e.conftest import REPO, Kubectl, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def crds_installed(kubectl: Kubectl) -> subprocess.CompletedProcess[str]:
    """The CRDs applied and published: kube-apiserver serves a new CRD's OpenAPI a moment after it is
    Established, and `kubectl explain` fails or explains an older version until then."""
    applied = kubectl("apply", "-f", "crds/")
    kubectl("wait", "--for", "condition=Established", "--timeout", "60s", "-f", "crds/")

    def published() -> bool:
        for spec in KINDS:
            result = kubectl("explain", spec.plural, check=False)
            if result.returncode != 0 or f"VERSION:    {c.VERSION_V1BETA2}" not in result.stdout:
                return False
        return True
    wait_for(published, 60, "every kind explained in v1beta2")
    return applied


def schema(spec: KindSpec, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "crds" / spec.file_name).read_text())
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    found: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return found


def explained(kubectl: Kubectl, field: str, *flags: str) -> tuple[dict[str, str], str]:
    """(header fields: GROUP, KIND, VERSION, FIELD; the description as one line) of `kubectl explain`."""
    out = kubectl("explain", field, *flags).stdout
    head, _, rest = out.partition("DESCRIPTION:")
    header = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines()) if v}
    description = rest.split("\nFIELDS:")[0]
    return header, " ".join(description.split())


@pytest.mark.parametrize("spec", KINDS, ids=lambda spec: spec.kind)
def test_each_kind_is_explained_in_v1beta2_with_its_description(kubectl: Kubectl, crds_installed: Any,
                                                                 spec: KindSpec) -> None:
    header, description = explained(kubectl, spec.plural)
    assert (header["GROUP"], header["KIND"], header["VERSION"]) == (c.GROUP, spec.kind, c.VERSION_V1BETA2)
    assert description == " ".join(schema(spec, c.VERSION_V1BETA2)["description"].split())


@pytest.mark.parametrize("spec", [s for s in KINDS if "spec" in schema(s, s.storage_version)["properties"]],
                         ids=lambda spec: spec.kind)
def test_every_spec_field_has_its_v1beta2_description(kubectl: Kubectl, crds_installed: Any, spec: KindSpec) -> None:
    fields = schema(spec, c.VERSION_V1BETA2)["properties"]["spec"]["properties"]
    for name, field in fields.items():
        header, description = explained(kubectl, f"{spec.plural}.spec.{name}")
        assert header["VERSION"] == c.VERSION_V1BETA2
        assert description and description != "<empty>", f"{spec.kind}.spec.{name}"
        # a list's explanation goes on with its items' description
        assert description.startswith(" ".join(field["description"].split())), f"{spec.kind}.spec.{name}"


@pytest.mark.parametrize("field, version, present", [
    ("clusterqueues.spec.cohortName", c.VERSION_V1BETA2, True),
    ("workloads.spec.priorityClassRef", c.VERSION_V1BETA2, True),
    ("clusterqueues.spec.cohort", c.VERSION_V1BETA1, True),
    ("workloads.spec.priorityClassName", c.VERSION_V1BETA1, True),
    ("clusterqueues.spec.cohort", c.VERSION_V1BETA2, False),
])
def test_renamed_fields_are_explained_in_their_own_version(kubectl: Kubectl, crds_installed: Any, field: str,
                                                           version: str, present: bool) -> None:
    result = kubectl("explain", field, "--api-version", f"{c.GROUP}/{version}", check=False)
    assert (result.returncode == 0) == present, result.stderr
    if present:
        assert f"VERSION:    {version}" in result.stdout
        assert "<empty>" not in result.stdout.split("DESCRIPTION:")[1].split("FIELDS:")[0]
