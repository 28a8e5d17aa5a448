"""``check --fail-on`` and ``drift --fail-on``: exit 3 on what was asked for, else as before."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli import inputs
from orchestrator.cli.main import app
from orchestrator.cli.output import EXIT_BAD_INPUT, EXIT_FOUND, EXIT_OK, EXIT_PARTIAL

ROOT = Path(__file__).parents[3]
FLEET = str(ROOT / "examples" / "fleet.yaml")
runner = CliRunner()


def test_the_found_status_is_its_own() -> None:
    assert EXIT_FOUND == 3
    assert EXIT_FOUND not in (EXIT_OK, EXIT_PARTIAL, EXIT_BAD_INPUT)


def _fleet_with_a_move(tmp_path: Path, *, calibrated: str) -> str:
    """Two clusters; the workload on ``a`` uses an API v1.32 removes and ``b`` (outside the
    selector) still serves it: a ``move`` finding, not a ``block``, when only ``a`` is calibrated.
    """
    doc = {
        "availableVersions": ["v1.31.1", "v1.32.0"],
        "clusters": [
            {
                "name": name,
                "labels": {"env": "prod", "calibrate": "yes" if name == calibrated else "no"},
                "controlPlane": {"version": "v1.31.1"},
                "machineDeployments": [{"name": "md-0", "version": "v1.31.1"}],
            }
            for name in ("a", "b")
        ],
        "workloads": [
            {
                "name": "tuner",
                "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                "placement": {
                    "clusters": ["a"],
                    "clusterAffinity": {"matchLabels": {"env": "prod"}},
                    "maxClusters": 1,
                },
            }
        ],
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_check_without_fail_on_keeps_its_statuses() -> None:
    # The example fleet: three blocking findings and unchecked clusters -> partial (1), as ever.
    result = runner.invoke(app, ["check", "--snapshot", FLEET, "-t", "v1.35.0", "-o", "json"])
    assert result.exit_code == EXIT_PARTIAL, result.stderr
    assert "--fail-on" not in result.stderr
    none = runner.invoke(
        app, ["check", "--snapshot", FLEET, "-t", "v1.35.0", "--fail-on", "none", "-o", "json"]
    )
    assert none.exit_code == EXIT_PARTIAL
    assert none.stdout == result.stdout


@pytest.mark.parametrize("level", ["block", "warn"])
def test_check_fails_on_blocking_findings_with_the_same_document(level: str) -> None:
    plain = runner.invoke(app, ["check", "--snapshot", FLEET, "-t", "v1.35.0", "-o", "json"])
    result = runner.invoke(
        app, ["check", "--snapshot", FLEET, "-t", "v1.35.0", "--fail-on", level, "-o", "json"]
    )
    # 3 wins over the partial 1: the gate stops either way, and something was found for sure.
    assert result.exit_code == EXIT_FOUND
    assert result.stdout == plain.stdout
    assert json.loads(result.stdout)["findings"]
    assert result.stderr == (
        f"--fail-on {level}: 3 findings found: prod-ap-1: platform/volume-classes (block), "
        "staging-us-1: ml/dra-trainer (block), dev-eu-2: platform/flow-tuner (block)\n"
    )


def test_a_finding_that_moves_fails_warn_but_not_block(tmp_path: Path) -> None:
    fleet = _fleet_with_a_move(tmp_path, calibrated="a")
    args = ["check", "--snapshot", fleet, "-t", "v1.32.0", "-l", "calibrate=yes"]
    block = runner.invoke(app, [*args, "--fail-on", "block"])
    assert block.exit_code == EXIT_OK, block.stderr
    assert block.stderr == ""
    warn = runner.invoke(app, [*args, "--fail-on", "warn", "-o", "json"])
    assert warn.exit_code == EXIT_FOUND
    assert json.loads(warn.stdout)["findings"][0]["action"] == "move"
    assert warn.stderr == "--fail-on warn: 1 finding found: a: default/tuner (move)\n"


def test_a_clean_check_passes_every_gate(tmp_path: Path) -> None:
    fleet = _fleet_with_a_move(tmp_path, calibrated="a")
    for level in ("block", "warn", "none"):
        result = runner.invoke(
            app, ["check", "--snapshot", fleet, "-t", "v1.31.1", "--fail-on", level]
        )
        assert (result.exit_code, result.stderr) == (EXIT_OK, "")


def test_check_refuses_an_unknown_level_as_bad_input() -> None:
    result = runner.invoke(app, ["check", "--snapshot", FLEET, "-t", "v1.35.0", "--fail-on", "x"])
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stdout == ""
    assert "Invalid value for '--fail-on'" in result.stderr


@pytest.fixture
def fixed_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """Support status depends on the day; the gate's answer must not."""
    monkeypatch.setattr(inputs, "today", lambda: date(2026, 12, 4))


def _drift(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["drift", "--snapshot", FLEET, "-t", "v1.35.0", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.usefixtures("fixed_day")
def test_drift_without_fail_on_exits_0_as_before() -> None:
    code, _, err = _drift("-o", "json")
    assert (code, err) == (EXIT_OK, "")


@pytest.mark.usefixtures("fixed_day")
def test_drift_fails_on_skew_alone() -> None:
    code, out, err = _drift("--fail-on", "skew", "-o", "json")
    assert code == EXIT_FOUND
    assert json.loads(out)["summary"]["skewed"] == 1  # the same document
    assert err == "--fail-on skew: 1 cluster found: dev-us-2 (skew)\n"


@pytest.mark.usefixtures("fixed_day")
def test_drift_conditions_combine_and_each_is_tested_on_its_own() -> None:
    code, _, err = _drift("--fail-on", "skew,eol,behind,skew")
    assert code == EXIT_FOUND
    # dev-us-2's status column says "skewed"; it is also past end of life (its v1.31 workers).
    assert err.startswith("--fail-on skew,eol,behind: 13 clusters found: prod-eu-1 (eol, behind), ")
    assert err.endswith("dev-us-1 (eol, behind), ... (3 more)\n")  # ten named at most
    # dev-us-2's status column says "skewed"; skew and eol are each tested on their own.
    code, _, err = _drift("--fail-on", "eol,skew", "-l", "env=dev")
    assert code == EXIT_FOUND
    assert "dev-us-2 (eol, skew)" in err
    assert err.count("\n") == 1


@pytest.mark.usefixtures("fixed_day")
def test_drift_behind_is_against_the_target() -> None:
    # Every cluster but dev-eu-1 (v1.35.0 everywhere) and dev-us-2 (control plane at the
    # target; its v1.31 workers are below it, so it is behind as well).
    result = runner.invoke(
        app, ["drift", "--snapshot", FLEET, "-t", "v1.31.13", "--fail-on", "behind"]
    )
    assert (result.exit_code, result.stderr) == (EXIT_FOUND, result.stderr)
    assert "dev-us-1 (behind)" in result.stderr  # v1.31.4 < v1.31.13
    assert "prod-eu-1" not in result.stderr
    code, _, err = _drift("--fail-on", "behind")
    assert code == EXIT_FOUND
    assert "dev-eu-1" not in err


@pytest.mark.usefixtures("fixed_day")
@pytest.mark.parametrize("value", ["bogus", "skew,", "", "EOL"])
def test_drift_refuses_an_unknown_condition_before_reading_the_fleet(value: str) -> None:
    result = runner.invoke(
        app, ["drift", "--snapshot", "/nonexistent/fleet.yaml", "--fail-on", value]
    )
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stdout == ""
    assert result.stderr.startswith("error: --fail-on: unknown condition ")
    assert result.stderr.endswith("expected a comma list of eol, skew, behind\n")
    assert result.stderr.count("\n") == 1
