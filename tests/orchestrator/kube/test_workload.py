"""Workload-cluster probes: Node summaries, and an unreachable cluster reported, never raised."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from orchestrator.kube import workload


def node(ready: bool, kubelet: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": str(ready)}]}
    if kubelet is not None:
        status["nodeInfo"] = {"kubeletVersion": kubelet}
    return {"metadata": {"name": "n"}, "status": status}


@pytest.mark.parametrize(
    ("nodes", "summary"),
    [
        ([], (0, 0, ())),
        ([node(True, "v1.33.0"), node(False, "v1.33.0")], (2, 1, (("v1.33.0", 2),))),
        (
            [node(True, "v1.34.0"), node(True, "v1.33.0"), node(True, "v1.34.0")],
            (3, 3, (("v1.33.0", 1), ("v1.34.0", 2))),
        ),
        # CAPD's in-memory Nodes report no nodeInfo: counted, no version invented.
        ([node(True, None), node(True, "")], (2, 2, ())),
    ],
)
def test_node_summary(nodes: list[dict[str, Any]], summary: tuple[Any, ...]) -> None:
    assert workload.node_summary(nodes) == summary


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A bound, never-listening local port: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_an_unreachable_api_server_is_a_reason_not_an_exception(refusing_port: int) -> None:
    cfg = client.Configuration()
    cfg.host = f"https://127.0.0.1:{refusing_port}"
    cfg.retries = False
    status = workload.probe(client.ApiClient(cfg), "fleet", "c1", timeout=5)
    assert not status.reachable
    assert status.reason.startswith("reading Secret fleet/c1-kubeconfig: ")
    assert len(status.reason) <= 400 and "\n" not in status.reason
