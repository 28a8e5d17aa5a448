"""infra.ownership: the stack creates a cluster at its version; later moves are the calibrator's."""

from __future__ import annotations

from typing import Any

import pytest

from infra.ownership import LiveVersions, effective_clusters, reconcile
from infra.spec import FleetSpecError, parse_fleet
from orchestrator.domain.versions import KubeVersion

V = KubeVersion.parse


def _config(*clusters: dict[str, Any]) -> dict[str, Any]:
    return {"namespace": "fleet", "clusters": list(clusters)}


TOPO = {"name": "a", "version": "v1.33.0"}
PLAIN = {
    "name": "p",
    "version": "v1.33.0",
    "topology": False,
    "machineDeployments": [{"name": "md-0"}, {"name": "md-1", "version": "v1.32.0"}],
}


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        ({}, [("a", None, "create", "v1.33.0")]),
        ({"a": LiveVersions(V("v1.33.0"), {})}, [("a", None, "declared", "v1.33.0")]),
        ({"a": LiveVersions(V("v1.35.2"), {})}, [("a", None, "kept", "v1.35.2")]),
        # A pre-release of the declared version is below it (refused, see the refusal table);
        # a build of the declared release is not below it, and what runs is kept.
        (
            {"a": LiveVersions(V("v1.33.0+build.1"), {})},
            [("a", None, "kept", "v1.33.0+build.1")],
        ),
    ],
)
def test_topology_cluster(
    live: dict[str, LiveVersions], expected: list[tuple[str, str | None, str, str]]
) -> None:
    decisions = reconcile(parse_fleet(_config(TOPO)), live)
    assert [(d.cluster, d.pool, d.action, str(d.effective)) for d in decisions] == expected


def test_plain_cluster_pools_are_decided_one_by_one() -> None:
    live = {"p": LiveVersions(V("v1.34.0"), {"md-0": V("v1.34.0"), "md-1": V("v1.32.0")})}
    decisions = reconcile(parse_fleet(_config(PLAIN)), live)
    assert [(d.pool, d.action, str(d.effective)) for d in decisions] == [
        (None, "kept", "v1.34.0"),
        ("md-0", "kept", "v1.34.0"),
        ("md-1", "declared", "v1.32.0"),
    ]
    (entry,) = effective_clusters([PLAIN], parse_fleet(_config(PLAIN)).clusters, decisions)
    assert entry["version"] == "v1.34.0"
    # md-0 inherits the kept control-plane version; md-1 keeps its own pin.
    assert entry["machineDeployments"] == [
        {"name": "md-0"},
        {"name": "md-1", "version": "v1.32.0"},
    ]


def test_a_pool_left_behind_is_pinned_where_it_runs() -> None:
    """Control plane calibrated, pool not yet: the pool must not follow the kept version."""
    live = {"p": LiveVersions(V("v1.34.0"), {"md-0": V("v1.33.0"), "md-1": V("v1.32.0")})}
    spec = parse_fleet(_config(PLAIN))
    (entry,) = effective_clusters([PLAIN], spec.clusters, reconcile(spec, live))
    assert entry["machineDeployments"][0] == {"name": "md-0", "version": "v1.33.0"}
    assert parse_fleet(_config(entry)).clusters[0].version == V("v1.34.0")  # still valid config


@pytest.mark.parametrize(
    ("config", "live", "message"),
    [
        (TOPO, {"a": LiveVersions(V("v1.32.5"), {})}, "cluster a runs v1.32.5 and the stack"),
        (
            TOPO,
            {"a": LiveVersions(V("v1.33.0-rc.1"), {})},
            "cluster a runs v1.33.0-rc.1 and the stack declares v1.33.0",
        ),
        (
            PLAIN,
            {"p": LiveVersions(V("v1.33.0"), {"md-0": V("v1.33.0"), "md-1": V("v1.31.0")})},
            "pool md-1 of cluster p runs v1.31.0 and the stack declares v1.32.0",
        ),
    ],
)
def test_declaring_above_the_live_version_is_refused(
    config: dict[str, Any], live: dict[str, LiveVersions], message: str
) -> None:
    with pytest.raises(FleetSpecError, match=message) as info:
        reconcile(parse_fleet(_config(config)), live)
    assert "calibrator calibrate --target" in str(info.value)
    assert "Nothing was changed" in str(info.value)


def test_only_version_fields_change_and_the_rest_stays_as_written() -> None:
    raw = {**TOPO, "labels": {"env": "prod"}, "controlPlaneReplicas": 3}
    spec = parse_fleet(_config(raw))
    decisions = reconcile(spec, {"a": LiveVersions(V("v1.34.1"), {})})
    assert effective_clusters([raw], spec.clusters, decisions) == [{**raw, "version": "v1.34.1"}]
    assert raw["version"] == "v1.33.0"  # the caller's config is not mutated
