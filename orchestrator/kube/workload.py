"""Workload-cluster access through CAPI's ``<cluster>-kubeconfig`` secret.

The kubeconfig never leaves this process: it is decoded into memory and handed to a client, so
no secret is written to disk or travels in a workflow payload. Reads return raw JSON because
simulated workload API servers (CAPD in-memory) serve sparse objects that typed models reject.
"""

from __future__ import annotations

import base64
import json
from typing import Any, cast

import yaml
from kubernetes import client, config


def kubeconfig_for(mgmt: client.ApiClient, namespace: str, cluster: str) -> dict[str, Any]:
    """The workload cluster's kubeconfig (parsed) from the management cluster's secret."""
    secret = client.CoreV1Api(mgmt).read_namespaced_secret(f"{cluster}-kubeconfig", namespace)
    data = secret.data or {}
    raw = base64.b64decode(data["value"]).decode()
    loaded: dict[str, Any] = yaml.safe_load(raw)
    return loaded


def workload_client(mgmt: client.ApiClient, namespace: str, cluster: str) -> client.ApiClient:
    """An ApiClient for the workload cluster (built in memory from its kubeconfig secret)."""
    api: client.ApiClient = config.new_client_from_config_dict(  # type: ignore[no-untyped-call]
        kubeconfig_for(mgmt, namespace, cluster)
    )
    return api


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
