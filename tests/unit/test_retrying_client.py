"""The e2e and conformance client (tests/retrying_client.py): which answers it sends again and after
how long, as client-go decides, against a scripted REST layer."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.retrying_client import MAX_RETRIES, RetryingApiClient, retry_after_seconds


@pytest.mark.parametrize(("why", "status", "retry_after", "seconds"), [
    ("kube-apiserver swapping a changed CRD's storage", 503, "1", 1),
    ("throttled by priority and fairness", 429, "2", 2),
    ("any 5xx that names a wait", 500, "0", 0),
    ("a 5xx that names no wait is the caller's", 503, None, None),
    ("a conflict is the caller's, whatever it says", 409, "1", None),
    ("an HTTP date is not waited for", 503, "Fri, 27 Nov 2026 08:41:50 GMT", None),
])
def test_what_is_sent_again(why: str, status: int, retry_after: str | None, seconds: int | None) -> None:
    assert retry_after_seconds(status, retry_after) == seconds, why


class Answer:
    """What the REST layer returns: a status and headers."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers, self.reads = status, headers, 0

    def read(self) -> bytes:
        self.reads += 1
        return b"{}"


def scripted_client(answers: list[Answer], monkeypatch: pytest.MonkeyPatch) -> tuple[RetryingApiClient, list[float]]:
    api = RetryingApiClient(client.Configuration(host="http://127.0.0.1:1"))
    sent: list[Any] = []

    def request(*args: Any, **kwargs: Any) -> Answer:
        sent.append(args)
        return answers[len(sent) - 1]
    monkeypatch.setattr(api.rest_client, "request", request)
    waits: list[float] = []
    monkeypatch.setattr("tests.retrying_client.time.sleep", waits.append)
    return api, waits


def test_a_503_with_retry_after_is_sent_again_after_that_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    unavailable = Answer(503, {"Retry-After": "1"})
    api, waits = scripted_client([unavailable, Answer(201, {})], monkeypatch)
    assert api.call_api("POST", "http://127.0.0.1:1/apis/g/v1/gadgets", {}, {"a": 1}).status == 201
    assert (waits, unavailable.reads) == ([1], 1)


def test_the_last_answer_is_the_callers_after_max_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [Answer(503, {"Retry-After": "1"}) for _ in range(MAX_RETRIES + 1)]
    api, waits = scripted_client(answers, monkeypatch)
    assert api.call_api("GET", "http://127.0.0.1:1/api/v1/pods").status == 503
    assert waits == [1] * MAX_RETRIES
