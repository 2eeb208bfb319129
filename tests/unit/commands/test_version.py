"""`tasq version`: the package version, the build's commit, every served API version and the Kueue release
followed."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from controller.api import constants as c
from controller.api.crds import KINDS
from controller.cli import main
from controller.commands import version as version_command
from controller.commands.version import commit, describe, git_commit


def test_names_the_installed_version_and_kueue_0_20s_api() -> None:
    lines = describe().splitlines()
    assert lines[0] == f"tasq {version('tasq')}"
    assert lines[1] == f"commit {commit()}"
    assert lines[2].startswith(f"follows the API of Kueue 0.20 ({c.GROUP}/v1beta2;")


def test_the_commit_baked_in_at_build_time_wins_over_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(version_command, "build_commit", lambda: "0123abcd")
    assert commit() == "0123abcd"


def _repo(path: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com",
                               *args], check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    (path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    return git("rev-parse", "HEAD")


def test_without_a_baked_commit_a_checkout_reports_its_head_and_whether_it_is_modified(tmp_path: Path) -> None:
    head = _repo(tmp_path)
    assert git_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("two\n")
    assert git_commit(tmp_path) == f"{head}-dirty"


def test_neither_a_baked_commit_nor_a_checkout_reads_unknown(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    monkeypatch.setattr(version_command, "build_commit", lambda: None)
    monkeypatch.setattr(version_command, "checkout_root", lambda: None)
    assert commit() == "unknown"
    monkeypatch.setattr(version_command, "checkout_root", lambda: tmp_path)  # not a git repository
    assert commit() == "unknown"


def test_lists_every_kind_with_each_served_version() -> None:
    text = describe()
    for spec in KINDS:
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{spec.kind}:"))
        for served in spec.served_versions:
            assert f"{c.GROUP}/{served}" in line
        assert f"stored as {spec.storage_version}" in line


def test_json_output_has_the_same_facts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tasq"] == version("tasq") and out["kueueAPI"] == "0.20" and out["group"] == c.GROUP
    assert out["kinds"] == [{"kind": spec.kind, "served": list(spec.served_versions), "storage": spec.storage_version}
                            for spec in KINDS]
    by_kind = {k["kind"]: k for k in out["kinds"]}
    assert by_kind[c.KIND_WORKLOAD]["storage"] == "v1beta2" and "v1beta1" in by_kind[c.KIND_WORKLOAD]["served"]
    assert by_kind[c.KIND_TOPOLOGY]["served"] == ["v1beta2", "v1beta1", "v1alpha1"]


def test_dash_dash_version_prints_the_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == describe() + "\n"
