"""`tasq` dispatch: every command is listed, only the chosen one is imported, `--version` works."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller.cli import COMMANDS, build_parser, main


def _modules_loaded_by(*argv: str) -> set[str]:
    code = ("import sys; from controller.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('\\n'.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True,
                          timeout=60)
    return set(proc.stdout.split())


def test_help_lists_every_command_without_importing_any_command_module(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out
    loaded = _modules_loaded_by("--help")
    assert not {m for m in loaded if m.startswith("controller.commands.")}
    assert "devcluster" not in loaded


def test_simulate_and_version_never_load_the_dev_server_or_kopf() -> None:
    for argv in (["version"], ["simulate", "--help"], ["crds", "--check"]):
        loaded = _modules_loaded_by(*argv)
        assert not {m for m in loaded if m.split(".")[0] in {"devcluster", "kopf", "aiohttp"}}, argv


def test_only_the_chosen_command_registers_its_options() -> None:
    parser = build_parser(["crds"])
    args = parser.parse_args(["crds", "--check"])
    assert args.check is True and args.command == "crds"


def test_dash_dash_version_prints_the_version_like_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    flag = capsys.readouterr().out
    assert main(["version"]) == 0
    assert capsys.readouterr().out == flag
    assert flag.startswith("tasq ")


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
