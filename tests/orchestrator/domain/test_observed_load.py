"""The FleetSnapshot's observed fields: round trip, old documents, one error per bad field."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.observed import MAX_BLOCKERS, MAX_USAGES, ApiUsage, DisruptionBlocker
from orchestrator.domain.snapshot import SnapshotError, WorkloadClusterStatus
from orchestrator.domain.snapshot_dump import dump_snapshot
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping

EXAMPLE = Path(__file__).parents[3] / "examples" / "fleet.yaml"
WC = "clusters[0].workloadCluster"
METRIC: dict[str, Any] = {
    "api": "storage.k8s.io/v1alpha1/VolumeAttributesClass",
    "resource": "volumeattributesclasses",
    "source": "metric",
    "removedRelease": "1.35",
    "requests": 1204,
    "firstSeen": "2026-12-05T10:02:00Z",
    "lastSeen": "2026-12-05T11:00:00Z",
    "observedAt": "2026-12-05T11:00:00Z",
    "example": "10.0.0.5:6443",
}
STORED: dict[str, Any] = {
    "api": "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema",
    "resource": "flowschemas",
    "source": "managedFields",
    "removedRelease": "1.32",
    "objects": 3,
    "firstSeen": "2026-12-05T10:02:00Z",
    "lastSeen": "2026-12-05T10:02:00Z",
    "observedAt": "2026-12-05T10:02:00Z",
}
BLOCKER: dict[str, Any] = {
    "namespace": "shop",
    "name": "web",
    "reason": "maxUnavailable is 0",
    "expectedPods": 2,
}


def doc_with(**observed: object) -> dict[str, Any]:
    status: dict[str, Any] = {
        "reachable": True,
        "apiVersions": ["v1"],
        "nodes": 1,
        "readyNodes": 1,
        "kubeletVersions": {},
    }
    status.update(observed)
    return {
        "availableVersions": ["v1.34.0", "v1.35.0"],
        "clusters": [
            {"name": "a", "controlPlane": {"version": "v1.34.0"}, "workloadCluster": status}
        ],
    }


def status_of(doc: dict[str, Any]) -> WorkloadClusterStatus:
    status = snapshot_from_mapping(doc).cluster("a").workload_cluster
    assert status is not None
    return status


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, 5, hour, minute, tzinfo=UTC)


def test_observed_fields_load_into_the_contract_types_and_round_trip() -> None:
    doc = doc_with(
        apiUsage=[STORED, METRIC],
        disruptionBlockers=[BLOCKER],
        observationPartial="apiserver 10.0.0.6:6443 did not answer",
    )
    status = status_of(doc)
    assert status.api_usage == (
        # Sorted by API and source, as merge_usage keeps them.
        ApiUsage(
            ApiRef("flowcontrol.apiserver.k8s.io", "v1beta3", "FlowSchema"),
            "flowschemas",
            "managedFields",
            "1.32",
            at(10, 2),
            at(10, 2),
            at(10, 2),
            objects=3,
        ),
        ApiUsage(
            ApiRef("storage.k8s.io", "v1alpha1", "VolumeAttributesClass"),
            "volumeattributesclasses",
            "metric",
            "1.35",
            at(10, 2),
            at(11),
            at(11),
            requests=1204,
            example="10.0.0.5:6443",
        ),
    )
    assert status.disruption_blockers == (
        DisruptionBlocker("shop", "web", "maxUnavailable is 0", 2),
    )
    assert status.observation_partial == "apiserver 10.0.0.6:6443 did not answer"
    assert status.to_json()["apiUsage"] == [STORED, METRIC]
    snap = snapshot_from_mapping(doc)
    assert load_snapshot(dump_snapshot(snap)) == snap


def test_unquoted_yaml_times_read_as_the_same_moments() -> None:
    text = yaml.safe_dump(doc_with(apiUsage=[METRIC])).replace("'2026-12-05T", "2026-12-05T")
    text = text.replace("Z'", "Z")
    assert "firstSeen: 2026-12-05T10:02:00Z" in text
    status = load_snapshot(text).cluster("a").workload_cluster
    assert status is not None and status.api_usage[0].first_seen == at(10, 2)


def test_a_metric_usage_without_a_count_stays_uncounted() -> None:
    usage = {k: v for k, v in METRIC.items() if k != "requests"}
    status = status_of(doc_with(apiUsage=[usage]))
    assert status.api_usage[0].requests is None
    assert status.to_json()["apiUsage"] == [usage]


def test_old_documents_load_unchanged_and_write_byte_identical() -> None:
    text = EXAMPLE.read_text()
    snap = load_snapshot(text)
    assert all(
        c.workload_cluster is None
        or (not c.workload_cluster.api_usage and not c.workload_cluster.observation_partial)
        for c in snap.clusters
    )
    plain = doc_with()
    status = status_of(plain)
    assert status.to_json() == plain["clusters"][0]["workloadCluster"]
    assert "apiUsage" not in dump_snapshot(snapshot_from_mapping(plain))


def _drop(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}


U = f"{WC}.apiUsage[0]"
B = f"{WC}.disruptionBlockers[0]"


@pytest.mark.parametrize(
    ("observed", "message"),
    [
        ({"apiUsage": {"api": "x"}}, f"{WC}.apiUsage: expected a list"),
        ({"apiUsage": ["x"]}, f"{U}: expected a mapping"),
        ({"apiUsage": [{**METRIC, "counters": {}}]}, f"{U}: unknown field(s) counters"),
        ({"apiUsage": [_drop(METRIC, "api")]}, f"{U}: missing required field 'api'"),
        ({"apiUsage": [{**METRIC, "api": "storage/VAC"}]}, f"{U}.api: invalid API"),
        ({"apiUsage": [{**METRIC, "resource": "Volume_Classes"}]}, f"{U}.resource: must be"),
        ({"apiUsage": [_drop(METRIC, "resource")]}, f"{U}: missing required field 'resource'"),
        ({"apiUsage": [{**METRIC, "source": "audit"}]}, f"{U}.source: must be one of metric"),
        ({"apiUsage": [{**METRIC, "removedRelease": 1.35}]}, f"{U}.removedRelease: expected"),
        ({"apiUsage": [{**METRIC, "removedRelease": "v1.35"}]}, f"{U}.removedRelease: expected"),
        ({"apiUsage": [{**METRIC, "removedRelease": "2.0"}]}, f"{U}.removedRelease: expected"),
        ({"apiUsage": [{**METRIC, "requests": -1}]}, f"{U}.requests: must be an integer"),
        ({"apiUsage": [{**METRIC, "requests": True}]}, f"{U}.requests: must be an integer"),
        ({"apiUsage": [{**METRIC, "objects": 1}]}, f"{U}.objects: only for the managedFields"),
        ({"apiUsage": [{**STORED, "requests": 1}]}, f"{U}.requests: only for the metric"),
        ({"apiUsage": [{**STORED, "objects": "3"}]}, f"{U}.objects: must be an integer"),
        ({"apiUsage": [_drop(METRIC, "firstSeen")]}, f"{U}: missing required field 'firstSeen'"),
        ({"apiUsage": [{**METRIC, "firstSeen": "yesterday"}]}, f"{U}.firstSeen: must be an RFC"),
        (
            {"apiUsage": [{**METRIC, "lastSeen": "2026-12-05T11:00:00+01:00"}]},
            f"{U}.lastSeen: must be an RFC 3339 time in UTC",
        ),
        (
            {"apiUsage": [{**METRIC, "observedAt": "2026-02-30T11:00:00Z"}]},
            f"{U}.observedAt: not a valid date",
        ),
        (
            {"apiUsage": [{**METRIC, "lastSeen": "2026-12-05T12:00:00Z"}]},
            f"{U}: expected firstSeen <= lastSeen <= observedAt",
        ),
        ({"apiUsage": [{**METRIC, "example": "a\nb"}]}, f"{U}.example: must be a non-empty"),
        ({"apiUsage": [METRIC, METRIC]}, f"{WC}.apiUsage[1]: storage.k8s.io/v1alpha1/"),
        ({"disruptionBlockers": "web"}, f"{WC}.disruptionBlockers: expected a list"),
        ({"disruptionBlockers": [{**BLOCKER, "pods": 1}]}, f"{B}: unknown field(s) pods"),
        ({"disruptionBlockers": [{**BLOCKER, "namespace": "Shop"}]}, f"{B}.namespace: must be"),
        ({"disruptionBlockers": [_drop(BLOCKER, "name")]}, f"{B}: missing required field 'name'"),
        ({"disruptionBlockers": [{**BLOCKER, "name": "web_1"}]}, f"{B}.name: must be a DNS"),
        ({"disruptionBlockers": [{**BLOCKER, "reason": " "}]}, f"{B}.reason: must be a non"),
        ({"disruptionBlockers": [{**BLOCKER, "expectedPods": -1}]}, f"{B}.expectedPods: must"),
        (
            {"disruptionBlockers": [BLOCKER, BLOCKER]},
            f"{WC}.disruptionBlockers[1]: PodDisruptionBudget shop/web is listed twice",
        ),
        ({"observationPartial": ""}, f"{WC}.observationPartial: must be a non-empty"),
        ({"observationPartial": 3}, f"{WC}.observationPartial: must be a non-empty"),
        ({"observationPartial": "x" * 1001}, f"{WC}.observationPartial: must be a non-empty"),
    ],
)
def test_every_bad_observed_field_gives_one_error_naming_it(
    observed: dict[str, Any], message: str
) -> None:
    with pytest.raises(SnapshotError) as err:
        snapshot_from_mapping(doc_with(**observed))
    assert message in str(err.value)


def test_an_unreachable_cluster_carries_no_observation() -> None:
    doc = doc_with()
    doc["clusters"][0]["workloadCluster"] = {
        "reachable": False,
        "reason": "timed out",
        "apiUsage": [],
    }
    with pytest.raises(SnapshotError, match=re.escape(f"{WC}: unknown field(s) apiUsage")):
        snapshot_from_mapping(doc)


@pytest.mark.parametrize(
    ("key", "entry", "bound"),
    [("apiUsage", METRIC, MAX_USAGES), ("disruptionBlockers", BLOCKER, MAX_BLOCKERS)],
)
def test_observed_lists_are_bounded(key: str, entry: dict[str, Any], bound: int) -> None:
    items = []
    for i in range(bound + 1):
        item = copy.deepcopy(entry)
        if key == "apiUsage":
            item["api"] = f"g{i}.example.com/v1beta1/Thing"
        else:
            item["name"] = f"pdb-{i}"
        items.append(item)
    with pytest.raises(SnapshotError, match=re.escape(f"{WC}.{key}: more than {bound} entries")):
        snapshot_from_mapping(doc_with(**{key: items}))
    snapshot_from_mapping(doc_with(**{key: items[:bound]}))
