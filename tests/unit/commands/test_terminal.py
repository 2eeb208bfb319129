"""The commands' console: 100 columns and no escapes when piped, colour on a terminal unless NO_COLOR,
headings styled, a spinner only on a terminal."""

from __future__ import annotations

import pytest

from controller.commands import terminal


def test_piped_no_escapes_and_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    out = terminal.console()
    assert (out.is_terminal, out.width) == (False, terminal.WIDTH)
    say, note = terminal.sayer(out), terminal.noter(out)
    note("waiting...")
    say("== a heading [bold]not markup[/bold]")
    note(None)
    assert capsys.readouterr().out == "== a heading [bold]not markup[/bold]\n"


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False)])
def test_a_terminal_gets_colour_unless_no_color(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                               no_color: str | None, coloured: bool) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "300")
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    out = terminal.console()
    assert out.is_terminal and out.width == terminal.WIDTH
    terminal.sayer(out)("== heading")
    assert ("\x1b[1;36m" in capsys.readouterr().out) is coloured
