"""kopf embedded in tasq's event loop: one instance per process, which owns no signal and no other task.

`run_kopf(registry, stop)` is kopf's `spawn_tasks` + `run_tasks` with two differences from
`kopf.operator`: SIGINT/SIGTERM keep setting `stop` (kopf installs its own handlers as it spawns; they
are replaced before anything else runs), and when kopf ends it waits for and cancels only the tasks
it spawned, not every task newer than itself (the devcluster's connections in `tasq dev`, tasq's
loops, a test's client). Used by controller.kube.operating and controller.kube.webhooking.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import kopf
from kopf._core.reactor.inventory import ResourceMemories
from kubernetes.aio import client

KOPF_SOURCES = str(Path(kopf.__file__).resolve().parent)


def take_back_signals(stop: asyncio.Event) -> None:
    """SIGINT/SIGTERM set `stop` (only the main thread may install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


def connection_info(api_client: client.ApiClient) -> kopf.ConnectionInfo:
    """kopf's credentials from the same configuration tasq's writers use (one identity)."""
    conf = api_client.configuration
    auth = str((conf.api_key or {}).get("authorization", "") or (conf.api_key or {}).get("BearerToken", ""))
    token = auth.removeprefix("Bearer ").strip() or None
    return kopf.ConnectionInfo(
        server=str(conf.host), token=token, ca_path=conf.ssl_ca_cert or None, insecure=not conf.verify_ssl,
        certificate_path=conf.cert_file or None, private_key_path=conf.key_file or None,
        username=conf.username or None, password=conf.password or None)


def spawned_by_kopf(task: asyncio.Task[Any]) -> bool:
    """Whether `task` runs one of kopf's own coroutines (its watchers, workers, guards, servers)."""
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and str(code.co_filename).startswith(KOPF_SOURCES)


class NotKopfs(Collection["asyncio.Task[Any]"]):
    """The tasks kopf must leave alone when it ends: those that existed before it started and any
    task that is not kopf's own. kopf only asks `task in ignored` of this collection."""

    def __init__(self, before: set[asyncio.Task[Any]]) -> None:
        self._before = before

    def __contains__(self, task: object) -> bool:
        return task in self._before or not (isinstance(task, asyncio.Task) and spawned_by_kopf(task))

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(self._before)

    def __len__(self) -> int:
        return len(self._before)


async def run_kopf(registry: kopf.OperatorRegistry, stop: asyncio.Event, *, ready: asyncio.Event | None = None,
                   memories: ResourceMemories | None = None, signalled: asyncio.Event | None = None) -> None:
    """Run kopf (standalone: no peering; cluster-wide) with `registry` until `stop` is set or it fails;
    `ready` is set once its startup handlers ran. SIGINT/SIGTERM set `signalled` (default `stop`: a
    caller that stops kopf later than the process passes its own). See the module docstring for the
    signals and tasks."""
    before = asyncio.all_tasks()
    tasks = await kopf.spawn_tasks(registry=registry, standalone=True, clusterwide=True, stop_flag=stop,
                                   ready_flag=ready, memories=memories)
    take_back_signals(signalled or stop)  # no await since kopf installed its handlers: no signal can reach them
    await kopf.run_tasks(tasks, ignored=NotKopfs(before))
