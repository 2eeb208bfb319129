"""`tasq demo`: what tasq is for, in under a minute, with no cluster to install.

Starts `tasq dev`'s stack (devcluster + tasq's operator and webhooks in one process) on the 40
sample GPU nodes, applies the packaged samples and the JobSet sample (each Job's pods told to run a
few seconds), then prints where every Job's and the JobSet's pods landed (blocks > racks > nodes),
why the second gang waits with no pod created, and how it runs once the first gang finishes. Exit 0
when every step happened as described.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.api import constants as c
from controller.api.configuration import Configuration
from controller.api.crds import KINDS
from controller.bundled import crd_dir, sample_nodes_file, samples_dir
from controller.commands import terminal
from controller.commands.dev import DevSetupError, DevStack, dev_stack, load_nodes
from controller.commands.run import config_flag, read_config_flag
from devcluster.server.errors import ApiError

LABEL_BLOCK = "cloud.provider.com/topology-block"
LABEL_RACK = "cloud.provider.com/topology-rack"
LABEL_GPU = "cloud.provider.com/gpu"

# How long each sample Job's pods run on the devcluster. The first gang is short so the second one
# gets its turn during the demo; the rest keep running while the picture is drawn.
RUN_SECONDS_FIRST_GANG = 8
RUN_SECONDS_DEFAULT = 600
FIRST_GANG, SECOND_GANG = "gang-a", "gang-b"
REQUIRE_RACK_JOB, PREFER_RACK_JOB = "llm-pretrain-rack", "llm-finetune-prefer-rack"
JOBSET = "rl-leader-workers"  # config/samples/jobset/: a leader and workers, one group in one rack
STEP_TIMEOUT_S = 40.0
POLL_S = 0.25

# apiVersion/kind -> REST plural, for the kinds the samples hold.
PLURALS: dict[tuple[str, str], str] = {
    **{(f"{c.GROUP}/{version}", spec.kind): spec.plural for spec in KINDS for version in spec.served_versions},
    (c.JOB_API_VERSION, c.KIND_JOB): "jobs",
    (f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}", c.KIND_JOBSET): c.PLURAL_JOBSETS,
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run a local cluster with tasq and sample Jobs, and show where their pods landed and why")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="also write a kubeconfig here (default: a temporary file)")
    parser.add_argument("--keep", action="store_true",
                        help="keep serving after the demo until Ctrl-C, to look around with kubectl")
    config_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config_problem = read_config_flag(args)
    if config_problem:
        print(f"tasq demo: {config_problem}", file=sys.stderr)
        return 2
    try:
        out = terminal.console()
        note = terminal.noter(out)
        try:
            return asyncio.run(_demo(args.kubeconfig, args.keep, terminal.sayer(out), args.configuration, note))
        finally:
            note(None)
    except DevSetupError as e:
        print(f"tasq demo: {e}", file=sys.stderr)
        return 2
    except SampleRefused as e:
        print(f"tasq demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


# ---------------------------------------------------------------- the cluster's state, as the demo reads it


@dataclass
class ClusterView:
    """One read of the objects the demo reports on; pods by Job name, nodes by name."""

    workloads: list[dict[str, Any]]
    jobs: dict[str, dict[str, Any]]
    pods_by_job: dict[str, list[dict[str, Any]]]
    nodes: dict[str, dict[str, Any]]
    taken_at: float = field(default=0.0)
    jobsets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def workload_of(self, job: str) -> dict[str, Any] | None:
        for w in self.workloads:
            if any(ref.get("kind") in (c.KIND_JOB, c.KIND_JOBSET) and ref.get("name") == job
                   for ref in w.get("metadata", {}).get("ownerReferences") or []):
                return w
        return None

    def condition(self, job: str, type_: str) -> dict[str, Any] | None:
        w = self.workload_of(job)
        for cond in ((w or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == type_:
                return dict(cond)
        return None

    def is_true(self, job: str, type_: str) -> bool:
        cond = self.condition(job, type_)
        return cond is not None and cond.get("status") == "True"

    def running(self, job: str) -> list[dict[str, Any]]:
        return [p for p in self.pods_by_job.get(job, []) if (p.get("status") or {}).get("phase") == "Running"
                and p.get("spec", {}).get("nodeName")]

    def parallelism(self, job: str) -> int:
        """A Job's parallelism; a JobSet's pods over all its replicatedJobs."""
        if job in self.jobsets:
            return sum(int(r.get("replicas", 1)) * int(r["template"]["spec"].get("parallelism") or 1)
                       for r in self.jobsets[job]["spec"]["replicatedJobs"])
        return int(self.jobs.get(job, {}).get("spec", {}).get("parallelism") or 1)

    def all_running(self, job: str) -> bool:
        return len(self.running(job)) == self.parallelism(job)

    def domains(self, job: str, label: str) -> set[str]:
        """The values of one node label over the nodes this Job's running pods are bound to."""
        return {self.nodes[p["spec"]["nodeName"]]["metadata"]["labels"].get(label, "?")
                for p in self.running(job) if p["spec"]["nodeName"] in self.nodes}


async def read_view(stack: DevStack) -> ClusterView:
    api = stack.cluster.api

    async def items(api_version: str, plural: str) -> list[dict[str, Any]]:
        listed = await api.list_objects(api.resource(api_version, plural), "default" if plural != "nodes" else None)
        return list(listed.get("items") or [])

    workloads = await items(c.API_VERSION, c.PLURAL_WORKLOADS)
    jobs = {j["metadata"]["name"]: j for j in await items(c.JOB_API_VERSION, "jobs")
            if not (j["metadata"].get("labels") or {}).get(c.LABEL_JOBSET_NAME)}  # a JobSet's Jobs: under it
    jobsets = {j["metadata"]["name"]: j for j in await items(f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}", c.PLURAL_JOBSETS)}
    pods_by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in await items("v1", "pods"):
        labels = pod["metadata"].get("labels") or {}
        job = labels.get(c.LABEL_JOBSET_NAME) or labels.get(c.LABEL_JOB_NAME)  # a JobSet's pods under its name
        if job:
            pods_by_job[job].append(pod)
    listed_nodes = await api.list_objects(api.resource("v1", "nodes"), None)
    nodes = {n["metadata"]["name"]: n for n in listed_nodes.get("items") or []}
    return ClusterView(workloads, jobs, dict(pods_by_job), nodes, time.monotonic(), jobsets)


# ---------------------------------------------------------------- the picture (pure)


def render_domains(view: ClusterView) -> list[str]:
    """Blocks > racks > nodes of every node that runs a pod, each node with `job x count` (sorted)."""
    tree: dict[str, dict[str, dict[str, Counter[str]]]] = defaultdict(lambda: defaultdict(dict))
    for job, _pods in sorted(view.pods_by_job.items()):
        for pod in view.running(job):
            node_name = pod["spec"]["nodeName"]
            if node_name not in view.nodes:
                continue
            labels = view.nodes[node_name]["metadata"].get("labels") or {}
            block = f"{labels.get(LABEL_GPU, '?')} block {labels.get(LABEL_BLOCK, '?')}"
            rack = labels.get(LABEL_RACK, "?")
            tree[block][rack].setdefault(node_name, Counter())[job] += 1
    lines: list[str] = []
    for block in sorted(tree):
        lines.append(block)
        for rack in sorted(tree[block]):
            rack_jobs: Counter[str] = Counter()
            for counts in tree[block][rack].values():
                rack_jobs.update(counts)
            lines.append(f"  rack {rack}: " + ", ".join(f"{j} x{n}" for j, n in sorted(rack_jobs.items())))
            lines += _host_lines(tree[block][rack])
    return lines


def _host_lines(hosts: Mapping[str, Counter[str]]) -> list[str]:
    """One line per run of consecutive hosts (in name order) running the same pods, so that a gang
    spread over a rack takes one line and the whole picture fits a screen."""
    lines: list[str] = []
    names = sorted(hosts)
    start = 0
    for end in range(1, len(names) + 1):
        if end < len(names) and hosts[names[end]] == hosts[names[start]]:
            continue
        jobs = ", ".join(f"{j} x{n}" for j, n in sorted(hosts[names[start]].items()))
        run = end - start
        lines.append(f"    {names[start]}: {jobs}" if run == 1 else
                     f"    {names[start]} .. {names[end - 1]} ({run} nodes): {jobs} each")
        start = end
    return lines


def placement_facts(view: ClusterView) -> list[str]:
    """What the picture shows, said in words and checked against it."""
    facts = []
    racks = view.domains(REQUIRE_RACK_JOB, LABEL_RACK)
    facts.append(f"{REQUIRE_RACK_JOB} (require rack): {len(view.running(REQUIRE_RACK_JOB))} pods in "
                 f"{len(racks)} rack ({', '.join(sorted(racks))})")
    racks = view.domains(PREFER_RACK_JOB, LABEL_RACK)
    blocks = view.domains(PREFER_RACK_JOB, LABEL_BLOCK)
    facts.append(f"{PREFER_RACK_JOB} (prefer rack): {len(view.running(PREFER_RACK_JOB))} pods need 72 GPUs, more "
                 f"than a rack's 64, so tasq fell back to one block: {len(racks)} racks of block "
                 f"{', '.join(sorted(blocks))}")
    racks = view.domains(JOBSET, LABEL_RACK)
    facts.append(f"{JOBSET} (JobSet: a leader and 2 Jobs of 2 workers, one group in one rack): "
                 f"{len(view.running(JOBSET))} pods in {len(racks)} rack ({', '.join(sorted(racks))})")
    return facts


def waiting_facts(view: ClusterView, job: str) -> list[str]:
    cond = view.condition(job, c.CONDITION_QUOTA_RESERVED) or {}
    suspended = bool(view.jobs.get(job, {}).get("spec", {}).get("suspend"))
    return [f"{job}: suspended={str(suspended).lower()}, pods created: {len(view.pods_by_job.get(job, []))}",
            f"  {cond.get('reason', '?')}: {cond.get('message', '(no message yet)')}"]


# ---------------------------------------------------------------- the steps


def sample_objects() -> list[dict[str, Any]]:
    """The packaged samples in file order, then the JobSet sample; each Job's pods told how long to
    run on the devcluster (the JobSet's keep running)."""
    objects = []
    for path in [*sorted(samples_dir().glob("*.yaml")), *sorted((samples_dir() / "jobset").glob("*.yaml"))]:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == c.KIND_JOB:
                seconds = RUN_SECONDS_FIRST_GANG if doc["metadata"]["name"] == FIRST_GANG else RUN_SECONDS_DEFAULT
                template = doc["spec"]["template"]
                meta = template.setdefault("metadata", {})
                meta.setdefault("annotations", {})[c.ANNOTATION_DEVCLUSTER_RUN_SECONDS] = str(seconds)
            objects.append(doc)
    return objects


class SampleRefused(Exception):
    """The local cluster refused one of the samples (a bug in tasq or the samples): exit 1 naming it."""


async def apply_samples(stack: DevStack, objects: Sequence[Mapping[str, Any]]) -> None:
    api = stack.cluster.api
    for obj in objects:
        plural = PLURALS[(obj["apiVersion"], obj["kind"])]
        namespace = obj["metadata"].get("namespace", "")
        try:
            await api.create(api.resource(obj["apiVersion"], plural), namespace, obj)
        except ApiError as e:
            raise SampleRefused(f"the local cluster refused the sample {obj['kind']} "
                                f"{obj['metadata'].get('name')!r}: {e.message}") from e


async def wait_for(stack: DevStack, done: Callable[[ClusterView], bool]) -> tuple[ClusterView, bool]:
    """Poll until `done(view)` or STEP_TIMEOUT_S; the last view and whether it was done."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while True:
        view = await read_view(stack)
        if done(view) or time.monotonic() > deadline:
            return view, done(view)
        await asyncio.sleep(POLL_S)


def first_step_done(view: ClusterView) -> bool:
    """Every sample Job but the second gang, and the JobSet, run whole, and the second gang was told
    why it waits."""
    jobs = [j for j in [*view.jobs, *view.jobsets] if j != SECOND_GANG]
    waiting = view.condition(SECOND_GANG, c.CONDITION_QUOTA_RESERVED)
    return (bool(jobs) and all(view.all_running(j) for j in jobs)
            and waiting is not None and waiting.get("status") == "False")


def second_step_done(view: ClusterView) -> bool:
    return view.is_true(FIRST_GANG, c.CONDITION_FINISHED) and view.all_running(SECOND_GANG)


def _no_note(text: str | None) -> None:
    """Where no terminal shows progress."""


async def _demo(kubeconfig: Path | None, keep: bool, say: Callable[[str], None],
                configuration: Configuration | None = None, note: Callable[[str | None], None] = _no_note) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tasq-demo-") as tmp:
        path = kubeconfig or Path(tmp) / "kubeconfig"
        nodes = load_nodes(sample_nodes_file())
        note("starting the local cluster, tasq's controller and webhooks...")
        async with dev_stack(path, 0, crd_dir(), extra_nodes=nodes, configuration=configuration) as stack:
            note(None)
            say(f"tasq demo: a local cluster with {stack.nodes} GPU nodes (H100: 2 blocks x 2 racks x 8 hosts; "
                f"A100: 1 block x 2 racks x 4 hosts; 8 GPUs each), tasq's controller and webhooks.")
            say(f"Applying the samples: a Topology, 2 flavors, ClusterQueues team-a (192 H100 GPUs) and team-b "
                f"(32 A100 GPUs), {sum(1 for o in sample_objects() if o['kind'] == c.KIND_JOB)} Jobs and a JobSet.")
            await apply_samples(stack, sample_objects())
            note("waiting for the Jobs to be admitted and their pods to run...")
            view, ok = await wait_for(stack, first_step_done)
            note(None)
            say("")
            say(f"== after {view.taken_at - started:.0f} s: where the pods run (blocks > racks > nodes)")
            for line in render_domains(view):
                say(line)
            say("")
            for line in placement_facts(view):
                say(line)
            say("")
            say("== two 32-GPU gangs against team-b's 32 GPUs: all or nothing, so no deadlock")
            say(f"{FIRST_GANG}: admitted, {len(view.running(FIRST_GANG))} pods running in rack "
                f"{', '.join(sorted(view.domains(FIRST_GANG, LABEL_RACK)))}")
            for line in waiting_facts(view, SECOND_GANG):
                say(line)
            if not ok:
                say(f"tasq demo: the first step did not complete within {STEP_TIMEOUT_S:.0f} s (see above)")
                return 1
            note(f"waiting for {FIRST_GANG} to finish and {SECOND_GANG} to start...")
            view, ok = await wait_for(stack, second_step_done)
            note(None)
            say("")
            say(f"== after {view.taken_at - started:.0f} s: {FIRST_GANG} finished, its quota was released")
            say(f"{SECOND_GANG}: admitted, {len(view.running(SECOND_GANG))} pods running in rack "
                f"{', '.join(sorted(view.domains(SECOND_GANG, LABEL_RACK)))}")
            if not ok:
                say(f"tasq demo: {SECOND_GANG} did not start within {STEP_TIMEOUT_S:.0f} s of {FIRST_GANG} finishing")
                return 1
            say("")
            say(f"Next: `tasq dev --kubeconfig PATH --nodes {sample_nodes_file()}` keeps a cluster with these "
                f"nodes running for kubectl; `kubectl apply -f {samples_dir()}`, then `kubectl get workloads`, "
                "`kubectl describe workload ...`.")
            if keep:
                say(f"serving until Ctrl-C; kubeconfig: {stack.kubeconfig}")
                await asyncio.Event().wait()
    return 0
