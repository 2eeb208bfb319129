"""When a replica starts leading (controller.kube.operating): never before what it waits for is set;
and which reconciler a pod or Workload change wakes.

With local webhooks `tasq run` holds every write until the CRDs' conversion points at its server;
these tests drive `_campaign_when_allowed` with events instead of a cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes.aio import client

from controller.api import constants as c
from controller.cache.cluster import KIND_POD
from controller.kube.operating import Operator, _campaign_when_allowed
from tests.builders.cluster import make_pod


class LeadingOnly:
    """The part of an Operator the campaign touches."""

    def __init__(self) -> None:
        self.leading = asyncio.Event()


async def test_without_an_elector_it_leads_only_once_allowed() -> None:
    operator, allowed, stop = LeadingOnly(), asyncio.Event(), asyncio.Event()
    campaign = asyncio.create_task(_campaign_when_allowed(operator, None, allowed, stop))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert not operator.leading.is_set() and not campaign.done()
    allowed.set()
    await asyncio.wait_for(campaign, 1)
    assert operator.leading.is_set()


async def test_a_stop_before_it_is_allowed_never_leads() -> None:
    operator, allowed, stop = LeadingOnly(), asyncio.Event(), asyncio.Event()
    campaign = asyncio.create_task(_campaign_when_allowed(operator, None, allowed, stop))  # type: ignore[arg-type]
    stop.set()
    await asyncio.wait_for(campaign, 1)
    assert not operator.leading.is_set()


async def test_an_elector_campaigns_only_once_allowed() -> None:
    runs: list[str] = []

    class Elector:
        async def run(self) -> None:
            runs.append("run")
            await asyncio.Event().wait()

    operator, allowed, stop = LeadingOnly(), asyncio.Event(), asyncio.Event()
    elector: Any = Elector()
    campaign = asyncio.create_task(_campaign_when_allowed(operator, elector, allowed, stop))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert runs == []
    allowed.set()
    await asyncio.sleep(0.01)
    assert runs == ["run"]
    stop.set()
    await asyncio.wait_for(campaign, 1)


async def test_a_queued_plain_pod_and_a_workload_its_pods_own_wake_their_group_in_the_job_reconciler() -> None:
    async with client.ApiClient() as api_client:
        operator = Operator(api_client)
        woken: list[tuple[str, str]] = []
        operator.jobs.notify = lambda key, kind=c.KIND_JOB: woken.append((kind, key))  # type: ignore[method-assign]
        pod = make_pod("p0").label(c.LABEL_QUEUE_NAME, "q").label(c.LABEL_POD_GROUP_NAME, "g").build()
        operator._wake_jobs(KIND_POD, pod)
        workload: dict[str, Any] = {"metadata": {"namespace": "default", "name": "g", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p0", "uid": "u"}]}}
        operator._wake_jobs(c.KIND_WORKLOAD, workload)
        operator._wake_jobs(KIND_POD, make_pod("unqueued").build())  # nobody's: wakes nobody
        assert woken == [(KIND_POD, "default/g"), (KIND_POD, "default/g")]
