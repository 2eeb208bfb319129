"""`hack/top-example`: docs/top-1024.svg, `tasq top`'s picture of a simulated 1,024-node cluster.

Writes a simulate input (4 blocks x 8 racks x 32 nodes of 8 GPUs, one topology flavor, one
ClusterQueue, and Jobs of several shapes: rack-required gangs, a block-preferring one, small
unconstrained ones) into a directory, then runs `tasq top -f cluster.yaml -f jobs.yaml -o svg` on it.
Deterministic: the same files and the same SVG every run. Run by people refreshing the picture and by
tests/unit/hack/test_top_example.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
BLOCKS, RACKS_PER_BLOCK, NODES_PER_RACK, GPUS_PER_NODE = 4, 8, 32, 8
JOBS = (
    # name, pods, GPUs per pod, topology annotation, its level
    ("llm-pretrain", 256, 1, "kueue.x-k8s.io/require-topology", RACK),
    ("llm-pretrain-2", 200, 1, "kueue.x-k8s.io/require-topology", RACK),
    ("moe-train", 96, 8, "kueue.x-k8s.io/prefer-topology", BLOCK),
    ("rl-rollouts", 64, 2, "kueue.x-k8s.io/prefer-topology", RACK),
    ("eval-sweep", 40, 1, "kueue.x-k8s.io/podset-unconstrained-topology", ""),
    ("vision-ft", 120, 4, "kueue.x-k8s.io/require-topology", BLOCK),
    ("speech-asr", 128, 8, "kueue.x-k8s.io/require-topology", BLOCK),
    ("llm-sft", 480, 2, "kueue.x-k8s.io/prefer-topology", RACK),
    ("notebook-pool", 24, 3, "kueue.x-k8s.io/podset-unconstrained-topology", ""),
    ("too-big-for-a-rack", 300, 1, "kueue.x-k8s.io/require-topology", RACK),
)


def cluster() -> list[dict[str, Any]]:
    """Topology, flavor, queues and the nodes."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "datacenter"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
         "spec": {"nodeLabels": {"cloud.provider.com/gpu": "h100"}, "topologyName": "datacenter"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "training"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
             {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8192"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "training", "namespace": "ml"}, "spec": {"clusterQueue": "training"}},
    ]
    for b in range(BLOCKS):
        for r in range(RACKS_PER_BLOCK):
            for n in range(NODES_PER_RACK):
                name = f"gpu-b{b}-r{r}-{n:02d}"
                objects.append({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {HOST: name, BLOCK: f"block-{b}", RACK: f"rack-{b}{r}",
                                                          "cloud.provider.com/gpu": "h100"}},
                    "status": {"allocatable": {"cpu": "95500m", "memory": "257741228Ki", "pods": "110",
                                               "nvidia.com/gpu": str(GPUS_PER_NODE)},
                               "conditions": [{"type": "Ready", "status": "True"}]}})
    return objects


def jobs() -> list[dict[str, Any]]:
    """The Jobs, oldest first (one second apart, so the queue order is the list's)."""
    out = []
    for i, (name, pods, gpus, annotation, level) in enumerate(JOBS):
        template_annotations = {annotation: "true"} if annotation.endswith("unconstrained-topology") else {}
        job_annotations = {} if template_annotations else {annotation: level}
        out.append({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": f"2026-01-01T00:00:{i:02d}Z",
                         "labels": {"kueue.x-k8s.io/queue-name": "training"}, "annotations": job_annotations},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "suspend": True,
                     "template": {"metadata": {"annotations": template_annotations}, "spec": {
                         "restartPolicy": "Never", "containers": [{
                             "name": "worker", "image": "registry.example.com/ml/worker:1",
                             "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                                           "limits": {"nvidia.com/gpu": str(gpus)}}}]}}}})
    return out


def write_inputs(directory: Path) -> tuple[Path, Path]:
    """cluster.yaml and jobs.yaml in `directory`: the two steps of the simulation."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = directory / "cluster.yaml", directory / "jobs.yaml"
    for path, objects in zip(paths, (cluster(), jobs()), strict=True):
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False))
    return paths


def svg(directory: Path) -> str:
    """`tasq top -f cluster.yaml -f jobs.yaml -o svg` over the inputs written into `directory`."""
    from controller.cli import main as tasq

    cluster_file, jobs_file = write_inputs(directory)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = tasq(["top", "-f", str(cluster_file), "-f", str(jobs_file), "-o", "svg"])
    if code != 0:
        raise SystemExit(f"tasq top exited {code}")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/top-example", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "top-1024.svg")
    parser.add_argument("--inputs", type=Path, default=None, help="keep the simulate input here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        picture = svg(args.inputs or Path(scratch))
    args.output.write_text(picture)
    print(f"wrote {args.output} ({len(picture)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
