"""`tasq explain workload` against a running cluster: the verdict the controller wrote, from outside.

Starts `tasq dev`'s stack in-process (devcluster + tasq) on the sample fleet, applies the samples,
and runs the real `tasq explain` command on the waiting gang and on an admitted Job.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.api import constants as c
from controller.bundled import crd_dir, sample_nodes_file
from controller.commands import demo
from controller.commands.dev import dev_stack, load_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.devcluster]
TASQ = Path(sys.executable).parent / "tasq"
SETTLE_TIMEOUT_S = 180.0
"""How long the samples may take to run and the second gang to be told why it waits: seconds on an
idle machine, far longer on a loaded one."""


def samples_with_the_first_gang_held() -> list[dict[str, Any]]:
    """The demo's samples, the first gang running as long as the other Jobs: it holds the quota the
    second gang waits for until the test has read and explained both (in the demo it ends after
    RUN_SECONDS_FIRST_GANG, and the second gang is admitted then, whatever the test has reached)."""
    objects = demo.sample_objects()
    for obj in objects:
        if obj["kind"] == c.KIND_JOB and obj["metadata"]["name"] == demo.FIRST_GANG:
            annotations = obj["spec"]["template"]["metadata"]["annotations"]
            annotations[c.ANNOTATION_DEVCLUSTER_RUN_SECONDS] = str(demo.RUN_SECONDS_DEFAULT)
    return objects


async def _tasq(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(str(TASQ), *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_explain_says_what_the_controller_wrote_for_a_waiting_and_an_admitted_workload(tmp_path: Path) -> None:
    async with dev_stack(tmp_path / "kubeconfig", 0, crd_dir(), extra_nodes=load_nodes(sample_nodes_file())) as stack:
        await demo.apply_samples(stack, samples_with_the_first_gang_held())
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        view = await demo.read_view(stack)
        while not demo.first_step_done(view):  # the other Jobs run, the second gang was told why it waits
            assert time.monotonic() < deadline, f"the samples not settled in {SETTLE_TIMEOUT_S:.0f}s: {view.workloads}"
            await asyncio.sleep(0.25)
            view = await demo.read_view(stack)
        waiting: dict[str, Any] = view.workload_of(demo.SECOND_GANG) or {}
        written = view.condition(demo.SECOND_GANG, c.CONDITION_QUOTA_RESERVED) or {}
        assert written.get("status") == "False", view.workloads

        code, out, err = await _tasq("explain", "workload", waiting["metadata"]["name"], "-n", "default",
                                     "--kubeconfig", str(stack.kubeconfig))
        assert code == 0, err
        assert written["message"] in out

        admitted = view.workload_of(demo.REQUIRE_RACK_JOB) or {}
        code, out, err = await _tasq("explain", "wl", admitted["metadata"]["name"], "--kubeconfig",
                                     str(stack.kubeconfig))
        assert code == 0, err
        assert 'admitted in ClusterQueue "team-a"' in out

        code, out, err = await _tasq("explain", "workload", "nope", "-n", "default", "--kubeconfig",
                                     str(stack.kubeconfig))
        assert code == 1 and 'workload "nope" not found' in err
