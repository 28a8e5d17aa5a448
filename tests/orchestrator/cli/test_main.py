"""The CLI contract (docs/api.md, CLI JSON): JSON shapes, formats, and one-line exit-2 errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app

ROOT = Path(__file__).parents[3]
FLEET = str(ROOT / "examples" / "fleet.yaml")
STRATEGY = str(ROOT / "examples" / "strategy.yaml")
runner = CliRunner()


def run_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "-o", "json"])
    assert result.exit_code == code, result.stderr or result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_plan_json_shape() -> None:
    # The example fleet has blocked clusters on purpose: a partial plan, exit 1.
    doc = run_json("plan", "--snapshot", FLEET, "--target", "v1.35.0", code=1)
    assert doc["complete"] is False
    assert doc["target"] == "v1.35.0"
    assert {"target", "clusters", "waves"} <= set(doc)
    for cluster in doc["clusters"]:
        assert {"name", "controlPlane", "workers", "blocked", "reasons"} <= set(cluster)
        assert set(cluster["controlPlane"]) == {"from", "steps"}
        assert set(cluster["workers"]) == {"from", "steps"}
        assert isinstance(cluster["blocked"], bool)
    by_name = {c["name"]: c for c in doc["clusters"]}
    assert by_name["prod-ap-1"]["controlPlane"]["steps"] == ["v1.35.0"]
    assert by_name["prod-ap-1"]["workers"] == {"from": "v1.31.13", "steps": ["v1.34.2", "v1.35.0"]}
    assert by_name["dev-us-1"]["controlPlane"] == {
        "from": "v1.31.4",
        "steps": ["v1.32.9", "v1.33.5", "v1.34.2", "v1.35.0"],
    }
    assert by_name["dev-us-1"]["workers"]["steps"] == ["v1.34.2", "v1.35.0"]
    assert by_name["dev-eu-1"]["controlPlane"]["steps"] == [] and not by_name["dev-eu-1"]["blocked"]
    assert by_name["dev-us-2"]["blocked"]
    assert any("4 minors behind" in r for r in by_name["dev-us-2"]["reasons"])
    assert by_name["dev-eu-2"]["blocked"]
    assert any(
        "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema" in r
        for r in by_name["dev-eu-2"]["reasons"]
    )
    assert doc["waves"][0] == ["staging-eu-1"]
    waved = [n for w in doc["waves"] for n in w]
    assert "dev-eu-2" not in waved and "dev-eu-1" not in waved
    assert len(waved) == len(set(waved))


def test_plan_with_strategy_and_selector() -> None:
    doc = run_json(
        "plan",
        "-s",
        FLEET,
        "-t",
        "v1.35.0",
        "--strategy",
        STRATEGY,
        "--selector",
        "env in (staging,dev)",
        code=1,
    )
    names = {c["name"] for c in doc["clusters"]}
    assert all(n.startswith(("staging", "dev")) for n in names)
    assert [s["name"] for s in doc["stages"]][:2] == ["canary", "dev"]
    assert doc["stages"][0]["groups"][0]["waves"] == [["staging-eu-1"]]


def test_check_json_shape() -> None:
    doc = run_json("check", "--snapshot", FLEET, "--target", "v1.35.0", code=1)
    assert doc["findings"], "the example fleet uses removed APIs"
    assert [u["cluster"] for u in doc["unchecked"]] == ["dev-us-2"]
    assert "4 minors behind" in doc["unchecked"][0]["reasons"][0]
    assert doc["complete"] is False
    for f in doc["findings"]:
        assert {"cluster", "workload", "api", "removedIn", "replacement"} <= set(f)
    apis = {(f["cluster"], f["api"], f["removedIn"]) for f in doc["findings"]}
    assert ("dev-eu-2", "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema", "1.32") in apis
    assert ("staging-us-1", "resource.k8s.io/v1alpha3/ResourceClaim", "1.34") in apis
    assert ("prod-ap-1", "storage.k8s.io/v1alpha1/VolumeAttributesClass", "1.35") in apis


@pytest.mark.parametrize("explain", [False, True])
def test_place_json_shape(explain: bool) -> None:
    doc = run_json("place", "--snapshot", FLEET, *(["--explain"] if explain else []))
    assert len(doc["decisions"]) == 9
    for d in doc["decisions"]:
        assert {"workload", "clusters", "unschedulable", "summary", "rejected"} <= set(d)
        assert ("reasons" in d) == explain
        assert ("scores" in d) == ("scoreWeights" in d) == explain
        for c in d["clusters"]:
            assert set(c) >= {"name", "replicas"} and isinstance(c["replicas"], int)
        assert d["summary"].split(" ")[1:3] == ["clusters", "available:"] or d["summary"].endswith(
            "clusters available"
        )
        for item in d["rejected"]:
            assert set(item) == {"reason", "clusters"} and item["clusters"] > 0
        for cluster, reasons in d.get("reasons", {}).items():
            assert isinstance(cluster, str) and all(isinstance(r, str) for r in reasons)


def test_place_one_workload_explains_it_as_the_full_run_placed_it() -> None:
    full = {d["workload"]: d for d in run_json("place", "-s", FLEET, "--explain")["decisions"]}
    doc = run_json("place", "-s", FLEET, "--workload", "edge/edge-cache")
    assert doc["decisions"] == [full["edge/edge-cache"]]
    assert doc["decisions"][0]["reasons"]


@pytest.mark.parametrize("rich_rows", [500, 0])
def test_place_table_shows_the_summary(rich_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.cli import render

    monkeypatch.setattr(render, "RICH_TABLE_ROWS", rich_rows)  # 0: the plain lines for big runs
    table = runner.invoke(app, ["place", "-s", FLEET, "--explain"], env={"COLUMNS": "250"})
    assert table.exit_code == 0
    assert "clusters available: " in table.stdout
    assert "edge/edge-cache: rejected clusters" in table.stdout
    assert "replicas moved: " in table.stdout
    # Scores: a column per plugin with its weight, chosen clusters starred, best first.
    lines = table.stdout.splitlines()
    head = lines.index("edge/edge-cache: scores, best first (* chosen)")
    assert lines[head + 1].split() == [
        "CLUSTER",
        "TaintToleration",
        "x1",
        "ClusterLocality",
        "x2",
        "ResourceBalance",
        "x1",
        "TOTAL",
    ]
    assert lines[head + 2].split() == ["*", "prod-ap-1", "100", "100", "67", "367"]
    assert lines[head + 3].split()[0] == "prod-us-2"


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_place_explain_carries_scores(fmt: str) -> None:
    result = runner.invoke(app, ["place", "-s", FLEET, "--workload", "edge/edge-cache", "-o", fmt])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout) if fmt == "json" else yaml.safe_load(result.stdout)
    (decision,) = doc["decisions"]
    assert decision["scoreWeights"] == {
        "TaintToleration": 1,
        "ClusterLocality": 2,
        "ResourceBalance": 1,
    }
    assert [(s["cluster"], s["total"]) for s in decision["scores"]] == [
        ("prod-ap-1", 367),
        ("prod-us-2", 156),
    ]
    assert decision["scores"][0]["plugins"] == {
        "TaintToleration": 100,
        "ClusterLocality": 100,
        "ResourceBalance": 67,
    }


def test_drift_json_shape() -> None:
    doc = run_json("drift", "--snapshot", FLEET, "--target", "v1.35.0")
    assert doc["target"] == "v1.35.0" and doc["newest"] == "v1.35.0"
    row = {c["name"]: c for c in doc["clusters"]}["prod-ap-1"]
    assert row["workerLag"] == 3 and row["minorsBehindTarget"] == 1
    assert set(doc["summary"]) == {"current", "behind", "ahead", "skewed", "end-of-life"}


@pytest.mark.parametrize(
    ("command", "code"), [("drift", 0), ("plan", 1), ("check", 1), ("place", 0)]
)
def test_yaml_and_table_outputs(command: str, code: int) -> None:
    args = [command, "--snapshot", FLEET] + (
        ["--target", "v1.35.0"] if command in ("plan", "check") else []
    )
    as_yaml = runner.invoke(app, [*args, "-o", "yaml"])
    assert as_yaml.exit_code == code
    assert isinstance(yaml.safe_load(as_yaml.stdout), dict)
    table = runner.invoke(app, args)
    assert table.exit_code == code
    assert "prod-" in table.stdout or "payments/billing" in table.stdout


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "snap.yaml"
    path.write_text(text)
    return str(path)


BASE = Path(FLEET).read_text()


@pytest.mark.parametrize(
    ("args", "snapshot_text", "message"),
    [
        (["plan", "-t", "1.35"], None, "invalid Kubernetes version '1.35'"),
        (["plan", "-t", "v1.34.2"], None, "downgrades are not supported"),
        (["plan", "-t", "v1.36.0"], None, "target v1.36.0 is not in availableVersions"),
        (["check", "-t", "banana"], None, "invalid Kubernetes version 'banana'"),
        (["drift", "-t", "v1.x"], None, "invalid Kubernetes version 'v1.x'"),
        (
            ["plan", "-t", "v1.35.0"],
            "clusters: [\n  {name: a\n",
            "snapshot is not valid YAML at line",
        ),
        (
            ["plan", "-t", "v1.35.0"],
            BASE.replace("  controlPlane: {version: v1.33.5, replicas: 3}\n", "", 1),
            "clusters[0]: missing required field 'controlPlane'",
        ),
        (
            ["drift"],
            BASE.replace("v1.34.2, replicas: 3}", "v1.34.two, replicas: 3}", 1),
            "clusters[1].controlPlane.version: invalid Kubernetes version 'v1.34.two'",
        ),
        (
            ["place"],
            BASE.replace("clusters: [prod-eu-1, prod-us-1]", "clusters: [prod-eu-9]", 1),
            "unknown cluster 'prod-eu-9'",
        ),
        (["place", "--workload", "nobody/nothing"], None, "unknown workload 'nobody/nothing'"),
        (["plan", "-t", "v1.35.0", "-l", "env in prod"], None, "invalid label selector"),
        (["plan", "-t", "v1.35.0", "-l", "env=qa"], None, "selector env=qa matches no cluster"),
        (
            ["plan", "-t", "v1.35.0", "--strategy", "/nonexistent.yaml"],
            None,
            "strategy file '/nonexistent.yaml' does not exist",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, args: list[str], snapshot_text: str | None, message: str
) -> None:
    snap = FLEET if snapshot_text is None else _write(tmp_path, snapshot_text)
    result = runner.invoke(app, [args[0], "--snapshot", snap, *args[1:]])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert message in lines[0]
    assert result.stdout == ""


def test_missing_snapshot_file() -> None:
    result = runner.invoke(app, ["drift", "--snapshot", "/no/such/file.yaml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: snapshot file '/no/such/file.yaml' does not exist"


def test_console_script_errors_have_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from orchestrator.cli.main import main; main()",
            "plan",
            "-s",
            FLEET,
            "-t",
            "v1.3",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        == "error: invalid Kubernetes version 'v1.3': expected a string like v1.31.1"
    )


@pytest.mark.parametrize(
    "args",
    [["place", "-o", "json"], ["plan", "-t", "v1.35.0", "-o", "json"], ["drift", "-o", "yaml"]],
)
def test_console_script_writes_the_whole_document_and_status(args: list[str]) -> None:
    """The console script ends one-shot commands with ``os._exit``: output flushed, same status."""
    expected = runner.invoke(app, [args[0], "-s", FLEET, *args[1:]])
    script = "from orchestrator.cli.main import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", script, args[0], "-s", FLEET, *args[1:]],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == expected.exit_code, proc.stderr
    assert proc.stdout == expected.stdout
    assert proc.stdout.endswith("\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calibrate", "-t", "banana"], "invalid Kubernetes version 'banana'"),
        (["calibrate", "-t", "v1.35.0", "-l", "env in prod"], "invalid label selector"),
    ],
)
def test_calibrate_rejects_bad_input_before_connecting(args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--address", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: ") and message in result.stderr


def test_temporal_commands_are_registered() -> None:
    result = runner.invoke(app, ["--help"])
    for command in (
        "temporal",
        "worker",
        "calibrate",
        "status",
        "pause",
        "resume",
        "approve",
        "retry",
        "skip",
        "abort",
        "demo",
        "env",
    ):
        assert command in result.stdout


@pytest.mark.parametrize(
    ("preload", "args", "code", "finalized"),
    [
        # The Temporal SDK is loaded: the process ends without finalizing, its status intact.
        ("import temporalio.bridge.temporal_sdk_bridge", ["--help"], 0, False),
        ("import temporalio.bridge.temporal_sdk_bridge", ["calibrate", "-t", "1.x"], 2, False),
        # Without it, an ordinary exit (atexit handlers run).
        ("pass", ["drift", "--snapshot", "/nonexistent.yaml"], 2, True),
    ],
)
def test_a_process_with_the_temporal_sdk_keeps_its_exit_status(
    preload: str, args: list[str], code: int, finalized: bool
) -> None:
    script = (
        f"{preload}; import atexit; atexit.register(print, 'finalized'); "
        "from orchestrator.cli.main import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert ("finalized" in proc.stdout) is finalized


# ------------------------------------------------------------------------------------------
# Exit status 1 = partial result: the document is printed and names what it left out.
# ------------------------------------------------------------------------------------------

GAP_FLEET = """\
availableVersions: [v1.19.4, v1.21.2]
clusters:
- name: old
  controlPlane: {version: v1.19.4}
  machineDeployments: [{name: md-0, version: v1.19.4}]
- name: fine
  controlPlane: {version: v1.21.0}
  machineDeployments: [{name: md-0, version: v1.21.0}]
workloads:
- name: cron
  apis: [batch/v1beta1/CronJob]
  placement: {clusters: [fine]}
"""

CLEAN_FLEET = GAP_FLEET.replace("[v1.19.4, v1.21.2]", "[v1.19.4, v1.20.1, v1.21.2]")


def test_check_never_calls_a_fleet_clean_that_it_did_not_check(tmp_path: Path) -> None:
    # availableVersions lacks minor 1.20: `old` cannot be planned, so nothing was checked there.
    snap = _write(tmp_path, GAP_FLEET)
    doc = run_json("check", "-s", snap, "-t", "v1.21.2", code=1)
    assert doc["findings"] == [] and doc["complete"] is False
    (entry,) = doc["unchecked"]
    assert entry["cluster"] == "old"
    assert "no available version for minor 1.20" in entry["reasons"][0]
    table = runner.invoke(app, ["check", "-s", snap, "-t", "v1.21.2"])
    assert table.exit_code == 1
    assert "no workload uses an API" not in table.stdout
    assert "Not checked" in table.stdout and "old" in table.stdout
    assert "1 of 2 clusters checked" in table.stdout


def test_check_of_a_fully_planned_fleet_is_complete(tmp_path: Path) -> None:
    snap = _write(tmp_path, CLEAN_FLEET)
    doc = run_json("check", "-s", snap, "-t", "v1.21.2")
    assert doc["unchecked"] == [] and doc["complete"] is True
    table = runner.invoke(app, ["check", "-s", snap, "-t", "v1.21.2"])
    assert table.exit_code == 0
    assert "no workload uses an API that a planned version removes" in table.stdout


def test_plan_with_a_blocked_cluster_is_partial(tmp_path: Path) -> None:
    snap = _write(tmp_path, GAP_FLEET)
    doc = run_json("plan", "-s", snap, "-t", "v1.21.2", code=1)
    assert doc["complete"] is False
    assert [c["name"] for c in doc["clusters"] if c["blocked"]] == ["old"]
    table = runner.invoke(app, ["plan", "-s", snap, "-t", "v1.21.2"])
    assert table.exit_code == 1
    assert "partial plan: 1 of 2 clusters will not reach v1.21.2: old" in table.stdout
    assert run_json("plan", "-s", _write(tmp_path, CLEAN_FLEET), "-t", "v1.21.2")["complete"]


def test_plan_with_an_unassigned_cluster_is_partial(tmp_path: Path) -> None:
    strategy = tmp_path / "strategy.yaml"
    strategy.write_text(
        "canary: null\nstages:\n- {name: only-old, selector: {matchLabels: {pick: 'yes'}}}\n"
    )
    snap = _write(tmp_path, CLEAN_FLEET)
    doc = run_json("plan", "-s", snap, "-t", "v1.21.2", "--strategy", str(strategy), code=1)
    assert sorted(doc["unassigned"]) == ["fine", "old"] and doc["complete"] is False


def test_place_with_an_unschedulable_workload_is_partial(tmp_path: Path) -> None:
    unplaceable = CLEAN_FLEET.replace(
        "placement: {clusters: [fine]}",
        "placement: {clusters: [fine], clusterAffinity: {matchLabels: {env: nowhere}}}",
    )
    doc = run_json("place", "-s", _write(tmp_path, unplaceable), code=1)
    assert [d["unschedulable"] for d in doc["decisions"]] == [True]
    assert not run_json("place", "-s", _write(tmp_path, CLEAN_FLEET))["decisions"][0][
        "unschedulable"
    ]


def test_drift_has_no_partial_result(tmp_path: Path) -> None:
    # Every cluster always gets a drift status; being behind is the answer, not a gap in it.
    run_json("drift", "-s", _write(tmp_path, GAP_FLEET), "-t", "v1.21.2")


def test_plan_shows_the_canary_approval_gate(tmp_path: Path) -> None:
    # approvalAfter on the canary gates the next stage in the preview, as the workflow enforces.
    gated = tmp_path / "strategy.yaml"
    gated.write_text(
        Path(STRATEGY)
        .read_text()
        .replace("  soak: 30m\n", "  soak: 30m\n  approvalAfter: true\n", 1)
    )
    doc = run_json("plan", "-s", FLEET, "-t", "v1.35.0", "--strategy", str(gated), code=1)
    assert doc["approvalGates"] == ["dev", "staging", "prod"]
    assert [s["approval"] for s in doc["stages"]] == [False, True, True, True]
    table = runner.invoke(app, ["plan", "-s", FLEET, "-t", "v1.35.0", "--strategy", str(gated)])
    assert "stage dev: maxConcurrency 3, soak 15m, approval before start" in table.stdout
    assert "approval gates: dev, staging, prod" in table.stdout
    assert "failure budget: 0 cluster(s) may fail before the run halts" in table.stdout
    assert doc["maxFailures"] == 0
    plain = run_json("plan", "-s", FLEET, "-t", "v1.35.0", "--strategy", STRATEGY, code=1)
    assert plain["approvalGates"] == ["staging", "prod"]


def test_check_follows_the_strategy_path(tmp_path: Path) -> None:
    # Minor 1.20 has only an rc: without the opt-in `old` is unchecked; with it, it is checked.
    snap = _write(
        tmp_path, GAP_FLEET.replace("[v1.19.4, v1.21.2]", "[v1.19.4, v1.20.0-rc.1, v1.21.2]")
    )
    doc = run_json("check", "-s", snap, "-t", "v1.21.2", code=1)
    assert "only pre-release(s) v1.20.0-rc.1" in doc["unchecked"][0]["reasons"][0]
    opt_in = tmp_path / "strategy.yaml"
    opt_in.write_text("stages: [{name: all}]\nallowPrereleases: true\n")
    doc = run_json("check", "-s", snap, "-t", "v1.21.2", "--strategy", str(opt_in))
    assert doc["unchecked"] == [] and doc["complete"] is True


def _completion(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    import os

    script = "from orchestrator.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, **env},
    )


def test_shell_completion_is_offered_under_the_commands_name() -> None:
    shown = _completion({}, "--show-completion", "bash")
    assert (shown.returncode, shown.stderr) == (0, "")
    # The program is `calibrator` however it was started, so one script serves every install.
    assert "complete -o default -F _calibrator_completion calibrator" in shown.stdout
    assert "_CALIBRATOR_COMPLETE=complete_bash" in shown.stdout


def test_completion_completes_commands_and_choices() -> None:
    commands = _completion(
        {"_CALIBRATOR_COMPLETE": "complete_bash", "COMP_WORDS": "calibrator dri", "COMP_CWORD": "1"}
    )
    assert (commands.returncode, commands.stdout.split()) == (0, ["drift"])
    levels = _completion(
        {
            "_CALIBRATOR_COMPLETE": "complete_bash",
            "COMP_WORDS": "calibrator check --fail-on ",
            "COMP_CWORD": "3",
        }
    )
    assert (levels.returncode, levels.stdout.split()) == (0, ["block", "warn", "none"])
