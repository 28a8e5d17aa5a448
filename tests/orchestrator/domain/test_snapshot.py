from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.snapshot import SnapshotError
from orchestrator.domain.snapshot_dump import dump_snapshot
from orchestrator.domain.snapshot_load import (
    ContentMemo,
    load_snapshot,
    snapshot_from_mapping,
    with_workloads,
    workload_from_mapping,
)

EXAMPLE = Path(__file__).parents[3] / "examples" / "fleet.yaml"


def minimal() -> dict[str, Any]:
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetSnapshot",
        "availableVersions": ["v1.31.1", "v1.32.0"],
        "clusters": [
            {
                "name": "a",
                "labels": {"env": "prod"},
                "controlPlane": {"version": "v1.31.1", "replicas": 3},
                "machineDeployments": [{"name": "md-0", "version": "v1.31.1", "replicas": 2}],
            }
        ],
        "workloads": [
            {"name": "w", "apis": ["apps/v1/Deployment"], "placement": {"clusters": ["a"]}}
        ],
    }


def test_example_loads_and_round_trips() -> None:
    snap = load_snapshot(EXAMPLE.read_text())
    assert len(snap.clusters) >= 12
    assert {c.labels["env"] for c in snap.clusters} == {"prod", "staging", "dev"}
    assert len({c.region for c in snap.clusters}) >= 3
    assert load_snapshot(dump_snapshot(snap)) == snap


def test_minimal_defaults() -> None:
    snap = snapshot_from_mapping(minimal())
    w = snap.workloads[0]
    assert w.namespace == "default" and w.replicas == 1 and w.key == "default/w"
    assert w.apis == (ApiRef("apps", "v1", "Deployment"),)
    assert snap.cluster("a").control_plane.replicas == 3


def _set(doc: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    *head, last = path.split(".")
    node: Any = doc
    for part in head:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "clusters.0.controlPlane.version",
            "v1.3x",
            "clusters[0].controlPlane.version: invalid Kubernetes version 'v1.3x'",
        ),
        (
            "clusters.0.machineDeployments.0.version",
            "1.31",
            "clusters[0].machineDeployments[0].version: invalid Kubernetes version '1.31'",
        ),
        (
            "availableVersions",
            ["v1.31.1", "nope"],
            "availableVersions[1]: invalid Kubernetes version 'nope'",
        ),
        ("availableVersions", ["v1.31.1", "v1.31.1"], "availableVersions: duplicate versions"),
        ("clusters.0.name", _DELETE, "clusters[0]: missing required field 'name'"),
        ("clusters.0.controlPlane", _DELETE, "clusters[0]: missing required field 'controlPlane'"),
        (
            "clusters.0.controlPlane.version",
            _DELETE,
            "clusters[0].controlPlane: missing required field 'version'",
        ),
        ("clusters", _DELETE, "snapshot: missing required field 'clusters'"),
        (
            "clusters.0.controlPlane.replicas",
            0,
            "clusters[0].controlPlane.replicas: must be an integer from 1 to 1,000,000, got 0",
        ),
        (
            "clusters.0.labels",
            {"env": ["x"]},
            "clusters[0].labels.env: label values must be strings",
        ),
        (
            "clusters.0.taints",
            [{"key": "k", "effect": "Sometimes"}],
            "clusters[0].taints[0]: invalid taint effect 'Sometimes'",
        ),
        (
            "clusters.0.capacity",
            {"cpu": "lots"},
            "clusters[0].capacity: invalid cpu quantity 'lots'",
        ),
        ("clusters.0.colour", "blue", "clusters[0]: unknown field(s) colour"),
        (
            "workloads.0.placement.clusters",
            ["ghost"],
            "workloads[0] (default/w).placement.clusters: unknown cluster 'ghost'",
        ),
        ("workloads.0.apis", ["CronJob"], "workloads[0].apis[0]: invalid API 'CronJob'"),
        (
            "workloads.0.replicas",
            -1,
            "workloads[0].replicas: must be an integer from 0 to 1,000,000, got -1",
        ),
        (
            "workloads.0.placement.replicaScheduling",
            {"type": "Spread"},
            "replicaScheduling.type: must be one of Duplicated, Weighted, Dynamic, Aggregated",
        ),
        (
            "workloads.0.placement.maxLatency",
            {"rttMs": 5},
            "maxLatency: give exactly one of 'cluster' or 'region'",
        ),
        (
            "workloads.0.placement.tolerations",
            [{"operator": "Equal"}],
            "tolerations[0]: an empty key needs operator Exists",
        ),
        ("kind", "Fleet", "snapshot.kind: expected FleetSnapshot, got 'Fleet'"),
        ("apiVersion", "v1", "snapshot.apiVersion: expected calibrator.dev/v1alpha1"),
    ],
)
def test_bad_input_gives_one_precise_error(path: str, value: object, message: str) -> None:
    with pytest.raises(SnapshotError) as err:
        snapshot_from_mapping(_set(minimal(), path, value))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_duplicate_names() -> None:
    doc = minimal()
    doc["clusters"].append(dict(doc["clusters"][0]))
    with pytest.raises(SnapshotError, match="duplicate cluster name"):
        snapshot_from_mapping(doc)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("clusters: [\n  - name: a\n bad", "snapshot is not valid YAML at line"),
        ("", "snapshot is empty"),
        ("- a\n- b\n", "snapshot: expected a mapping, got list"),
    ],
)
def test_malformed_text(text: str, message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        load_snapshot(text)


BAD = "Dev_AP 2!"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "clusters.0.name",
            "../../etc/prod-eu-1",
            "clusters[0].name: must be a DNS-1123 subdomain",
        ),
        ("clusters.0.name", "A", "clusters[0].name: must be a DNS-1123 subdomain"),
        ("clusters.0.name", "a" * 64, "clusters[0].name: must be at most 63 characters"),
        ("clusters.0.name", "", "clusters[0].name: must be a non-empty string"),
        (
            "clusters.0.machineDeployments.0.name",
            "MD 0",
            "machineDeployments[0].name: must be a DNS-1123 subdomain",
        ),
        ("workloads.0.name", "W", "workloads[0].name: must be a DNS-1123 subdomain"),
        ("workloads.0.name", "w" * 254, "workloads[0].name: must be at most 253 characters"),
        ("workloads.0.namespace", "a.b", "workloads[0].namespace: must be a DNS-1123 label"),
        ("workloads.0.namespace", "Default", "workloads[0].namespace: must be a DNS-1123 label"),
        ("workloads.0.placement.clusters", [BAD], "placement.clusters[0]: must be a DNS-1123"),
        (
            "workloads.0.placement.clusters",
            [{"name": BAD, "replicas": 1}],
            "placement.clusters[0].name: must be a DNS-1123",
        ),
        (
            "workloads.0.placement.clusterAffinity",
            {"clusterNames": [BAD]},
            "clusterAffinity.clusterNames[0]: must be a DNS-1123",
        ),
        (
            "workloads.0.placement.clusterAffinity",
            {"exclude": [BAD]},
            "clusterAffinity.exclude[0]: must be a DNS-1123",
        ),
        (
            "workloads.0.placement.replicaScheduling",
            {"type": "Weighted", "weights": [{"cluster": BAD}]},
            "weights[0].cluster: must be a DNS-1123",
        ),
        (
            "workloads.0.placement.maxLatency",
            {"cluster": BAD, "rttMs": 5},
            "maxLatency.cluster: must be a DNS-1123",
        ),
        ("network", [{"from": BAD, "to": "a", "rttMs": 1}], "network[0].from: must be a DNS-1123"),
        (
            "network",
            [{"from": "a", "to": "a", "rttMs": 1}],
            "network[0]: from and to are the same cluster 'a'",
        ),
        (
            "clusters.0.controlPlane.version",
            "v1.31.1\n",
            "clusters[0].controlPlane.version: invalid Kubernetes version 'v1.31.1\\n': "
            "leading or trailing whitespace",
        ),
        (
            "clusters.0.machineDeployments.0.version",
            " v1.31.1",
            "machineDeployments[0].version: invalid Kubernetes version ' v1.31.1'",
        ),
        ("availableVersions", ["v1.31.1", "v1.32.0 "], "availableVersions[1]: invalid"),
        ("workloads.0.apis", ["v1/ConfigMap "], "workloads[0].apis[0]: invalid API"),
        ("workloads.0.apis", ["apps/v1/deployment"], "workloads[0].apis[0]: invalid API"),
        ("workloads.0.apis", ["Apps/v1/Deployment"], "workloads[0].apis[0]: invalid API"),
        ("workloads.0.apis", ["apps/1/Deployment"], "workloads[0].apis[0]: invalid API"),
    ],
)
def test_names_and_versions_are_what_kubernetes_accepts(
    path: str, value: object, message: str
) -> None:
    with pytest.raises(SnapshotError) as err:
        snapshot_from_mapping(_set(minimal(), path, value))
    assert message in str(err.value)


def test_kubelet_versions_are_not_padded() -> None:
    doc = minimal()
    doc["clusters"][0]["workloadCluster"] = {
        "reachable": True,
        "nodes": 1,
        "kubeletVersions": {"v1.31.1\n": 1},
    }
    with pytest.raises(SnapshotError, match="kubeletVersions: invalid version"):
        snapshot_from_mapping(doc)


def test_network_links_must_name_known_clusters() -> None:
    doc = minimal()
    doc["network"] = [{"from": "a", "to": "b", "rttMs": 3}]
    with pytest.raises(SnapshotError, match=r"network\[0\]: unknown cluster 'b'"):
        snapshot_from_mapping(doc)


def test_dump_is_yaml_with_contract_keys() -> None:
    snap = snapshot_from_mapping(minimal())
    doc = yaml.safe_load(dump_snapshot(snap))
    assert list(doc)[:5] == ["apiVersion", "kind", "availableVersions", "clusters", "workloads"]


REACHABLE = {
    "reachable": True,
    "apiVersions": ["apps/v1", "batch/v1", "v1"],
    "nodes": 3,
    "readyNodes": 2,
    "kubeletVersions": {"v1.31.1": 2, "v1.30.4": 1},
}


@pytest.mark.parametrize(
    "status",
    [
        REACHABLE,
        {"reachable": True, "apiVersions": [], "nodes": 2, "readyNodes": 2, "kubeletVersions": {}},
        {"reachable": False, "reason": "no kubeconfig: Secret ns/a-kubeconfig not found"},
    ],
)
def test_workload_cluster_status_round_trips(status: dict[str, Any]) -> None:
    doc = minimal()
    doc["clusters"][0]["workloadCluster"] = status
    snap = snapshot_from_mapping(doc)
    observed = snap.cluster("a").workload_cluster
    assert observed is not None and observed.reachable is status["reachable"]
    assert observed.to_json() == status
    assert load_snapshot(dump_snapshot(snap)) == snap


def test_a_cluster_without_workload_cluster_status_was_not_probed() -> None:
    snap = snapshot_from_mapping(minimal())
    assert snap.cluster("a").workload_cluster is None
    assert "workloadCluster" not in dump_snapshot(snap)


def test_workload_cluster_status_describes_itself_for_tables() -> None:
    doc = minimal()
    doc["clusters"][0]["workloadCluster"] = REACHABLE
    observed = snapshot_from_mapping(doc).cluster("a").workload_cluster
    assert observed is not None
    assert observed.describe() == (
        "2/3 Nodes Ready, kubelet v1.31.1 x2, v1.30.4 x1, 3 API versions"
    )


WC = "clusters[0].workloadCluster"


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({"reason": "x"}, f"{WC}: missing required field 'reachable'"),
        ({"reachable": "false", "reason": "x"}, f"{WC}.reachable: must be true or false"),
        ({"reachable": False}, f"{WC}: missing required field 'reason'"),
        ({"reachable": False, "reason": " "}, f"{WC}.reason: must be a non-empty string"),
        ({"reachable": False, "reason": "x" * 1001}, f"{WC}.reason: must be a non-empty string"),
        ({"reachable": False, "reason": "x", "nodes": 1}, f"{WC}: unknown field(s) nodes"),
        ({**REACHABLE, "reason": "x"}, f"{WC}: unknown field(s) reason"),
        ({**REACHABLE, "apiVersions": ["apps"]}, f"{WC}.apiVersions[0]: expected group/version"),
        ({**REACHABLE, "apiVersions": ["Apps/v1"]}, f"{WC}.apiVersions[0]: expected group/"),
        ({**REACHABLE, "apiVersions": ["v1", "v1"]}, f"{WC}.apiVersions: duplicate entries"),
        ({**REACHABLE, "apiVersions": "v1"}, f"{WC}.apiVersions: expected a list"),
        ({**REACHABLE, "nodes": -1}, f"{WC}.nodes: must be an integer from 0"),
        ({**REACHABLE, "readyNodes": 4}, f"{WC}.readyNodes: must be an integer from 0 to 3"),
        ({**REACHABLE, "kubeletVersions": {"v1.31.1": 0}}, "kubeletVersions.v1.31.1: must be"),
        ({**REACHABLE, "kubeletVersions": {"v1.31.1": 4}}, "counts more than the 3 Node(s)"),
        ({**REACHABLE, "kubeletVersions": {"": 1}}, f"{WC}.kubeletVersions: invalid version"),
        ({**REACHABLE, "kubeletVersions": ["v1.31.1"]}, f"{WC}.kubeletVersions: expected a map"),
    ],
)
def test_workload_cluster_status_is_strict(status: dict[str, Any], message: str) -> None:
    doc = minimal()
    doc["clusters"][0]["workloadCluster"] = status
    with pytest.raises(SnapshotError) as err:
        snapshot_from_mapping(doc)
    assert message in str(err.value)


def test_workload_cluster_api_version_list_is_bounded() -> None:
    doc = minimal()
    doc["clusters"][0]["workloadCluster"] = {
        **REACHABLE,
        "apiVersions": [f"g{i}.example.com/v1" for i in range(1001)],
    }
    with pytest.raises(SnapshotError, match=r"apiVersions: more than 1000 entries"):
        snapshot_from_mapping(doc)


def _workloads_with(placements: list[dict[str, Any]], requests: list[object]) -> dict[str, Any]:
    doc = minimal()
    doc["workloads"] = [
        {"name": f"w{i}", "placement": p, "requests": {"cpu": r}}
        for i, (p, r) in enumerate(zip(placements, requests, strict=True))
    ]
    return doc


def test_parts_parsed_once_are_still_parsed_from_their_own_text() -> None:
    """The loader parses each distinct part once (``_by_content``); every part of the key counts."""
    aff: list[dict[str, Any]] = [
        {"clusterAffinities": [{"name": "eu", "matchLabels": {"env": "prod"}}]},
        {"clusterAffinities": [{"name": "us", "matchLabels": {"env": "dev"}}]},
        {"clusterAffinity": {"matchLabels": {"env": "prod"}}},
        {"clusterAffinity": {"matchLabels": {"env": "prod"}}},
    ]
    snap = snapshot_from_mapping(_workloads_with(aff, ["1", "2", "1", 1]))
    w0, w1, w2, w3 = snap.workloads
    assert w0.placement.affinities[0].name == "eu"
    assert w1.placement.affinities[0].name == "us"
    assert w0.placement.affinities != w1.placement.affinities
    # Equal parts are one object, however they were written (1 and "1" CPU).
    assert w2.placement.affinities is w3.placement.affinities
    assert w2.requests is w3.requests
    assert w0.requests is w2.requests
    assert w1.requests != w0.requests


def test_workloads_parsed_one_by_one_make_the_same_snapshot() -> None:
    """``workload_from_mapping`` + ``with_workloads`` are the whole parse's rules, split."""
    doc = minimal()
    doc["workloads"].append({"name": "v", "replicas": 2, "placement": {"clusters": ["a"]}})
    memo = ContentMemo()
    parsed = tuple(
        workload_from_mapping(w, f"workloads[{i}]", memo) for i, w in enumerate(doc["workloads"])
    )
    base = snapshot_from_mapping(dict(doc, workloads=[]))
    assert with_workloads(base, parsed) == snapshot_from_mapping(doc)


@pytest.mark.parametrize(
    "extra",
    [
        {"name": "w", "placement": {"clusters": ["a"]}},  # the key default/w again
        {"name": "v", "placement": {"clusterAffinity": {"clusterNames": ["typo"]}}},
    ],
    ids=["duplicate", "unknown cluster"],
)
def test_with_workloads_refuses_as_the_whole_parse_does(extra: dict[str, Any]) -> None:
    doc = minimal()
    doc["workloads"].append(extra)
    with pytest.raises(SnapshotError) as whole:
        snapshot_from_mapping(doc)
    parsed = tuple(
        workload_from_mapping(w, f"workloads[{i}]") for i, w in enumerate(doc["workloads"])
    )
    with pytest.raises(SnapshotError) as split:
        with_workloads(snapshot_from_mapping(dict(doc, workloads=[])), parsed)
    assert str(split.value) == str(whole.value)
