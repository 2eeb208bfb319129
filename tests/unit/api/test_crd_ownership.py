"""Telling an installed Kueue's CRDs from tasq's (controller.api.crd_ownership)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api.crd_ownership import kueue_installed_message, kueue_mark
from controller.commands.crds import DEFAULT_DIR


def crd(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "workloads.kueue.x-k8s.io", "annotations": annotations or {}, "labels": labels or {}}}


@pytest.mark.parametrize(("obj", "mark"), [
    pytest.param(crd({"controller-gen.kubebuilder.io/version": "v0.16.5"}),
                 "annotation controller-gen.kubebuilder.io/version=v0.16.5", id="Kueue's release manifests"),
    pytest.param(crd(labels={"app.kubernetes.io/name": "kueue"}), "label app.kubernetes.io/name=kueue",
                 id="Kueue's name label"),
    pytest.param(crd(labels={"helm.sh/chart": "kueue-0.20.0"}), "label helm.sh/chart=kueue-0.20.0",
                 id="Kueue's Helm chart"),
    pytest.param(crd(labels={"app.kubernetes.io/name": "tasq", "helm.sh/chart": "tasq-0.1.0"}), None,
                 id="tasq's chart"),
    pytest.param({"metadata": {}}, None, id="no metadata marks"),
])
def test_kueue_mark(obj: dict[str, Any], mark: str | None) -> None:
    assert kueue_mark(obj) == mark


def test_tasqs_own_crds_carry_no_kueue_mark() -> None:
    import yaml

    files = sorted(DEFAULT_DIR.glob("*.yaml"))
    assert files and all(kueue_mark(yaml.safe_load(f.read_text())) is None for f in files)


def test_the_message_names_the_crd_the_mark_and_the_guide() -> None:
    assert kueue_installed_message("workloads.kueue.x-k8s.io", "label app.kubernetes.io/name=kueue") == (
        "CRD workloads.kueue.x-k8s.io belongs to an installed Kueue (label app.kubernetes.io/name=kueue); tasq will "
        "not replace Kueue's CRDs: migrate from Kueue first, as docs/migrating-from-kueue.md explains")
