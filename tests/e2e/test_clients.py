"""The official Python client (sync and kubernetes.aio) against the devcluster over HTTP.

CRUD with Kubernetes' status codes and Status bodies, generateName, list pagination, list + watch
from a resourceVersion with selectors, the three patch types, 409 on stale writes, 410 Gone for
compacted watch history and expired continue tokens, dryRun, CRD validation and pruning.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.aio import client as aclient
from kubernetes.aio import config as aconfig
from kubernetes.aio import watch as awatch
from kubernetes.client.exceptions import ApiException

from devcluster.cluster import DevCluster
from devcluster.server.apiserver import FRESH_WAIT_SECONDS
from tests.client_models import as_body, present
from tests.retrying_client import new_client

pytestmark = pytest.mark.e2e

WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["size"], "properties": {
                                   "size": {"type": "integer", "minimum": 1},
                                   "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                                   "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                               "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}]},
}


@pytest.fixture(scope="module")
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with new_client(kubeconfig) as api:
        yield api


@pytest.fixture(scope="module")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition(as_body(WIDGETS_CRD))
    return client.CustomObjectsApi(api_client)


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
            "data": {"k": "v"}}


def status_of(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(present(error.body))
    return body


@pytest.mark.parametrize("path, want_kind", [
    ("/api", "APIVersions"), ("/api/", "APIVersions"), ("/apis", "APIGroupList"), ("/apis/", "APIGroupList"),
    ("/apis/batch", "APIGroup"), ("/apis/batch/v1/", "APIResourceList"), ("/api/v1", "APIResourceList"),
])
def test_discovery_paths_with_and_without_trailing_slash(devcluster: DevCluster, path: str, want_kind: str) -> None:
    with urllib.request.urlopen(devcluster.url + path) as resp:
        assert json.loads(resp.read())["kind"] == want_kind


def test_version_and_unknown_paths(devcluster: DevCluster) -> None:
    with urllib.request.urlopen(devcluster.url + "/version/") as resp:
        assert json.loads(resp.read())["major"] == "1"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(devcluster.url + "/apis/nope.example.com/v1")
    assert missing.value.code == 404 and json.loads(missing.value.read())["kind"] == "Status"


@pytest.mark.parametrize("resource, body, want_code", [
    ("pods", {"metadata": {"name": "has-status"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, 200),
    ("configmaps", {"metadata": {"name": "no-status"}, "data": {"k": "v"}}, 404),
], ids=["pod_has_a_status_subresource", "configmap_has_none"])
def test_get_status_subresource_only_where_the_kind_has_one(devcluster: DevCluster, namespace: str, resource: str,
                                                            body: dict[str, Any], want_code: int) -> None:
    base = f"{devcluster.url}/api/v1/namespaces/{namespace}/{resource}"
    created = urllib.request.Request(base, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(created).close()
    try:
        with urllib.request.urlopen(f"{base}/{body['metadata']['name']}/status") as resp:
            code = resp.status
    except urllib.error.HTTPError as e:
        code = e.code
    assert code == want_code


def test_create_get_replace_delete_with_kubernetes_status_codes(core: client.CoreV1Api, namespace: str) -> None:
    created, code, _ = core.create_namespaced_config_map_with_http_info(namespace, as_body(configmap("c1")))
    assert code == 201
    assert present(created.metadata).uid and present(created.metadata).creation_timestamp
    with pytest.raises(ApiException) as again:
        core.create_namespaced_config_map(namespace, as_body(configmap("c1")))
    assert again.value.status == 409
    assert status_of(again.value)["reason"] == "AlreadyExists"
    assert status_of(again.value)["message"] == 'configmaps "c1" already exists'
    created.data = {"k": "w"}
    replaced = core.replace_namespaced_config_map("c1", namespace, created)
    assert int(present(present(replaced.metadata).resource_version)) > int(present(present(created.metadata).resource_version))
    core.delete_namespaced_config_map("c1", namespace)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("c1", namespace)
    assert missing.value.status == 404
    assert status_of(missing.value)["details"] == {"name": "c1", "kind": "configmaps"}


def test_create_in_a_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as error:
        core.create_namespaced_config_map("no-such-ns", as_body(configmap("c1")))
    assert error.value.status == 404
    assert status_of(error.value)["message"] == 'namespaces "no-such-ns" not found'


def test_generate_name_gives_distinct_names(core: client.CoreV1Api, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    names = {present(present(core.create_namespaced_config_map(namespace, as_body(body)).metadata).name) for _ in range(5)}
    assert len(names) == 5 and all(n.startswith("gen-") and len(n) == 9 for n in names)


def test_stale_resource_version_is_409_conflict_for_put_and_patch(core: client.CoreV1Api, namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, as_body(configmap("c")))
    core.patch_namespaced_config_map("c", namespace, {"data": {"k": "2"}})
    first.data = {"k": "stale"}
    with pytest.raises(ApiException) as put:
        core.replace_namespaced_config_map("c", namespace, first)
    assert put.value.status == 409 and status_of(put.value)["reason"] == "Conflict"
    stale = {"metadata": {"resourceVersion": present(first.metadata).resource_version}, "data": {"k": "x"}}
    with pytest.raises(ApiException) as patch:
        core.patch_namespaced_config_map("c", namespace, stale, _content_type="application/merge-patch+json")
    assert patch.value.status == 409
    assert core.read_namespaced_config_map("c", namespace).data == {"k": "2"}


def test_three_patch_types_by_content_type(core: client.CoreV1Api, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
           "spec": {"containers": [{"name": "main", "image": "img:1"}, {"name": "side", "image": "side:1"}],
                    "tolerations": [{"key": "x", "operator": "Exists"}]}}
    core.create_namespaced_pod(namespace, as_body(pod))
    core.patch_namespaced_pod("p", namespace, {"spec": {"containers": [{"name": "side", "image": "side:2"}]}},
                              _content_type="application/strategic-merge-patch+json")
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"a": None, "b": "2"}}},
                              _content_type="application/merge-patch+json")
    core.patch_namespaced_pod("p", namespace, [{"op": "add", "path": "/metadata/annotations", "value": {"n": "1"}}],
                              _content_type="application/json-patch+json")
    got = core.read_namespaced_pod("p", namespace)
    assert [(c.name, c.image) for c in present(got.spec).containers] == [("main", "img:1"), ("side", "side:2")]
    assert present(got.metadata).labels == {"b": "2"}
    assert present(got.metadata).annotations == {"n": "1"}


def test_list_pagination_and_expired_continue_token(devcluster: DevCluster, core: client.CoreV1Api,
                                                    namespace: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(namespace, as_body(configmap(f"c{i}")))
    names, token = [], None
    while True:
        page = core.list_namespaced_config_map(namespace, limit=2, _continue=token)
        names += [present(c.metadata).name for c in page.items]
        token = present(page.metadata)._continue
        if not token:
            break
    assert names == [f"c{i}" for i in range(5)]
    first = core.list_namespaced_config_map(namespace, limit=2)
    core.create_namespaced_config_map(namespace, as_body(configmap("later")))  # compaction reaches past the list
    devcluster.call(lambda: _async_compact(devcluster))
    with pytest.raises(ApiException) as expired:
        core.list_namespaced_config_map(namespace, limit=2, _continue=present(first.metadata)._continue)
    assert expired.value.status == 410 and status_of(expired.value)["reason"] == "Expired"


async def _async_compact(cluster: DevCluster) -> None:
    cluster.api.compact()


def test_label_and_field_selectors(core: client.CoreV1Api, namespace: str) -> None:
    for name, tier in (("a", "gold"), ("b", "silver"), ("c", "bronze")):
        core.create_namespaced_config_map(namespace, as_body(configmap(name, tier=tier)))
    core.create_namespaced_config_map(namespace, as_body(configmap("d")))

    def names(**kw: Any) -> list[str]:
        # a real cluster also publishes kube-root-ca.crt in every namespace: only the test's own count
        return [present(present(c.metadata).name) for c in core.list_namespaced_config_map(namespace, **kw).items
                if present(c.metadata).name != "kube-root-ca.crt"]

    assert names(label_selector="tier in (gold,silver)") == ["a", "b"]
    assert names(label_selector="tier!=gold") == ["b", "c", "d"]
    assert names(label_selector="!tier") == ["d"]
    assert names(label_selector="tier,tier notin (bronze)") == ["a", "b"]
    assert names(field_selector="metadata.name=c") == ["c"]
    with pytest.raises(ApiException) as bad:
        core.list_namespaced_config_map(namespace, field_selector="data.k=v")
    assert bad.value.status == 400
    assert "data.k" in status_of(bad.value)["message"]  # the exact message: tests/conformance


def test_watch_from_a_resource_version_sees_every_change_once(core: client.CoreV1Api, namespace: str) -> None:
    listed = core.list_namespaced_config_map(namespace)
    core.create_namespaced_config_map(namespace, as_body(configmap("w", app="x")))
    core.patch_namespaced_config_map("w", namespace, {"data": {"k": "2"}})
    core.create_namespaced_config_map(namespace, as_body(configmap("other", app="y")))
    core.delete_namespaced_config_map("w", namespace)
    seen = [(e["type"], e["object"].metadata.name, (e["object"].data or {}).get("k"))
            for e in watch.Watch().stream(core.list_namespaced_config_map, namespace, label_selector="app=x",  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
                                          resource_version=present(listed.metadata).resource_version, timeout_seconds=1)]
    assert seen == [("ADDED", "w", "v"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]


@pytest.mark.parametrize("bookmarks", [False, True], ids=["plain", "with_bookmarks"])
def test_an_idle_watch_ends_at_timeout_seconds(core: client.CoreV1Api, namespace: str, bookmarks: bool) -> None:
    """The server closes the stream itself (bookmarks, every 0.5 s here, must not keep it open)."""
    started = time.monotonic()
    # the selector matches nothing: not even kube-root-ca.crt, which a real cluster puts in every namespace
    resp: object = core.list_namespaced_config_map(namespace, watch=True, timeout_seconds=1, _preload_content=False,
                                                   allow_watch_bookmarks=bookmarks, label_selector="app=none")
    assert isinstance(resp, urllib3.BaseHTTPResponse)  # what _preload_content=False returns
    events = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 5, elapsed
    assert {e["type"] for e in events} == ({"BOOKMARK"} if bookmarks else set())


def test_watch_from_a_compacted_revision_is_410_gone(devcluster: DevCluster, core: client.CoreV1Api,
                                                     namespace: str) -> None:
    old = present(core.create_namespaced_config_map(namespace, as_body(configmap("g"))).metadata).resource_version
    core.patch_namespaced_config_map("g", namespace, {"data": {"k": "2"}})
    devcluster.call(lambda: _async_compact(devcluster))
    resp: object = core.list_namespaced_config_map(namespace, watch=True, resource_version=old, timeout_seconds=1,
                                                   _preload_content=False)
    assert isinstance(resp, urllib3.BaseHTTPResponse)  # what _preload_content=False returns
    events = [json.loads(line) for line in resp.read().decode().splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    with pytest.raises(ApiException) as gone:
        list(watch.Watch().stream(core.list_namespaced_config_map, namespace, resource_version=old,  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
                                  timeout_seconds=1))
    assert gone.value.status == 410


def test_dry_run_does_not_persist(core: client.CoreV1Api, namespace: str) -> None:
    made = core.create_namespaced_config_map(namespace, as_body(configmap("dry")), dry_run="All")
    assert present(made.metadata).name == "dry"
    assert [present(c.metadata).name for c in core.list_namespaced_config_map(namespace).items if present(c.metadata).name == "dry"] == []


def test_custom_objects_validation_pruning_defaults_and_status(custom: client.CustomObjectsApi,
                                                                namespace: str) -> None:
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
            "spec": {"size": 3, "unknown": "dropped", "extra": {"kept": True}}, "status": {"phase": "ignored"}}
    made = custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets", body)
    assert isinstance(made, dict)
    assert made["spec"] == {"size": 3, "color": "red", "extra": {"kept": True}}
    assert "status" not in made
    with pytest.raises(ApiException) as bad:
        custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"},
            "spec": {"size": 0, "color": "green"}})
    assert bad.value.status == 422
    causes = status_of(bad.value)["details"]["causes"]
    assert sorted((c["field"], c["reason"]) for c in causes) == [  # Kubernetes does not fix their order
        ("spec.color", "FieldValueNotSupported"), ("spec.size", "FieldValueInvalid")]
    status = custom.patch_namespaced_custom_object_status("example.com", "v1", namespace, "widgets", "w1",
                                                          {"status": {"phase": "Ready"}, "spec": {"size": 9}})
    assert isinstance(status, dict)
    assert status["status"] == {"phase": "Ready"} and status["spec"]["size"] == 3
    assert status["metadata"]["generation"] == 1
    main = custom.patch_namespaced_custom_object("example.com", "v1", namespace, "widgets", "w1",
                                                 {"status": {"phase": "Lost"}, "spec": {"size": 4}})
    assert isinstance(main, dict)
    assert main["status"] == {"phase": "Ready"} and main["spec"]["size"] == 4
    assert main["metadata"]["generation"] == 2


def test_strategic_merge_patch_of_a_custom_object_is_415(custom: client.CustomObjectsApi, namespace: str) -> None:
    """Custom objects take no strategic merge patch (no patch strategies in a CRD schema)."""
    custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})
    with pytest.raises(ApiException) as strategic:
        custom.patch_namespaced_custom_object("example.com", "v1", namespace, "widgets", "w",
                                              {"spec": {"size": 2}},
                                              _content_type="application/strategic-merge-patch+json")
    assert strategic.value.status == 415 and status_of(strategic.value)["reason"] == "UnsupportedMediaType"
    widget = custom.get_namespaced_custom_object("example.com", "v1", namespace, "widgets", "w")
    assert isinstance(widget, dict)
    assert widget["spec"]["size"] == 1


async def test_async_client_crud_and_watch(tmp_path: Path) -> None:
    async with DevCluster(bookmark_interval=0.2) as cluster:
        path = cluster.write_kubeconfig(tmp_path / "config")
        api_client = await aconfig.new_client_from_config(config_file=str(path))  # type: ignore[no-untyped-call]  # kubernetes' config loaders are unannotated
        async with api_client:
            core = aclient.CoreV1Api(api_client)
            await core.create_namespaced_config_map("default", as_body(configmap("a")))
            listed = await core.list_namespaced_config_map("default")
            assert [present(c.metadata).name for c in listed.items] == ["a"]
            await core.patch_namespaced_config_map("a", "default", {"data": {"k": "2"}})
            await core.delete_namespaced_config_map("a", "default")
            seen = []
            stream = awatch.Watch().stream(core.list_namespaced_config_map, "default",  # type: ignore[no-untyped-call]  # kubernetes' watch module is unannotated
                                           resource_version=present(listed.metadata).resource_version,
                                           allow_watch_bookmarks=True, timeout_seconds=1)
            async for event in stream:
                obj = event["object"]
                # bookmarks come back undecoded: only a resourceVersion, no name
                seen.append((event["type"], obj["metadata"]["resourceVersion"] if isinstance(obj, dict)
                             else obj.metadata.name))
            assert seen[:2] == [("MODIFIED", "a"), ("DELETED", "a")]
            assert len(seen) > 2 and all(kind == "BOOKMARK" for kind, _ in seen[2:])
            with pytest.raises(aclient.ApiException) as conflict:
                await core.create_namespace(as_body({"metadata": {"name": "default"}}))
            assert conflict.value.status == 409


def test_list_from_a_resource_version_the_server_has_not_reached_is_504_too_large(
        devcluster: DevCluster, core: client.CoreV1Api, namespace: str) -> None:
    current = int(present(present(core.list_namespaced_config_map(namespace).metadata).resource_version))
    assert core.list_namespaced_config_map(namespace, resource_version=str(current)).items == []
    devcluster.api.fresh_wait = 0.1
    try:
        with pytest.raises(ApiException) as error:
            core.list_namespaced_config_map(namespace, resource_version=str(current + 1000))
    finally:
        devcluster.api.fresh_wait = FRESH_WAIT_SECONDS
    status = status_of(error.value)
    assert (error.value.status, status["reason"], status["details"]["causes"][0]["reason"]) == (
        504, "Timeout", "ResourceVersionTooLarge")
    assert status["message"].startswith(f"Timeout: Too large resource version: {current + 1000}, current: ")
