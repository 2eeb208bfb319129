"""`tasq version`: the package version, every served API version and the Kueue release followed."""

from __future__ import annotations

from importlib.metadata import version

from controller.api import constants as c
from controller.api.crds import KINDS
from controller.commands.version import describe


def test_names_the_installed_version_and_the_kueue_release() -> None:
    lines = describe().splitlines()
    assert lines[0] == f"tasq {version('tasq')}"
    assert f"Kueue {c.KUEUE_VERSION_FOLLOWED}" in lines[1]


def test_lists_every_kind_with_each_served_version() -> None:
    text = describe()
    for spec in KINDS:
        line = next(line for line in text.splitlines() if line.strip().startswith(f"{spec.kind}:"))
        for served in spec.served_versions:
            assert f"{c.GROUP}/{served}" in line
        assert f"stored as {spec.storage_version}" in line
