"""`tasq crds` writes only into a checkout or `--output DIR`, never into the installed package."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from controller.commands import crds


def test_without_a_checkout_writing_needs_output_and_changes_nothing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(crds, "checkout_root", lambda: None)
    before = {p.name: p.read_bytes() for p in crds.DEFAULT_DIR.glob("*.yaml")}
    assert main(["crds"]) == 2
    assert "--output DIR" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in crds.DEFAULT_DIR.glob("*.yaml")} == before


def test_check_reads_the_installed_crds_even_without_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crds, "checkout_root", lambda: None)
    assert main(["crds", "--check"]) == 0


def test_output_writes_every_file_into_the_given_directory(tmp_path: Path) -> None:
    target = tmp_path / "out"
    assert main(["crds", "--output", str(target)]) == 0
    assert sorted(p.name for p in target.glob("*.yaml")) == sorted(crds.rendered())


def test_output_that_is_a_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["crds", "--output", str(blocker)]) == 2
    assert str(blocker) in capsys.readouterr().err


def test_a_checkout_is_written_and_checked_in_crds_and_the_kustomize_copy(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(crds, "checkout_root", lambda: tmp_path)
    assert main(["crds"]) == 0
    copy = tmp_path / crds.KUSTOMIZE_COPY
    assert sorted(p.name for p in copy.glob("*.yaml")) == sorted(p.name for p in (tmp_path / "crds").glob("*.yaml"))
    assert main(["crds", "--check"]) == 0
    stale = next(copy.glob("*.yaml"))
    stale.write_text("stale")
    capsys.readouterr()
    assert main(["crds", "--check"]) == 1
    assert f"{stale.name} (differs)" in capsys.readouterr().err
