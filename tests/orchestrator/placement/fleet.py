"""Snapshot builders for placement tests (everything goes through the file format), and a plugin."""

from __future__ import annotations

from typing import Any

from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Workload
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import FITS, FilterResult, unfit


def cluster(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    version: str = "v1.33.5",
    taints: list[dict[str, str]] | None = None,
    capacity: dict[str, str] | None = None,
    allocated: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A cluster entry; capacity defaults to 16 cpu / 64Gi, none allocated."""
    item: dict[str, Any] = {
        "name": name,
        "labels": labels if labels is not None else {},
        "controlPlane": {"version": version},
        "taints": taints or [],
        "capacity": capacity if capacity is not None else {"cpu": "16", "memory": "64Gi"},
    }
    if allocated:
        item["allocated"] = allocated
    return item


def workload(
    name: str,
    *,
    namespace: str = "default",
    apis: list[str] | None = None,
    replicas: int = 1,
    requests: dict[str, str] | None = None,
    **placement: Any,
) -> dict[str, Any]:
    """A workload entry; keyword arguments are placement fields in file-format spelling."""
    return {
        "name": name,
        "namespace": namespace,
        "apis": apis or ["apps/v1/Deployment"],
        "replicas": replicas,
        "requests": requests or {"cpu": "100m", "memory": "128Mi"},
        "placement": placement,
    }


def fleet(
    clusters: list[dict[str, Any]],
    workloads: list[dict[str, Any]] | None = None,
    network: list[dict[str, Any]] | None = None,
) -> FleetSnapshot:
    """A validated snapshot."""
    return snapshot_from_mapping(
        {
            "apiVersion": "calibrator.dev/v1alpha1",
            "kind": "FleetSnapshot",
            "availableVersions": ["v1.33.5"],
            "clusters": clusters,
            "workloads": workloads or [],
            "network": network or [],
        }
    )


def single(
    cluster_item: dict[str, Any], workload_item: dict[str, Any], **extra: Any
) -> tuple[PlacementContext, Workload, Cluster]:
    """One cluster and one workload, ready for a direct plugin call."""
    snapshot = fleet(
        [cluster_item, *extra.get("others", [])], [workload_item], extra.get("network")
    )
    ctx = PlacementContext(snapshot)
    return ctx, snapshot.workloads[0], snapshot.cluster(cluster_item["name"])


class RejectOdd:
    """A dynamic filter with no batch form: rejects clusters whose name ends in an odd digit."""

    name = "RejectOdd"
    cluster_facts: frozenset[Any] = frozenset({"capacity"})
    workload_facts: frozenset[Any] = frozenset()

    def filter(self, ctx: object, workload: object, cluster: Any) -> FilterResult:
        return unfit("odd") if int(cluster.name[-1]) % 2 else FITS
