"""Planning glue: compatibility findings decide between moving a workload and blocking a cluster."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import parse_selector_string
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import DEFAULT_STRATEGY
from orchestrator.planning import findings_to_json, plan_calibration, plan_to_json

V = KubeVersion.parse


def fleet(workload_clusters: list[str], affinity: dict[str, Any] | None = None) -> FleetSnapshot:
    return snapshot_from_mapping(
        {
            "availableVersions": ["v1.31.1", "v1.32.0", "v1.33.1"],
            "clusters": [
                {
                    "name": "a",
                    "labels": {"env": "prod", "calibrate": "yes"},
                    "controlPlane": {"version": "v1.31.1"},
                    "machineDeployments": [{"name": "md-0", "version": "v1.31.1"}],
                },
                {
                    "name": "b",
                    "labels": {"env": "prod"},
                    "controlPlane": {"version": "v1.31.1"},
                    "machineDeployments": [{"name": "md-0", "version": "v1.31.1"}],
                },
                {
                    "name": "c",
                    "labels": {"env": "dev", "calibrate": "yes"},
                    "controlPlane": {"version": "v1.32.0"},
                },
            ],
            "workloads": [
                {
                    "name": "tuner",
                    "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                    "placement": {
                        "clusters": workload_clusters,
                        "clusterAffinity": affinity or {"matchLabels": {"env": "prod"}},
                        "maxClusters": 1,
                    },
                }
            ],
        }
    )


def test_blocks_when_no_cluster_can_take_the_workload_after_calibration() -> None:
    plan = plan_calibration(fleet(["a"]), V("v1.33.1"))
    a = plan.plan_for("a")
    assert a.blocked
    assert (
        "step to v1.32.0 would break default/tuner uses flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"
        in a.reasons[0]
    )
    assert not plan.plan_for("b").blocked
    assert "a" not in [n for w in plan.rollout.waves() for n in w]
    assert [v.action for v in plan.findings] == ["block"]


def test_moves_when_a_cluster_outside_the_calibration_still_serves_the_api() -> None:
    plan = plan_calibration(
        fleet(["a"]), V("v1.33.1"), selector=parse_selector_string("calibrate=yes")
    )
    assert not plan.plan_for("a").blocked
    verdict = plan.findings[0]
    assert (verdict.action, verdict.destination) == ("move", "b")
    doc = findings_to_json(plan)
    assert doc["findings"][0]["action"] == "move"  # type: ignore[index]


def test_already_broken_workloads_never_block() -> None:
    plan = plan_calibration(fleet(["c"], {"matchLabels": {"env": "dev"}}), V("v1.33.1"))
    assert not plan.plan_for("c").blocked
    assert [v.action for v in plan.findings] == ["none"]


def test_selector_that_matches_nothing_is_bad_input() -> None:
    with pytest.raises(InputError, match="matches no cluster"):
        plan_calibration(fleet(["a"]), V("v1.33.1"), selector=parse_selector_string("env=qa"))


def test_plan_json_contains_execution_order() -> None:
    doc = plan_to_json(
        plan_calibration(
            fleet(["b"]), V("v1.33.1"), selector=parse_selector_string("calibrate=yes")
        )
    )
    a = next(c for c in doc["clusters"] if c["name"] == "a")  # type: ignore[attr-defined]
    assert [o["component"] for o in a["order"]] == ["controlPlane", "controlPlane", "workers"]


def test_clusters_without_a_plan_are_unchecked_not_clean() -> None:
    # Minor 1.32 missing from the list: `a` and `b` cannot be planned to v1.33.1, `c` can.
    snap = fleet(["a"])
    gap = snapshot_from_mapping(
        {
            "availableVersions": ["v1.31.1", "v1.33.1"],
            "clusters": [
                {"name": c.name, "controlPlane": {"version": str(c.control_plane.version)}}
                for c in snap.clusters
            ],
        }
    )
    plan = plan_calibration(gap, V("v1.33.1"))
    assert plan.unchecked == ("a", "b")
    assert plan.left_behind() == ("a", "b")
    doc = findings_to_json(plan)
    assert doc["complete"] is False
    assert [u["cluster"] for u in doc["unchecked"]] == ["a", "b"]  # type: ignore[attr-defined]
    assert plan_to_json(plan)["complete"] is False


def test_a_cluster_blocked_by_a_finding_was_checked() -> None:
    # The finding is the answer for `a`: it was checked, and the block is reported as a finding.
    plan = plan_calibration(fleet(["a"]), V("v1.33.1"))
    assert plan.plan_for("a").blocked and plan.unchecked == ()
    assert findings_to_json(plan)["complete"] is True
    assert plan.left_behind() == ("a",)


def test_the_strategy_opts_in_to_prerelease_steps() -> None:
    snap = snapshot_from_mapping(
        {
            "availableVersions": ["v1.33.5", "v1.34.2", "v1.34.3-rc.0", "v1.35.0"],
            "clusters": [{"name": "a", "controlPlane": {"version": "v1.33.5"}}],
        }
    )
    ga = plan_calibration(snap, V("v1.35.0")).plan_for("a")
    assert [str(v) for v in ga.control_plane_steps] == ["v1.34.2", "v1.35.0"]
    opted = plan_calibration(
        snap, V("v1.35.0"), replace(DEFAULT_STRATEGY, allow_prereleases=True)
    ).plan_for("a")
    assert [str(v) for v in opted.control_plane_steps] == ["v1.34.3-rc.0", "v1.35.0"]


@pytest.mark.parametrize(
    ("selector", "scope", "planned"),
    [
        (None, {"b"}, ["b"]),
        (None, {"b", "c", "deleted"}, ["b", "c"]),
        ("calibrate=yes", {"a", "b"}, ["a"]),  # scope and selector both apply
        (None, None, ["a", "b", "c"]),
    ],
)
def test_a_scope_narrows_the_calibration_to_named_clusters(
    selector: str | None, scope: set[str] | None, planned: list[str]
) -> None:
    sel = parse_selector_string(selector) if selector else None
    plan = plan_calibration(
        fleet(["b"]), V("v1.33.1"), selector=sel, scope=None if scope is None else frozenset(scope)
    )
    assert [p.cluster for p in plan.clusters] == planned


def test_a_scope_with_no_cluster_left_is_bad_input() -> None:
    with pytest.raises(InputError, match="none of the 1 scoped cluster"):
        plan_calibration(fleet(["b"]), V("v1.33.1"), scope=frozenset({"deleted"}))
