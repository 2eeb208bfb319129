"""`tasq top`: the text view of a simulate input (a line per node when few, glyphs per rack when many),
no escapes when piped, at most 100 columns, the SVG a valid picture; unusable input refused."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from controller.cli import main
from controller.commands.terminal import WIDTH
from controller.commands.top import layout_of, simulated_occupancies, strip

DEADLOCK = Path(__file__).resolve().parents[2] / "data" / "simulate" / "deadlock"
FILES = ["-f", str(DEADLOCK / "cluster.yaml"), "-f", str(DEADLOCK / "jobs.yaml")]


def top(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["top", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_small_cluster_gets_a_line_per_node_with_its_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = top(capsys, *FILES)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("gpu (flavor, topology dc): nvidia.com/gpu 100/150 used (66%), 19 nodes, 1 Workloads in team")
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:-1]}
    assert rows["r1"][1:] == ["80/80", "0", "free", "job-job-a-b5c0b"]
    assert rows["gpu-12"][1:] == ["0/8", "8", "free", "-"]
    assert rows["gpu-18"][1:] == ["4/6", "2", "free", "job-job-a-b5c0b"]
    assert "\x1b" not in out  # piped: no escapes
    assert max(map(len, lines)) <= WIDTH


def test_no_color_and_a_terminal_still_no_escapes(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stdout as a terminal
    code, out, _ = top(capsys, *FILES)
    assert code == 0 and "█" in out
    assert "\x1b[3" not in out and "\x1b[9" not in out  # no colour codes


def test_the_svg_is_a_picture_of_the_same_view(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = top(capsys, *FILES, "-o", "svg")
    assert code == 0
    root = ET.fromstring(out)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "job-job-a-b5c0b" in out.replace("&#160;", " ")


def test_many_nodes_fold_into_glyphs_and_counts() -> None:
    assert strip([(8, 8), (3, 8), (0, 8), (0, 0)]).plain == "█▓░ "
    assert strip([(8, 8)] * 30 + [(1, 8)] * 5 + [(0, 8)] * 6).plain == "30█ 5▓ 6░"


def test_layout_lines_for_few_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    [occ], errors = simulated_occupancies([str(DEADLOCK / "cluster.yaml")])
    assert errors == []
    assert (layout_of(occ).node_lines, layout_of(occ).depth) == (True, 2)


def test_an_unknown_flavor_and_bad_input_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = top(capsys, *FILES, "--flavor", "h200")
    assert (code, err) == (2, 'tasq top: no topology flavor "h200"\n')
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {unschedulable: maybe}\n")
    code, out, err = top(capsys, "-f", str(broken))
    assert code == 2 and out == ""
    assert err.endswith("1 error(s); nothing drawn\n")
