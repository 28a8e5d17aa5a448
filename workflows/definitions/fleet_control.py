"""Operator control of a ``FleetCalibration`` run: pause, resume, approve, skip, retry, abort.

The SDK requires update handlers and their validators to be methods of the workflow class, so
the class keeps thin methods that call these functions. What an operator may ask, when it is
refused and with which words, and what each request changes and tells the running clusters is
a concern of its own: it changes when the operator's commands change, not when the way waves
are scheduled does. Every function takes the run's record (``FleetRun``) explicitly.

Validators raise ``ValueError`` (the update is rejected before it enters history); a handler that
learns too late that it cannot act raises ``ApplicationError``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from workflows.activities import CalibrationActivities
    from workflows.definitions.cluster_upgrade import ClusterUpgrade
    from workflows.definitions.common import short_options
    from workflows.definitions.fleet_progress import FleetRun, skipped_message
    from workflows.model import (
        AbortRequest,
        Ack,
        ApproveRequest,
        ClusterCommand,
        ClusterLocation,
        ClusterState,
        LocateInput,
        PauseRequest,
        ResumeRequest,
        RetryRequest,
        SkipRequest,
        StepState,
    )


# ---------------------------------------------------------------------- telling the clusters


async def command(run: FleetRun, name: str, cmd: ClusterCommand) -> None:
    """Signal one cluster's upgrade; a child that finished meanwhile needs no telling."""
    handle = workflow.get_external_workflow_handle(run.child_id(name))
    try:
        await handle.signal(ClusterUpgrade.command, cmd)
    except FailureError as err:  # the child finished meanwhile: nothing to tell it
        workflow.logger.info("cannot signal %s: %s", run.child_id(name), err)


async def broadcast(run: FleetRun, cmd: ClusterCommand) -> None:
    """Signal every cluster whose child runs."""
    await asyncio.gather(*(command(run, n, cmd) for n in run.active()))


async def catch_up(run: FleetRun, name: str) -> None:
    """Tell a child that just started of a pause or abort that arrived while it was starting."""
    if run.paused:
        await command(run, name, ClusterCommand("pause", run.pause_reason))
    if run.aborted:
        await command(run, name, ClusterCommand("abort", run.progress.abort_reason))


def require_running(run: FleetRun) -> None:
    """Refuse a request before the plan exists or after the run finished."""
    if run.final_phase is not None:
        raise ValueError(f"the calibration has finished ({run.final_phase.value})")
    if run.plan is None:
        raise ValueError("the calibration is still planning; try again in a moment")


# ---------------------------------------------------------------------- pause, resume


async def pause(run: FleetRun, request: PauseRequest) -> Ack:
    """Start no new cluster or step; running steps finish."""
    run.pause_reason = request.reason
    run.progress = replace(run.progress, paused=True)
    run.touch()
    await broadcast(run, ClusterCommand("pause", request.reason))
    return Ack(run.phase().value, "paused: running steps finish, nothing new starts")


def validate_pause(run: FleetRun, request: PauseRequest) -> None:
    """A pause applies to a running run that is not paused."""
    require_running(run)
    if run.paused:
        raise ValueError("the calibration is already paused")


async def resume(run: FleetRun, request: ResumeRequest) -> Ack:
    """Undo a pause."""
    run.pause_reason = ""
    run.progress = replace(run.progress, paused=False)
    run.touch()
    await broadcast(run, ClusterCommand("resume", request.reason))
    return Ack(run.phase().value, "resumed")


def validate_resume(run: FleetRun, request: ResumeRequest) -> None:
    """A resume applies to a paused run."""
    require_running(run)
    if not run.paused:
        raise ValueError("the calibration is not paused")


# ---------------------------------------------------------------------- approve


def approve(run: FleetRun, request: ApproveRequest) -> Ack:
    """Open a stage's approval gate (ahead of time is fine)."""
    run.approved.add(request.stage)
    run.stages = [replace(s, approved=True) if s.name == request.stage else s for s in run.stages]
    run.touch()
    return Ack(run.phase().value, f"stage {request.stage} approved")


def validate_approve(run: FleetRun, request: ApproveRequest) -> None:
    """An approval names a stage with a gate that is neither approved nor past."""
    require_running(run)
    assert run.plan is not None
    names = [s.name for s in run.plan.stages]
    if request.stage not in names:
        raise ValueError(f"unknown stage {request.stage!r}; stages: {', '.join(names) or 'none'}")
    index = names.index(request.stage)
    if not run.plan.stages[index].approval:
        raise ValueError(f"stage {request.stage} has no approval gate")
    if request.stage in run.approved:
        raise ValueError(f"stage {request.stage} is already approved")
    if index < run.progress.stage_index:
        raise ValueError(f"stage {request.stage} has already run")


# ---------------------------------------------------------------------- skip


async def skip(run: FleetRun, request: SkipRequest) -> Ack:
    """Leave a cluster out: before it starts, or instead of retrying its failed step.

    A cluster of a later wave is not loaded yet: the stored plan says where it is (an
    activity), and the skip is kept until its wave loads.
    """
    name = request.cluster
    if name not in run.clusters:
        assert run.plan is not None
        where = await workflow.execute_activity_method(
            CalibrationActivities.locate_cluster,
            LocateInput(run.plan.plan, name),
            **short_options(run.input.options),
        )
        if name not in run.clusters:  # its wave did not load meanwhile
            skip_ahead_or_refuse(run, name, where, request.reason)
            run.touch()
            return Ack(run.phase().value, f"{name} skipped")
    current = run.clusters[name]
    if current.state == ClusterState.WAITING_FOR_DECISION:
        await command(run, name, ClusterCommand("skip", request.reason))
        return Ack(run.phase().value, f"{name}: skip sent to its upgrade")
    if run.started(name) or current.state not in (
        ClusterState.PENDING,
        ClusterState.WAITING_FOR_WINDOW,
    ):  # it started while the handler waited for the activity above
        raise ApplicationError(f"cluster {name} is {current.state.value}: too late to skip")
    run.put(
        replace(
            current,
            state=ClusterState.SKIPPED,
            finished_at=workflow.now(),
            message=skipped_message(request.reason),
            steps=tuple(replace(s, state=StepState.SKIPPED) for s in current.steps),
        )
    )
    run.members.pop(name, None)
    run.touch()
    return Ack(run.phase().value, f"{name} skipped")


def skip_ahead_or_refuse(run: FleetRun, name: str, where: ClusterLocation, reason: str) -> None:
    """Record the skip of a cluster of a later wave, or refuse it with the reason."""
    if not where.found:
        raise ApplicationError(f"cluster {name!r} is not part of this calibration")
    if where.state != ClusterState.PENDING.value:
        raise ApplicationError(
            f"cluster {name} is {where.state}: skip applies before it starts or while it "
            "waits for a decision"
        )
    if name in run.skip_ahead:
        raise ApplicationError(f"cluster {name} is already skipped")
    here = (run.progress.stage_index, run.progress.wave_index)
    if (where.stage, where.wave) < here:
        raise ApplicationError(f"cluster {name} has already run (stage {where.stage + 1})")
    run.skip_ahead[name] = reason
    run.count(ClusterState.PENDING, -1)
    run.count(ClusterState.SKIPPED, 1)


def validate_skip(run: FleetRun, request: SkipRequest) -> None:
    """A skip applies before a loaded cluster starts or while it waits for a decision."""
    require_running(run)
    current = run.clusters.get(request.cluster)
    if current is None:
        return  # not loaded: the handler asks the stored plan
    waiting_to_start = not run.started(request.cluster) and current.state in (
        ClusterState.PENDING,
        ClusterState.WAITING_FOR_WINDOW,
    )
    if not (waiting_to_start or current.state == ClusterState.WAITING_FOR_DECISION):
        raise ValueError(
            f"cluster {request.cluster} is {current.state.value}: skip applies before it "
            "starts or while it waits for a decision"
        )


# ---------------------------------------------------------------------- retry, abort


async def retry(run: FleetRun, request: RetryRequest) -> Ack:
    """Retry a cluster's failed step."""
    await command(run, request.cluster, ClusterCommand("retry", request.reason))
    return Ack(run.phase().value, f"{request.cluster}: retry sent to its upgrade")


def validate_retry(run: FleetRun, request: RetryRequest) -> None:
    """A retry names a cluster that waits for a decision."""
    require_running(run)
    current = run.clusters.get(request.cluster)
    if current is None:
        raise ValueError(f"cluster {request.cluster!r} is not part of this calibration")
    if current.state != ClusterState.WAITING_FOR_DECISION:
        raise ValueError(
            f"cluster {request.cluster} is {current.state.value}, not waiting for a decision"
        )


async def abort(run: FleetRun, request: AbortRequest) -> Ack:
    """Stop the run: nothing new starts, running clusters stop at their next step boundary."""
    reason = request.reason or "aborted by operator"
    run.progress = replace(run.progress, abort_reason=reason)
    run.touch()
    await broadcast(run, ClusterCommand("abort", reason))
    return Ack(run.phase().value, "aborting: running clusters stop at their next step boundary")


def validate_abort(run: FleetRun, request: AbortRequest) -> None:
    """An abort applies once."""
    require_running(run)
    if run.aborted:
        raise ValueError("the calibration is already aborting")
