"""Which endpoints an observation dials, and a cluster that does not answer (the rest runs on
the real plane: tests/integration/test_observation.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from orchestrator.kube.apiusage import observe, valid_endpoint
from orchestrator.kube.bounded import Deadline, no_retry_client


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("10.0.0.5:6443", "10.0.0.5:6443"),
        (" 172.18.0.3:6443 ", "172.18.0.3:6443"),
        ("[fd00::5]:6443", "[fd00::5]:6443"),
        ("cp-0.example.com:443", "cp-0.example.com:443"),
        ("10.0.0.5", None),
        ("10.0.0.5:0", None),
        ("10.0.0.5:70000", None),
        ("[fd00::zz]:6443", None),
        ("fd00::5:6443", None),
        ("http://10.0.0.5:6443", None),
        ("10.0.0.5:6443/evil", None),
        ("user@10.0.0.5:6443", None),
        ("", None),
    ],
)
def test_valid_endpoint(text: str, endpoint: str | None) -> None:
    assert valid_endpoint(text) == endpoint


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A bound, never-listening local port: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def kubeconfig(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }


NOW = datetime(2026, 12, 5, tzinfo=UTC)


def test_a_spent_deadline_names_every_step_left(refusing_port: int) -> None:
    config = kubeconfig(refusing_port)
    seen = observe(no_retry_client(config), config, Deadline(0), NOW, ["v1"])
    assert seen == (
        (),
        (),
        "no time left for apiserver metrics, PodDisruptionBudgets, stored objects",
    )


def test_a_drain_gate_look_reads_the_pdbs_alone(refusing_port: int) -> None:
    config = kubeconfig(refusing_port)
    seen = observe(no_retry_client(config), config, Deadline(0), NOW, ["v1"], blockers_only=True)
    assert seen == ((), (), "no time left for PodDisruptionBudgets")
    _, _, partial = observe(
        no_retry_client(config), config, Deadline(30), NOW, ["v1"], blockers_only=True
    )
    # Neither the apiservers' metrics nor the stored objects were asked for.
    assert partial.startswith("listing PodDisruptionBudgets: "), partial
    assert "/metrics" not in partial and "/version" not in partial, partial


def test_a_silent_cluster_is_a_partial_look_never_an_exception(refusing_port: int) -> None:
    config = kubeconfig(refusing_port)
    usage, blockers, partial = observe(no_retry_client(config), config, Deadline(30), NOW, ["v1"])
    assert (usage, blockers) == ((), ())
    where = f"127.0.0.1:{refusing_port}"
    assert partial.startswith("listing kube-apiserver pods: "), partial
    for step in (
        f"apiserver {where}: GET /metrics: ",
        "listing PodDisruptionBudgets: ",
        "reading /version: ",
    ):
        assert step in partial, partial
