"""The data files tasq ships inside its package: the generated CRDs, the samples, the demo's nodes and,
in a built image, the commit it was built from.

In a checkout `controller/data/` links to `crds/`, `config/samples/` and `config/simulate/`; a wheel
carries copies as package data. Commands read them through `importlib.resources`, so `tasq dev`,
`tasq demo` and `tasq simulate` work from a plain install in any directory.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_PACKAGE = "controller"


def _data(name: str) -> Path:
    # A regular (non-zip) install: the Traversable is a real directory on disk.
    return Path(str(files(_PACKAGE).joinpath("data", name))).resolve()


def crd_dir() -> Path:
    """The generated CustomResourceDefinitions, one YAML file per kind."""
    return _data("crds")


def samples_dir() -> Path:
    """Sample Topology, flavors, queues and Jobs (`kubectl apply -f` order by file name)."""
    return _data("samples")


def sample_nodes_file() -> Path:
    """The sample GPU Nodes `tasq simulate` admits the samples on."""
    return _data("simulate") / "gpu-nodes.yaml"


BUILD_COMMIT_FILE = "build-commit"
"""Written into controller/data/ by the Dockerfile (build arg TASQ_COMMIT) before the wheel is built."""


def build_commit() -> str | None:
    """The commit baked into this installation at build time, or None (a checkout, a plain wheel)."""
    path = _data(BUILD_COMMIT_FILE)
    text = path.read_text().strip() if path.is_file() else ""
    return text or None


def checkout_root() -> Path | None:
    """The source checkout this package runs from (editable install), or None for a plain install.

    `tasq crds` writes only into a checkout: writing into site-packages would leave files pip
    cannot uninstall.
    """
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / "crds").is_dir() and (root / ".git").exists():
        return root
    return None
