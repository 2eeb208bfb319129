"""Every manifest in config/samples passes the validators, and each tasq kind also its CRD schema.

The CRD schemas are read from the checked-in `crds/` files (what `kubectl apply` installs), with
unknown fields rejected so a misspelt sample field fails here instead of being pruned silently.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from controller.api import constants as c
from controller.api.crds import crd_json_schema
from webhooks.validation import validate

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "config" / "samples"
SAMPLE_FILES = sorted(SAMPLES.glob("*.yaml"))


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@functools.cache  # read once for all samples, not once per parametrized case
def _crds_by_kind() -> dict[str, dict[str, Any]]:
    crds = [d for p in sorted((ROOT / "crds").glob("*.yaml")) for d in _documents(p)]
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_sample_passes_the_validators(path: Path) -> None:
    docs = _documents(path)
    assert docs, f"{path.name} holds no manifest"
    for doc in docs:
        assert [str(e) for e in validate(doc)] == []


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_sample_matches_its_crd_schema(path: Path) -> None:
    crds = _crds_by_kind()
    for doc in _documents(path):
        group, _, version = doc["apiVersion"].rpartition("/")
        if group != c.GROUP:
            continue  # Jobs are checked by the validators only.
        schema = crd_json_schema(crds[doc["kind"]], version, reject_unknown=True)
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
        assert [f"{e.json_path}: {e.message}" for e in errors] == []


def test_samples_cover_every_kind_and_annotation_form() -> None:
    docs = [d for p in SAMPLE_FILES for d in _documents(p)]
    kinds = {d["kind"] for d in docs}
    assert {c.KIND_TOPOLOGY, c.KIND_RESOURCE_FLAVOR, c.KIND_CLUSTER_QUEUE, c.KIND_LOCAL_QUEUE,
            c.KIND_WORKLOAD, "Job"} <= kinds
    jobs = [d for d in docs if d["kind"] == "Job"]
    job_notes = [set((d["metadata"].get("annotations") or {}).items()) for d in jobs]
    template_notes = [set((d["spec"]["template"].get("metadata") or {}).get("annotations") or {})
                      for d in jobs]
    assert any((c.ANNOTATION_PREFER_TOPOLOGY, c.TOPOLOGY_AUTO) in n for n in job_notes)
    assert any(k == c.ANNOTATION_REQUIRE_TOPOLOGY for n in job_notes for k, _ in n)
    assert any(k == c.ANNOTATION_PREFER_TOPOLOGY and v != c.TOPOLOGY_AUTO for n in job_notes for k, v in n)
    for key in (c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY, c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY,
                c.ANNOTATION_PODSET_UNCONSTRAINED_TOPOLOGY):
        assert any(key in n for n in template_notes), key
    flavors = [d for d in docs if d["kind"] == c.KIND_RESOURCE_FLAVOR]
    assert any("topologyName" in f["spec"] for f in flavors)
    assert any("topology" in f["spec"] for f in flavors)


