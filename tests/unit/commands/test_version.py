"""`tasq version`: the package version, every served API version and the Kueue release followed."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from controller.api import constants as c
from controller.api.crds import KINDS
from controller.cli import main
from controller.commands.version import describe


def test_names_the_installed_version_and_kueue_0_20s_api() -> None:
    lines = describe().splitlines()
    assert lines[0] == f"tasq {version('tasq')}"
    assert lines[1].startswith(f"follows the API of Kueue 0.20 ({c.GROUP}/v1beta2;")


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
