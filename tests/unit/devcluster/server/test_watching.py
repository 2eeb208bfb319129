"""Watch delivery: an event already queued is handed out whatever the timeout asked for."""

from __future__ import annotations

from devcluster.server.store import ADDED
from devcluster.server.watching import Watch


def make_watch() -> Watch:
    return Watch(present=lambda obj: obj, matches=lambda obj: True)


async def test_a_queued_event_comes_out_even_when_the_timeout_has_already_passed() -> None:
    # The HTTP stream asks with timeout 0 once a bookmark is due; the queued event must not wait
    # for the stream's end (it did: asyncio.wait_for(get, 0) gives up before the get runs).
    watch = make_watch()
    watch.start_with_objects([{"metadata": {"name": "j1"}}])

    event = await watch.next(timeout=0)

    assert event == {"type": ADDED, "object": {"metadata": {"name": "j1"}}}
    assert watch.pending() == 0


async def test_nothing_queued_and_no_time_left_is_none_and_the_watch_goes_on() -> None:
    watch = make_watch()

    assert await watch.next(timeout=0) is None
    assert not watch.closed


async def test_a_closed_watch_hands_out_what_it_had_queued_then_ends() -> None:
    watch = make_watch()
    watch.start_with_objects([{"metadata": {"name": "j1"}}])
    watch.close()

    first = await watch.next(timeout=0)
    end = await watch.next(timeout=0)

    assert first is not None and first["object"]["metadata"]["name"] == "j1"
    assert end is None and watch.closed
