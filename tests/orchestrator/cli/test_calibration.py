"""Operator commands reach the right client call with the right arguments (no Temporal needed)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.cli import calibration
from orchestrator.cli.main import app
from orchestrator.kube import client as kube_client
from workflows import client as wc
from workflows.client import ControlError
from workflows.model import Ack, CalibrationProgress, ClusterProgress, ClusterState, Phase

runner = CliRunner()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], str]]:
    recorded: list[tuple[str, tuple[Any, ...], str]] = []

    async def no_client(options: object) -> object:
        return object()

    def fake(name: str) -> Any:
        async def call(client: object, *args: Any, reason: str = "") -> Ack:
            if args[-1] == "refused":
                raise ControlError(f"{name} refused")
            recorded.append((name, args, reason))
            return Ack("Running", f"{name} ok")

        return call

    monkeypatch.setattr(calibration, "_client", no_client)
    for name in ("pause", "resume", "approve", "retry", "skip", "abort"):
        monkeypatch.setattr(wc, name, fake(name))
    return recorded


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["retry", "cal-1", "--cluster", "prod-eu-1", "--reason", "flake"],
            ("retry", ("cal-1", "prod-eu-1"), "flake"),
        ),
        (["skip", "cal-1", "--cluster", "prod-eu-1"], ("skip", ("cal-1", "prod-eu-1"), "")),
        (["approve", "cal-1", "--stage", "prod"], ("approve", ("cal-1", "prod"), "")),
        (["abort", "cal-1", "--reason", "stop"], ("abort", ("cal-1",), "stop")),
        (["pause", "cal-1"], ("pause", ("cal-1",), "")),
        (["resume", "cal-1"], ("resume", ("cal-1",), "")),
    ],
)
def test_operator_commands_call_the_client(
    calls: list[tuple[str, tuple[Any, ...], str]], argv: list[str], expected: tuple[Any, ...]
) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert calls == [expected]


def test_a_refused_retry_is_one_error_line(calls: list[tuple[str, tuple[Any, ...], str]]) -> None:
    result = runner.invoke(app, ["retry", "cal-1", "--cluster", "refused"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: retry refused"
    assert calls == []


@pytest.mark.parametrize(
    ("in_pod", "namespace", "expected"),
    [
        (True, None, "calibrator-system"),  # the Deployment: every namespace, plans at home
        (True, "fleet", "fleet"),  # --namespace: the fleet's one namespace, as before
        (False, None, "default"),  # by hand with a kubeconfig, every namespace: as before
        (False, "fleet", "fleet"),
    ],
)
def test_the_worker_keeps_plans_in_its_pods_namespace_unless_told(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    in_pod: bool,
    namespace: str | None,
    expected: str,
) -> None:
    (tmp_path / "namespace").write_text("calibrator-system\n")  # as the kubelet mounts it
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_DIR", tmp_path)
    kubeconfig = kube_client.IN_CLUSTER if in_pod else str(tmp_path / "kubeconfig")
    assert calibration.plan_namespace(kubeconfig, namespace) == expected


# --- calibrate --wait / status --wait: the run's end is the exit status --------------------


class _Closed:
    def __init__(self, name: str) -> None:
        self.name = name


class _Description:
    def __init__(self, status: str) -> None:
        self.status = _Closed(status)


class _Run:
    """A workflow whose ``describe`` and progress walk through ``states`` (one per poll)."""

    def __init__(self, states: list[tuple[str, CalibrationProgress]]) -> None:
        self.states = states
        self.polls = 0
        self.id = "cal-1"

    def get_workflow_handle(self, calibration_id: str) -> _Run:
        assert calibration_id == "cal-1"
        return self

    async def describe(self) -> _Description:
        self.polls += 1
        return _Description(self.states[min(self.polls, len(self.states)) - 1][0])

    def progress(self) -> CalibrationProgress:
        return self.states[min(self.polls, len(self.states)) - 1][1]


def _progress(phase: Phase, *clusters: tuple[str, ClusterState, str], **kw: Any) -> Any:
    return CalibrationProgress(
        calibration_id="cal-1",
        target="v1.35.0",
        phase=phase,
        clusters=tuple(ClusterProgress(name=n, state=s, message=m) for n, s, m in clusters),
        counts={str(s): sum(1 for c in clusters if c[1] == s) for _, s, _ in clusters},
        total_clusters=len(clusters),
        **kw,
    )


@pytest.fixture
def run_ends(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[tuple[str, Any]]], _Run]:
    def install(states: list[tuple[str, Any]]) -> _Run:
        run = _Run(states)

        async def client(options: object, **extra: object) -> _Run:
            return run

        async def start(client: _Run, inp: object, **kw: object) -> _Run:
            return run

        async def status(client: _Run, calibration_id: str) -> Any:
            return run.progress() if run.polls else states[0][1]

        monkeypatch.setattr(calibration, "_client", client)
        monkeypatch.setattr(calibration, "POLL_SECONDS", 0)
        monkeypatch.setattr(wc, "start_calibration", start)
        monkeypatch.setattr(wc, "status", status)
        return run

    return install


RUNNING = _progress(
    Phase.RUNNING,
    ("a", ClusterState.RUNNING, "step 1/2 (control plane v1.35.0): rolling out"),
    ("b", ClusterState.PENDING, ""),
)
SUCCEEDED = _progress(
    Phase.COMPLETED,
    ("a", ClusterState.SUCCEEDED, "upgraded"),
    ("b", ClusterState.UP_TO_DATE, ""),
)


@pytest.mark.parametrize("command", [["calibrate", "-t", "v1.35.0"], ["status", "cal-1"]])
def test_wait_exits_0_only_for_a_run_that_upgraded_every_cluster(
    run_ends: Callable[[list[tuple[str, Any]]], _Run], command: list[str]
) -> None:
    run_ends([("RUNNING", RUNNING), ("RUNNING", RUNNING), ("COMPLETED", SUCCEEDED)])
    result = runner.invoke(app, [*command, "--wait", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["phase"] == "Completed"
    # Off a terminal: one line per change, nothing repeated, nothing wrapped, no table.
    assert result.stderr.splitlines() == [
        "cal-1 -> v1.35.0: Running (2 clusters: 1 Pending, 1 Running)",
        "cal-1 a: Running: step 1/2 (control plane v1.35.0): rolling out",
        "cal-1 b: Pending",
        "cal-1 -> v1.35.0: Completed (2 clusters: 1 Succeeded, 1 UpToDate)",
        "cal-1 a: Succeeded: upgraded",
        "cal-1 b: UpToDate",
    ]


@pytest.mark.parametrize(
    ("closed", "final", "code", "line"),
    [
        (
            "COMPLETED",
            _progress(
                Phase.FAILED,
                ("a", ClusterState.FAILED, "step 1/2: timed out"),
                message="failure budget exceeded",
            ),
            4,
            "calibration cal-1 ended Failed: 1 Failed; failure budget exceeded",
        ),
        (
            "TERMINATED",
            RUNNING,
            4,
            "calibration cal-1: workflow terminated (phase Running)",
        ),
        (
            "COMPLETED",
            _progress(Phase.ABORTED, ("a", ClusterState.ABORTED, ""), abort_reason="freeze"),
            5,
            "calibration cal-1 ended Aborted: freeze",
        ),
        (
            "COMPLETED",
            _progress(
                Phase.COMPLETED,
                ("a", ClusterState.SUCCEEDED, ""),
                ("b", ClusterState.BLOCKED, ""),
                ("c", ClusterState.SKIPPED, ""),
            ),
            6,
            "calibration cal-1 ended Completed with clusters not upgraded: 1 Blocked, 1 Skipped",
        ),
    ],
)
def test_wait_has_a_status_of_its_own_for_each_other_end(
    run_ends: Callable[[list[tuple[str, Any]]], _Run],
    closed: str,
    final: Any,
    code: int,
    line: str,
) -> None:
    run_ends([("RUNNING", RUNNING), (closed, final)])
    for command in (["calibrate", "-t", "v1.35.0"], ["status", "cal-1"]):
        result = runner.invoke(app, [*command, "--wait", "-o", "json"])
        assert result.exit_code == code, result.stderr
        assert json.loads(result.stdout)["calibration_id"] == "cal-1"  # the document, whole
        assert result.stderr.splitlines()[-1] == line


def test_calibrate_without_wait_and_status_without_wait_exit_0_whatever_the_run(
    run_ends: Callable[[list[tuple[str, Any]]], _Run],
) -> None:
    run_ends([("COMPLETED", _progress(Phase.ABORTED, ("a", ClusterState.ABORTED, "")))])
    started = runner.invoke(app, ["calibrate", "-t", "v1.35.0", "-o", "json"])
    assert (started.exit_code, started.stderr) == (0, "")
    assert json.loads(started.stdout) == {"calibrationId": "cal-1", "target": "v1.35.0"}
    shown = runner.invoke(app, ["status", "cal-1", "-o", "json"])
    assert (shown.exit_code, shown.stderr) == (0, "")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_is_a_live_table_not_lines(
    run_ends: Callable[[list[tuple[str, Any]]], _Run],
) -> None:
    import asyncio

    run = run_ends([("RUNNING", RUNNING), ("COMPLETED", SUCCEEDED)])
    screen = _Terminal()
    doc, closed = asyncio.run(calibration.follow_run(run, "cal-1", stream=screen))
    assert (doc["phase"], closed) == ("Completed", "COMPLETED")
    text = screen.getvalue()
    assert "\x1b[" in text  # cursor movement: redrawn in place
    assert "cal-1 -> v1.35.0: Completed" in text
    assert "cal-1 a: Succeeded" not in text  # none of the plain lines


def test_worker_help_gives_the_workers_own_placement_rounds_default() -> None:
    from workflows.activities.placement import PLACEMENT_ROUNDS_AT_ONCE

    result = runner.invoke(app, ["worker", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert f"(default: {PLACEMENT_ROUNDS_AT_ONCE};" in result.stdout
