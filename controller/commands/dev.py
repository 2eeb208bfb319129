"""`tasq dev`: the devcluster with sample GPU nodes and tasq's operator and webhooks, in one process.

Starts `devcluster.DevCluster` on 127.0.0.1, creates GPU nodes from `--topology` (default 2 blocks
x 4 racks x 4 nodes x 8 GPUs) and/or from `--nodes` dumps of a real cluster, applies `crds/` and
the JobSet CRD, runs the simulated JobSet and Job controllers, scheduler and kubelet in real time,
writes a kubeconfig for kubectl, then runs tasq (operator + local webhooks; `--no-tasq`: the bare
control plane) and serves until SIGINT/SIGTERM (then exits 0). `dev_stack` is the same as an async context manager (`tasq demo`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.api.configuration import Configuration
from controller.api.features import FLAG_HELP, FeatureGates, parse_feature_gates
from controller.commands import terminal
from controller.commands.crds import DEFAULT_DIR
from controller.commands.run import config_flag, read_config_flag
from controller.kube.api import connect
from controller.kube.operating import Operator, OperatorOptions
from controller.kube.process import Webhooks, serve_tasq
from devcluster.cluster import DevCluster
from devcluster.server.errors import ApiError
from devcluster.simulated.components import Components
from devcluster.simulated.jobsets import jobset_crd
from devcluster.simulated.nodes import (
    LABEL_RACK,
    NodeDumpError,
    TopologyShape,
    create_nodes,
    nodes_from_dump,
    parse_shape,
    topology_nodes,
)
from devcluster.simulated.seeding import apply_crds

DEFAULT_TOPOLOGY = "2x4x4x8"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("dev", help="run a local development API server with sample GPU nodes")
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write the kubeconfig")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free port)")
    parser.add_argument("--crds", type=Path, default=DEFAULT_DIR, help="directory of CRD YAML to apply")
    parser.add_argument("--topology", default=None,
                        help=f"GPU nodes as BLOCKSxRACKSxNODESxGPUS (default: {DEFAULT_TOPOLOGY}, "
                             "none when --nodes is given)")
    parser.add_argument("--nodes", type=Path, action="append", default=[], metavar="FILE",
                        help="also create the nodes of a `kubectl get nodes -o yaml` dump (repeatable; "
                             "later files replace nodes of the same name)")
    parser.add_argument("--no-components", action="store_true",
                        help="API server only: no Job controller, scheduler or kubelet (for benchmarks)")
    parser.add_argument("--feature-gates", default="", metavar="NAME=true|false,...", help=FLAG_HELP)
    config_flag(parser)
    parser.add_argument("--no-tasq", action="store_true",
                        help="the bare control plane: no tasq operator or webhooks")
    parser.set_defaults(handler=run)


class DevSetupError(Exception):
    """The arguments cannot work (a directory as the kubeconfig, a busy port...): exit 2 with this message."""


def run(args: argparse.Namespace) -> int:
    try:
        topology = args.topology if args.topology is not None or not args.nodes else None
        shape = parse_shape(topology) if topology is not None else None
        check_paths(args.kubeconfig, args.crds)
        dumped = [node for path in args.nodes for node in load_nodes(path)]
        features = parse_feature_gates(args.feature_gates)
        config_problem = read_config_flag(args)
        if config_problem:
            raise DevSetupError(config_problem)
        asyncio.run(serve(args.kubeconfig, args.port, args.crds, shape, components=not args.no_components,
                          extra_nodes=dumped, tasq=not args.no_tasq, features=features,
                          configuration=args.configuration))
    except (ValueError, DevSetupError) as e:  # FeatureGateError is a ValueError
        print(f"tasq dev: {e}", file=sys.stderr)
        return 2
    return 0


def check_paths(kubeconfig: Path, crds: Path) -> None:
    """Refuse, before anything starts, a kubeconfig path that is a directory or another tool's kubeconfig
    (tasq dev rewrites only its own), and a missing CRD directory."""
    if kubeconfig.is_dir():
        raise DevSetupError(f"--kubeconfig {str(kubeconfig)!r} is a directory; give a file path, "
                            f"e.g. {str(kubeconfig / 'config')!r}")
    if kubeconfig.is_file():
        foreign = _foreign_clusters(kubeconfig)
        if foreign:
            names = ", ".join(repr(n) for n in foreign)
            raise DevSetupError(f"--kubeconfig {str(kubeconfig)!r} already holds another kubeconfig (cluster(s) "
                                f"{names}); give a new path so it is not overwritten")
    if not crds.is_dir():
        raise DevSetupError(f"--crds {str(crds)!r} is not a directory of CRD YAML files")


def load_nodes(path: Path) -> list[dict[str, Any]]:
    """The Nodes of one dump file; DevSetupError naming the file and its first problem (one line)."""
    try:
        nodes = nodes_from_dump(path.read_text())
    except OSError as e:
        raise DevSetupError(f"--nodes {str(path)!r}: cannot read it: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise DevSetupError(f"--nodes {str(path)!r}: not UTF-8 text (byte {e.start})") from e
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DevSetupError(f"--nodes {str(path)!r}: invalid YAML{where}: {e.problem or e.context}") from e
    except yaml.YAMLError as e:
        raise DevSetupError(f"--nodes {str(path)!r}: invalid YAML: {str(e).splitlines()[0]}") from e
    except NodeDumpError as e:
        raise DevSetupError(f"--nodes {str(path)!r}: {e}") from e
    if not nodes:
        raise DevSetupError(f"--nodes {str(path)!r}: holds no Node; want the output of `kubectl get nodes -o yaml`")
    return nodes


def _foreign_clusters(path: Path) -> list[str]:
    """The sorted names of clusters in an existing file that `tasq dev` did not write (empty: safe to replace)."""
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ["<unreadable>"]
    if not isinstance(config, dict):
        return [] if config is None else ["<not a kubeconfig>"]
    names = {str(c.get("name", "")) for c in config.get("clusters") or [] if isinstance(c, dict)}
    return sorted(names - {DevCluster.CONTEXT})


@dataclass
class DevStack:
    """A running `tasq dev`: the cluster, its kubeconfig, what was seeded and tasq's operator (None
    with `tasq=False`)."""

    cluster: DevCluster
    kubeconfig: Path
    nodes: int
    crds: list[str]
    operator: Operator | None


@asynccontextmanager
async def dev_stack(kubeconfig: Path, port: int, crds: Path, shape: TopologyShape | None = None,
                    components: bool = True, extra_nodes: list[dict[str, Any]] | None = None,
                    tasq: bool = True, stop: asyncio.Event | None = None,
                    features: FeatureGates | None = None,
                    configuration: Configuration | None = None) -> AsyncIterator[DevStack]:
    """Start and seed (`shape` nodes, then `extra_nodes`; the default shape when both are absent),
    write the kubeconfig, start tasq against it; everything is stopped on exit. `stop` (set by a
    signal once tasq runs) also ends tasq early. `configuration`: Kueue's Configuration for tasq."""
    stop = stop or asyncio.Event()
    try:
        cluster = await DevCluster(port=port).start()
    except OSError as e:
        raise DevSetupError(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from e
    simulated = Components(cluster.api).start() if components else None
    if simulated is not None:
        simulated.run_in_background()
    api_client = None
    tasq_task: asyncio.Task[None] | None = None
    try:
        if shape is None and not extra_nodes:
            shape = parse_shape(DEFAULT_TOPOLOGY)
        all_nodes = [*(topology_nodes(shape, "gpu-") if shape is not None else []), *(extra_nodes or [])]
        try:
            await create_nodes(cluster.api, all_nodes)
        except ApiError as e:
            raise DevSetupError(f"cannot create the nodes: {e.message}") from e
        nodes = len({n["metadata"]["name"] for n in all_nodes})  # a later dump replaces a same-named node
        try:
            crd_names = await apply_crds(cluster.api, crds)
        except (ApiError, yaml.YAMLError) as e:
            raise DevSetupError(f"cannot apply the CRDs in {str(crds)!r}: {e}") from e
        if simulated is not None:  # the simulated JobSet controller's CRD: JobSets run as on a cluster with JobSet
            try:
                await cluster.api.create(cluster.api.resource("apiextensions.k8s.io/v1", "customresourcedefinitions"),
                                         "", jobset_crd())
            except ApiError as e:
                raise DevSetupError(f"cannot create the JobSet CRD: {e.message}") from e
        try:
            path = cluster.write_kubeconfig(kubeconfig)
        except OSError as e:
            raise DevSetupError(f"cannot write the kubeconfig {str(kubeconfig)!r}: {e.strerror or e}") from e
        operators: list[Operator] = []
        if tasq:
            api_client = await connect(path)
            ready = asyncio.Event()
            options = OperatorOptions(features=features or FeatureGates(), started=operators.append,
                                      configuration=configuration or Configuration())
            tasq_task = asyncio.create_task(serve_tasq(api_client, stop, options, webhooks=Webhooks(local=True),
                                                       ready=ready))
            await asyncio.wait({tasq_task, asyncio.create_task(ready.wait())}, return_when=asyncio.FIRST_COMPLETED)
            if tasq_task.done():
                await tasq_task  # it failed to start: raise why
        yield DevStack(cluster, path, nodes, crd_names, operators[0] if operators else None)
    finally:
        stop.set()
        if tasq_task is not None:
            await asyncio.gather(tasq_task, return_exceptions=True)
        if api_client is not None:
            await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated
        if simulated is not None:
            simulated.close()
        await cluster.aclose()


async def serve(kubeconfig: Path, port: int, crds: Path, shape: TopologyShape | None = None,
                components: bool = True, extra_nodes: list[dict[str, Any]] | None = None, tasq: bool = True,
                features: FeatureGates | None = None, configuration: Configuration | None = None) -> None:
    """`dev_stack`, print how to use it, wait for a signal, stop cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    out = terminal.console()
    say, note = terminal.sayer(out), terminal.noter(out)
    note("starting the local cluster...")
    try:
        async with dev_stack(kubeconfig, port, crds, shape, components, extra_nodes, tasq, stop, features,
                             configuration) as stack:
            what = "tasq operator and webhooks running" if stack.operator is not None else "no tasq (--no-tasq)"
            note(None)
            say(f"devcluster serving at {stack.cluster.url}: {stack.nodes} node(s), {len(stack.crds)} CRD(s); "
                f"{what}")
            say("its state lives in memory: stopping it forgets every object (--port keeps the address)")
            say(f"kubeconfig written to {stack.kubeconfig}; try:")
            say(f"  kubectl --kubeconfig {stack.kubeconfig} get nodes -L {LABEL_RACK}")
            say(f"  export KUBECONFIG={stack.kubeconfig}")
            say("press Ctrl-C to stop")
            await stop.wait()
    finally:
        note(None)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    say("devcluster stopped")
