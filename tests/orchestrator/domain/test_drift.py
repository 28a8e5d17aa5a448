from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

from orchestrator.domain.drift import drift_report
from orchestrator.domain.snapshot_load import load_snapshot
from orchestrator.domain.versions import KubeVersion

EXAMPLE = load_snapshot((Path(__file__).parents[3] / "examples" / "fleet.yaml").read_text())


def test_drift_of_the_example_fleet() -> None:
    report = drift_report(EXAMPLE, KubeVersion.parse("v1.35.0"), date(2026, 12, 2))
    by_name = {d.cluster.name: d for d in report.clusters}
    assert str(report.newest) == "v1.35.0"
    assert by_name["dev-eu-1"].status == "current"
    assert by_name["dev-us-2"].status == "skewed"
    assert "4 minors behind" in by_name["dev-us-2"].skew_violations[0]
    assert by_name["prod-ap-1"].worker_lag == 3
    assert by_name["prod-ap-1"].status == "end-of-life"  # its workers run 1.31, past end of life
    assert by_name["dev-eu-2"].minors_behind_target == 4
    assert by_name["staging-eu-1"].support.state == "end-of-life"
    counts = report.counts()
    assert sum(counts.values()) == len(EXAMPLE.clusters)


def test_drift_without_target_uses_newest() -> None:
    report = drift_report(EXAMPLE, None, date(2025, 1, 1))
    by_name = {d.cluster.name: d for d in report.clusters}
    assert by_name["prod-eu-2"].status == "behind"
    assert by_name["prod-eu-2"].minors_behind_target is None
    assert by_name["prod-eu-2"].minors_behind_newest == 1


def test_ahead_of_target() -> None:
    report = drift_report(EXAMPLE, KubeVersion.parse("v1.34.2"), date(2025, 1, 1))
    assert {d.cluster.name: d.status for d in report.clusters}["dev-eu-1"] == "ahead"


def test_newest_ignores_prereleases() -> None:
    # A ClusterClass that lists an alpha for testing does not make the fleet "behind".
    snap = replace(
        EXAMPLE,
        available_versions=(
            *EXAMPLE.available_versions,
            KubeVersion.parse("v1.36.0-alpha.1"),
            KubeVersion.parse("v1.35.1-rc.0"),
        ),
    )
    report = drift_report(snap, None, date(2025, 1, 1))
    assert str(report.newest) == "v1.35.0"
    assert {d.cluster.name: d.status for d in report.clusters}["dev-eu-1"] == "current"
