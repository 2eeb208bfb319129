"""The protobuf body decoder: wire format, zero values, maps, repeated fields, refusals.

Bodies are built with a minimal encoder below; the field numbers under test are the ones kubectl
really sends (checked end to end in e2e/test_kubectl.py::test_imperative_commands_send_protobuf_...).
"""

from __future__ import annotations

import pytest

from devcluster.front.protobuf import MAGIC, ProtobufError, decode


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def entry(key: str, value: str) -> bytes:
    return field(1, key) + field(2, value)


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + field(1, field(1, api_version) + field(2, kind)) + field(2, raw)


def meta(name: str, *extra: bytes) -> bytes:
    # Go writes every non-pointer string, even empty ones (generateName, selfLink, uid...)
    return field(1, name) + field(2, "") + field(4, "") + field(5, "") + field(8, b"") + b"".join(extra)


def test_configmap_with_labels_and_data() -> None:
    body = envelope("v1", "ConfigMap", field(1, meta("c", field(11, entry("app", "x")))) +
                    field(2, entry("a", "1")) + field(2, entry("b", "2")))
    assert decode(body) == {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "c", "labels": {"app": "x"}}, "data": {"a": "1", "b": "2"}}


def test_secret_bytes_become_base64() -> None:
    body = envelope("v1", "Secret", field(1, meta("s")) + field(2, entry("pw", "hunter2")) + field(3, "Opaque"))
    assert decode(body)["data"] == {"pw": "aHVudGVyMg=="}


def test_negative_ints_pointer_bools_and_repeated_strings() -> None:
    container = field(1, "main") + field(2, "img") + field(3, "echo") + field(3, "hi") + field(16, 0)
    pod_spec = field(2, container) + field(3, "Never") + field(11, 0) + field(4, -1)
    job_spec = field(6, field(2, pod_spec)) + field(10, 0)
    got = decode(envelope("batch/v1", "Job", field(1, meta("j")) + field(2, job_spec)))
    spec = got["spec"]
    assert spec["suspend"] is False  # *bool: an explicit false is kept
    tspec = spec["template"]["spec"]
    assert tspec["containers"] == [{"name": "main", "image": "img", "command": ["echo", "hi"]}]  # stdin: false dropped
    assert (tspec["restartPolicy"], tspec["terminationGracePeriodSeconds"], "hostNetwork" in tspec) == ("Never", -1, False)


@pytest.mark.parametrize("body, want", [
    (b"{}", "magic"),
    (envelope("apps/v1", "Deployment", b""), "kind Deployment"),
    (envelope("v1", "ConfigMap", field(1, meta("c")) + field(99, "x")), "field 99 of ConfigMap"),
    (envelope("v1", "ConfigMap", field(1, meta("c", field(16, "x")))), "field 16 of ObjectMeta (metadata)"),
], ids=["not protobuf", "unsupported kind", "unknown field", "unknown nested field"])
def test_what_cannot_be_decoded_faithfully_is_refused(body: bytes, want: str) -> None:
    with pytest.raises(ProtobufError, match=want.replace("(", r"\(").replace(")", r"\)")):
        decode(body)
