"""tasq's CRDs on a cluster, with no webhook: the API server accepts them (their CEL rules compile
within its cost budget), stores valid objects of every kind, and refuses bad ones with Kueue's
messages, transition rules included. Run with `--cluster=real` to prove it on kube-apiserver.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from controller.api.conversion import convert
from controller.commands.crds import DEFAULT_DIR
from tests.e2e.conftest import Kubectl
from tests.unit.api import examples

pytestmark = pytest.mark.e2e

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def crds_applied(kubectl: Kubectl) -> Kubectl:
    out = kubectl("apply", "-f", str(DEFAULT_DIR), check=False)
    assert out.returncode == 0, out.stderr  # a rule over the cost budget or not compiling is refused here
    for path in sorted(DEFAULT_DIR.glob("*.yaml")):
        name = path.name.removeprefix(f"{c.GROUP}_").removesuffix(".yaml") + f".{c.GROUP}"
        kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    deadline = time.monotonic() + 30
    while kubectl("get", c.PLURAL_TOPOLOGIES, check=False).returncode != 0:  # discovery catches up
        assert time.monotonic() < deadline, "the CRDs were never served"
        time.sleep(0.2)
    return kubectl


def _stored(doc: Doc, namespace: str) -> Doc:
    """An example as a user would write it: no server-set metadata, owners or finalizers."""
    meta = {"name": doc["metadata"]["name"], **({"namespace": namespace} if "namespace" in doc["metadata"] else {})}
    return {k: v for k, v in doc.items() if k not in ("metadata", "status")} | {"metadata": meta}


def _apply(kubectl: Kubectl, tmp_path: Path, doc: Doc) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"{doc['kind']}-{doc['metadata']['name']}.json"
    path.write_text(json.dumps(doc))
    return kubectl("apply", "-f", str(path), check=False)


def _workload() -> Doc:
    wl = examples.workload()
    wl["spec"]["podSets"][1]["template"] = {"spec": {"containers": [{"name": "launcher", "image": "x"}]}}
    return wl


EXAMPLES: list[Callable[[], Doc]] = [examples.topology, examples.flavor_kueue_form, examples.flavor_inline_form,
                                     examples.cluster_queue, examples.local_queue, _workload]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda f: f.__name__)
def test_a_valid_object_of_each_kind_is_stored(crds_applied: Kubectl, namespace: str, tmp_path: Path,
                                               example: Callable[[], Doc]) -> None:
    doc = _stored(example(), namespace)
    out = _apply(crds_applied, tmp_path, doc)
    assert out.returncode == 0, out.stderr


def _topology(name: str, *levels: str) -> Doc:
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_TOPOLOGY, "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def _flavor_without_labels(name: str) -> Doc:
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR, "metadata": {"name": name},
            "spec": {"topologyName": "racks"}}


def _workload_without_priority(name: str, api_version: str = c.API_VERSION) -> Doc:
    wl = _stored(_workload(), "default")
    wl["metadata"]["name"] = name
    del wl["spec"]["priority"]
    converted = convert(wl, api_version)
    assert isinstance(converted, dict)
    return converted


@pytest.mark.parametrize(("doc", "message"), [
    pytest.param(_topology("dup", "rack", "rack"), "must be unique", id="duplicate topology levels"),
    pytest.param(_topology("host-high", c.LABEL_HOSTNAME, "rack"),
                 "the kubernetes.io/hostname label can only be used at the lowest level of topology",
                 id="hostname above the lowest level"),
    pytest.param(_flavor_without_labels("no-labels"), "at least one nodeLabel is required when topology is set",
                 id="a topology flavor without nodeLabels"),
    pytest.param(_workload_without_priority("no-priority"), "priority should not be nil when priorityClassRef is set",
                 id="a priorityClassRef without priority"),
    pytest.param(_workload_without_priority("no-priority-v1", c.API_VERSION_V1BETA1),
                 "priority should not be nil when priorityClassName is set",
                 id="v1beta1: a priorityClassName without priority"),
])
def test_cel_rules_refuse_with_kueues_messages(crds_applied: Kubectl, tmp_path: Path, doc: Doc,
                                              message: str) -> None:
    out = _apply(crds_applied, tmp_path, doc)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_a_transition_rule_refuses_an_update(crds_applied: Kubectl, namespace: str, tmp_path: Path) -> None:
    queue = _stored(examples.local_queue(), namespace)
    assert _apply(crds_applied, tmp_path, queue).returncode == 0
    queue["spec"]["clusterQueue"] = "elsewhere"
    out = _apply(crds_applied, tmp_path, queue)
    assert out.returncode != 0 and "field is immutable" in out.stderr, out.stderr


@pytest.mark.real  # devcluster refuses a null in a non-nullable field; kube-apiserver prunes it
def test_a_null_reads_as_absent_and_gets_the_default(crds_applied: Kubectl, tmp_path: Path) -> None:
    """The validators and the models treat a null as absent because the API server does: tasq's
    optional fields are not nullable, so their nulls are pruned before defaulting and CEL."""
    queue = {"apiVersion": c.API_VERSION, "kind": c.KIND_CLUSTER_QUEUE, "metadata": {"name": "nulls"},
             "spec": {"queueingStrategy": None, "stopPolicy": None, "preemption": {"borrowWithinCohort": None}}}
    flavor = {"apiVersion": c.API_VERSION, "kind": c.KIND_RESOURCE_FLAVOR, "metadata": {"name": "nulls"},
              "spec": {"tolerations": [{"key": "gpu", "operator": None, "effect": None}]}}
    for doc in (queue, flavor):
        out = _apply(crds_applied, tmp_path, doc)
        assert out.returncode == 0, out.stderr
    stored = json.loads(crds_applied("get", c.PLURAL_CLUSTER_QUEUES, "nulls", "-o", "json").stdout)["spec"]
    assert stored == {"queueingStrategy": c.QUEUEING_BEST_EFFORT_FIFO, "preemption": {}}
    stored = json.loads(crds_applied("get", c.PLURAL_RESOURCE_FLAVORS, "nulls", "-o", "json").stdout)["spec"]
    assert stored == {"tolerations": [{"key": "gpu"}]}


@pytest.mark.parametrize(("break_it", "message"), [
    pytest.param(lambda ta: None, None, id="the example as it is is stored"),
    pytest.param(lambda ta: ta["slices"][0]["valuesPerLevel"][1]["individual"].__setitem__("roots", ["3"]),
                 "valuesPerLevel.individual, if set, must have roots of length equal to domainCount",
                 id="fewer roots than domains"),
    pytest.param(lambda ta: ta["slices"][0].__setitem__("podCounts", {"universal": 4, "individual": [6, 2]}),
                 "exactly one of the fields in [universal individual] must be set", id="both pod count forms"),
    pytest.param(lambda ta: ta.__setitem__("levels", ta["levels"][:1]),
                 "valuesPerLevel must have the same length as the number of levels", id="values for a level not named"),
])
def test_a_compact_topology_assignment_that_cannot_be_expanded_is_refused(
        crds_applied: Kubectl, namespace: str, tmp_path: Path, break_it: Callable[[Doc], object],
        message: str | None) -> None:
    """Kueue's rules on v1beta2's compact form hold without the webhook (the status subresource)."""
    wl = _stored(_workload(), namespace)
    wl["metadata"]["name"] = "compact"
    assert _apply(crds_applied, tmp_path, wl).returncode == 0
    status = _workload()["status"]
    break_it(status["admission"]["podSetAssignments"][0]["topologyAssignment"])
    out = crds_applied("patch", c.PLURAL_WORKLOADS, "compact", "-n", namespace, "--subresource=status",
                       "--type=merge", "-p", json.dumps({"status": status}), check=False)
    if message is None:
        assert out.returncode == 0, out.stderr
    else:
        assert out.returncode != 0 and message in out.stderr, out.stderr
