"""`tasq run`: the operator against a cluster until SIGINT/SIGTERM.

Connects in-cluster or with `--kubeconfig`, elects a leader on a Lease in `--lease-namespace`
(only the leader admits and writes), serves /healthz, /readyz and /metrics on `--metrics-port`,
and exits 0 after a clean stop (the Lease released). Exit 2 on arguments that cannot work.
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
from pathlib import Path

from controller.api import constants as c
from controller.api.features import FLAG_HELP, FeatureGateError, parse_feature_gates


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("run", help="run the tasq operator against a cluster")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig to use (default: the in-cluster service account)")
    parser.add_argument("--metrics-port", type=int, default=8080,
                        help="port of /metrics, /healthz and /readyz (default 8080; -1: none)")
    parser.add_argument("--metrics-host", default="0.0.0.0",  # all interfaces: the kubelet probes a pod IP
                        help="address the probes listen on (default 0.0.0.0)")
    parser.add_argument("--lease-namespace", default=c.TASQ_NAMESPACE,
                        help=f"namespace of the leader-election Lease (default {c.TASQ_NAMESPACE})")
    parser.add_argument("--lease-name", default=c.LEADER_LEASE_NAME,
                        help=f"name of the Lease (default {c.LEADER_LEASE_NAME})")
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
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO (default WARNING)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.kubeconfig is not None and not args.kubeconfig.is_file():
        print(f"tasq run: --kubeconfig {str(args.kubeconfig)!r} is not a file", file=sys.stderr)
        return 2
    if args.kubeconfig is None and "KUBERNETES_SERVICE_HOST" not in os.environ:
        print("tasq run: not in a cluster (no KUBERNETES_SERVICE_HOST); give --kubeconfig", file=sys.stderr)
        return 2
    if not -1 <= args.metrics_port <= 65535:
        print(f"tasq run: --metrics-port {args.metrics_port}: want 0-65535, or -1 for none", file=sys.stderr)
        return 2
    try:
        args.features = parse_feature_gates(args.feature_gates)
    except FeatureGateError as e:
        print(f"tasq run: {e}", file=sys.stderr)
        return 2
    if args.webhook_cert_dir is not None and not args.webhook_cert_dir.is_dir():
        print(f"tasq run: --webhook-cert-dir {str(args.webhook_cert_dir)!r} is not a directory", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    identity = args.identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
    from controller.kube.api import ApiError

    try:
        asyncio.run(_serve(args, identity))
    except OSError as e:
        print(f"tasq run: {e.strerror or e}", file=sys.stderr)
        return 1
    except ApiError as e:  # no usable connection, or a request that failed past its retries
        detail = e.message if e.status == 0 else f"the API server refused a request: {e}"
        print(f"tasq run: {detail}", file=sys.stderr)
        return 1
    return 0


async def _serve(args: argparse.Namespace, identity: str) -> None:
    from controller.kube.api import connect
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
        elector = LeaderElector(api_client, args.lease_namespace, args.lease_name, identity)
        options = OperatorOptions(elector=elector, features=args.features, metrics_host=args.metrics_host,
                                  metrics_port=None if args.metrics_port < 0 else args.metrics_port)
        await serve_tasq(api_client, stop, options, webhooks=webhooks)
    finally:
        await api_client.close()  # type: ignore[no-untyped-call]  # kubernetes.aio is unannotated
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
