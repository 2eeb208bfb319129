"""`tasq migrate-storage`: the lines and exit code of the kinds' outcomes, and an unusable kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from controller.commands.migrate_storage import report
from controller.kube.storage_migrating import REASON_NOT_INSTALLED, KindMigration, Problem


def migrated(kind: str, before: list[str], **fields: object) -> KindMigration:
    result = KindMigration(kind, f"{kind.lower()}s.kueue.x-k8s.io", "v1beta2", stored_before=before,
                           stored_after=before)
    for name, value in fields.items():
        setattr(result, name, value)
    return result


def test_a_migration_says_per_kind_what_was_rewritten_and_the_stored_versions() -> None:
    code, lines = report([migrated("Workload", ["v1beta1", "v1beta2"], rewritten=12, gone=1, conflicts=2,
                                   stored_after=["v1beta2"]),
                          migrated("Topology", ["v1beta2"])], dry_run=False)
    assert code == 0
    assert lines == ["Workload: 12 rewritten, 1 deleted meanwhile, 2 conflict(s) retried; "
                     "storedVersions [v1beta1, v1beta2] -> [v1beta2]",
                     "Topology: stored as v1beta2 only: nothing to rewrite",
                     "2 of 2 kind(s) migrated, 12 object(s) rewritten"]


def test_a_dry_run_lists_each_object_it_would_rewrite() -> None:
    code, lines = report([migrated("LocalQueue", ["v1beta1", "v1beta2"], names=["team-a/lq", "team-b/lq"])],
                         dry_run=True)
    assert code == 0
    assert lines == ["LocalQueue: would rewrite 2 object(s), then set storedVersions [v1beta1, v1beta2] -> [v1beta2]",
                     "  LocalQueue team-a/lq", "  LocalQueue team-b/lq",
                     "1 of 1 kind(s) can be migrated, 2 object(s) would be rewritten"]


def test_a_kind_not_migrated_is_named_with_its_reason_and_exits_1() -> None:
    problem = Problem(REASON_NOT_INSTALLED, "CRD workloads.kueue.x-k8s.io is not installed: ...")
    code, lines = report([migrated("Workload", [], problem=problem), migrated("Topology", ["v1beta2"])], False)
    assert code == 1
    assert lines[0] == "Workload: not migrated: CRDNotInstalled: CRD workloads.kueue.x-k8s.io is not installed: ..."
    assert lines[-1] == "1 of 2 kind(s) migrated, 0 object(s) rewritten; 1 not migrated"


def test_a_kubeconfig_that_is_not_a_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["migrate-storage", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert "is not a file" in capsys.readouterr().err
