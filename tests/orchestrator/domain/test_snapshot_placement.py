"""The snapshot parser's placement fields of issue 15: Lt/Gt tolerations, Aggregated division."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.domain.snapshot import SnapshotError
from orchestrator.domain.snapshot_dump import dump_snapshot
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping
from orchestrator.domain.taints import Toleration


def _snapshot(**placement: Any) -> dict[str, Any]:
    return {
        "clusters": [{"name": "a", "controlPlane": {"version": "v1.33.0"}}],
        "workloads": [{"name": "w", "placement": placement}],
    }


def _tolerations(*items: dict[str, Any]) -> tuple[Toleration, ...]:
    snapshot = snapshot_from_mapping(_snapshot(tolerations=list(items)))
    return snapshot.workloads[0].placement.tolerations


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            {"key": "example.com/sla", "operator": "Gt", "value": "900"},
            Toleration("example.com/sla", "Gt", "900"),
        ),
        (  # a YAML integer is its decimal text
            {"key": "example.com/sla", "operator": "Lt", "value": 950, "effect": "NoExecute"},
            Toleration("example.com/sla", "Lt", "950", "NoExecute"),
        ),
        (
            {"key": "k", "operator": "Gt", "value": "-3", "tolerationSeconds": 60},
            Toleration("k", "Gt", "-3", toleration_seconds=60),
        ),
        ({"key": "k", "operator": "Lt", "value": "0"}, Toleration("k", "Lt", "0")),
    ],
)
def test_numeric_tolerations_parse(item: dict[str, Any], expected: Toleration) -> None:
    assert _tolerations(item) == (expected,)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"key": "k", "operator": "Gt", "value": "0950"}, r"tolerations\[0\]\.value: operator Gt"),
        ({"key": "k", "operator": "Lt", "value": "+5"}, "without sign or leading zeros"),
        ({"key": "k", "operator": "Lt", "value": "-0"}, "without sign or leading zeros"),
        ({"key": "k", "operator": "Gt", "value": "95.5"}, "needs an integer"),
        ({"key": "k", "operator": "Gt"}, "needs an integer"),  # an empty value is no integer
        ({"key": "k", "operator": "Gt", "value": "9223372036854775808"}, "64-bit"),
        ({"key": "k", "operator": "Gt", "value": True}, "must be a string"),
        ({"operator": "Gt", "value": "5"}, "an empty key needs operator Exists"),  # key required
        ({"key": "k", "operator": "Ge", "value": "5"}, "must be one of Equal, Exists, Lt, Gt"),
    ],
)
def test_numeric_tolerations_follow_kubernetes_validation(
    item: dict[str, Any], message: str
) -> None:
    with pytest.raises(SnapshotError, match=message):
        _tolerations(item)


def test_aggregated_and_numeric_tolerations_round_trip() -> None:
    snapshot = snapshot_from_mapping(
        _snapshot(
            replicaScheduling={"type": "Aggregated"},
            tolerations=[{"key": "k", "operator": "Gt", "value": "7", "tolerationSeconds": 30}],
        )
    )
    assert snapshot.workloads[0].placement.replica_scheduling.type == "Aggregated"
    assert load_snapshot(dump_snapshot(snapshot)) == snapshot


def test_aggregated_takes_no_weights() -> None:
    with pytest.raises(SnapshotError, match="only used with type Weighted"):
        snapshot_from_mapping(
            _snapshot(replicaScheduling={"type": "Aggregated", "weights": [{"cluster": "a"}]})
        )
