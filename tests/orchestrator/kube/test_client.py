"""``observe_requests`` (every request of one ApiClient, and only of that client, is observed), the
request counts the calibration benchmark takes through it, and the in-cluster client a worker in
a pod uses."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.resource import ResourceInstance

from orchestrator.kube import client as kube_client
from orchestrator.kube.client import (
    Answered,
    RequestCounts,
    RequestPolicy,
    dynamic,
    harden,
    observe_requests,
    request_kind,
)
from tests.orchestrator.kube.api_server import NODES, Fault, api_server, faulty_server
from tests.orchestrator.kube.fake_dyn import NS, FakeDyn


def test_every_request_runs_inside_the_observer_with_its_status() -> None:
    seen: list[tuple[str, str, int]] = []

    @contextmanager
    def observer(method: str, url: str, headers: Mapping[str, str]) -> Iterator[Answered]:
        yield lambda response: seen.append((method, url, response.status))

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


BASE = "https://10.0.0.1:6443"
CAPI = f"{BASE}/apis/cluster.x-k8s.io/v1beta2"


@pytest.mark.parametrize(
    ("method", "url", "content_type", "kind"),
    [
        ("GET", f"{CAPI}/namespaces/ns/clusters?limit=500", "", ("LIST", "clusters")),
        ("GET", f"{CAPI}/clusters", "", ("LIST", "clusters")),
        ("GET", f"{CAPI}/namespaces/ns/clusters/c1", "", ("GET", "clusters")),
        (
            "GET",
            f"{CAPI}/namespaces/ns/clusters?watch=True&resourceVersion=5&allowWatchBookmarks=True",
            "",
            ("WATCH", "clusters"),
        ),
        (
            "PATCH",
            f"{CAPI}/namespaces/ns/clusters/c1",
            "application/merge-patch+json",
            ("PATCH", "clusters"),
        ),
        (
            "PATCH",
            f"{BASE}/apis/calibrator.dev/v1alpha1/namespaces/ns/fleetworkloads/w/status"
            "?fieldManager=fleet-calibrator&force=True",
            "application/apply-patch+yaml",
            ("APPLY", "fleetworkloads/status"),
        ),
        ("POST", f"{BASE}/api/v1/namespaces", "application/json", ("POST", "namespaces")),
        ("GET", f"{BASE}/api/v1/namespaces/ns", "", ("GET", "namespaces")),
        ("GET", f"{BASE}/api/v1/namespaces/ns/secrets/c1-kubeconfig", "", ("GET", "secrets")),
        ("PUT", f"{BASE}/api/v1/namespaces/ns/configmaps/p", "", ("PUT", "configmaps")),
        ("DELETE", f"{BASE}/api/v1/namespaces/ns/configmaps/p", "", ("DELETE", "configmaps")),
        (
            "DELETE",
            f"{BASE}/api/v1/namespaces/ns/configmaps",
            "",
            ("DELETECOLLECTION", "configmaps"),
        ),
        ("GET", f"{BASE}/apis", "", ("GET", "discovery")),
        ("GET", f"{BASE}/api/v1", "", ("GET", "discovery")),
        ("GET", f"{BASE}/apis/cluster.x-k8s.io/v1beta2", "", ("GET", "discovery")),
        ("GET", f"{BASE}/readyz", "", ("GET", "/readyz")),
    ],
)
def test_a_request_is_named_as_the_api_server_counts_it(
    method: str, url: str, content_type: str, kind: tuple[str, str]
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    assert request_kind(method, url, headers) == kind


def test_requests_are_counted_per_attempt_with_the_bytes_read() -> None:
    """A retried request counts twice (the server saw two); bodies count as they are read."""
    counts = RequestCounts()
    policy = RequestPolicy(timeout=5, attempts=2, backoff=0.01)
    with faulty_server([Fault("status", 503)]) as (api, _):
        observe_requests(api, counts.observe)
        harden(api, policy)
        assert client.CoreV1Api(api).list_node().items == []
        with pytest.raises(ApiException):
            client.CoreV1Api(api).read_namespace("missing")
    nodes = len(json.dumps(NODES).encode())
    assert counts.requests == {("LIST", "nodes"): 2, ("GET", "namespaces"): 1}
    assert counts.received[("LIST", "nodes")] == nodes  # the 503's body was never read
    assert counts.received[("GET", "namespaces")] > 0
    assert counts.refused == {("LIST", "nodes", 503): 1, ("GET", "namespaces", 404): 1}
    assert counts.totals()["requests"] == {"LIST nodes": 2, "GET namespaces": 1}
    assert counts.totals()["refused"] == {"LIST nodes 503": 1, "GET namespaces 404": 1}


def test_a_version_probe_is_a_list_counted_apart_too() -> None:
    """``collection_version``'s LIST of limit=1: a LIST for the API server, a probe for us."""
    counts = RequestCounts()
    for url in (
        f"{CAPI}/namespaces/ns/clusters?limit=1",
        f"{CAPI}/namespaces/ns/clusters?limit=500",
        f"{CAPI}/namespaces/ns/clusters?limit=1&watch=true",
        f"{CAPI}/namespaces/ns/clusters/limit",
    ):
        with counts.observe("GET", url, {}):
            pass
    assert counts.requests == {
        ("LIST", "clusters"): 2,
        ("WATCH", "clusters"): 1,
        ("GET", "clusters"): 1,
    }
    assert counts.probes == {("LIST", "clusters"): 1}
    assert counts.totals()["probes"] == {"LIST clusters": 1}


def test_the_collection_version_is_one_list_of_one_object() -> None:
    dyn = FakeDyn()
    for name in ("a", "b", "c"):
        dyn.add("FleetWorkload", {"metadata": {"name": name}})
    dyn.rv = 42
    resource = dyn.resources.get("calibrator.dev/v1alpha1", "FleetWorkload")
    assert kube_client.collection_version(resource, namespace=NS) == "42"
    assert dyn.probes == {"FleetWorkload": 1} and dyn.lists == {}


class _Body:
    """A urllib3 response as the watch reads it: by ``stream``, then ``release_conn``."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.released = False

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        self.released = True


class _Answer:
    status = 200

    def __init__(self, body: _Body) -> None:
        self.response: Any = body


def test_a_watchs_bytes_are_counted_as_its_events_arrive() -> None:
    counts = RequestCounts()
    body = _Body([b'{"type":"ADDED"}\n', b'{"type":"BOOKMARK"}\n'])
    answer = _Answer(body)
    with counts.observe("GET", f"{CAPI}/clusters?watch=true", {}) as answered:
        answered(answer)
    stream = answer.response.stream(amt=None, decode_content=False)
    assert next(stream) == body.chunks[0]
    assert counts.received[("WATCH", "clusters")] == len(body.chunks[0])
    assert list(stream) == body.chunks[1:]
    assert counts.received[("WATCH", "clusters")] == sum(map(len, body.chunks))
    answer.response.release_conn()  # anything else goes to the response itself
    assert body.released


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
