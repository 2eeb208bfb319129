"""`--feature-gates` on `tasq run` and `tasq dev`: parsed like `tasq simulate`'s and carried into the
operator's admission snapshots; a bad value exits 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.api import constants as c
from controller.api.features import FeatureGates
from controller.cache.cluster import ClusterCache
from controller.cli import main


@pytest.mark.parametrize("command", ["run", "dev"])
def test_a_bad_gate_exits_2_naming_it_before_anything_starts(command: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    if command == "run":
        kubeconfig.write_text("{}")  # never read: the flag is refused first
    assert main([command, "--kubeconfig", str(kubeconfig), "--feature-gates", "TASBalancedPlacement=maybe"]) == 2
    assert "TASBalancedPlacement='maybe': the value must be true or false" in capsys.readouterr().err


def test_the_gates_reach_every_admission_snapshot_of_the_cache() -> None:
    gates = FeatureGates({c.FEATURE_TAS_BALANCED_PLACEMENT: True})
    cache = ClusterCache(features=gates)
    assert cache.snapshot().features.balanced_placement
    assert not ClusterCache().snapshot().features.balanced_placement
