"""``client.harden``: every request bounded in time, transient faults retried a bounded number of
times (429 after its Retry-After, capped), everything else answered at once - against a real
socket server that injects the faults."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from orchestrator.kube.client import (
    CallCancelled,
    RequestPolicy,
    harden,
    retry_after_seconds,
    run_cancellable,
)
from tests.orchestrator.kube.api_server import Fault, faulty_server

# Short waits keep the test fast; the rules are the same as the defaults'.
FAST = RequestPolicy(timeout=2.0, attempts=4, backoff=0.01, max_backoff=0.02, retry_after_cap=0.05)
NODES = "/api/v1/nodes"


def status(code: int, **headers: str) -> Fault:
    return Fault("status", code, headers)


class Retries(list[tuple[str, str, float]]):
    def __call__(self, method: str, url: str, why: str, delay: float) -> None:
        self.append((method, why, delay))


@pytest.mark.parametrize(
    ("faults", "whys"),
    [
        ([status(500), status(503)], ["HTTP 500", "HTTP 503"]),
        ([status(502), status(504), status(500)], ["HTTP 502", "HTTP 504", "HTTP 500"]),
        ([Fault("reset")], ["ProtocolError"]),
    ],
)
def test_transient_faults_are_retried_within_the_call(faults: list[Fault], whys: list[str]) -> None:
    retries = Retries()
    with faulty_server(faults) as (api, seen):
        harden(api, FAST, retries)
        assert client.CoreV1Api(api).list_node().items == []
    assert [why for _, why, _ in retries] == whys
    assert len(seen) == len(faults) + 1


def test_429_waits_what_retry_after_asks_up_to_the_cap() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    faults = [
        status(429, **{"Retry-After": "0.02"}),
        status(429, **{"Retry-After": "3600"}),  # capped
        status(503, **{"Retry-After": later}),  # an HTTP date, capped too
    ]
    retries = Retries()
    with faulty_server(faults) as (api, _):
        harden(api, FAST, retries)
        client.CoreV1Api(api).list_node()
    assert [(why, delay) for _, why, delay in retries] == [
        ("HTTP 429", 0.02),
        ("HTTP 429", FAST.retry_after_cap),
        ("HTTP 503", FAST.retry_after_cap),
    ]


def test_an_answer_held_past_the_timeout_is_retried() -> None:
    retries = Retries()
    policy = RequestPolicy(timeout=1.0, attempts=4, backoff=0.01)
    with faulty_server([Fault("hold")]) as (api, seen):
        harden(api, policy, retries)
        assert client.CoreV1Api(api).list_node().items == []
    assert retries[0][1] == "ReadTimeoutError"
    assert len(seen) == len(retries) + 1


def test_the_last_failure_reaches_the_caller_after_the_bounded_attempts() -> None:
    retries = Retries()
    with faulty_server([status(503)] * 10) as (api, seen):
        harden(api, FAST, retries)
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(api).list_node()
    assert caught.value.status == 503
    assert len(seen) == FAST.attempts and len(retries) == FAST.attempts - 1
    with faulty_server([Fault("reset")] * 10) as (api, seen):
        harden(api, FAST)
        with pytest.raises(urllib3.exceptions.ProtocolError):
            client.CoreV1Api(api).list_node()
    assert len(seen) == FAST.attempts


@pytest.mark.parametrize("code", [400, 403, 404, 409, 422])
def test_answers_retrying_cannot_change_are_returned_at_once(code: int) -> None:
    retries = Retries()
    with faulty_server([status(code)]) as (api, seen):
        harden(api, FAST, retries)
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(api).patch_namespace("ns", {"metadata": {}})
    assert caught.value.status == code
    assert len(seen) == 1 and not retries


def test_writes_are_retried_too() -> None:
    """Safe because every write of the worker is conditional or an idempotent apply."""
    with faulty_server([Fault("reset"), status(500)]) as (api, seen):
        harden(api, FAST)
        with pytest.raises(ApiException) as caught:  # the server's 404 after the faults
            client.CoreV1Api(api).patch_namespace("ns", {"metadata": {}})
    assert caught.value.status == 404
    assert [m for m, _ in seen] == ["PATCH"] * 3


def test_a_cancelled_call_sends_no_further_request() -> None:
    cancel = threading.Event()
    cancel.set()
    with faulty_server([]) as (api, seen):
        harden(api, FAST)
        with pytest.raises(CallCancelled):
            run_cancellable(client.CoreV1Api(api).list_node, cancel)
    assert seen == []


def test_a_cancelled_call_stops_waiting_to_retry() -> None:
    """The backoff wait ends when the caller gives up, instead of running to its end."""
    cancel = threading.Event()
    slow = RequestPolicy(timeout=2.0, attempts=3, backoff=60.0, max_backoff=60.0)
    with faulty_server([status(503)] * 3) as (api, seen):
        harden(api, slow, lambda *_: cancel.set())  # the activity ends during the first retry
        with pytest.raises(CallCancelled):
            run_cancellable(client.CoreV1Api(api).list_node, cancel)
    assert len(seen) == 1


def test_hardening_is_idempotent_and_switches_off_urllib3_retries() -> None:
    with faulty_server([status(503)] * 10) as (api, seen):
        harden(api, FAST)
        harden(api, FAST)  # a second harden must not multiply attempts
        assert api.configuration.retries is False
        with pytest.raises(ApiException):
            client.CoreV1Api(api).list_node()
    assert len(seen) == FAST.attempts


def test_a_request_timeout_is_always_set() -> None:
    timeouts: list[object] = []
    with faulty_server([]) as (api, _):
        harden(api, FAST)
        send: Any = api.rest_client.request

        def request(*args: object, **kwargs: object) -> object:
            timeouts.append(kwargs.get("_request_timeout"))
            return send(*args, **kwargs)

        api.rest_client.request = request  # type: ignore[method-assign]
        client.CoreV1Api(api).list_node()
        client.CoreV1Api(api).list_node(_request_timeout=7)  # the caller's own wins
    assert timeouts == [FAST.timeout, 7]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, None), ("", None), ("3", 3.0), (" 1.5 ", 1.5), ("-4", 0.0), ("soon", None)],
)
def test_retry_after_values(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value) == seconds


def test_backoff_doubles_up_to_its_cap_and_retry_after_is_capped() -> None:
    policy = RequestPolicy(backoff=0.5, max_backoff=4.0, retry_after_cap=10.0)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert policy.delay(1, 2.0) == 2.0 and policy.delay(1, 99.0) == 10.0
    default = RequestPolicy()
    worst = default.attempts * default.timeout + (default.attempts - 1) * default.retry_after_cap
    assert worst <= 120, "one request must fit the activities' default start-to-close timeout"
