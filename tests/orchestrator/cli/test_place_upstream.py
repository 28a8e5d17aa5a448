"""The three placement rules issue 31 found diverging from upstream, through ``calibrator place``.

Zone ``In`` matches any zone (Karmada), ``Gt``/``Lt`` compare only canonical integers
(Kubernetes' IsDecimalInteger) and Aggregated scale-down packs (Karmada). Exit 0 when every
workload is placed, 1 when one is unschedulable; nothing on stderr either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app

runner = CliRunner()


def _cluster(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "controlPlane": {"version": "v1.34.2"},
        "capacity": {"cpu": "16", "memory": "64Gi"},
        **extra,
    }


def _place(tmp_path: Path, clusters: list[dict[str, Any]], workload: dict[str, Any]) -> Any:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        yaml.safe_dump({"clusters": clusters, "workloads": [{"name": "w", **workload}]})
    )
    result = runner.invoke(app, ["place", "-s", str(path), "-o", "json"])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr == ""
    (decision,) = json.loads(result.stdout)["decisions"]
    return result.exit_code, decision


def _placed(decision: dict[str, Any]) -> dict[str, int]:
    return {c["name"]: c["replicas"] for c in decision["clusters"]}


ZONES = {"zones": ["zone1", "zone2", "zone3"]}


@pytest.mark.parametrize(
    ("values", "code"),
    [(["zone2"], 0), (["zone1", "zone2", "zone3"], 0), (["zone4"], 1)],
)
def test_zone_in_places_a_cluster_when_any_of_its_zones_is_listed(
    tmp_path: Path, values: list[str], code: int
) -> None:
    selector = {"matchExpressions": [{"key": "zone", "operator": "In", "values": values}]}
    found, decision = _place(
        tmp_path,
        [_cluster("a", **ZONES)],
        {"placement": {"clusterAffinity": {"fieldSelector": selector}}},
    )
    assert found == code
    assert list(_placed(decision)) == (["a"] if code == 0 else [])


@pytest.mark.parametrize(
    ("taint_value", "code"),
    [("200", 0), ("0200", 1), ("+200", 1), ("100", 1)],
)
def test_gt_tolerates_only_a_canonical_integer_above_its_value(
    tmp_path: Path, taint_value: str, code: int
) -> None:
    taint = {"key": "example.com/sla", "value": taint_value, "effect": "NoSchedule"}
    toleration = {"key": "example.com/sla", "operator": "Gt", "value": "150"}
    found, decision = _place(
        tmp_path,
        [_cluster("a", taints=[taint])],
        {"placement": {"tolerations": [toleration]}},
    )
    assert found == code
    assert list(_placed(decision)) == (["a"] if code == 0 else [])


@pytest.mark.parametrize(
    ("current", "replicas", "expected"),
    [
        ({"a": 6, "b": 3, "c": 3}, 6, {"a": 6}),
        ({"a": 2, "b": 6, "c": 4}, 5, {"b": 5}),
        ({"a": 4, "b": 4, "c": 4}, 6, {"a": 3, "b": 3}),
    ],
)
def test_aggregated_scale_down_packs_onto_the_largest_holders(
    tmp_path: Path, current: dict[str, int], replicas: int, expected: dict[str, int]
) -> None:
    clusters = [_cluster(n, allocated={"cpu": str(r), "memory": "0"}) for n, r in current.items()]
    found, decision = _place(
        tmp_path,
        clusters,
        {
            "replicas": replicas,
            "requests": {"cpu": "1", "memory": "1Mi"},
            "placement": {
                "clusters": [{"name": n, "replicas": r} for n, r in current.items()],
                "replicaScheduling": {"type": "Aggregated"},
            },
        },
    )
    assert found == 0
    assert _placed(decision) == expected
