"""Continuous calibration on the real Temporal dev server: a Schedule, triggered by hand.

The fleet is the in-memory backend (the same activity code as production, behind the
FleetBackend port); the Schedule, its overlap policy, the runs and the child calibrations are the
real server's. A calibration starts only when the fleet breaks the policy, only for the due
clusters, and never while the previous run still runs. tests/integration/test_continuous.py runs
the same on the local CAPI plane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, ScheduleHandle, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.domain.versions import KubeVersion
from testkit.workflow_harness import FAST, cluster, in_memory, start_dev_server
from workflows import schedules, task_queues
from workflows.definitions.continuous import ContinuousCalibration, calibration_id
from workflows.model import ContinuousResult
from workflows.worker import build_worker

runner = CliRunner()
WAIT = 120.0
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _closed_window_days() -> list[str]:
    """A weekly window that is closed now and for the next day (two days ahead, 1 hour)."""
    return [DAYS[(datetime.now(UTC).weekday() + 2) % 7]]


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "CalibrationPolicy",
        "selector": {"matchLabels": {"env": "prod"}},
        "rules": {"channel": "stable"},
        "strategy": {
            "stages": [{"name": "prod"}],
            "maintenanceWindows": [
                {
                    "selector": {"matchLabels": {"region": "us"}},
                    "days": _closed_window_days(),
                    "start": "00:00",
                    "duration": "1h",
                }
            ],
        },
    }


async def _until(what: str, check: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def _run(client: Client, handle: ScheduleHandle, runs: int) -> tuple[str, ContinuousResult]:
    """Wait for the schedule's ``runs``-th run to finish; its id and result."""

    async def finished() -> str | None:
        desc = await handle.describe()
        recent = desc.info.recent_actions
        if len(recent) < runs:
            return None
        workflow_id = getattr(recent[runs - 1].action, "workflow_id", "")
        run = await client.get_workflow_handle(workflow_id).describe()
        return workflow_id if run.status != WorkflowExecutionStatus.RUNNING else None

    workflow_id = await _until(f"run {runs} of the schedule", finished)
    result = await client.get_workflow_handle_for(ContinuousCalibration.run, workflow_id).result()
    return workflow_id, result


async def _exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def test_a_schedule_calibrates_only_when_the_policy_is_broken(tmp_path: Path) -> None:
    fleet = in_memory(
        cluster("eu", "v1.33.7", labels={"env": "prod", "region": "eu"}),
        cluster("us", "v1.33.7", labels={"env": "prod", "region": "us"}),
        cluster("lab", "v1.32.9", labels={"env": "lab"}),
        versions=("v1.32.9", "v1.33.7", "v1.34.2"),
    )
    config = tmp_path / "temporal.toml"

    async def main() -> None:
        env = await start_dev_server()
        try:
            address = env.client.service_client.config.target_host
            config.write_text(f'[profile.dev]\naddress = "{address}"\n')
            cli_env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "dev"}

            async def cli(*argv: str) -> Any:
                return await asyncio.to_thread(runner.invoke, app, list(argv), env=cli_env)

            client = env.client
            async with build_worker(client, fleet, task_queue=task_queues.CALIBRATION):
                spec = schedules.build_schedule(
                    "fleet-policy", policy(), every=timedelta(days=7), paused=True, options=FAST
                )
                await schedules.create(client, "fleet-policy", spec)
                handle = client.get_schedule_handle("fleet-policy")

                # 1. The fleet keeps the policy (stable = v1.33.7): no calibration.
                await handle.trigger()
                first, result = await _run(client, handle, 1)
                assert result.report is not None and result.report.checked == 2
                assert result.report.violating == 0 and result.calibrations == ()
                assert result.message == "compliant: 2 cluster(s) keep the policy"
                assert not await _exists(client, calibration_id(first, "v1.34.2"))

                # 2. A new minor is released: stable moves to v1.34.2, both prod clusters break
                # it; "us" waits for its window, "eu" is calibrated, and only "eu". Its rollout
                # is held, so the run is still going when the schedule is triggered again: that
                # tick is skipped (overlap SKIP), no second run, no second calibration.
                fleet.available_versions = tuple(
                    KubeVersion.parse(v) for v in ("v1.32.9", "v1.33.7", "v1.34.2", "v1.35.0")
                )
                fleet.hold("eu")
                await handle.trigger()

                async def calibrating() -> bool:
                    desc = await handle.describe()
                    return bool(desc.info.running_actions) and fleet.has_upgrading_taint("eu")

                await _until("the calibration of eu", calibrating)
                await handle.trigger()
                skipped = await _until(
                    "the skipped tick",
                    lambda: _skipped(handle),
                )
                assert skipped == 1
                fleet.release("eu")
                second, result = await _run(client, handle, 2)
                assert result.report is not None
                assert result.report.counts == {"due": 1, "deferred": 1, "busy": 0, "unfixable": 0}
                (group,) = result.report.groups
                assert (group.target, group.scope.clusters, group.sample) == ("v1.34.2", 1, ("eu",))
                (started,) = result.calibrations
                assert started.calibration_id == f"{second}/v1.34.2"
                assert started.phase == "Completed"
                assert fleet.versions("eu") == ("v1.34.2", ("v1.34.2",))
                assert fleet.versions("us") == ("v1.33.7", ("v1.33.7",))
                assert fleet.versions("lab") == ("v1.32.9", ("v1.32.9",))
                assert len((await handle.describe()).info.recent_actions) == 2
                # Its scope and the calibration's plan were stored, then deleted by their
                # owners: nothing stays behind in the store.
                assert group.scope.digest in fleet.blob_deletes and len(fleet.blob_deletes) == 2
                assert fleet.blobs == {}

                # 3. Only "us" is left, and its window is closed: nothing starts.
                await handle.trigger()
                third, result = await _run(client, handle, 3)
                assert result.calibrations == ()
                assert result.report is not None and result.report.counts["deferred"] == 1
                assert "1 wait for their maintenance window" in result.message
                assert not await _exists(client, calibration_id(third, "v1.34.2"))

                # The CLI, through the profile: list, describe (the latest verdict), pause, delete.
                async def listed() -> bool:  # the list is read from visibility: poll it
                    shown = await cli("schedule", "list", "-o", "json")
                    assert shown.exit_code == 0, shown.output
                    return '"name": "fleet-policy"' in shown.stdout

                await _until("the schedule in the list", listed)
                described = await cli("schedule", "describe", "fleet-policy", "-o", "json")
                assert described.exit_code == 0, described.output
                assert '"overlap": "SKIP"' in described.stdout
                assert '"policy": "channel stable"' in described.stdout
                assert '"skippedOverlap": 1' in described.stdout
                assert "1 wait for their maintenance window" in described.stdout
                for argv in (("unpause", "fleet-policy"), ("pause", "fleet-policy")):
                    done = await cli("schedule", *argv, "--reason", "test")
                    assert done.exit_code == 0, done.output
                assert (await handle.describe()).schedule.state.paused
                created = await cli(
                    "schedule", "create", "nightly", "--policy", str(_policy_file(tmp_path)),
                    "--cron", "0 3 * * *", "--paused", "-o", "json",
                )  # fmt: skip
                assert created.exit_code == 0, created.output
                assert '"spec": "cron 0 3 * * *"' in created.stdout
                again = await cli(
                    "schedule", "create", "nightly", "--policy", str(_policy_file(tmp_path)),
                    "--every", "1d",
                )  # fmt: skip
                assert again.exit_code == 2
                assert again.stderr.strip() == "error: schedule nightly already exists"
                for name in ("nightly", "fleet-policy"):
                    deleted = await cli("schedule", "delete", name)
                    assert deleted.exit_code == 0, deleted.output
                missing = await cli("schedule", "describe", "nightly")
                assert missing.exit_code == 2
                assert missing.stderr.strip() == "error: schedule nightly not found"
        finally:
            await env.shutdown()

    asyncio.run(main())


async def _skipped(handle: ScheduleHandle) -> int:
    return (await handle.describe()).info.num_actions_skipped_overlap


def _policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("kind: CalibrationPolicy\nrules: {maxMinorsBehind: 1, noEndOfLife: true}\n")
    return path
