"""Broken manifests in tests/data/broken (one mistake per file) are each rejected at their field.

The table maps every file to the field path its mistake must be reported at; a file missing
from the table (or a table row without its file) fails, so the two stay in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from webhooks.validation import validate

BROKEN = Path(__file__).resolve().parents[2] / "data" / "broken"
RG_FLAVOR = "spec.resourceGroups[0].flavors[0]"


@dataclass(frozen=True)
class BrokenCase:
    file: str
    want_path: str
    # Paths a mistake necessarily causes besides `want_path` (a swap misplaces two items).
    want_also: tuple[str, ...] = ()


CASES = [
    BrokenCase("topology-hostname-not-lowest.yaml", "spec.levels[1].nodeLabel"),
    BrokenCase("topology-duplicate-level.yaml", "spec.levels[1].nodeLabel"),
    BrokenCase("flavor-both-topology-forms.yaml", "spec.topology"),
    BrokenCase("flavor-topology-without-node-labels.yaml", "spec.nodeLabels"),
    BrokenCase("flavor-toleration-bad-operator.yaml", "spec.tolerations[0].operator"),
    BrokenCase("flavor-taint-bad-effect.yaml", "spec.nodeTaints[0].effect"),
    BrokenCase("flavor-duplicate-taint.yaml", "spec.nodeTaints[1]"),
    BrokenCase("clusterqueue-lending-above-nominal.yaml", f"{RG_FLAVOR}.resources[1].lendingLimit"),
    BrokenCase("workload-slices-miscounted.yaml",
               "status.admission.podSetAssignments[0].topologyAssignment.slices"),
    BrokenCase("job-template-kep-and-kueue-annotations.yaml", "spec.template.metadata.annotations"),
    BrokenCase("clusterqueue-resources-out-of-order.yaml", f"{RG_FLAVOR}.resources[0].name",
               want_also=(f"{RG_FLAVOR}.resources[1].name",)),
    BrokenCase("clusterqueue-borrowing-without-cohort.yaml", f"{RG_FLAVOR}.resources[1].borrowingLimit"),
    BrokenCase("clusterqueue-bad-quantity.yaml", f"{RG_FLAVOR}.resources[1].nominalQuota"),
    BrokenCase("clusterqueue-unknown-strategy.yaml", "spec.queueingStrategy"),
    BrokenCase("localqueue-missing-clusterqueue.yaml", "spec.clusterQueue"),
    BrokenCase("workload-podset-name-uppercase.yaml", "spec.podSets[0].name"),
    BrokenCase("workload-mincount-above-count.yaml", "spec.podSets[0].minCount"),
    BrokenCase("workload-two-topology-modes.yaml", "spec.podSets[0].topologyRequest"),
    BrokenCase("job-require-topology-auto.yaml", "metadata.annotations[kueue.x-k8s.io/require-topology]"),
    BrokenCase("job-two-topology-annotations.yaml", "spec.template.metadata.annotations"),
    BrokenCase("job-unconstrained-not-boolean.yaml",
               "spec.template.metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]"),
    BrokenCase("job-level-label-invalid.yaml", "metadata.annotations[kueue.x-k8s.io/require-topology]"),
]


def test_every_broken_file_has_a_row() -> None:
    assert sorted(p.name for p in BROKEN.glob("*.yaml")) == sorted(c.file for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.file.removesuffix(".yaml") for c in CASES])
def test_broken_manifest_is_rejected_at_its_field(case: BrokenCase) -> None:
    obj = yaml.safe_load((BROKEN / case.file).read_text())
    # The file's one mistake and nothing collateral.
    assert [e.path for e in validate(obj)] == [case.want_path, *case.want_also]
