"""Calibration policies: violations, goals, windows and the strict policy file."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from orchestrator.domain.policy import (
    Policy,
    PolicyError,
    evaluate_policy,
    load_policy,
    policy_from_mapping,
)
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion

AVAILABLE = ["v1.31.5", "v1.32.3", "v1.32.9", "v1.33.1", "v1.33.7", "v1.34.2"]
# A Sunday: 1.32 reached end of life on 2026-02-28, 1.33 is supported until 2026-06-28.
NOW = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)


def cluster(
    name: str,
    cp: str,
    workers: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "labels": labels or {},
        "controlPlane": {"version": cp, "replicas": 1},
        "machineDeployments": [{"name": "md-0", "version": workers or cp, "replicas": 1}],
        "taints": taints or [],
    }


def fleet(*clusters: dict[str, Any], available: list[str] = AVAILABLE) -> FleetSnapshot:
    return snapshot_from_mapping({"availableVersions": available, "clusters": list(clusters)})


def policy(**rules: Any) -> Policy:
    return policy_from_mapping({"kind": "CalibrationPolicy", "rules": rules})


@pytest.mark.parametrize(
    ("rules", "cp", "workers", "broken", "goal"),
    [
        ({"maxMinorsBehind": 1}, "v1.34.2", None, (), None),
        ({"maxMinorsBehind": 1}, "v1.33.1", None, (), None),
        ({"maxMinorsBehind": 1}, "v1.32.9", None, ("maxMinorsBehind",), "v1.33.7"),
        ({"maxMinorsBehind": 0}, "v1.33.7", None, ("maxMinorsBehind",), "v1.34.2"),
        # Workers count: the lowest component decides.
        ({"maxMinorsBehind": 2}, "v1.33.7", "v1.31.5", ("maxMinorsBehind",), "v1.33.7"),
        ({"noEndOfLife": True}, "v1.32.9", None, ("noEndOfLife",), "v1.33.7"),
        ({"noEndOfLife": True}, "v1.33.1", None, (), None),
        ({"noEndOfLife": True}, "v1.33.1", "v1.32.9", ("noEndOfLife",), "v1.33.7"),
        ({"noEndOfLife": False}, "v1.31.5", None, (), None),
        ({"maxWorkerSkew": 1}, "v1.33.7", "v1.31.5", ("maxWorkerSkew",), "v1.33.7"),
        ({"maxWorkerSkew": 1}, "v1.33.1", "v1.32.9", (), None),
        # The goal is the newest patch of the goal minor, never the control plane's own patch.
        ({"maxWorkerSkew": 0}, "v1.33.1", "v1.32.9", ("maxWorkerSkew",), "v1.33.7"),
        ({"channel": "patch"}, "v1.33.1", None, ("channel",), "v1.33.7"),
        ({"channel": "patch"}, "v1.33.7", "v1.33.1", ("channel",), "v1.33.7"),
        ({"channel": "patch"}, "v1.32.9", None, (), None),
        ({"channel": "patch"}, "v1.32.3", None, ("channel",), "v1.32.9"),
        ({"channel": "stable"}, "v1.32.9", None, ("channel",), "v1.33.7"),
        ({"channel": "stable"}, "v1.33.1", None, ("channel",), "v1.33.7"),
        ({"channel": "stable"}, "v1.33.7", None, (), None),
        ({"channel": "stable"}, "v1.34.2", None, (), None),  # ahead of the channel
        # Several rules: the goal satisfies all of them at once.
        (
            {"channel": "patch", "noEndOfLife": True},
            "v1.32.3",
            None,
            ("noEndOfLife", "channel"),
            "v1.33.7",
        ),
        (
            {"channel": "stable", "maxMinorsBehind": 0, "maxWorkerSkew": 1},
            "v1.32.9",
            "v1.31.5",
            ("maxMinorsBehind", "channel"),
            "v1.34.2",
        ),
    ],
)
def test_rules_and_goals(
    rules: dict[str, Any], cp: str, workers: str | None, broken: tuple[str, ...], goal: str | None
) -> None:
    result = evaluate_policy(fleet(cluster("c1", cp, workers)), policy(**rules), NOW)
    assert result.checked == 1
    if not broken:
        assert result.compliant, result.violating
        assert result.due_groups() == ()
        return
    (verdict,) = result.violating
    assert tuple(v.rule for v in verdict.violations) == broken
    assert verdict.goal == KubeVersion.parse(goal)
    assert verdict.due
    assert result.due_groups() == ((KubeVersion.parse(goal), ("c1",)),)


@pytest.mark.parametrize(
    ("rules", "cp", "workers", "available", "why"),
    [
        (
            {"maxWorkerSkew": 0},
            "v1.33.9",
            "v1.32.9",
            AVAILABLE,
            "control plane at v1.33.9 is newer than every available 1.33 release",
        ),
        (
            {"maxWorkerSkew": 0},
            "v1.35.0",
            "v1.34.2",
            AVAILABLE,
            "no available version on minor 1.35 or newer",
        ),
        (
            {"noEndOfLife": True},
            "v1.31.5",
            None,
            ["v1.31.5", "v1.32.9"],
            "every available version is past end of support",
        ),
    ],
)
def test_unfixable_clusters_start_nothing(
    rules: dict[str, Any], cp: str, workers: str | None, available: list[str], why: str
) -> None:
    result = evaluate_policy(
        fleet(cluster("c1", cp, workers), available=available), policy(**rules), NOW
    )
    (verdict,) = result.violating
    assert (verdict.goal, verdict.unfixable, verdict.state()) == (None, why, "unfixable")
    assert result.due_groups() == ()
    assert not result.compliant


def test_violators_are_grouped_by_goal_and_the_selector_limits_the_check() -> None:
    snap = fleet(
        cluster("b", "v1.32.9", labels={"env": "prod"}),
        cluster("a", "v1.32.3", labels={"env": "prod"}),
        cluster("c", "v1.33.7", labels={"env": "prod"}),
        cluster("d", "v1.34.2", labels={"env": "prod"}),
        cluster("dev", "v1.31.5", labels={"env": "dev"}),
    )
    doc = {"selector": {"matchLabels": {"env": "prod"}}, "rules": {"maxMinorsBehind": 0}}
    result = evaluate_policy(snap, policy_from_mapping(doc), NOW)
    assert result.checked == 4
    assert result.due_groups() == ((KubeVersion.parse("v1.34.2"), ("a", "b", "c")),)
    # The patch channel keeps each cluster on its minor: one group per minor.
    result = evaluate_policy(snap, policy(channel="patch"), NOW)
    assert result.due_groups() == ((KubeVersion.parse("v1.32.9"), ("a",)),)


@pytest.mark.parametrize(
    ("now", "state", "opens_at"),
    [
        (datetime(2026, 3, 15, 3, 0, tzinfo=UTC), "due", None),  # Sunday 03:00: open
        (NOW, "deferred", datetime(2026, 3, 21, 2, 0, tzinfo=UTC)),  # Sunday 10:00: closed
        (datetime(2026, 3, 21, 5, 59, tzinfo=UTC), "due", None),  # Saturday, last minute
    ],
)
def test_maintenance_windows_defer_a_violation(
    now: datetime, state: str, opens_at: datetime | None
) -> None:
    doc = {
        "rules": {"channel": "stable"},
        "strategy": {
            "stages": [{"name": "all"}],
            "maintenanceWindows": [
                {
                    "selector": {"matchLabels": {"env": "prod"}},
                    "days": ["Sat", "Sun"],
                    "start": "02:00",
                    "duration": "4h",
                }
            ],
        },
    }
    snap = fleet(cluster("p", "v1.32.9", labels={"env": "prod"}), cluster("d", "v1.33.7"))
    result = evaluate_policy(snap, policy_from_mapping(doc), now)
    (verdict,) = result.violating
    assert (verdict.name, verdict.state(), verdict.opens_at) == ("p", state, opens_at)
    assert result.next_opening() == opens_at
    assert result.counts()[state] == 1


def test_a_cluster_another_calibration_is_upgrading_is_left_alone() -> None:
    taint = {"key": "calibrator.dev/upgrading", "value": "calibration-x", "effect": "NoSchedule"}
    snap = fleet(cluster("c1", "v1.32.9", taints=[taint]))
    (verdict,) = evaluate_policy(snap, policy(channel="stable"), NOW).violating
    assert (verdict.state(), verdict.busy, verdict.due) == ("busy", "calibration-x", False)


def test_naive_time_is_refused() -> None:
    with pytest.raises(PolicyError, match="timezone-aware"):
        evaluate_policy(
            fleet(cluster("c", "v1.33.7")), policy(channel="patch"), datetime(2026, 1, 1)
        )


def test_a_full_policy_file_loads() -> None:
    text = """
apiVersion: calibrator.dev/v1alpha1
kind: CalibrationPolicy
selector:
  matchExpressions: [{key: env, operator: In, values: [prod, staging]}]
rules:
  maxMinorsBehind: 1
  noEndOfLife: true
  maxWorkerSkew: 1
  channel: stable
strategy:
  stages: [{name: staging, selector: {matchLabels: {env: staging}}}, {name: prod, approval: true}]
  maintenanceWindows: [{days: [Sat], start: "01:00", duration: 6h}]
"""
    loaded = load_policy(text)
    assert loaded.describe() == (
        "within 1 minor(s) of newest, no end-of-life, worker skew <= 1, channel stable"
    )
    assert [s.name for s in loaded.strategy.stages] == ["staging", "prod"]
    assert loaded.strategy.windows[0].days == (5,)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"rules": {}}, "policy.rules: name at least one rule"),
        ({}, "policy.rules: name at least one rule"),
        ({"rules": ["channel"]}, "policy.rules: expected a mapping"),
        ({"rules": {"chanel": "patch"}}, "policy.rules: unknown field(s) chanel"),
        ({"rules": {"channel": "rapid"}}, "policy.rules.channel: expected patch or stable"),
        (
            {"rules": {"maxWorkerSkew": 4}},
            "policy.rules.maxWorkerSkew: must be an integer from 0 to 3",
        ),
        ({"rules": {"maxMinorsBehind": True}}, "policy.rules.maxMinorsBehind: must be an integer"),
        ({"rules": {"maxMinorsBehind": -1}}, "policy.rules.maxMinorsBehind: must be an integer"),
        ({"rules": {"noEndOfLife": "true"}}, "policy.rules.noEndOfLife: must be true or false"),
        (
            {"rules": {"channel": "patch"}, "kind": "Policy"},
            "policy.kind: expected CalibrationPolicy",
        ),
        ({"rules": {"channel": "patch"}, "apiVersion": "v1"}, "policy.apiVersion: expected"),
        ({"rules": {"channel": "patch"}, "schedule": "1h"}, "policy: unknown field(s) schedule"),
        (
            {
                "rules": {"channel": "patch"},
                "strategy": {"stages": [{"name": "a", "approvel": True}]},
            },
            "policy.strategy.stages[0]: unknown field(s) approvel",
        ),
        (
            {"rules": {"channel": "patch"}, "selector": {"matchLabel": {}}},
            "policy.selector",
        ),
        ("just text", "policy: expected a mapping"),
    ],
)
def test_bad_policies_are_one_clear_error(doc: Any, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_mapping(doc)
    assert message in str(caught.value)


def test_the_strict_loader_is_used() -> None:
    with pytest.raises(PolicyError, match="duplicate"):
        load_policy("rules: {channel: patch}\nrules: {channel: stable}\n")
