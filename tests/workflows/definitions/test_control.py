"""Operator control: pause / resume, skip, abort, their validators, and the progress query."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from testkit.workflow_harness import Calibration, Harness, cluster, in_memory, strategy
from workflows import client as control
from workflows.client import ControlError
from workflows.model import (
    SAMPLE_LIMIT,
    CalibrationProgress,
    ClusterProgress,
    ClusterState,
    Phase,
    StageProgress,
    StageState,
    StepProgress,
    StepState,
)

ONE_AT_A_TIME = strategy({"name": "fleet", "maxConcurrency": 1})


def test_pause_stops_at_the_next_step_boundary_and_resume_continues(harness: Harness) -> None:
    # "first" has two control-plane steps; it is held inside the first one.
    fleet = in_memory(cluster("first", "v1.31.13"), cluster("second", "v1.32.9"))
    fleet.hold("first")

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=ONE_AT_A_TIME)
        await c.wait_for(
            handle.id,
            "first's first step",
            lambda p: p.cluster("first").steps[0].state == StepState.RUNNING,
        )
        with pytest.raises(ControlError, match="not paused"):
            await control.resume(c.client, handle.id)
        ack = await control.pause(c.client, handle.id, "incident INC-7")
        assert ack.state == Phase.PAUSED.value
        with pytest.raises(ControlError, match="already paused"):
            await control.pause(c.client, handle.id)
        fleet.release("first")
        paused = await c.wait_for(
            handle.id, "first paused", lambda p: p.cluster("first").state == ClusterState.PAUSED
        )
        assert paused.phase == Phase.PAUSED and paused.paused
        first = paused.cluster("first")
        assert [s.state for s in first.steps][:2] == [StepState.SUCCEEDED, StepState.PENDING]
        assert first.tainted and fleet.has_upgrading_taint("first")  # paused mid-upgrade: tainted
        with pytest.raises(ControlError, match="not waiting for a decision"):
            await control.decide(c.client, handle.id, "first", "retry")
        await asyncio.sleep(0.3)  # nothing moves while paused
        still = await c.progress(handle.id)
        assert still.cluster("first").state == ClusterState.PAUSED
        assert still.cluster("second").state == ClusterState.PENDING
        assert fleet.events_of("second") == []
        await control.resume(c.client, handle.id, "incident over")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED and not result.paused
        assert all(cl.state == ClusterState.SUCCEEDED for cl in result.clusters)

    harness.run(fleet, body)


def test_skip_leaves_a_pending_cluster_untouched(harness: Harness) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"), cluster("b", "v1.32.9"), cluster("c", "v1.32.9"))
    fleet.hold("a")

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=ONE_AT_A_TIME)
        await c.wait_for(
            handle.id, "a running", lambda p: p.cluster("a").state == ClusterState.RUNNING
        )
        with pytest.raises(ControlError, match="skip applies before it starts"):
            await control.skip(c.client, handle.id, "a")
        with pytest.raises(ControlError, match="not part of this calibration"):
            await control.skip(c.client, handle.id, "zzz")
        await control.skip(c.client, handle.id, "c", "owned by team X")
        fleet.release("a")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        skipped = result.cluster("c")
        assert skipped.state == ClusterState.SKIPPED and "owned by team X" in skipped.message
        assert all(s.state == StepState.SKIPPED for s in skipped.steps)
        assert fleet.events_of("c") == []
        assert result.cluster("b").state == ClusterState.SUCCEEDED

    harness.run(fleet, body)


def test_abort_stops_running_clusters_at_a_step_boundary(harness: Harness) -> None:
    fleet = in_memory(cluster("a", "v1.31.13"), cluster("b", "v1.32.9"), cluster("c", "v1.32.9"))
    fleet.hold("a")

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=ONE_AT_A_TIME)
        await c.wait_for(
            handle.id,
            "a's first step",
            lambda p: p.cluster("a").steps[0].state == StepState.RUNNING,
        )
        ack = await control.abort(c.client, handle.id, "wrong target")
        assert ack.state == Phase.ABORTED.value
        with pytest.raises(ControlError, match="already aborting"):
            await control.abort(c.client, handle.id)
        fleet.release("a")
        result = await handle.result()
        assert result.phase == Phase.ABORTED and result.abort_reason == "wrong target"
        a = result.cluster("a")
        # The running step finished; the next did not start; a stays tainted (mid-upgrade).
        assert a.state == ClusterState.ABORTED
        assert [s.state for s in a.steps] == [
            StepState.SUCCEEDED,
            StepState.SKIPPED,
            StepState.SKIPPED,
        ]
        assert a.touched and a.tainted and fleet.has_upgrading_taint("a")
        assert "mid-upgrade" in a.message
        for name in ("b", "c"):
            assert result.cluster(name).state == ClusterState.NOT_STARTED
            assert fleet.events_of(name) == []
        assert result.stages[0].state != StageState.DONE

    harness.run(fleet, body)


def test_progress_query_shape(harness: Harness) -> None:
    fleet = in_memory(
        cluster("blocked", "v1.31.13", workers="v1.27.0"),
        cluster("ok", "v1.32.9", labels={"calibrator.dev/canary": "true"}),
        cluster("current", "v1.33.5"),
        versions=("v1.27.0", "v1.31.13", "v1.32.9", "v1.33.5"),
    )
    fleet.hold("ok")

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5")  # default strategy: canary, then one at a time
        mid = await c.wait_for(
            handle.id,
            "ok's first step",
            lambda p: p.cluster("ok").steps[0].state == StepState.RUNNING,
        )
        assert isinstance(mid, CalibrationProgress)
        assert mid.calibration_id == handle.id and mid.target == "v1.33.5"
        assert mid.phase == Phase.RUNNING and mid.runs == 1 and mid.failures == 0
        assert isinstance(mid.started_at, datetime) and isinstance(mid.updated_at, datetime)
        assert [s.name for s in mid.stages] == ["canary"]
        assert isinstance(mid.stages[0], StageProgress)
        assert mid.stages[0].state == StageState.RUNNING
        assert (mid.stages[0].wave_count, mid.stages[0].clusters) == (1, 1)
        assert mid.total_clusters == 3
        assert mid.counts == {"Blocked": 1, "Running": 1, "UpToDate": 1}
        ok = mid.cluster("ok")
        assert isinstance(ok, ClusterProgress) and ok.stage == "canary"
        assert ok.from_version == "v1.32.9" and ok.target == "v1.33.5"
        assert ok.tainted and isinstance(ok.steps[0], StepProgress)
        assert ok.steps[0].state == StepState.RUNNING and ok.steps[0].attempts == 1
        assert ok.steps[0].step_id == f"{handle.id}/ok/00-controlPlane-v1.33.5"
        assert mid.cluster("blocked").state == ClusterState.BLOCKED
        assert any("skew" in r for r in mid.cluster("blocked").reasons)
        assert mid.cluster("current").state == ClusterState.UP_TO_DATE
        child = await control.cluster_status(c.client, handle.id, "ok")
        assert child.steps[0].activity in ("patch", "wait")
        fleet.release("ok")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        assert result.cluster("ok").finished_at is not None

    harness.run(fleet, body)


def test_abort_at_an_approval_gate_ends_the_run_without_touching_the_stage(
    harness: Harness,
) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"), cluster("b", "v1.32.9"))
    doc = strategy({"name": "gated", "approval": True, "maxConcurrency": 2})

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=doc)
        await c.wait_for(handle.id, "the gate", lambda p: p.phase == Phase.AWAITING_APPROVAL)
        await control.abort(c.client, handle.id, "change window cancelled")
        result = await handle.result()
        assert result.phase == Phase.ABORTED
        assert result.stages[0].state == StageState.NOT_STARTED
        assert {cl.state for cl in result.clusters} == {ClusterState.NOT_STARTED}
        assert fleet.events == []

    harness.run(fleet, body)


def test_a_fleet_beyond_the_detail_limit_is_counted_and_later_clusters_can_be_skipped(
    harness: Harness,
) -> None:
    # 56 clusters in two waves of 28: the last ones get no detail until their wave loads.
    names = [f"c{i:02d}" for i in range(56)]
    fleet = in_memory(*(cluster(n, "v1.32.9") for n in names), rollout_polls=1)
    fleet.hold("c00")

    async def body(c: Calibration) -> None:
        handle = await c.start(
            "v1.33.5", strategy=strategy({"name": "fleet", "maxConcurrency": 28})
        )
        mid = await c.wait_for(
            handle.id, "c00 running", lambda p: p.cluster("c00").state == ClusterState.RUNNING
        )
        assert mid.total_clusters == 56 and "c55" not in {cl.name for cl in mid.clusters}
        assert len(mid.clusters) <= SAMPLE_LIMIT
        await control.skip(c.client, handle.id, "c55", "owned by team X")
        with pytest.raises(ControlError, match="already skipped"):
            await control.skip(c.client, handle.id, "c55")
        with pytest.raises(ControlError, match="not part of this calibration"):
            await control.skip(c.client, handle.id, "zzz")
        assert (await c.progress(handle.id)).counts.get("Skipped") == 1
        fleet.release("c00")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        assert result.counts == {"Skipped": 1, "Succeeded": 55}
        skipped = result.cluster("c55")  # detail once its wave loaded
        assert skipped.state == ClusterState.SKIPPED and "owned by team X" in skipped.message
        assert fleet.events_of("c55") == []
        assert len(result.clusters) == SAMPLE_LIMIT  # the last finished ones
        assert all(fleet.versions(n)[0] == "v1.33.5" for n in names[:55])

    harness.run(fleet, body)
