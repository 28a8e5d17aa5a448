"""Writing a FleetSnapshot document (pure): the inverse of ``snapshot_load``; round-trips."""

from __future__ import annotations

from typing import cast

import yaml

from orchestrator.domain.location import (
    cluster_location,
)
from orchestrator.domain.snapshot import (
    API_VERSION,
    KIND,
    ClusterAffinity,
    FleetSnapshot,
    PlacementPolicy,
    Resources,
)


def _affinity_to_json(aff: ClusterAffinity) -> dict[str, object]:
    out: dict[str, object] = {}
    if aff.name:
        out["name"] = aff.name
    out.update(aff.selector.to_json())
    if aff.cluster_names:
        out["clusterNames"] = list(aff.cluster_names)
    if aff.exclude:
        out["exclude"] = list(aff.exclude)
    if not aff.field_selector.is_empty():
        out["fieldSelector"] = aff.field_selector.to_json()
    return out


def _placement_to_json(policy: PlacementPolicy) -> dict[str, object]:
    out: dict[str, object] = {}
    if len(policy.affinities) == 1:
        out["clusterAffinity"] = _affinity_to_json(policy.affinities[0])
    elif policy.affinities:
        out["clusterAffinities"] = [_affinity_to_json(a) for a in policy.affinities]
    out["tolerations"] = [
        {
            k: v
            for k, v in (
                ("key", t.key),
                ("operator", t.operator),
                ("value", t.value),
                ("effect", t.effect),
                ("tolerationSeconds", t.toleration_seconds),
            )
            if v not in ("", None)
        }
        for t in policy.tolerations
    ]
    if policy.current_replicas is None:
        out["clusters"] = list(policy.clusters)
    else:
        out["clusters"] = [
            {"name": n, "replicas": r}
            for n, r in zip(policy.clusters, policy.current_replicas, strict=True)
        ]
    rs = policy.replica_scheduling
    if rs.type != "Duplicated" or rs.weights:
        rs_out: dict[str, object] = {"type": rs.type}
        if rs.weights:
            rs_out["weights"] = [
                {
                    k: v
                    for k, v in (
                        ("cluster", w.cluster),
                        ("matchLabels", dict(w.selector.match_labels) if w.selector else None),
                        ("weight", w.weight),
                        ("minReplicas", w.min_replicas or None),
                        ("maxReplicas", w.max_replicas),
                    )
                    if v is not None
                }
                for w in rs.weights
            ]
        out["replicaScheduling"] = rs_out
    if policy.max_latency:
        lat = policy.max_latency
        out["maxLatency"] = (
            {"cluster": lat.to_cluster} if lat.to_cluster else {"region": lat.to_region}
        )
        cast(dict[str, object], out["maxLatency"])["rttMs"] = lat.max_rtt_ms
    if policy.max_clusters is not None:
        out["maxClusters"] = policy.max_clusters
    if policy.spread_constraints:
        out["spreadConstraints"] = [
            {
                k: v
                for k, v in (
                    ("spreadByField", c.field),
                    ("minGroups", c.min_groups),
                    ("maxGroups", c.max_groups),
                )
                if v is not None
            }
            for c in policy.spread_constraints
        ]
    if policy.observed_generation is not None:
        out["observedGeneration"] = policy.observed_generation
    return out


def snapshot_to_mapping(snapshot: FleetSnapshot) -> dict[str, object]:
    """The file form of a snapshot (what ``load_snapshot`` reads back to an equal snapshot)."""
    clusters: list[dict[str, object]] = []
    for c in snapshot.clusters:
        item: dict[str, object] = {
            "name": c.name,
            "labels": dict(c.labels),
            "controlPlane": {
                "version": str(c.control_plane.version),
                "replicas": c.control_plane.replicas,
            },
            "machineDeployments": [
                {"name": md.name, "version": str(md.version), "replicas": md.replicas}
                for md in c.machine_deployments
            ],
            "taints": [t.to_json() for t in c.taints],
        }
        if not c.topology:
            item["topology"] = False
        if c.capacity is not None:
            item["capacity"] = c.capacity.to_json()
        if c.allocated != Resources():
            item["allocated"] = c.allocated.to_json()
        if c.workload_cluster is not None:
            item["workloadCluster"] = c.workload_cluster.to_json()
        # Only fields the labels do not imply: the file stays as it was for label-only fleets.
        derived = cluster_location(c.labels)
        if c.provider is not None and c.provider != derived.provider:
            item["provider"] = c.provider
        if c.region is not None and c.region != derived.region:
            item["region"] = c.region
        if c.zones and c.zones != derived.zones:
            item["zones"] = list(c.zones)
        clusters.append(item)
    workloads: list[dict[str, object]] = []
    for w in snapshot.workloads:
        entry: dict[str, object] = {
            "name": w.name,
            "namespace": w.namespace,
            "apis": [str(a) for a in w.apis],
            "replicas": w.replicas,
        }
        if w.requests != Resources():
            entry["requests"] = w.requests.to_json()
        entry["placement"] = _placement_to_json(w.placement)
        if w.generation is not None:
            entry["generation"] = w.generation
        workloads.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "availableVersions": [str(v) for v in snapshot.available_versions],
        "clusters": clusters,
        "workloads": workloads,
        "network": [
            {"from": n.source, "to": n.target, "rttMs": n.rtt_ms} for n in snapshot.network
        ],
    }


def dump_snapshot(snapshot: FleetSnapshot) -> str:
    """YAML text of a snapshot."""
    return yaml.safe_dump(snapshot_to_mapping(snapshot), sort_keys=False)
