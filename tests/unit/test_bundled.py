"""The package's data files: the CRDs, samples and sample nodes are where the commands look for them."""

from __future__ import annotations

from controller import bundled
from controller.commands.crds import rendered


def test_the_crds_carried_are_the_generated_ones() -> None:
    carried = {p.name: p.read_text(encoding="utf-8") for p in bundled.crd_dir().glob("*.yaml")}
    assert carried == rendered()


def test_samples_and_sample_nodes_are_carried() -> None:
    assert sorted(bundled.samples_dir().glob("*.yaml"))
    assert "kind: Node" in bundled.sample_nodes_file().read_text(encoding="utf-8")


def test_an_editable_install_knows_its_checkout() -> None:
    root = bundled.checkout_root()
    assert root is not None and (root / "pyproject.toml").is_file()
