"""Workload-cluster access through CAPI's ``<cluster>-kubeconfig`` secret.

The kubeconfig never leaves this process: it is decoded into memory and handed to a client, so
no secret is written to disk by us or travels in a workflow payload. Reads return raw JSON because
simulated workload API servers (CAPD in-memory) serve sparse objects that typed models reject.

``probe`` is what a live inventory learns from one workload cluster: the group/versions its API
server serves (discovery: ``/api`` and ``/apis``, what ``kubectl api-versions`` prints), its
Nodes' readiness and kubelet versions, and what the cluster is seen doing (deprecated APIs in
use, PodDisruptionBudgets that block drains: ``apiusage``). It never raises for an unreachable
cluster: it says why (no secret, no permission, no answer in time, an error status), so callers
can report every cluster either way. Every request of a probe shares one deadline, and the
client retries nothing, so one probe takes at most about ``timeout`` seconds.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any, cast

import yaml
from kubernetes import client, config

from orchestrator.domain.snapshot import WorkloadClusterStatus
from orchestrator.kube import bounded
from orchestrator.kube.apiusage import Observation, observe
from orchestrator.kube.bounded import Deadline, get_json, no_retry_client
from orchestrator.kube.client import DEFAULT_REQUESTS, RequestPolicy, harden

# Seconds per workload cluster, every request included. 10 s were enough to read discovery
# and Nodes (REACH_TIMEOUT, still their bound); observing the cluster (apiusage: every
# apiserver's /metrics of a few MB, discovery per deprecated group/version, paginated LISTs of
# PDBs and of the catalog's kinds) needs more on a busy cluster, so the probe may take 30 s.
REACH_TIMEOUT = 10.0
PROBE_TIMEOUT = 30.0
OBSERVE_TIMEOUT = 30.0
# The worker's workload-cluster client: an unreachable workload cluster is an observation, not a
# fault to ride out, so it is tried twice, 15 s each (the next poll asks again).
WORKLOAD_REQUESTS = RequestPolicy(timeout=15.0, attempts=2)
NODE_PAGE = 500
failure_reason = bounded.failure_reason  # moved to bounded; the CLI still asks this module


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


def api_versions(api: client.ApiClient, deadline: Deadline) -> tuple[str, ...]:
    """Served group/versions, sorted (``v1`` for the core group)."""
    core = get_json(api, "/api", deadline).get("versions") or []
    groups = get_json(api, "/apis", deadline).get("groups") or []
    served = {str(v) for v in core}
    served |= {
        str(v["groupVersion"])
        for g in groups
        for v in g.get("versions") or []
        if "groupVersion" in v
    }
    return tuple(sorted(served))


def node_list(api: client.ApiClient, deadline: Deadline) -> list[dict[str, Any]]:
    """Every Node, in pages."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = get_json(api, "/api/v1/nodes", deadline, {"limit": NODE_PAGE, "continue": token})
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return items


def node_summary(items: list[dict[str, Any]]) -> tuple[int, int, tuple[tuple[str, int], ...]]:
    """(Nodes, Ready Nodes, Nodes per reported kubelet version sorted by version text)."""
    kubelets = Counter(v for v in (kubelet_version(n) for n in items) if v)
    ready = sum(1 for n in items if node_ready(n))
    return len(items), ready, tuple(sorted(kubelets.items()))


class WorkloadUnreachable(Exception):
    """The workload cluster cannot be asked: the message says why (secret, permission, answer)."""


def _open(
    mgmt: client.ApiClient, namespace: str, cluster: str, deadline: Deadline
) -> tuple[dict[str, Any], client.ApiClient]:
    """(The kubeconfig, a no-retry client of the cluster), or WorkloadUnreachable saying why."""
    secret = f"Secret {namespace}/{cluster}-kubeconfig"
    try:
        kubeconfig = kubeconfig_for(mgmt, namespace, cluster, timeout=deadline.left())
    except client.ApiException as err:
        if err.status == 404:
            raise WorkloadUnreachable(f"no kubeconfig: {secret} not found") from err
        if err.status == 403:
            raise WorkloadUnreachable(f"not allowed to read {secret}") from err
        raise WorkloadUnreachable(f"reading {secret}: {failure_reason(err)}") from err
    except (KeyError, ValueError, TypeError, yaml.YAMLError) as err:
        raise WorkloadUnreachable(f"{secret} holds no kubeconfig under data.value") from err
    except Exception as err:
        raise WorkloadUnreachable(f"reading {secret}: {failure_reason(err)}") from err
    try:
        return kubeconfig, no_retry_client(kubeconfig)
    except Exception as err:
        raise WorkloadUnreachable(
            f"unusable kubeconfig in {secret}: {failure_reason(err)}"
        ) from err


def probe(
    mgmt: client.ApiClient,
    namespace: str,
    cluster: str,
    timeout: float = PROBE_TIMEOUT,
    now: datetime | None = None,
) -> WorkloadClusterStatus:
    """What the workload cluster reports through its kubeconfig secret, or why it cannot.

    Reaching it (the secret, discovery, Nodes) has ``REACH_TIMEOUT`` of the ``timeout``, as the
    probe had before it observed anything, so an unreachable cluster costs no more than it did;
    the observation (``apiusage.observe``: every apiserver's ``/metrics``, the PDB and catalog
    kind LISTs) gets the rest, and what it could not finish is named in
    ``observation_partial``. ``now`` (default: the clock) stamps the observed usage.
    """
    deadline = Deadline(timeout)
    reach = Deadline(min(timeout, REACH_TIMEOUT))
    try:
        kubeconfig, api = _open(mgmt, namespace, cluster, reach)
    except WorkloadUnreachable as err:
        return WorkloadClusterStatus(False, str(err))
    where = api.configuration.host
    try:
        versions = api_versions(api, reach)
        total, ready, kubelets = node_summary(node_list(api, reach))
        seen = observe(api, kubeconfig, deadline, now or datetime.now(UTC), versions)
    except Exception as err:
        return WorkloadClusterStatus(False, f"{where}: {failure_reason(err)}")
    finally:
        api.close()  # type: ignore[no-untyped-call]
    return WorkloadClusterStatus(
        True,
        "",
        versions,
        total,
        ready,
        kubelets,
        api_usage=seen.api_usage,
        disruption_blockers=seen.disruption_blockers,
        observation_partial=seen.observation_partial,
    )


def observe_cluster(
    mgmt: client.ApiClient,
    namespace: str,
    cluster: str,
    now: datetime,
    timeout: float = OBSERVE_TIMEOUT,
    *,
    blockers_only: bool = False,
) -> Observation:
    """(api_usage, disruption_blockers, observation_partial) of one workload cluster at ``now``.

    For the worker's activity that records observations before each step. Raises
    ``WorkloadUnreachable`` (the message names the secret or the server and why) when the
    cluster cannot be asked at all; an apiserver instance, a LIST or the deadline failing later
    only makes ``observation_partial`` say so (``apiusage.observe``).
    """
    deadline = Deadline(timeout)
    kubeconfig, api = _open(mgmt, namespace, cluster, deadline)
    try:
        try:
            versions = api_versions(api, deadline)
        except Exception as err:
            where = api.configuration.host
            raise WorkloadUnreachable(f"{where}: {failure_reason(err)}") from err
        return observe(api, kubeconfig, deadline, now, versions, blockers_only=blockers_only)
    finally:
        api.close()  # type: ignore[no-untyped-call]
