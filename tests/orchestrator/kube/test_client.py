"""``observe_requests`` (every request of one ApiClient, and only of that client, is observed), and
the in-cluster client a worker in a pod uses."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.resource import ResourceInstance

from orchestrator.kube import client as kube_client
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


def _service_account(tmp: Path, token: str = "tok-1") -> Path:
    (tmp / "token").write_text(token)
    (tmp / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nnot parsed here\n")
    (tmp / "namespace").write_text("calibrator-system\n")
    return tmp


def test_in_cluster_client_uses_the_pods_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_DIR", _service_account(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert kube_client.in_cluster()
    assert kube_client.in_cluster_namespace() == "calibrator-system"
    api = kube_client.api_client(kube_client.IN_CLUSTER)
    cfg = api.configuration
    assert cfg.host == "https://10.0.0.1:443"
    assert cfg.ssl_ca_cert == str(tmp_path / "ca.crt")
    assert cfg.api_key["BearerToken"].lower() == "bearer tok-1"
    # The kubelet rotates the projected token in place: the client re-reads it when it expires.
    assert cfg.refresh_api_key_hook is not None


@pytest.mark.parametrize(
    ("env", "token"),
    [
        ({}, True),  # no service environment: not in a pod
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, True),  # no port
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, False),
    ],
)
def test_not_in_cluster_without_the_service_environment_and_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], token: bool
) -> None:
    if token:
        _service_account(tmp_path)
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_DIR", tmp_path)
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert not kube_client.in_cluster()
    assert kube_client.in_cluster_namespace() == ("calibrator-system" if token else "default")


class _Raw:
    """The raw response the dynamic client returns with ``serialize=False``."""

    def __init__(self, body: dict[str, object]) -> None:
        self.data = json.dumps(body).encode()


@pytest.mark.parametrize(
    "body",
    [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
        # Built-in kinds: the server leaves apiVersion and kind out of a list's items.
        {
            "apiVersion": "v1",
            "kind": "NamespaceList",
            "metadata": {"resourceVersion": "7"},
            "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}, "spec": {}}],
        },
        # Custom resources carry their own; an empty list stays empty.
        {
            "apiVersion": "calibrator.dev/v1alpha1",
            "kind": "FleetWorkloadList",
            "metadata": {"continue": "x"},
            "items": [
                {
                    "apiVersion": "calibrator.dev/v1alpha1",
                    "kind": "FleetWorkload",
                    "metadata": {"name": "w", "labels": {"a": "b"}},
                    "spec": {"replicas": 3, "placement": {"clusterAffinities": [{"n": None}]}},
                }
            ],
        },
        {"apiVersion": "v1", "kind": "SecretList", "metadata": {}, "items": []},
    ],
)
def test_read_json_gives_what_the_dynamic_clients_objects_give(body: dict[str, object]) -> None:
    """The raw body parsed once equals ``ResourceInstance(...).to_dict()``, list items too."""
    asked: list[dict[str, object]] = []

    def call(**kwargs: object) -> _Raw:
        asked.append(kwargs)
        return _Raw(body)

    got = kube_client.read_json(call, name="a", namespace="n")
    assert asked == [{"serialize": False, "name": "a", "namespace": "n"}]
    assert got == ResourceInstance(None, json.loads(json.dumps(body))).to_dict()  # type: ignore[no-untyped-call]
