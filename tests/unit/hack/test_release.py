"""hack/release.py: dist/tasq.yaml is config/default as kubectl renders it with only the manager's image
changed, headed by version and commit; image references without a tag or digest are refused."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

RELEASE_PY = Path(__file__).resolve().parents[3] / "hack" / "release.py"


@pytest.fixture(scope="module")
def release() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hack_release", RELEASE_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hack_release"] = module
    spec.loader.exec_module(module)
    return module


def test_the_manifest_is_config_default_with_the_image_set_in_one_place(release: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "tasq.yaml"
    assert release.main(["--image", "registry.example/ml/tasq:1.2.3", "--output", str(out)]) == 0
    text = out.read_text()
    assert text.splitlines()[0].startswith(f"# tasq {release.project_version()} (commit ")
    released = [d for d in yaml.safe_load_all(text) if d]
    plain = release.render_default()
    assert [(d["kind"], d["metadata"]["name"]) for d in released] == [(d["kind"], d["metadata"]["name"]) for d in plain]
    images = [c["image"] for d in released if d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"]]
    assert images == ["registry.example/ml/tasq:1.2.3"]
    for ours, theirs in zip(released, plain, strict=True):
        if ours["kind"] != "Deployment":
            assert ours == theirs


@pytest.mark.parametrize(("image", "refused_because"), [
    ("registry.example/tasq:0.1.0", None),
    ("localhost:5000/tasq:dev", None),
    ("tasq@sha256:" + "a" * 64, None),
    ("localhost:5000/tasq", "names no tag or digest"),      # the port is not a tag
    ("tasq", "names no tag or digest"),
    ("Registry.Example/Tasq:1", "is not an image reference"),  # upper case is not allowed
    ("tasq:1 --privileged", "is not an image reference"),
])
def test_an_image_reference_needs_a_tag_or_digest(release: ModuleType, image: str,
                                                  refused_because: str | None) -> None:
    problem = release.image_problem(image)
    if refused_because is None:
        assert problem is None
    else:
        assert problem is not None and refused_because in problem


def test_a_bundle_without_the_manager_is_refused_by_name(release: ModuleType) -> None:
    with pytest.raises(release.ReleaseError, match="tasq-controller-manager"):
        release.with_image([{"kind": "Service", "metadata": {"name": "x"}}], "tasq:1")
