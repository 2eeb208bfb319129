"""`tasq run`: the operator against a cluster until SIGINT/SIGTERM.

Connects in-cluster or with `--kubeconfig`, elects a leader on a Lease in `--lease-namespace` (only the
leader admits and writes; timings as Kueue's unless given; `--create-namespace` makes a missing
namespace), serves /metrics over HTTPS on `--metrics-port` (each scrape authenticated and authorized
with the API server) and /healthz, /readyz on the plain `--probe-port`, and exits 0 after a clean stop
(the Lease released). Exit 2 on arguments that cannot work.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.api import constants as c
from controller.api.features import FLAG_HELP, FeatureGateError, parse_feature_gates

# Kueue's leader-election defaults (controller-runtime's): leaseDuration, renewDeadline, retryPeriod.
LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S = 15.0, 10.0, 2.0

# Kept here (not imported from controller.kube.logs): `tasq run --help` must not load the operator.
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")

if TYPE_CHECKING:
    from controller.kube.metrics import BuildInfo, Endpoints


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("run", help="run the tasq operator against a cluster")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig to use (default: the in-cluster service account)")
    # Metrics and probes: see `metrics_flags` (kept apart so the operator's own flags stay readable).
    metrics_flags(parser)
    parser.add_argument("--lease-namespace", default=c.TASQ_NAMESPACE,
                        help=f"namespace of the leader-election Lease (default {c.TASQ_NAMESPACE})")
    parser.add_argument("--lease-name", default=c.LEADER_LEASE_NAME,
                        help=f"name of the Lease (default {c.LEADER_LEASE_NAME})")
    parser.add_argument("--lease-duration", type=float, default=LEASE_DURATION_S, metavar="SECONDS",
                        help=f"how long a Lease holds without renewal: a killed leader is replaced after "
                             f"at most this (default {LEASE_DURATION_S:g}, as Kueue)")
    parser.add_argument("--renew-deadline", type=float, default=RENEW_DEADLINE_S, metavar="SECONDS",
                        help=f"a leader that cannot renew for this long stops acting (default {RENEW_DEADLINE_S:g})")
    parser.add_argument("--retry-period", type=float, default=RETRY_PERIOD_S, metavar="SECONDS",
                        help=f"how often the Lease is renewed or tried (default {RETRY_PERIOD_S:g})")
    parser.add_argument("--create-namespace", action="store_true",
                        help="create the Lease namespace if it does not exist (out of a cluster)")
    parser.add_argument("--identity", default=None,
                        help="this replica's identity in the Lease (default: hostname + random suffix)")
    hooks = parser.add_mutually_exclusive_group()
    hooks.add_argument("--local-webhooks", action="store_true",
                       help="serve the webhooks on 127.0.0.1 with a generated CA and register their "
                            "configurations (a control plane on this machine); removed on exit")
    hooks.add_argument("--webhook-cert-dir", type=Path, default=None,
                       help="serve the webhooks with tls.crt/tls.key/ca.crt from this directory "
                            "(a mounted Secret; reloaded when they change)")
    parser.add_argument("--webhook-port", type=int, default=None,
                        help=f"webhook port (default {c.WEBHOOK_CONTAINER_PORT}, or a free one with --local-webhooks)")
    parser.add_argument("--feature-gates", default="", metavar="NAME=true|false,...", help=FLAG_HELP)
    parser.add_argument("--node-failure-delay", type=float, default=30.0, metavar="SECONDS",
                        help="how long a not-Ready node of an admitted Workload's topology assignment waits "
                             "before its pods are replaced (Kueue's NodeFailureDelay, 30 s)")
    config_flag(parser)
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info",
                        help="info (default): one line per decision that matters (leader, ready, admitted, "
                             "webhook errors); debug adds kopf's and the clients' per-handler lines")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text", help="text (default) or json lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="the same as --log-level debug")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        print(f"tasq run: --kubeconfig {str(args.kubeconfig)!r} is not a file", file=sys.stderr)
        return 2
    if args.kubeconfig is None and "KUBERNETES_SERVICE_HOST" not in os.environ:
        print("tasq run: not in a cluster (no KUBERNETES_SERVICE_HOST); give --kubeconfig", file=sys.stderr)
        return 2
    endpoints_problem = endpoints_flags_problem(args)
    if endpoints_problem:
        print(f"tasq run: {endpoints_problem}", file=sys.stderr)
        return 2
    if not 0 < args.retry_period < args.renew_deadline < args.lease_duration:
        print(f"tasq run: leader election needs 0 < --retry-period ({args.retry_period:g}) < --renew-deadline "
              f"({args.renew_deadline:g}) < --lease-duration ({args.lease_duration:g})", file=sys.stderr)
        return 2
    if not args.node_failure_delay >= 0:
        print(f"tasq run: --node-failure-delay ({args.node_failure_delay:g}) must be 0 or more seconds",
              file=sys.stderr)
        return 2
    try:
        args.features = parse_feature_gates(args.feature_gates)
    except FeatureGateError as e:
        print(f"tasq run: {e}", file=sys.stderr)
        return 2
    config_problem = read_config_flag(args)
    if config_problem:
        print(f"tasq run: {config_problem}", file=sys.stderr)
        return 2
    if args.webhook_cert_dir is not None and not args.webhook_cert_dir.is_dir():
        print(f"tasq run: --webhook-cert-dir {str(args.webhook_cert_dir)!r} is not a directory", file=sys.stderr)
        return 2
    from controller.kube.logs import configure_logging

    configure_logging("debug" if args.verbose else args.log_level, args.log_format)
    identity = args.identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
    from controller.kube.api import ApiError
    from controller.kube.webhooking import KueueCrdsInstalled

    try:
        asyncio.run(_serve(args, identity))
    except KueueCrdsInstalled as e:
        print(f"tasq run: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"tasq run: {e.strerror or e}", file=sys.stderr)
        return 1
    except ApiError as e:  # no usable connection, or a request that failed past its retries
        detail = e.message if e.status == 0 else f"the API server refused a request: {e}"
        print(f"tasq run: {detail}", file=sys.stderr)
        return 1
    return 0


def namespace_fix(args: argparse.Namespace) -> str:
    """How to make a missing Lease namespace: out of a cluster, tasq can create it itself."""
    ns = args.lease_namespace
    if args.kubeconfig is not None:
        return f"create it with `kubectl create namespace {ns}`, or run tasq run with --create-namespace"
    return (f"create it with `kubectl create namespace {ns}`, or give --lease-namespace the namespace tasq "
            f"runs in (the manager's Deployment passes its own)")


async def create_namespace(api: Any, namespace: str) -> None:
    """Create `namespace` unless it exists (--create-namespace); says so at WARNING when it does."""
    from controller.kube.api import ApiError

    try:
        await api.create(("v1", "namespaces"), None, {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": namespace}})
    except ApiError as e:
        if e.status != 409:  # already there
            raise
        return
    logging.getLogger(__name__).warning("created namespace %s for the leader-election Lease", namespace)


async def _serve(args: argparse.Namespace, identity: str) -> None:
    from controller.kube.api import KubeApi, connect
    from controller.kube.embedding import take_back_signals
    from controller.kube.leading import LeaderElector
    from controller.kube.operating import OperatorOptions
    from controller.kube.process import Webhooks, serve_tasq

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    take_back_signals(stop)
    webhooks = None
    if args.local_webhooks:
        webhooks = Webhooks(local=True, port=args.webhook_port or 0)
    elif args.webhook_cert_dir is not None:
        webhooks = Webhooks(cert_dir=args.webhook_cert_dir, addr="0.0.0.0",  # all interfaces: the Service
                            port=args.webhook_port or c.WEBHOOK_CONTAINER_PORT)
    api_client = await connect(args.kubeconfig)
    try:
        if args.create_namespace:
            await create_namespace(KubeApi(api_client), args.lease_namespace)
        elector = LeaderElector(KubeApi(api_client), args.lease_namespace, args.lease_name, identity,
                                lease_duration_s=args.lease_duration, renew_deadline_s=args.renew_deadline,
                                retry_period_s=args.retry_period, namespace_fix=namespace_fix(args))
        options = OperatorOptions(elector=elector, features=args.features, endpoints=endpoints_from_flags(args),
                                  build=build_info(), configuration=args.configuration,
                                  node_failure_delay=timedelta(seconds=args.node_failure_delay))
        await serve_tasq(api_client, stop, options, webhooks=webhooks)
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def config_flag(parser: argparse.ArgumentParser) -> None:
    """`--config FILE`: Kueue's Configuration file (shared by run, dev, demo and simulate)."""
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="Kueue's Configuration file (config.kueue.x-k8s.io v1beta1 or v1beta2); tasq acts on "
                             "its waitForPodsReady section (off without a file)")


def read_config_flag(args: argparse.Namespace) -> str | None:
    """Parse `--config` into `args.configuration` (the defaults without it); the problem, with
    every field path, when the file cannot be read or used."""
    from controller.api.configuration import Configuration, ConfigurationError, parse_configuration

    args.configuration = Configuration()
    path: Path | None = args.config
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return f"--config {str(path)!r}: {getattr(e, 'strerror', None) or e}"
    try:
        args.configuration = parse_configuration(text, f"--config {str(path)!r}")
    except ConfigurationError as e:
        return "\n  ".join([f"{e.source}: {len(e.errors)} problem(s)", *e.errors])
    return None


def build_info() -> BuildInfo:
    """kueue_build_info's labels: this installation's version and the commit it was built from."""
    from controller.commands.version import commit, package_version
    from controller.kube.metrics import BuildInfo

    return BuildInfo(git_version=package_version(), git_commit=commit())


def metrics_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of /metrics (HTTPS, TokenReview + SubjectAccessReview) and of the plain probe port."""
    parser.add_argument("--metrics-port", type=int, default=c.METRICS_PORT,
                        help=f"HTTPS port of /metrics (default {c.METRICS_PORT}; -1: none); a scrape needs a bearer "
                             "token whose user may get /metrics (the metrics-reader ClusterRole)")
    parser.add_argument("--metrics-host", default="0.0.0.0",  # all interfaces: Prometheus scrapes the pod IP
                        help="address /metrics listens on (default 0.0.0.0)")
    parser.add_argument("--metrics-cert-dir", type=Path, default=None,
                        help="serve /metrics with tls.crt/tls.key from this directory, reloaded when they change "
                             "(default: --webhook-cert-dir when given, else a self-signed certificate)")
    parser.add_argument("--metrics-insecure", action="store_true",
                        help="serve /metrics over plain HTTP without authentication; only with a loopback "
                             "--metrics-host (a control plane on this machine)")
    parser.add_argument("--probe-port", type=int, default=c.PROBE_PORT,
                        help=f"plain-HTTP port of /healthz and /readyz (default {c.PROBE_PORT}; -1: none)")
    parser.add_argument("--probe-host", default="0.0.0.0",  # all interfaces: the kubelet probes the pod IP
                        help="address the probes listen on (default 0.0.0.0)")


def endpoints_flags_problem(args: argparse.Namespace) -> str | None:
    """Why the metrics and probe flags cannot work together, or None."""
    from controller.kube.metrics import is_loopback

    for flag, port in (("--metrics-port", args.metrics_port), ("--probe-port", args.probe_port)):
        if not -1 <= port <= 65535:
            return f"{flag} {port}: want 0-65535, or -1 for none"
    if args.metrics_port > 0 and args.metrics_port == args.probe_port:
        return f"--metrics-port and --probe-port are both {args.probe_port}: /metrics and the probes need their own ports"
    if args.metrics_insecure and not is_loopback(args.metrics_host):
        return (f"--metrics-insecure serves /metrics without authentication: only on a loopback --metrics-host "
                f"(127.0.0.1, ::1 or localhost), not {args.metrics_host!r}")
    cert_dir = args.metrics_cert_dir
    if cert_dir is not None and not cert_dir.is_dir():
        return f"--metrics-cert-dir {str(cert_dir)!r} is not a directory"
    return None


def endpoints_from_flags(args: argparse.Namespace) -> Endpoints:
    from controller.kube.metrics import Endpoints

    return Endpoints(metrics_host=args.metrics_host, metrics_port=None if args.metrics_port < 0 else args.metrics_port,
                     metrics_cert_dir=args.metrics_cert_dir or args.webhook_cert_dir,
                     metrics_insecure=args.metrics_insecure,
                     probe_host=args.probe_host, probe_port=None if args.probe_port < 0 else args.probe_port)
