"""Workflow inputs sent straight through a Temporal client: one clear, non-retryable failure."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from testkit.workflow_harness import FAST, Calibration, Harness, cluster, in_memory, one_step_run
from workflows.definitions.cluster_upgrade import ClusterUpgrade
from workflows.definitions.fleet_calibration import FleetCalibration
from workflows.model import CalibrationInput, ClusterUpgradeInput, Timeouts
from workflows.validation import validate_calibration_input, validate_cluster_upgrade_input

STAGES = [{"name": "fleet"}]
BAD_CALIBRATIONS: list[tuple[CalibrationInput, str]] = [
    (CalibrationInput(target="latest"), "target: invalid Kubernetes version 'latest'"),
    (CalibrationInput(target="v" + "1" * 5000), "target: expected a Kubernetes version"),
    (CalibrationInput(target=5), "target: expected a Kubernetes version"),  # type: ignore[arg-type]
    (
        CalibrationInput(target="v1.33.5", strategy={"stages": [{"name": "a", "approvel": True}]}),
        "unknown field(s) approvel",
    ),
    (
        CalibrationInput(
            target="v1.33.5", strategy={"stages": [{"name": "a", "approval": "false"}]}
        ),
        "approval: must be true or false, got 'false'",
    ),
    (
        CalibrationInput(target="v1.33.5", strategy={"apiVersion": "v9", "stages": STAGES}),
        "strategy.apiVersion: expected calibrator.dev/v1alpha1",
    ),
    (
        CalibrationInput(
            target="v1.33.5",
            strategy={"stages": [{"name": "a", "soak": "99999999999999999999d"}]},
        ),
        "longer than the limit of 366d",
    ),
    (CalibrationInput(target="v1.33.5", selector="env in prod"), "invalid label selector"),
    (CalibrationInput(target="v1.33.5", snapshot=[1]), "snapshot: expected"),  # type: ignore[arg-type]
    (
        CalibrationInput(target="v1.33.5", options=replace(FAST, worker_concurrency=0)),
        "options.worker_concurrency: must be 1 to 1000",
    ),
    (
        CalibrationInput(
            target="v1.33.5",
            options=replace(FAST, timeouts=Timeouts(rollout_seconds=1e30)),
        ),
        "options.timeouts.rollout_seconds",
    ),
    (
        CalibrationInput(
            target="v1.33.5",
            options=replace(FAST, timeouts=Timeouts(poll_seconds=float("nan"))),
        ),
        "options.timeouts.poll_seconds",
    ),
    (
        CalibrationInput(
            target="v1.33.5",
            options=replace(FAST, timeouts=Timeouts(placement_seconds=0)),
        ),
        "options.timeouts.placement_seconds",
    ),
    (
        CalibrationInput(target="v1.33.5", options=replace(FAST, history_threshold=0)),
        "options.history_threshold",
    ),
]


def _upgrade(**changes: Any) -> ClusterUpgradeInput:
    plan = replace(one_step_run(), **changes)
    return ClusterUpgradeInput("x", "v1.33.5", "fleet", plan, FAST)


BAD_UPGRADES: list[tuple[ClusterUpgradeInput, str]] = [
    (_upgrade(plan=replace(one_step_run().plan, cluster="")), "plan.plan.cluster"),
    (_upgrade(step_ids=()), "plan.step_ids: 0 id(s) for 1 planned step(s)"),
    (_upgrade(step_ids=(" ",)), "plan.step_ids[0]"),
]


@pytest.mark.parametrize(("input", "message"), BAD_CALIBRATIONS)
def test_bad_calibration_input(input: CalibrationInput, message: str) -> None:
    with pytest.raises(ApplicationError) as err:
        validate_calibration_input(input)
    assert err.value.non_retryable and err.value.type == "InvalidInput"
    assert message in err.value.message and "\n" not in err.value.message
    assert len(err.value.message) < 300


@pytest.mark.parametrize(("input", "message"), BAD_UPGRADES)
def test_bad_cluster_upgrade_input(input: ClusterUpgradeInput, message: str) -> None:
    with pytest.raises(ApplicationError) as err:
        validate_cluster_upgrade_input(input)
    assert err.value.non_retryable and message in err.value.message


def test_good_inputs_pass() -> None:
    validate_calibration_input(CalibrationInput(target="v1.33.5", strategy={"stages": STAGES}))
    validate_cluster_upgrade_input(_upgrade())


def test_started_directly_the_workflows_fail_at_once_and_touch_nothing(harness: Harness) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"))

    async def body(c: Calibration) -> None:
        starts: list[tuple[Any, Any, str]] = [
            (FleetCalibration.run, BAD_CALIBRATIONS[3][0], "approvel"),
            (FleetCalibration.run, BAD_CALIBRATIONS[9][0], "worker_concurrency"),
            (ClusterUpgrade.run, BAD_UPGRADES[1][0], "plan.step_ids"),
        ]
        for run, input, message in starts:
            handle = await c.client.start_workflow(
                run, input, id=f"direct-{uuid.uuid4().hex[:8]}", task_queue=c.task_queue
            )
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
            cause = failure.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput"
            assert message in cause.message
        assert fleet.events == []

    harness.run(fleet, body)


def test_a_cluster_the_inventory_skipped_is_shown_with_its_reason(harness: Harness) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"))
    read = fleet.inventory

    async def inventory(clusters: Any = ()) -> Any:
        return replace(await read(clusters), skipped={"broken": "no Kubernetes version"})

    fleet.inventory = inventory  # type: ignore[method-assign]

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy={"stages": STAGES})
        result = await handle.result()
        broken = result.cluster("broken")
        assert broken.state == "Skipped" and broken.message == "skipped: no Kubernetes version"
        assert result.cluster("a").state == "Succeeded"
        assert fleet.events_of("broken") == []

    harness.run(fleet, body)
