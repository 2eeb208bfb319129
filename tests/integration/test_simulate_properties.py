"""Property: random mutations of valid manifests never crash `tasq simulate`.

The base is the sample cluster (Topology, flavors, queues, Jobs, a Workload) plus a Node, a bound
Pod (gated, with node affinity, tolerations, an owner and conditions), a finished Job, a Namespace
and a PriorityClass. Each example replaces, deletes, adds, renames or nulls 1-3 fields or list items
anywhere (values of every JSON type, huge and negative numbers, deep nesting), writes YAML or JSON,
and runs simulate in process: exit 0 or 2, never an exception, exit 2 names the file, the document
and a field path on every error line, and a skipped document is a warning naming file and document.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cli import main
from tests.builders.cluster import make_node, make_pod

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
BASE: list[dict[str, Any]] = [
    doc for path in sorted(SAMPLES.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc
] + [
    make_node("n1").labels({"cloud.provider.com/topology-block": "b1", "cloud.provider.com/topology-rack": "r1"})
    .allocatable({"nvidia.com/gpu": "8"}, cpu="64").build(),
    make_pod("p1").build(),
    make_pod("p2").gate("a.io/wait").toleration("nvidia.com/gpu", operator="Exists", effect="NoSchedule")
    .node_affinity([("cloud.provider.com/topology-rack", "In", ["r1"])], [("team", "Exists", [])])
    .set("metadata.ownerReferences", [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}])
    .set("status.conditions", [{"type": "PodScheduled", "status": "False"}]).build(),
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "done", "namespace": "default",
                                                          "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
     "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
     "status": {"conditions": [{"type": "Complete", "status": "True"}]}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
]
ERROR_LINE = re.compile(r"(?P<field>.+?): (Required value|Invalid value|Unsupported value|Duplicate value|"
                        r"Not found|Too many|Forbidden|unknown field)")
"""A field path (any text: mutated keys are arbitrary), then one of apimachinery's error types."""

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    st.sampled_from(["", "0", "-1", "1e3", "500m", "yes", "true", "False", "2026-01-01", "a/b/c", "Ki",
                     "NoSchedule", "In", "Exists", "auto", "kubernetes.io/hostname", "Job", "v1"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def _mutate(data: st.DataObject, doc: Any) -> None:
    """One change at a random place below the document's root."""
    node = doc
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and data.draw(st.booleans()):
            node = child
            continue
        op = data.draw(st.sampled_from(["replace", "delete", "add", "rename", "null"]))
        if op == "null" and isinstance(child, list):
            child.insert(data.draw(st.integers(min_value=0, max_value=len(child))), None)
        elif op == "null":
            node[key] = None
        elif op == "replace":
            node[key] = data.draw(values)
        elif op == "delete":
            del node[key]
        elif op == "add" and isinstance(node, dict):
            node[data.draw(st.text(min_size=1, max_size=10))] = data.draw(values)
        elif op == "add":
            node.append(data.draw(values))
        elif isinstance(node, dict):
            node[data.draw(st.text(min_size=1, max_size=10))] = node.pop(key)
        return


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_manifests_exit_0_or_2_and_every_error_names_file_document_and_field(data: st.DataObject) -> None:
    docs = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        _mutate(data, data.draw(st.sampled_from(docs)))
    as_json = data.draw(st.booleans())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("in.json" if as_json else "in.yaml")
        if as_json:
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}), encoding="utf-8")
        else:
            path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["simulate", "-f", str(path)])
    assert code in (0, 2), err.getvalue()
    document = re.escape(str(path)) + (":1: " if as_json else r":\d+: ")
    lines = err.getvalue().splitlines()
    warnings = [line for line in lines if line.startswith("warning: ") and "skipped:" in line]
    for line in warnings:
        assert re.match(f"warning: {document}", line), line
    if code == 2:
        errors = [line for line in lines if not line.startswith("warning: ")]
        assert errors[-1].endswith("error(s); nothing simulated")
        for line in errors[:-1]:
            assert re.match(f"error: {document}{ERROR_LINE.pattern}", line), line
