"""Rollout shape: canary first, waves in order, maxConcurrency, approval gates, soak, windows."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowUpdateFailedError

from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import strategy_from_mapping
from orchestrator.planning import plan_calibration, plan_to_json
from testkit.workflow_harness import (
    Calibration,
    Harness,
    cluster,
    in_memory,
    snapshot,
    strategy,
)
from workflows import client as control
from workflows.client import ControlError
from workflows.model import CalibrationProgress, ClusterState, Phase, StageState

CANARY = {"calibrator.dev/canary": "true"}


def test_canary_goes_first_and_waves_run_in_order(harness: Harness) -> None:
    fleet = in_memory(
        cluster("c-canary", "v1.32.9", labels={"env": "dev", **CANARY}),
        *(cluster(f"dev-{i}", "v1.32.9", labels={"env": "dev"}) for i in range(1, 6)),
    )
    doc = strategy(
        {"name": "dev", "selector": {"matchLabels": {"env": "dev"}}, "maxConcurrency": 2},
        canary={"selector": {"matchLabels": CANARY}},
    )

    async def body(c: Calibration) -> None:
        result = await (await c.start("v1.33.5", strategy=doc)).result()
        assert result.phase == Phase.COMPLETED
        assert [s.name for s in result.stages] == ["canary", "dev"]
        # The waves live in the stored plan; progress counts them.
        assert (result.stages[1].wave_count, result.stages[1].clusters) == (3, 5)
        # The canary finished (untainted) before any other cluster was touched.
        canary_done = fleet.last("c-canary", "untaint")
        assert all(fleet.first(f"dev-{i}", "taint") > canary_done for i in range(1, 6))
        # Wave k+1 starts only after every cluster of wave k finished.
        waves = (("dev-1", "dev-2"), ("dev-3", "dev-4"), ("dev-5",))
        for earlier, later in itertools.pairwise(waves):
            end = max(fleet.last(n, "untaint") for n in earlier)
            assert all(fleet.first(n, "taint") > end for n in later)
        assert fleet.max_upgrading == 2

    harness.run(fleet, body)


def test_max_concurrency_bounds_clusters_upgrading_at_once(harness: Harness) -> None:
    fleet = in_memory(
        *(cluster(f"c{i}", "v1.31.13", labels={"env": "prod"}) for i in range(7)),
        rollout_polls=4,
    )
    doc = strategy({"name": "prod", "maxConcurrency": 3})

    async def body(c: Calibration) -> None:
        result = await (await c.start("v1.33.5", strategy=doc)).result()
        assert result.phase == Phase.COMPLETED
        assert fleet.max_upgrading == 3
        assert all(cl.state == ClusterState.SUCCEEDED for cl in result.clusters)

    harness.run(fleet, body)


def test_approval_gate_blocks_the_stage_until_approved(harness: Harness) -> None:
    fleet = in_memory(
        cluster("canary", "v1.32.9", labels=CANARY),
        cluster("prod-1", "v1.32.9", labels={"env": "prod"}),
        cluster("prod-2", "v1.32.9", labels={"env": "prod"}),
    )
    doc = strategy(
        {"name": "prod", "selector": {"matchLabels": {"env": "prod"}}, "approval": True},
        canary={"selector": {"matchLabels": CANARY}},
    )

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=doc)
        waiting = await c.wait_for(
            handle.id, "the approval gate", lambda p: p.phase == Phase.AWAITING_APPROVAL
        )
        assert waiting.cluster("canary").state == ClusterState.SUCCEEDED
        assert waiting.stages[1].state == StageState.AWAITING_APPROVAL
        assert waiting.cluster("prod-1").state == ClusterState.PENDING
        assert fleet.events_of("prod-1") == [] and fleet.events_of("prod-2") == []
        # Validators refuse what makes no sense, with the reason.
        with pytest.raises(ControlError, match="unknown stage 'nope'"):
            await control.approve(c.client, handle.id, "nope")
        with pytest.raises(ControlError, match="has no approval gate"):
            await control.approve(c.client, handle.id, "canary")
        ack = await control.approve(c.client, handle.id, "prod", "change CHG-1")
        assert "approved" in ack.message
        with pytest.raises(ControlError, match="already approved"):
            await control.approve(c.client, handle.id, "prod")
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        assert result.stages[1].approved
        assert fleet.first("prod-1", "taint") > fleet.last("canary", "untaint")

    harness.run(fleet, body)


def test_soak_time_is_honoured_between_stages(harness: Harness) -> None:
    fleet = in_memory(
        cluster("canary", "v1.32.9", labels=CANARY),
        cluster("rest", "v1.32.9"),
    )
    doc = strategy(
        {"name": "rest", "soak": "30m"},
        canary={"selector": {"matchLabels": CANARY}, "soak": "2h"},
    )

    async def body(c: Calibration) -> None:
        c.require_time_skipping()
        handle = await c.start("v1.33.5", strategy=doc)
        result = await handle.result()  # time skips over the soaks
        canary, rest = result.stages
        assert canary.finished_at is not None and canary.soak_until is not None
        assert canary.soak_until - canary.finished_at == timedelta(hours=2)
        assert rest.started_at is not None and rest.started_at >= canary.soak_until
        started = result.cluster("rest").started_at
        assert started is not None and started >= canary.soak_until
        assert rest.soak_until is not None and rest.finished_at is not None
        assert rest.soak_until - rest.finished_at == timedelta(minutes=30)
        assert result.updated_at is not None and result.updated_at >= rest.soak_until
        assert result.phase == Phase.COMPLETED

    harness.run(fleet, body)


def test_maintenance_window_delays_a_cluster_until_it_opens(harness: Harness) -> None:
    fleet = in_memory(
        cluster("anytime", "v1.32.9", labels={"env": "dev"}),
        cluster("windowed", "v1.32.9", labels={"env": "prod"}),
    )

    async def body(c: Calibration) -> None:
        c.require_time_skipping()
        now = (await c.env.get_current_time()).astimezone(UTC)
        opening = (now + timedelta(hours=3)).replace(second=0, microsecond=0)
        doc = strategy(
            {"name": "all", "maxConcurrency": 2},
            windows=[
                {
                    "selector": {"matchLabels": {"env": "prod"}},
                    "start": f"{opening:%H:%M}",
                    "duration": "1h",
                }
            ],
        )
        handle = await c.start("v1.33.5", strategy=doc)
        waiting = await c.wait_for(
            handle.id,
            "the window wait",
            lambda p: (
                p.cluster("windowed").state == ClusterState.WAITING_FOR_WINDOW
                and p.cluster("anytime").state == ClusterState.SUCCEEDED
            ),
        )
        assert "opens" in waiting.cluster("windowed").message
        assert fleet.events_of("windowed") == []
        result = await handle.result()
        windowed = result.cluster("windowed")
        assert windowed.state == ClusterState.SUCCEEDED
        assert windowed.started_at is not None and windowed.started_at >= opening
        assert windowed.window.endswith("UTC for 1h")
        anytime = result.cluster("anytime").started_at
        assert anytime is not None and anytime < opening
        assert isinstance(anytime, datetime)

    harness.run(fleet, body)


def test_update_on_a_finished_calibration_is_refused(harness: Harness) -> None:
    fleet = in_memory(cluster("one", "v1.32.9"))

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5")
        await handle.result()
        with pytest.raises((ControlError, WorkflowUpdateFailedError)):
            await control.pause(c.client, handle.id)

    harness.run(fleet, body)


def at_gate(stage: str) -> Callable[[CalibrationProgress], bool]:
    """The run waits for the approval of ``stage``."""

    def check(p: CalibrationProgress) -> bool:
        return p.phase == Phase.AWAITING_APPROVAL and any(
            s.name == stage and s.state == StageState.AWAITING_APPROVAL for s in p.stages
        )

    return check


def test_the_run_stops_at_exactly_the_gates_the_preview_shows(harness: Harness) -> None:
    # approvalAfter on the canary used to be a gate only the workflow knew about.
    clusters = (
        cluster("canary", "v1.32.9", labels=CANARY),
        cluster("dev-1", "v1.32.9", labels={"env": "dev"}),
        cluster("prod-1", "v1.32.9", labels={"env": "prod"}),
    )
    fleet = in_memory(*clusters)
    doc = strategy(
        {"name": "dev", "selector": {"matchLabels": {"env": "dev"}}},
        {"name": "prod", "selector": {"matchLabels": {"env": "prod"}}, "approval": True},
        canary={"selector": {"matchLabels": CANARY}, "approvalAfter": True},
    )
    preview = plan_to_json(
        plan_calibration(
            snapshot(*clusters), KubeVersion.parse("v1.33.5"), strategy_from_mapping(doc)
        )
    )
    assert preview["approvalGates"] == ["dev", "prod"]
    stage_of = {c["name"]: c["stage"] for c in preview["clusters"]}  # type: ignore[attr-defined]

    async def body(c: Calibration) -> None:
        handle = await c.start("v1.33.5", strategy=doc)
        for gate in preview["approvalGates"]:  # type: ignore[attr-defined]
            await c.wait_for(handle.id, f"the approval gate of {gate}", at_gate(gate))
            # Nothing of the gated stage was touched before its approval.
            assert all(fleet.events_of(n) == [] for n, s in stage_of.items() if s == gate)
            await control.approve(c.client, handle.id, gate)
        result = await handle.result()
        assert result.phase == Phase.COMPLETED
        assert [s.name for s in result.stages] == [
            s["name"]
            for s in preview["stages"]  # type: ignore[attr-defined]
        ]
        assert [s.name for s in result.stages if s.approval] == preview["approvalGates"]

    harness.run(fleet, body)
