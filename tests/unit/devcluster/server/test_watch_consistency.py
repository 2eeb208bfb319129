"""Property: a list at revision R plus the watch from R (with a label selector) replays to exactly
what a fresh list returns at the end, whatever the sequence of creates, relabels, edits and deletes."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from devcluster.server.apiserver import PATCH_MERGE, ApiServer, ListOptions
from devcluster.server.errors import ApiError

NAMES = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(st.tuples(st.sampled_from(["create", "relabel", "edit", "delete"]), NAMES,
                         st.sampled_from(["x", "y"])), max_size=25)


async def apply_ops(api: ApiServer, ops: list[tuple[str, str, str]]) -> None:
    cms = api.resource("v1", "configmaps")
    for op, name, app in ops:
        try:
            if op == "create":
                await api.create(cms, "default", {"metadata": {"name": name, "labels": {"app": app}}, "data": {}},
                                 copy=False)
            elif op == "relabel":
                await api.patch(cms, "default", name, PATCH_MERGE, {"metadata": {"labels": {"app": app}}}, copy=False)
            elif op == "edit":
                await api.patch(cms, "default", name, PATCH_MERGE, {"data": {"v": app}}, copy=False)
            else:
                await api.delete(cms, "default", name, copy=False)
        except ApiError as e:
            assert e.code in (404, 409)  # missing or already there: the op simply does not apply


async def replay(before: list[tuple[str, str, str]], after: list[tuple[str, str, str]]) -> tuple[Any, Any]:
    api = ApiServer()
    cms = api.resource("v1", "configmaps")
    opts = ListOptions(label_selector="app=x")
    await apply_ops(api, before)
    listed = await api.list_objects(cms, "default", opts)
    state = {o["metadata"]["name"]: o for o in listed["items"]}
    watch = api.watch(cms, "default", resource_version=listed["metadata"]["resourceVersion"], label_selector="app=x")
    await apply_ops(api, after)
    while (event := watch.next_nowait()) is not None:
        name = event["object"]["metadata"]["name"]
        if event["type"] == "DELETED":
            assert name in state
            del state[name]
        else:
            assert (name in state) == (event["type"] == "MODIFIED")
            state[name] = event["object"]
    final = await api.list_objects(cms, "default", opts)
    return state, {o["metadata"]["name"]: o for o in final["items"]}


@settings(max_examples=60, deadline=None)
@given(OPS, OPS)
def test_list_then_watch_replays_to_the_final_list(before: list[tuple[str, str, str]],
                                                    after: list[tuple[str, str, str]]) -> None:
    replayed, final = asyncio.run(replay(before, after))
    assert replayed == final
