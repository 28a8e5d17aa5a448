"""The progress table (`calibrator status`, `calibrator demo`) shows why a cluster is blocked."""

from __future__ import annotations

import json
from dataclasses import asdict

from rich.console import Console

from orchestrator.cli.calibration import moved_cell, renderable, row_message
from workflows.model import (
    CalibrationProgress,
    ClusterProgress,
    ClusterState,
    Phase,
    StepProgress,
)

SKEW = "current state violates the skew policy: md-0 at v1.29.0 is 4 minors behind v1.33.0"


def _doc() -> dict[str, object]:
    progress = CalibrationProgress(
        calibration_id="cal-1",
        target="v1.34.0",
        phase=Phase.RUNNING,
        clusters=(
            ClusterProgress("ok", state=ClusterState.RUNNING, message="controlPlane -> v1.34.0"),
            ClusterProgress("stuck", state=ClusterState.BLOCKED, reasons=(SKEW,)),
        ),
        counts={"Blocked": 1, "Running": 1, "UpToDate": 9998},
        total_clusters=10_000,
    )
    doc: dict[str, object] = json.loads(json.dumps(asdict(progress), default=str))
    return doc


def test_blocked_row_carries_the_plan_reason() -> None:
    doc = _doc()
    clusters = doc["clusters"]
    assert isinstance(clusters, list)
    assert row_message(clusters[1]) == f"blocked: {SKEW}"
    assert row_message(clusters[0]) == "controlPlane -> v1.34.0"
    con = Console(width=400, record=True)
    con.print(renderable(doc))
    text = con.export_text()
    stuck = next(line for line in text.splitlines() if "stuck" in line)
    assert "Blocked" in stuck and "4 minors behind v1.33.0" in stuck
    assert "10000 clusters: 1 Blocked, 1 Running, 9998 UpToDate" in text


def test_long_messages_are_clipped() -> None:
    row = {"name": "x", "state": "Running", "message": "m" * 200}
    assert len(row_message(row)) == 80
    blocked = {"name": "x", "state": "Blocked", "reasons": ["r" * 300]}
    assert len(row_message(blocked)) == 200 and row_message(blocked).endswith("…")


def test_a_cluster_waiting_for_a_decision_shows_its_reason() -> None:
    """The cause comes after the step's label; a progress line's 80 characters would cut it."""
    reason = (
        "step 1/2 (control plane v1.33.0 -> v1.34.0): timed out (schedule-to-close timeout); "
        "last seen: control plane rolling out v1.34.0: 0/1 Machines up to date"
    )
    for state in ("WaitingForDecision", "Skipped", "Failed", "Aborted"):
        row = {"name": "x", "state": state, "message": reason}
        assert row_message(row) == reason
    waiting = {"name": "x", "state": "WaitingForDecision", "message": "m" * 300}
    assert len(row_message(waiting)) == 200


def test_replicas_moved_per_cluster_step_and_run() -> None:
    steps = (
        StepProgress(0, "s0", "cp", replicas_moved=0),
        StepProgress(1, "s1", "w", replicas_moved=3),
    )
    progress = CalibrationProgress(
        calibration_id="cal-1",
        target="v1.34.0",
        phase=Phase.COMPLETED,
        clusters=(
            ClusterProgress("a", state=ClusterState.SUCCEEDED, steps=steps, replicas_moved=5),
        ),
        replicas_moved=7,
    )
    doc: dict[str, object] = json.loads(json.dumps(asdict(progress), default=str))
    clusters = doc["clusters"]
    assert isinstance(clusters, list)
    assert moved_cell(clusters[0]) == "5 (steps 0/3)"
    assert moved_cell({"name": "b"}) == "0"
    con = Console(width=400, record=True)
    con.print(renderable(doc))
    assert "replicas moved by placement: 7 (forced: 0)" in con.export_text()


def test_moved_cell_and_caption_show_the_forced_replicas() -> None:
    assert moved_cell({"replicas_moved": 4, "replicas_forced": 3}) == "4 (forced 3)"
    steps = [{"replicas_moved": 1}, {"replicas_moved": 3}]
    cell = moved_cell({"replicas_moved": 4, "replicas_forced": 3, "steps": steps})
    assert cell == "4 (steps 1/3, forced 3)"
    doc = {
        "calibration_id": "c",
        "target": "v1.35.0",
        "phase": "Completed",
        "clusters": [],
        "replicas_moved": 9,
        "replicas_forced": 2,
    }
    con = Console(width=400, record=True)
    con.print(renderable(doc))
    assert "replicas moved by placement: 9 (forced: 2)" in con.export_text()
