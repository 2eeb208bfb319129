"""The console `tasq demo`, `tasq dev` and `tasq top` write to: at most 100 columns, colour and a
spinner only on a terminal (rich honours NO_COLOR and pipes: no escapes when piped). Called by those
command modules.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.status import Status
from rich.text import Text

WIDTH = 100
"""Columns the commands fit in (a narrower terminal keeps its own width)."""

Note = Callable[[str | None], None]
"""Shows what the command waits for (a spinner on a terminal; nothing when piped); None clears it."""


def console() -> Console:
    """stdout at min(terminal, WIDTH) columns (WIDTH when not a terminal)."""
    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal or out.width > WIDTH:
        out = Console(highlight=False, soft_wrap=False, width=WIDTH)
    return out


def sayer(out: Console) -> Callable[[str], None]:
    """A line printer: `== ...` headings bold cyan, `tasq ...: ` failures red, the rest as given
    (never read as markup: Job names and messages are data)."""
    def say(text: str = "") -> None:
        style = "bold cyan" if text.startswith("==") else "red" if text.startswith("tasq ") and ": " in text else ""
        out.print(Text(text, style=style), soft_wrap=not out.is_terminal)  # a terminal: wrapped at words
    return say


def noter(out: Console) -> Note:
    """A spinner with the current wait on a terminal; a no-op otherwise (logs stay clean)."""
    status: list[Status] = []

    def note(text: str | None) -> None:
        if not out.is_terminal:
            return
        if text is None:
            while status:
                status.pop().stop()
            return
        if status:
            status[0].update(text)
        else:
            status.append(out.status(text, spinner="dots"))
            status[0].start()
    return note
