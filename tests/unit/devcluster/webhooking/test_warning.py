"""Warnings collected per request and their `Warning` header form."""

from __future__ import annotations

import asyncio

import pytest

from devcluster.webhooking import warning


@pytest.mark.parametrize("text, want", [
    ("plain", '299 - "plain"'),
    ('say "hi"', '299 - "say \\"hi\\""'),
    ("back\\slash", '299 - "back\\\\slash"'),
], ids=["plain", "quotes_escaped", "backslash_escaped"])
def test_header_value_is_a_quoted_299_warning(text: str, want: str) -> None:
    assert warning.header_value(text) == want


async def test_collecting_gathers_distinct_warnings_from_concurrent_tasks_and_nothing_outside() -> None:
    warning.add("outside any request")  # dropped: nobody collects

    async def webhook(text: str) -> None:
        await asyncio.sleep(0)
        warning.add(text)

    with warning.collecting() as first:
        await asyncio.gather(webhook("a"), webhook("a"), webhook("two\nlines"), webhook("  "))
        with warning.collecting() as nested:
            warning.add("inner")
    assert (sorted(first), nested) == (["a", "two lines"], ["inner"])
