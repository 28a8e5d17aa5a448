"""Wave scheduling of a ``FleetCalibration`` run: which clusters start when.

A stage opens at its approval gate; its waves run in order, a wave's members loaded from the
stored plan in bounded slices and started at once (the planner already bounded a wave by the
stage's ``maxConcurrency``); a cluster starts only while the run may start clusters and only
inside its maintenance window (on the workflow clock); after the last wave the stage soaks.
These rules change with the rollout strategy, not with the operator's commands nor with how
progress is reported, so they live apart from both and from the main loop that calls them.
Every function takes the run's record (``FleetRun``) explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    # Domain types that are payloads themselves (a window is a ``MaintenanceWindow`` with its
    # ``LabelSelector``): the SDK resolves their field types through the sandbox's ``sys.modules``
    # when it decodes them, and only a module imported here by its own name is there.
    from orchestrator.domain.selectors import LabelSelector, Requirement  # noqa: F401
    from orchestrator.domain.waves import MaintenanceWindow  # noqa: F401
    from workflows import search_attributes
    from workflows.activities import CalibrationActivities
    from workflows.definitions.cluster_upgrade import ClusterUpgrade
    from workflows.definitions.common import MIN_TIMER, describe_failure, read_options
    from workflows.definitions.fleet_control import catch_up
    from workflows.definitions.fleet_progress import FleetRun, skipped_message
    from workflows.model import (
        FAILED_CLUSTER_STATES,
        FINAL_CLUSTER_STATES,
        SAMPLE_LIMIT,
        ClusterProgress,
        ClusterState,
        ClusterUpgradeInput,
        Phase,
        StageState,
        StepProgress,
        StepState,
        WaveInput,
        WaveMember,
    )

# Members per ``wave`` activity call: a wave of any size enters history in bounded slices.
WAVE_SLICE = 200


async def open_gate(run: FleetRun, index: int) -> bool:
    """The stage's approval gate; False when the run was aborted while waiting."""
    assert run.plan is not None
    stage = run.plan.stages[index]
    if run.stages[index].state not in (StageState.PENDING, StageState.AWAITING_APPROVAL):
        return True  # resumed after continue-as-new inside this stage
    if stage.approval and stage.name not in run.approved:
        run.set_stage(index, state=StageState.AWAITING_APPROVAL)
        run.activity_phase = Phase.AWAITING_APPROVAL
        run.touch(f"stage {stage.name} waits for approval")
        await workflow.wait_condition(lambda: stage.name in run.approved or run.aborted)
        if run.aborted:
            return False
    run.activity_phase = Phase.RUNNING
    run.set_stage(index, state=StageState.RUNNING, started_at=workflow.now())
    run.touch(f"stage {stage.name} started")
    return True


async def gate(run: FleetRun) -> bool:
    """Before a wave: wait out pause and halt; False when the run must stop."""
    while True:
        if run.must_stop():
            return False
        if run.may_start():
            run.touch()
            return True
        run.touch()
        await workflow.wait_condition(lambda: run.may_start() or run.must_stop())


async def run_wave(run: FleetRun, stage_index: int, wave_index: int) -> None:
    """Load the wave's members from the stored plan (bounded slices), run them, settle."""
    assert run.plan is not None
    stage = run.plan.stages[stage_index]
    run.touch(f"stage {stage.name}: wave {wave_index + 1}/{stage.waves}")
    wave: list[str] = []
    offset, total = 0, 1
    while offset < total:
        part = await workflow.execute_activity_method(
            CalibrationActivities.wave,
            WaveInput(run.plan.plan, stage_index, wave_index, offset, WAVE_SLICE),
            **read_options(run.input.options),
        )
        total = part.total
        offset += max(1, len(part.members))
        for member in part.members:
            wave.append(member.name)
            load_member(run, stage.name, member)
    for name in wave:
        if run.clusters[name].state == ClusterState.PENDING and not run.started(name):
            run.tasks[name] = asyncio.create_task(run_cluster(run, stage.name, name))
    await workflow.wait_condition(lambda: all(run.settled(n) for n in wave))
    for name in wave:
        run.tasks.pop(name, None)
        run.members.pop(name, None)
    run.set_stage(stage_index, finished_at=workflow.now())
    prune(run)


def load_member(run: FleetRun, stage: str, member: WaveMember) -> None:
    """A cluster of the current wave gets its detail entry (pending, or skipped ahead)."""
    known = run.clusters.get(member.name)
    if known is not None and (known.state != ClusterState.PENDING or known.started_at):
        return  # skipped while it waited, or already started
    ids = member.step_ids or ("",) * len(member.steps)
    steps = tuple(
        StepProgress(i, sid, d) for i, (sid, d) in enumerate(zip(ids, member.steps, strict=True))
    )
    progress = ClusterProgress(
        name=member.name,
        stage=stage,
        from_version=member.from_version,
        target=run.progress.target,
        window="" if member.window is None else member.window.describe(),
        steps=steps,
    )
    if member.name in run.skip_ahead:  # counted as skipped when the operator asked
        reason = run.skip_ahead.pop(member.name)
        run.clusters[member.name] = replace(
            progress,
            state=ClusterState.SKIPPED,
            finished_at=workflow.now(),
            message=skipped_message(reason),
            steps=tuple(replace(s, state=StepState.SKIPPED) for s in steps),
        )
        return
    run.clusters[member.name] = progress
    run.members[member.name] = member


def prune(run: FleetRun) -> None:
    """Keep detail for clusters in flight, failed ones and the last finished ones only."""
    finished = [
        n
        for n, c in run.clusters.items()
        if c.state in FINAL_CLUSTER_STATES and c.state not in FAILED_CLUSTER_STATES
    ]
    for name in finished[: max(0, len(finished) - SAMPLE_LIMIT)]:
        del run.clusters[name]


async def run_cluster(run: FleetRun, stage: str, name: str) -> None:
    """Start one cluster once the run may start it and its window is open; await its end."""
    member = run.members[name]
    window = member.window

    def skipped() -> bool:
        return run.clusters[name].state == ClusterState.SKIPPED

    while True:
        await workflow.wait_condition(lambda: run.may_start() or run.must_stop() or skipped())
        if skipped():
            return
        if run.must_stop():
            run.set_cluster(
                name,
                state=ClusterState.NOT_STARTED,
                finished_at=workflow.now(),
                message="not started: " + (run.progress.abort_reason or "failure budget exceeded"),
            )
            return
        now = workflow.now()
        if window is None or window.is_open(now):
            break
        opening = window.next_opening(now)
        run.set_cluster(
            name,
            state=ClusterState.WAITING_FOR_WINDOW,
            message=f"maintenance window {member.window.describe() if member.window else ''} "
            f"opens {opening:%Y-%m-%d %H:%M} UTC",
        )
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: run.must_stop() or skipped() or not run.may_start(),
                timeout=max(opening - now, MIN_TIMER),
                timeout_summary=f"window {name}",
            )
    await start_child(run, stage, member)


async def start_child(run: FleetRun, stage: str, member: WaveMember) -> None:
    """Start the cluster's ``ClusterUpgrade`` child and record how it ended."""
    assert run.plan is not None
    name = member.name
    run.set_cluster(name, state=ClusterState.RUNNING, started_at=workflow.now(), message="starting")
    target = run.plan.target
    try:
        handle = await workflow.start_child_workflow(
            ClusterUpgrade.run,
            ClusterUpgradeInput(
                calibration_id=workflow.info().workflow_id,
                target=target,
                stage=stage,
                options=run.input.options,
                plan_ref=run.plan.plan,
                cluster=name,
            ),
            id=run.child_id(name),
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(search_attributes.CLUSTER_NAME, name),
                    SearchAttributePair(search_attributes.CALIBRATION_TARGET, target),
                    SearchAttributePair(
                        search_attributes.CALIBRATION_PHASE, ClusterState.PENDING.value
                    ),
                ]
            ),
            static_summary=f"Upgrade {name} {member.from_version} → {target} "
            f"({len(member.steps)} steps, stage {stage})",
            static_details="\n".join(
                [f"Calibration `{workflow.info().workflow_id}`, stage {stage}", ""]
                + [f"{i + 1}. {d}" for i, d in enumerate(member.steps)]
                + ([f"\nMaintenance window: {member.window.describe()}"] if member.window else [])
            ),
        )
        run.open_children.add(name)
        try:
            await catch_up(run, name)
            final = await handle
        finally:
            run.open_children.discard(name)
    except ChildWorkflowError as err:
        run.set_cluster(
            name,
            state=ClusterState.FAILED,
            finished_at=workflow.now(),
            message=f"upgrade workflow failed: {describe_failure(err)}",
        )
        return
    current = run.clusters[name]
    if current.state not in FINAL_CLUSTER_STATES or current.state != final.state:
        run.put(
            replace(
                final,
                stage=current.stage,
                window=current.window,
                started_at=current.started_at,
            )
        )
        run.touch()


# How long a run that ends waits for the children that reported their end to close.
CLOSING_WAIT = timedelta(minutes=5)


async def closing_children(run: FleetRun) -> None:
    """Wait, bounded, until every child of this run that reported its end has closed.

    A child reports its final state by signal and then returns; its close reaches the parent as
    an event of its own. A parent that completes between the two has its completion refused (a
    new event arrived during its task) and runs its last task again, live: the calibrations
    metric counted the end twice (``tests/workflows/test_observability.py``, every run once the
    re-placements got faster). Children still running (an abort abandons them) are not waited
    for, and no timer starts when nothing is closing.
    """

    def closing() -> bool:
        return any(
            (c := run.clusters.get(name)) is not None and c.state in FINAL_CLUSTER_STATES
            for name in run.open_children
        )

    if closing():
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: not closing(), timeout=CLOSING_WAIT, timeout_summary="children closing"
            )


async def soak(run: FleetRun, index: int) -> None:
    """After a stage's last wave: wait its soak time out (an abort ends the wait)."""
    assert run.plan is not None
    stage = run.plan.stages[index]
    if stage.soak_seconds <= 0:
        return
    progress = run.stages[index]
    until = progress.soak_until
    if until is None:
        until = workflow.now() + timedelta(seconds=stage.soak_seconds)
        run.set_stage(index, state=StageState.SOAKING, soak_until=until)
    run.activity_phase = Phase.SOAKING
    run.touch(f"stage {stage.name} soaks until {until:%Y-%m-%d %H:%M} UTC")
    remaining = until - workflow.now()
    if remaining > timedelta(0):
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: run.aborted,
                timeout=max(remaining, MIN_TIMER),
                timeout_summary=f"soak {stage.name}",
            )
    run.activity_phase = Phase.RUNNING
