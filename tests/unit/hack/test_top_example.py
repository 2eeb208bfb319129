"""hack/top_example.py: the 1,024-node simulate input gives a valid SVG with racks folded into node
glyphs, and docs/top-1024.svg is what the script writes today."""

from __future__ import annotations

import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hack_top_example", ROOT / "hack" / "top_example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hack_top_example"] = module
    spec.loader.exec_module(module)
    return module


def test_the_command_draws_a_valid_svg_of_1024_nodes(example: ModuleType, tmp_path: Path) -> None:
    picture = example.svg(tmp_path)
    root = ET.fromstring(picture)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = picture.replace("&#160;", " ")
    assert "1024 nodes" in text and "rack-37" in text and "EACH NODE" in text
    assert picture == (ROOT / "docs" / "top-1024.svg").read_text(), "run hack/top-example to refresh the picture"
