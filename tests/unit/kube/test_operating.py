"""When a replica starts leading (controller.kube.operating): never before what it waits for is set.

With local webhooks `tasq run` holds every write until the CRDs' conversion points at its server;
these tests drive `_campaign_when_allowed` with events instead of a cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

from controller.kube.operating import _campaign_when_allowed


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
