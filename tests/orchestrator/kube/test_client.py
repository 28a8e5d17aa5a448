"""``observe_requests``: every request of one ApiClient, and only of that client, is observed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from orchestrator.kube.client import dynamic, observe_requests
from tests.orchestrator.kube.api_server import api_server


def test_every_request_runs_inside_the_observer_with_its_status() -> None:
    seen: list[tuple[str, str, int]] = []

    @contextmanager
    def observer(method: str, url: str) -> Iterator[Callable[[int], None]]:
        yield lambda status: seen.append((method, url, status))

    with api_server() as api, api_server() as other:
        observe_requests(api, observer)
        host = api.configuration.host
        assert client.CoreV1Api(api).list_node().items == []
        with pytest.raises(ApiException):
            client.CoreV1Api(api).read_namespace("missing")
        with pytest.raises(Exception, match="404"):  # the dynamic client's discovery
            dynamic(api)
        client.CoreV1Api(other).list_node()  # a client nobody observes
    assert seen[:2] == [
        ("GET", f"{host}/api/v1/nodes", 200),
        ("GET", f"{host}/api/v1/namespaces/missing", 404),
    ]
    assert len(seen) >= 3 and all(m == "GET" and s == 404 for m, _, s in seen[2:]), seen
