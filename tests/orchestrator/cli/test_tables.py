"""Tables for people: names are never cut, -o wide adds columns, machines' formats unchanged."""

from __future__ import annotations

import io
import json
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from orchestrator.cli import render
from orchestrator.cli.main import app
from orchestrator.cli.output import NON_TTY_WIDTH, console
from orchestrator.domain.drift import drift_report
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.planning import plan_calibration

ROOT = Path(__file__).parents[3]
FLEET = str(ROOT / "examples" / "fleet.yaml")
STRATEGY = str(ROOT / "examples" / "strategy.yaml")
LONG = "demo-prod-eu-central-long-cluster-1"
runner = CliRunner()


def long_named_fleet() -> FleetSnapshot:
    return snapshot_from_mapping(
        {
            "apiVersion": "calibrator.dev/v1alpha1",
            "kind": "FleetSnapshot",
            "availableVersions": ["v1.34.2", "v1.35.0"],
            "clusters": [
                {
                    "name": LONG,
                    "labels": {"env": "prod", "region": "eu-central"},
                    "controlPlane": {"version": "v1.34.2"},
                    "machineDeployments": [
                        {"name": "md-general-purpose-pool", "version": "v1.34.2"}
                    ],
                }
            ],
        }
    )


@pytest.mark.parametrize("width", [60, 80, 100])
@pytest.mark.parametrize("wide", [False, True])
def test_narrow_terminal_never_cuts_names(width: int, wide: bool) -> None:
    snap = long_named_fleet()
    con = Console(width=width, record=True, file=io.StringIO())
    render.drift_table(con, drift_report(snap, None, date(2026, 12, 3)), wide=wide)
    render.plan_table(con, plan_calibration(snap, KubeVersion.parse("v1.35.0")), wide=wide)
    text = con.export_text()
    assert "…" not in text
    assert text.count(LONG) >= 2  # one unbroken token per table


def test_console_is_wide_when_not_a_terminal() -> None:
    # pytest captures stdout, so this is the pipe / CI-log case.
    assert console().width == NON_TTY_WIDTH


def test_cli_tables_in_a_log_keep_full_names() -> None:
    # The example fleet has blocked clusters on purpose: plan and check are partial (exit 1).
    for args, code in (
        (["drift"], 0),
        (["plan", "-t", "v1.35.0"], 1),
        (["check", "-t", "v1.35.0"], 1),
    ):
        result = runner.invoke(app, [*args, "-s", FLEET])
        assert result.exit_code == code, result.output
        assert "…" not in result.stdout
        for name in ("staging-us-1", "prod-ap-1", "dev-eu-2"):
            assert name in result.stdout


@pytest.mark.parametrize(
    ("args", "extra", "code"),
    [
        (
            ["drift", "-t", "v1.35.0"],
            ["Labels", "Worker lag", "Behind newest", "tier=critical"],
            0,
        ),
        (
            ["plan", "-t", "v1.35.0", "--strategy", STRATEGY],
            ["Wave", "Maintenance window", "Sat,Sun 02:00 UTC for 4h", "md-general,md-memory"],
            1,  # blocked clusters: a partial plan
        ),
    ],
)
def test_wide_adds_columns(args: list[str], extra: list[str], code: int) -> None:
    plain = runner.invoke(app, [*args, "-s", FLEET])
    wide = runner.invoke(app, [*args, "-s", FLEET, "-o", "wide"])
    assert plain.exit_code == code and wide.exit_code == code, wide.output
    for word in extra:
        assert word in wide.stdout
        assert word not in plain.stdout


@pytest.mark.parametrize("command", [["drift"], ["plan", "-t", "v1.35.0"]])
def test_json_is_unchanged_by_wide(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "-s", FLEET, "-o", "json"])
    doc = json.loads(result.stdout)
    snap = load_snapshot(Path(FLEET).read_text())
    assert [c["name"] for c in doc["clusters"]] == [c.name for c in snap.clusters]
