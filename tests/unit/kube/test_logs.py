"""The operator's log setup: decisions at info, kopf's and the clients' chatter only at debug, JSON
lines that parse with the fields documented, bad flags refused by name."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from controller.kube.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("kopf", "aiohttp", "kubernetes")}
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    for name, lvl in levels.items():
        logging.getLogger(name).setLevel(lvl)


def emit_each() -> None:
    logging.getLogger("controller.kube.admitting").info("admitted default/w1 into ClusterQueue cq")
    logging.getLogger("controller.kube.admitting").debug("cycle details")
    logging.getLogger("kopf.objects").info("Handler 'watch' succeeded.")
    logging.getLogger("kopf.objects").warning("Patching failed")
    logging.getLogger("aiohttp.client").info("connection opened")


@pytest.mark.parametrize(("level", "shown", "hidden"), [
    pytest.param("info", ["admitted default/w1", "Patching failed"],
                 ["cycle details", "Handler 'watch' succeeded.", "connection opened"], id="info: decisions only"),
    pytest.param("debug", ["admitted default/w1", "cycle details", "Handler 'watch' succeeded.", "connection opened"],
                 [], id="debug: everything"),
    pytest.param("warning", ["Patching failed"], ["admitted default/w1", "Handler 'watch' succeeded."],
                 id="warning: problems only"),
])
def test_each_level_shows_what_it_promises(level: str, shown: list[str], hidden: list[str]) -> None:
    out = io.StringIO()
    configure_logging(level, "text", out, force=True)
    emit_each()
    text = out.getvalue()
    assert all(line in text for line in shown), text
    assert not any(line in text for line in hidden), text


def test_json_lines_parse_and_carry_time_level_logger_message_and_error() -> None:
    out = io.StringIO()
    configure_logging("info", "json", out, force=True)
    logging.getLogger("controller.kube.leading").info("%s is now the leader", "tasq-1")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("controller.kube.admitting").exception("admission cycle failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first.keys() == {"time", "level", "logger", "msg"}
    assert (first["level"], first["logger"], first["msg"]) == ("info", "controller.kube.leading",
                                                                "tasq-1 is now the leader")
    assert first["time"].endswith("+00:00")
    assert second["level"] == "error" and "RuntimeError: boom" in second["error"]


def test_a_second_setup_replaces_the_first_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "text", first, force=True)
    configure_logging("info", "text", second)  # its own handler is replaced without force
    logging.getLogger("controller").info("once")
    assert first.getvalue() == "" and second.getvalue().count("once") == 1


def test_logging_configured_by_someone_else_is_left_alone_unless_forced() -> None:
    root = logging.getLogger()
    theirs = logging.StreamHandler(io.StringIO())
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(theirs)
    root.setLevel(logging.WARNING)
    assert configure_logging("debug", "json", io.StringIO()) is None
    assert root.handlers == [theirs] and root.level == logging.WARNING
    assert configure_logging("debug", "json", io.StringIO(), force=True) is not None
    assert theirs not in root.handlers and root.level == logging.DEBUG


@pytest.mark.parametrize(("level", "fmt"), [("verbose", "text"), ("info", "yaml")])
def test_unknown_levels_and_formats_are_refused_by_name(level: str, fmt: str) -> None:
    with pytest.raises(ValueError, match="want one of"):
        configure_logging(level, fmt, io.StringIO(), force=True)
