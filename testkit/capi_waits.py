"""Bounded waits and CAPI look-ups on a live management cluster (integration tests, benchmarks)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.kube import capi, workload

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float, interval: float = 2.0) -> T:
    """Poll until ``check`` returns something truthy; fail with the last observation."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except Exception as err:  # transient API errors while things start
            result, last = None, err
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def get(dyn: DynamicClient, kind: tuple[str, str], namespace: str, name: str) -> dict[str, Any]:
    """One object of ``kind`` (apiVersion, kind) as a plain dict."""
    res = dyn.resources.get(api_version=kind[0], kind=kind[1])
    obj: dict[str, Any] = res.get(name=name, namespace=namespace).to_dict()
    return obj


def list_for_cluster(
    dyn: DynamicClient, kind: tuple[str, str], namespace: str, cluster: str
) -> list[dict[str, Any]]:
    """The objects of ``kind`` labelled as ``cluster``'s."""
    res = dyn.resources.get(api_version=kind[0], kind=kind[1])
    items = res.get(
        namespace=namespace, label_selector=f"{capi.CLUSTER_NAME_LABEL}={cluster}"
    ).to_dict()["items"]
    return list(items)


def patch(
    dyn: DynamicClient, kind: tuple[str, str], namespace: str, name: str, body: dict[str, Any]
) -> None:
    """A JSON merge patch of one object, as ``kubectl patch --type merge`` sends it."""
    res = dyn.resources.get(api_version=kind[0], kind=kind[1])
    res.patch(
        body=body, name=name, namespace=namespace, content_type="application/merge-patch+json"
    )


def machines(dyn: DynamicClient, namespace: str, cluster: str) -> list[dict[str, Any]]:
    """The cluster's Machines."""
    return list_for_cluster(dyn, capi.MACHINE, namespace, cluster)


def workload_nodes(
    mgmt: client.ApiClient, namespace: str, cluster: str
) -> dict[str, dict[str, Any]]:
    """The workload cluster's Nodes by name, read through its kubeconfig Secret."""
    return workload.nodes(workload.workload_client(mgmt, namespace, cluster))


def kube_proxy_image(mgmt: client.ApiClient, namespace: str, cluster: str) -> str:
    """The kube-proxy image the workload cluster runs."""
    return workload.kube_proxy_image(workload.workload_client(mgmt, namespace, cluster))


def fully_at_version(  # noqa: PLR0917 - the integration tests call it positionally
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    namespace: str,
    cluster: str,
    version: str,
    expected_machines: int,
    replaced: frozenset[str] = frozenset(),
) -> dict[str, Any] | None:
    """A summary once the cluster is at ``version``, else None.

    At ``version``: every Machine at it with a Ready Node in the workload cluster, none of
    ``replaced`` left, the Cluster Available.

    CAPD's in-memory Nodes (v1.13.4) carry no status.nodeInfo, so kubeletVersion is checked only
    when a Node reports it; Machine.spec.version plus a Ready Node per Machine is what is observable.
    """
    ms = machines(dyn, namespace, cluster)
    if len(ms) != expected_machines:
        return None
    if any(m["spec"].get("version") != version for m in ms):
        return None
    if replaced & {m["metadata"]["name"] for m in ms}:
        return None
    if any(not (m.get("status") or {}).get("nodeRef") for m in ms):
        return None
    nodes = workload_nodes(mgmt, namespace, cluster)
    for m in ms:
        node = nodes.get(m["status"]["nodeRef"]["name"])
        if node is None or not workload.node_ready(node):
            return None
        kubelet = workload.kubelet_version(node)
        if kubelet and kubelet != version:
            return None
    cluster_obj = get(dyn, capi.CLUSTER, namespace, cluster)
    if not capi.is_true(cluster_obj, "Available"):
        return None
    return {"machines": sorted(m["metadata"]["name"] for m in ms), "nodes": sorted(nodes)}
