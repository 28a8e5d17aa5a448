"""Continue-as-new at wave boundaries carries plan, progress and approvals into the next run."""

from __future__ import annotations

from dataclasses import replace

from temporalio.api.enums.v1 import EventType

from testkit.workflow_harness import FAST, Calibration, Harness, cluster, in_memory, strategy
from workflows import client as control
from workflows.model import ClusterState, Phase, StageState, StepState

CANARY = {"calibrator.dev/canary": "true"}


def test_continue_as_new_carries_state_across_runs(harness: Harness) -> None:
    fleet = in_memory(
        cluster("canary", "v1.32.9", labels=CANARY),
        cluster("r1", "v1.31.13"),
        cluster("r2", "v1.32.9"),
        cluster("r3", "v1.32.9"),
    )
    fleet.hold("canary")
    doc = strategy(
        {"name": "rest", "maxConcurrency": 2, "approval": True},
        canary={"selector": {"matchLabels": CANARY}},
    )
    options = replace(FAST, history_threshold=1)  # force continue-as-new at every boundary

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=doc, options=options)
        await c.wait_for(
            handle.id,
            "canary step running",
            lambda p: p.cluster("canary").steps[0].state == StepState.RUNNING,
        )
        await control.approve(c.client, handle.id, "rest", "approved ahead of time")
        fleet.release("canary")
        result = await handle.result()  # follows the chain of runs
        assert result.phase == Phase.COMPLETED
        assert result.runs >= 3, result.runs  # canary wave, canary stage, rest waves...
        assert all(cl.state == ClusterState.SUCCEEDED for cl in result.clusters)
        assert [s.state for s in result.stages] == [StageState.DONE, StageState.DONE]
        assert result.stages[1].approved
        # Progress made by earlier runs survived: times and step attempts are intact.
        canary = result.cluster("canary")
        assert canary.started_at is not None and canary.finished_at is not None
        assert [s.attempts for s in canary.steps] == [1, 1]
        assert all(count == 1 for count in fleet.patches.values())
        # The first run really ended by continuing as new.
        first = c.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
        history = await first.fetch_history()
        assert (
            history.events[-1].event_type
            == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        )
        described = await c.client.get_workflow_handle(handle.id).describe()
        assert described.run_id != handle.first_execution_run_id

    harness.run(fleet, body)
