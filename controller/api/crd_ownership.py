"""Whose CustomResourceDefinitions of `kueue.x-k8s.io` are installed: Kueue's or tasq's.

Both projects serve the same group and kinds, so an install of one over the other would silently
take the other's CRDs (and its objects' conversion). Kueue's CRDs carry the marks its build and its
chart leave (controller-gen's version annotation, the `kueue` name and chart labels); tasq's carry
none of them. `kueue_mark` names the mark found, `kueue_installed_message` says what to do. Used by
`tasq run --local-webhooks` before it points a CRD's conversion at itself; the Helm chart checks the
same marks in templates/crds.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

ANNOTATION_CONTROLLER_GEN: Final = "controller-gen.kubebuilder.io/version"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_CHART: Final = "helm.sh/chart"
MIGRATION_DOC: Final = "docs/migrating-from-kueue.md"


def kueue_mark(crd: Mapping[str, Any]) -> str | None:
    """The mark that makes `crd` Kueue's (`annotation controller-gen.kubebuilder.io/version=v0.16.5`,
    `label app.kubernetes.io/name=kueue`, `label helm.sh/chart=kueue-0.20.0`), or None."""
    meta = crd.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    if ANNOTATION_CONTROLLER_GEN in annotations:
        return f"annotation {ANNOTATION_CONTROLLER_GEN}={annotations[ANNOTATION_CONTROLLER_GEN]}"
    if labels.get(LABEL_NAME) == "kueue":
        return f"label {LABEL_NAME}=kueue"
    chart = str(labels.get(LABEL_CHART) or "")
    if chart.startswith("kueue-"):
        return f"label {LABEL_CHART}={chart}"
    return None


def kueue_installed_message(name: str, mark: str) -> str:
    """Why tasq refuses to take CRD `name` over, and what to do instead."""
    return (f"CRD {name} belongs to an installed Kueue ({mark}); tasq will not replace Kueue's CRDs: "
            f"migrate from Kueue first, as {MIGRATION_DOC} explains")
