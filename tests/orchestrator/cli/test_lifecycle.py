"""``--lifecycle`` on check, drift and plan: an operator's removals and dates, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app

runner = CliRunner()

FLEET: dict[str, Any] = {
    "apiVersion": "calibrator.dev/v1alpha1",
    "kind": "FleetSnapshot",
    "availableVersions": ["v1.34.2", "v1.35.0"],
    "clusters": [
        {
            "name": "prod-eu-1",
            "controlPlane": {"version": "v1.34.2"},
            "machineDeployments": [{"name": "md-0", "version": "v1.34.2"}],
        }
    ],
    "workloads": [
        {
            "name": "widget-controller",
            "namespace": "widgets",
            "apis": ["apps/v1/Deployment", "widgets.example.com/v1alpha2/Widget"],
            "placement": {"clusters": ["prod-eu-1"]},
        }
    ],
}
LIFECYCLE = """\
apiVersion: calibrator.dev/v1alpha1
kind: LifecycleOverrides
removedApis:
- {groupVersion: widgets.example.com/v1alpha2, kinds: [Widget], deprecatedIn: "1.33",
   removedIn: "1.35", replacement: widgets.example.com/v1}
releases:
- {minor: "1.34", endOfLife: "2026-01-31"}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(FLEET))
    lifecycle = tmp_path / "lifecycle.yaml"
    lifecycle.write_text(LIFECYCLE)
    return str(fleet), str(lifecycle)


def _run(*argv: str) -> tuple[int, Any, str]:
    result = runner.invoke(app, list(argv))
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, json.loads(result.stdout) if result.stdout else None, result.stderr


def test_check_finds_a_crd_version_only_the_operator_file_knows(files: tuple[str, str]) -> None:
    fleet, lifecycle = files
    code, doc, _ = _run("check", "-s", fleet, "-t", "v1.35.0", "-o", "json")
    assert code == 0 and doc["findings"] == []
    code, doc, _ = _run(
        "check", "-s", fleet, "-t", "v1.35.0", "--lifecycle", lifecycle, "-o", "json"
    )
    assert code == 0
    (finding,) = doc["findings"]
    assert finding["api"] == "widgets.example.com/v1alpha2/Widget"
    assert finding["action"] == "block"
    # The next command in the same process, without the flag, is back on the built-in catalog.
    code, doc, _ = _run("check", "-s", fleet, "-t", "v1.35.0", "-o", "json")
    assert code == 0 and doc["findings"] == []


def test_plan_blocks_on_it(files: tuple[str, str]) -> None:
    fleet, lifecycle = files
    code, _, _ = _run("plan", "-s", fleet, "-t", "v1.35.0", "-o", "json")
    assert code == 0
    code, doc, _ = _run(
        "plan", "-s", fleet, "-t", "v1.35.0", "--lifecycle", lifecycle, "-o", "json"
    )
    assert code == 1  # a cluster that will not reach the target
    assert "Widget" in json.dumps(doc)


def test_drift_takes_the_operators_end_of_life(files: tuple[str, str]) -> None:
    fleet, lifecycle = files
    _, before, _ = _run("drift", "-s", fleet, "-o", "json")
    code, after, _ = _run("drift", "-s", fleet, "--lifecycle", lifecycle, "-o", "json")
    assert code == 0
    assert before["clusters"][0]["support"]["endOfLife"] != "2026-01-31"
    assert after["clusters"][0]["support"]["endOfLife"] == "2026-01-31"


@pytest.mark.parametrize(
    "command", [["check", "-t", "v1.35.0"], ["plan", "-t", "v1.35.0"], ["drift"]]
)
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (LIFECYCLE.replace("removedIn", "removedin"), "unknown field(s) removedin"),
        (LIFECYCLE.replace('"1.35"', "1.35"), "removedIn: expected a minor"),
        (LIFECYCLE.replace("LifecycleOverrides", "Lifecycle"), "lifecycle.kind"),
        (LIFECYCLE + LIFECYCLE.split("\n", 2)[2], "duplicate key"),
        ("", "lifecycle file is empty"),
    ],
)
def test_a_bad_file_is_one_error_and_exit_2(
    command: list[str], text: str, message: str, files: tuple[str, str], tmp_path: Path
) -> None:
    fleet, _ = files
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    before = set(tmp_path.iterdir())
    code, doc, stderr = _run(*command, "-s", fleet, "--lifecycle", str(bad))
    assert code == 2 and doc is None
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert message in lines[0]
    assert set(tmp_path.iterdir()) == before
