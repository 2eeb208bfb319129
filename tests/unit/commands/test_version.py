"""`tasq version`: the package version, the build's commit, every served API version and the Kueue release
followed."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from controller.api import constants as c
from controller.api.crds import KINDS
from controller.commands import version as version_command
from controller.commands.version import commit, describe, git_commit


def test_names_the_installed_version_and_the_kueue_release() -> None:
    lines = describe().splitlines()
    assert lines[0] == f"tasq {version('tasq')}"
    assert lines[1] == f"commit {commit()}"
    assert f"Kueue {c.KUEUE_VERSION_FOLLOWED}" in lines[2]


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
