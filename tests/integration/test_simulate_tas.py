"""`tasq simulate` with Kueue 0.19's TAS annotations on Jobs and the `--feature-gates` flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from controller.api import constants as c
from controller.cli import main
from tests.builders.cluster import make_node
from tests.builders.kueue import (
    label_slices,
    make_cluster_queue,
    make_flavor,
    make_job,
    make_local_queue,
    make_topology,
)

GPU = "nvidia.com/gpu"
BLOCK, RACK, HOST = "cloud.com/block", "cloud.com/rack", "kubernetes.io/hostname"


# Two racks of 15 GPUs (hosts of 8 and 7) in block b1:
#
#               b1
#         /            \
#       r1              r2
#     /    \          /    \
#   n1(8)  n2(7)    n3(8)  n4(7)
def cluster(tmp_path: Path, job_notes: dict[str, str], parallelism: int, min_parallelism: int | None = None) -> Path:
    nodes = [make_node(name).labels({BLOCK: "b1", RACK: rack, "gpu": "h100"}).allocatable({GPU: str(g)}, cpu="64")
             for name, rack, g in (("n1", "r1", 8), ("n2", "r1", 7), ("n3", "r2", 8), ("n4", "r2", 7))]
    job = make_job("train").queue("lq").parallelism(parallelism).requests({GPU: "1"})
    for key, value in job_notes.items():
        job = job.template_annotate(key, value)
    if min_parallelism is not None:
        job = job.annotate(c.ANNOTATION_JOB_MIN_PARALLELISM, str(min_parallelism))
    objects = [*(n.obj() for n in nodes), make_topology("t", BLOCK, RACK, HOST).obj(),
               make_flavor("h100").node_labels({"gpu": "h100"}).topology_name("t").obj(),
               make_cluster_queue("cq").flavor("h100", {GPU: 100}).obj(), make_local_queue("lq", "cq").obj(), job.obj()]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    return path


def placement(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> list[str]:
    """`host=count` of the Job's only Workload."""
    code = main(["simulate", "-f", str(path), "-o", "json", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    (item,) = json.loads(out)["items"]
    (psa,) = item["status"]["admission"]["podSetAssignments"]
    return [f"{s['nodeLabels'][HOST]}={s['count']}" for s in label_slices(psa["topologyAssignment"])]


def test_balanced_placement_is_off_by_default_and_on_by_the_flag(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    path = cluster(tmp_path, {c.ANNOTATION_PODSET_PREFERRED_TOPOLOGY: RACK}, 25)
    assert placement(capsys, path) == ["n1=8", "n2=7", "n3=8", "n4=2"]
    assert placement(capsys, path, "--feature-gates=TASBalancedPlacement=true") == ["n1=8", "n2=5", "n3=8", "n4=4"]


def test_slice_annotations_on_the_job_template(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    notes = {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK, c.ANNOTATION_PODSET_SLICE_REQUIRED_TOPOLOGY: HOST,
             c.ANNOTATION_PODSET_SLICE_SIZE: "4"}
    # Hosts hold 2 (n1, n3) or 1 (n2, n4) slices of 4: 12 pods take r1 as 8 + 4.
    assert placement(capsys, cluster(tmp_path, notes, 12)) == ["n1=8", "n2=4"]


def test_an_unknown_gate_is_an_error_and_nothing_is_simulated(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    path = cluster(tmp_path, {}, 1)
    code = main(["simulate", "-f", str(path), "--feature-gates", "TASProfileMixed=true"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == ("error: --feature-gates: unknown feature gate 'TASProfileMixed'; known gates: "
                   "PartialAdmission, TASBalancedPlacement, TASMultiLayerTopology\n")


def test_a_job_with_a_minimum_parallelism_is_admitted_with_what_one_rack_holds(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # 20 pods in one rack fit nowhere (15 a rack); 10 would do: the largest count, 15, fills r1.
    path = cluster(tmp_path, {c.ANNOTATION_PODSET_REQUIRED_TOPOLOGY: RACK}, 20, min_parallelism=10)
    assert placement(capsys, path) == ["n1=8", "n2=7"]
    assert main(["simulate", "-f", str(path)]) == 0
    table = capsys.readouterr().out
    assert "b1/r1:15 (15 of 20 pods)" in table, table
    assert main(["simulate", "-f", str(path), "--explain", "--feature-gates=PartialAdmission=false"]) == 0
    out = capsys.readouterr()
    assert "(15 of 20 pods)" not in out.out and "PodSetTopologyUnfit" in out.out + out.err
