"""Workload-cluster access through CAPI's ``<cluster>-kubeconfig`` secret.

The kubeconfig never leaves this process: it is decoded into memory and handed to a client, so
no secret is written to disk by us or travels in a workflow payload. Reads return raw JSON because
simulated workload API servers (CAPD in-memory) serve sparse objects that typed models reject.

``probe`` is what a live inventory learns from one workload cluster: the group/versions its API
server serves (discovery: ``/api`` and ``/apis``, what ``kubectl api-versions`` prints) and its
Nodes' readiness and kubelet versions. It never raises for an unreachable cluster: it says why
(no secret, no permission, no answer in time, an error status), so callers can report every
cluster either way. Every request of a probe shares one deadline, and the client retries nothing,
so one probe takes at most about ``timeout`` seconds.
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from typing import Any, cast

import yaml
from kubernetes import client, config

from orchestrator.domain.snapshot import WorkloadClusterStatus
from orchestrator.kube.client import DEFAULT_REQUESTS, RequestPolicy, harden

PROBE_TIMEOUT = 10.0  # seconds per workload cluster, every request included
# The worker's workload-cluster client: an unreachable workload cluster is an observation, not a
# fault to ride out, so it is tried twice, 15 s each (the next poll asks again).
WORKLOAD_REQUESTS = RequestPolicy(timeout=15.0, attempts=2)
NODE_PAGE = 500
REASON_LIMIT = 300


def kubeconfig_for(
    mgmt: client.ApiClient, namespace: str, cluster: str, timeout: float | None = None
) -> dict[str, Any]:
    """The workload cluster's kubeconfig (parsed) from the management cluster's secret.

    ``timeout`` bounds the read (default: the client policy's, ``DEFAULT_REQUESTS.timeout``).
    """
    timeout = timeout or DEFAULT_REQUESTS.timeout
    secret = client.CoreV1Api(mgmt).read_namespaced_secret(
        f"{cluster}-kubeconfig", namespace, _request_timeout=timeout
    )
    data = secret.data or {}
    raw = base64.b64decode(data["value"]).decode()
    loaded: dict[str, Any] = yaml.safe_load(raw)
    return loaded


def workload_client(
    mgmt: client.ApiClient,
    namespace: str,
    cluster: str,
    policy: RequestPolicy = WORKLOAD_REQUESTS,
) -> client.ApiClient:
    """An ApiClient for the workload cluster (built in memory from its kubeconfig secret).

    Every request it sends has a timeout and bounded retries (``client.harden`` with ``policy``).
    """
    api: client.ApiClient = config.new_client_from_config_dict(  # type: ignore[no-untyped-call]
        kubeconfig_for(mgmt, namespace, cluster)
    )
    return harden(api, policy)


def _json(response: object) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(cast(Any, response).data)
    return loaded


def nodes(api: client.ApiClient) -> dict[str, dict[str, Any]]:
    """Node name -> Node (raw JSON)."""
    resp = client.CoreV1Api(api).list_node(_preload_content=False, _request_timeout=15)
    return {n["metadata"]["name"]: n for n in _json(resp)["items"]}


def kubelet_version(node: dict[str, Any]) -> str:
    """status.nodeInfo.kubeletVersion, or "" when the node does not report it."""
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or "")


def node_ready(node: dict[str, Any]) -> bool:
    """The Ready condition is True."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def kube_proxy_image(api: client.ApiClient) -> str:
    """kube-proxy's image: KCP moves its tag to the new version after a control-plane upgrade."""
    resp = client.AppsV1Api(api).read_namespaced_daemon_set(
        "kube-proxy", "kube-system", _preload_content=False, _request_timeout=15
    )
    ds = _json(resp)
    return str(ds["spec"]["template"]["spec"]["containers"][0]["image"])


# ------------------------------------------------------------------------------------ probe


class _Deadline:
    """Seconds left for the requests of one probe; TimeoutError once none are."""

    def __init__(self, timeout: float) -> None:
        self._end = time.monotonic() + timeout

    def left(self) -> float:
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no answer in time")
        return remaining


def _get(api: client.ApiClient, path: str, deadline: _Deadline, **query: Any) -> dict[str, Any]:
    """GET ``path`` as raw JSON (discovery paths have no generated method without a slash)."""
    request = api.param_serialize(
        "GET",
        path,
        query_params=[(k, v) for k, v in query.items() if v is not None],
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    resp: Any = api.call_api(*request, _request_timeout=deadline.left())
    resp.read()
    if not 200 <= resp.status <= 299:
        raise client.ApiException(status=resp.status, reason=resp.reason)
    loaded: dict[str, Any] = json.loads(resp.data)
    return loaded


def api_versions(api: client.ApiClient, deadline: _Deadline) -> tuple[str, ...]:
    """Served group/versions, sorted (``v1`` for the core group)."""
    core = _get(api, "/api", deadline).get("versions") or []
    groups = _get(api, "/apis", deadline).get("groups") or []
    served = {str(v) for v in core}
    served |= {
        str(v["groupVersion"])
        for g in groups
        for v in g.get("versions") or []
        if "groupVersion" in v
    }
    return tuple(sorted(served))


def node_list(api: client.ApiClient, deadline: _Deadline) -> list[dict[str, Any]]:
    """Every Node, in pages."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = _get(api, "/api/v1/nodes", deadline, limit=NODE_PAGE, **{"continue": token})
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return items


def node_summary(items: list[dict[str, Any]]) -> tuple[int, int, tuple[tuple[str, int], ...]]:
    """(Nodes, Ready Nodes, Nodes per reported kubelet version sorted by version text)."""
    kubelets = Counter(v for v in (kubelet_version(n) for n in items) if v)
    ready = sum(1 for n in items if node_ready(n))
    return len(items), ready, tuple(sorted(kubelets.items()))


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_LIMIT else line[: REASON_LIMIT - 1] + "…"


def failure_reason(err: BaseException) -> str:
    """Why a request failed, in a few words (no credentials: only status, host, error kind)."""
    status = getattr(err, "status", None)
    if isinstance(status, int) and status:
        return f"API server answered {status} {getattr(err, 'reason', '') or ''}".strip()
    if isinstance(err, TimeoutError):
        return str(err) or "no answer in time"
    cause = getattr(err, "reason", None)  # urllib3's MaxRetryError wraps the real error
    text = str(cause or err) or type(err).__name__
    if text.startswith("HTTP") and "): " in text:  # "HTTPSConnection(host=..., port=...): why"
        text = text.split("): ", 1)[1]
    return _clip(text)


def _client(kubeconfig: dict[str, Any]) -> client.ApiClient:
    """A client that does not retry: the probe's deadline, not urllib3, bounds its time."""
    cfg = client.Configuration()
    config.load_kube_config_from_dict(kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    cfg.retries = False
    return client.ApiClient(cfg)


def probe(
    mgmt: client.ApiClient, namespace: str, cluster: str, timeout: float = PROBE_TIMEOUT
) -> WorkloadClusterStatus:
    """What the workload cluster reports through its kubeconfig secret, or why it cannot."""
    deadline = _Deadline(timeout)
    secret = f"Secret {namespace}/{cluster}-kubeconfig"
    try:
        kubeconfig = kubeconfig_for(mgmt, namespace, cluster, timeout=deadline.left())
    except client.ApiException as err:
        if err.status == 404:
            return WorkloadClusterStatus(False, f"no kubeconfig: {secret} not found")
        if err.status == 403:
            return WorkloadClusterStatus(False, f"not allowed to read {secret}")
        return WorkloadClusterStatus(False, f"reading {secret}: {failure_reason(err)}")
    except (KeyError, ValueError, TypeError, yaml.YAMLError):
        return WorkloadClusterStatus(False, f"{secret} holds no kubeconfig under data.value")
    except Exception as err:
        return WorkloadClusterStatus(False, f"reading {secret}: {failure_reason(err)}")
    try:
        api = _client(kubeconfig)
    except Exception as err:
        return WorkloadClusterStatus(
            False, f"unusable kubeconfig in {secret}: {failure_reason(err)}"
        )
    where = api.configuration.host
    try:
        versions = api_versions(api, deadline)
        total, ready, kubelets = node_summary(node_list(api, deadline))
    except Exception as err:
        return WorkloadClusterStatus(False, f"{where}: {failure_reason(err)}")
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return WorkloadClusterStatus(True, "", versions, total, ready, kubelets)
