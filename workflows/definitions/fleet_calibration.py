"""The ``FleetCalibration`` workflow: a fleet converged to one version, stage by stage.

The rules below are the product's safety promises, so they are spelled out here:

plan (one activity: inventory, plan, store the plan by digest; history keeps the digest and a
bounded summary, so payloads do not grow with the fleet) -> for each stage: approval gate ->
waves in order, a wave's clusters at once (the planner already split groups into waves of at
most ``maxConcurrency``) -> soak -> next stage. A cluster starts only while the run is neither
paused, aborted nor over its failure budget, and only inside its maintenance window (evaluated
on the workflow clock). A wave's members are read from the stored plan in bounded slices; each
cluster is a ``ClusterUpgrade`` child that reads its own plan by digest and reports every
transition back by signal, so the ``progress`` query shows stage, cluster and step states:
counts for every cluster, detail for those in flight, failed or just finished.
Failure budget ``maxFailures`` (default 0): a cluster counts as failed while it waits for a
decision and after it gave up. Over budget the run is *halted*: running clusters finish their
current work, nothing new starts, and the run resumes when a retry succeeds or a failed cluster
is skipped; when no decision is pending any more it ends as failed. ``abort`` stops everything
at the next step boundary. At each wave boundary the run continues as new when the server
suggests it or the history passed ``options.history_threshold``, carrying plan and progress.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
)

with workflow.unsafe.imports_passed_through():
    # Domain types that are payloads themselves (a window is a ``MaintenanceWindow`` with its
    # ``LabelSelector``): the SDK resolves their field types through the sandbox's ``sys.modules``
    # when it decodes them, and only a module imported here by its own name is there (importing
    # workflows.model is not enough). Without these, a planned window fails the workflow task.
    from orchestrator.domain.selectors import LabelSelector, Requirement  # noqa: F401
    from orchestrator.domain.waves import MaintenanceWindow  # noqa: F401
    from workflows import metrics, runstate, search_attributes
    from workflows.activities import CalibrationActivities
    from workflows.definitions.cluster_upgrade import ClusterUpgrade
    from workflows.definitions.common import (
        DROP_PLAN_PATCH,
        MIN_TIMER,
        REPORT_SIGNAL,
        describe_failure,
        drop_stored,
        read_options,
        short_options,
    )
    from workflows.model import (
        FAILED_CLUSTER_STATES,
        FINAL_CLUSTER_STATES,
        SAMPLE_LIMIT,
        AbortRequest,
        Ack,
        ApproveRequest,
        CalibrationCheckpoint,
        CalibrationInput,
        CalibrationProgress,
        ClusterCommand,
        ClusterLocation,
        ClusterProgress,
        ClusterReport,
        ClusterState,
        ClusterUpgradeInput,
        LocateInput,
        PauseRequest,
        Phase,
        PlanInput,
        PlanSummary,
        ResumeRequest,
        RetryRequest,
        SkipRequest,
        StageProgress,
        StageState,
        StepProgress,
        StepState,
        WaveInput,
        WaveMember,
    )
    from workflows.validation import validate_calibration_input

# Members per ``wave`` activity call: a wave of any size enters history in bounded slices.
WAVE_SLICE = 200


def _skipped_message(reason: str) -> str:
    return f"skipped before it started: {reason}".rstrip(": ")


@workflow.defn(name="FleetCalibration")
class FleetCalibration:
    """Converge a fleet to one Kubernetes version, stage by stage, wave by wave."""

    @workflow.init
    def __init__(self, input: CalibrationInput) -> None:
        self._input = input
        info = workflow.info()
        checkpoint = input.checkpoint
        self._plan: PlanSummary | None = None
        self._approved: set[str] = set()
        self._pause_reason = ""
        # Detail of the clusters in flight, the failed ones and the last finished ones; every
        # cluster of the plan is in ``_counts`` by state (bounded payloads: docs/decisions.md).
        self._clusters: dict[str, ClusterProgress] = {}
        self._counts: dict[str, int] = {}
        self._members: dict[str, WaveMember] = {}  # loaded, not yet started
        self._skip_ahead: dict[str, str] = {}  # clusters of later waves skipped: reason
        self._stages: list[StageProgress] = []
        if checkpoint is not None:
            self._plan = checkpoint.summary
            self._approved = set(checkpoint.approved)
            self._pause_reason = checkpoint.pause_reason
            self._clusters = {c.name: c for c in checkpoint.progress.clusters}
            self._counts = dict(checkpoint.progress.counts)
            self._skip_ahead = dict(checkpoint.skip_ahead)
            self._stages = list(checkpoint.progress.stages)
            self._progress = replace(checkpoint.progress, runs=checkpoint.progress.runs + 1)
        else:
            self._progress = CalibrationProgress(
                calibration_id=info.workflow_id,
                target=input.target,
                phase=Phase.PLANNING,
                started_at=workflow.now(),
            )
        self._activity_phase = Phase.RUNNING
        self._final_phase: Phase | None = None
        # The phase the search attribute already holds (set at start, kept by continue-as-new).
        current = info.typed_search_attributes.get(search_attributes.CALIBRATION_PHASE)
        self._phase_attr: Phase | None = Phase(current) if current in set(Phase) else None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._metrics: metrics.FleetMetrics | None = None
        self._counts_at_start = dict(self._counts)  # counted by the run that reached them

    # ------------------------------------------------------------------ derived state

    @property
    def _paused(self) -> bool:
        return self._progress.paused

    @property
    def _aborted(self) -> bool:
        return bool(self._progress.abort_reason)

    def _failures(self) -> int:
        return runstate.failures(self._counts)

    def _max_failures(self) -> int:
        return 0 if self._plan is None else self._plan.max_failures

    def _over_budget(self) -> bool:
        return runstate.over_budget(self._counts, self._max_failures())

    def _started(self, name: str) -> bool:
        return runstate.started(self._clusters, name)

    def _active(self) -> list[str]:
        return runstate.active(self._clusters)

    def _stepping(self) -> bool:
        return runstate.stepping(self._clusters)

    def _must_stop(self) -> bool:
        return self._aborted or runstate.dead_halt(
            self._clusters, self._counts, self._max_failures()
        )

    def _may_start(self) -> bool:
        return runstate.may_start(
            paused=self._paused, aborted=self._aborted, over_budget=self._over_budget()
        )

    def _settled(self, name: str) -> bool:
        return runstate.settled(self._clusters[name].state)

    def _phase(self) -> Phase:
        return runstate.phase(
            final=self._final_phase,
            planned=self._plan is not None,
            aborted=self._aborted,
            over_budget=self._over_budget(),
            paused=self._paused,
            activity=self._activity_phase,
        )

    # ------------------------------------------------------------------ handlers

    @workflow.query
    def progress(self) -> CalibrationProgress:
        """Stages, clusters and steps with their states, times and messages."""
        return self._snapshot()

    @workflow.signal(name=REPORT_SIGNAL)
    def report(self, report: ClusterReport) -> None:
        """A child's progress after one of its transitions."""
        incoming = report.progress
        current = self._clusters.get(incoming.name)
        if current is None or current.state in FINAL_CLUSTER_STATES:
            return
        self._put(
            replace(
                incoming, stage=current.stage, window=current.window, started_at=current.started_at
            )
        )
        self._touch()

    @workflow.update
    async def pause(self, request: PauseRequest) -> Ack:
        """Start no new cluster or step; running steps finish."""
        self._pause_reason = request.reason
        self._progress = replace(self._progress, paused=True)
        self._touch()
        await self._broadcast(ClusterCommand("pause", request.reason))
        return Ack(self._phase().value, "paused: running steps finish, nothing new starts")

    @pause.validator
    def _validate_pause(self, request: PauseRequest) -> None:
        self._require_running()
        if self._paused:
            raise ValueError("the calibration is already paused")

    @workflow.update
    async def resume(self, request: ResumeRequest) -> Ack:
        """Undo a pause."""
        self._pause_reason = ""
        self._progress = replace(self._progress, paused=False)
        self._touch()
        await self._broadcast(ClusterCommand("resume", request.reason))
        return Ack(self._phase().value, "resumed")

    @resume.validator
    def _validate_resume(self, request: ResumeRequest) -> None:
        self._require_running()
        if not self._paused:
            raise ValueError("the calibration is not paused")

    @workflow.update
    def approve(self, request: ApproveRequest) -> Ack:
        """Open a stage's approval gate (ahead of time is fine)."""
        self._approved.add(request.stage)
        self._stages = [
            replace(s, approved=True) if s.name == request.stage else s for s in self._stages
        ]
        self._touch()
        return Ack(self._phase().value, f"stage {request.stage} approved")

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        self._require_running()
        assert self._plan is not None
        names = [s.name for s in self._plan.stages]
        if request.stage not in names:
            raise ValueError(
                f"unknown stage {request.stage!r}; stages: {', '.join(names) or 'none'}"
            )
        index = names.index(request.stage)
        if not self._plan.stages[index].approval:
            raise ValueError(f"stage {request.stage} has no approval gate")
        if request.stage in self._approved:
            raise ValueError(f"stage {request.stage} is already approved")
        if index < self._progress.stage_index:
            raise ValueError(f"stage {request.stage} has already run")

    @workflow.update
    async def skip(self, request: SkipRequest) -> Ack:
        """Leave a cluster out: before it starts, or instead of retrying its failed step.

        A cluster of a later wave is not loaded yet: the stored plan says where it is (an
        activity), and the skip is kept until its wave loads.
        """
        name = request.cluster
        if name not in self._clusters:
            assert self._plan is not None
            where = await workflow.execute_activity_method(
                CalibrationActivities.locate_cluster,
                LocateInput(self._plan.plan, name),
                **short_options(self._input.options),
            )
            if name not in self._clusters:  # its wave did not load meanwhile
                self._skip_ahead_or_refuse(name, where, request.reason)
                self._touch()
                return Ack(self._phase().value, f"{name} skipped")
        current = self._clusters[name]
        if current.state == ClusterState.WAITING_FOR_DECISION:
            await self._command(name, ClusterCommand("skip", request.reason))
            return Ack(self._phase().value, f"{name}: skip sent to its upgrade")
        if self._started(name) or current.state not in (
            ClusterState.PENDING,
            ClusterState.WAITING_FOR_WINDOW,
        ):  # it started while the handler waited for the activity above
            raise ApplicationError(f"cluster {name} is {current.state.value}: too late to skip")
        self._put(
            replace(
                current,
                state=ClusterState.SKIPPED,
                finished_at=workflow.now(),
                message=_skipped_message(request.reason),
                steps=tuple(replace(s, state=StepState.SKIPPED) for s in current.steps),
            )
        )
        self._members.pop(name, None)
        self._touch()
        return Ack(self._phase().value, f"{name} skipped")

    def _skip_ahead_or_refuse(self, name: str, where: ClusterLocation, reason: str) -> None:
        """Record the skip of a cluster of a later wave, or refuse it with the reason."""
        if not where.found:
            raise ApplicationError(f"cluster {name!r} is not part of this calibration")
        if where.state != ClusterState.PENDING.value:
            raise ApplicationError(
                f"cluster {name} is {where.state}: skip applies before it starts or while it "
                "waits for a decision"
            )
        if name in self._skip_ahead:
            raise ApplicationError(f"cluster {name} is already skipped")
        here = (self._progress.stage_index, self._progress.wave_index)
        if (where.stage, where.wave) < here:
            raise ApplicationError(f"cluster {name} has already run (stage {where.stage + 1})")
        self._skip_ahead[name] = reason
        self._count(ClusterState.PENDING, -1)
        self._count(ClusterState.SKIPPED, 1)

    @skip.validator
    def _validate_skip(self, request: SkipRequest) -> None:
        self._require_running()
        current = self._clusters.get(request.cluster)
        if current is None:
            return  # not loaded: the handler asks the stored plan
        waiting_to_start = not self._started(request.cluster) and current.state in (
            ClusterState.PENDING,
            ClusterState.WAITING_FOR_WINDOW,
        )
        if not (waiting_to_start or current.state == ClusterState.WAITING_FOR_DECISION):
            raise ValueError(
                f"cluster {request.cluster} is {current.state.value}: skip applies before it "
                "starts or while it waits for a decision"
            )

    @workflow.update
    async def retry(self, request: RetryRequest) -> Ack:
        """Retry a cluster's failed step."""
        await self._command(request.cluster, ClusterCommand("retry", request.reason))
        return Ack(self._phase().value, f"{request.cluster}: retry sent to its upgrade")

    @retry.validator
    def _validate_retry(self, request: RetryRequest) -> None:
        self._require_running()
        current = self._clusters.get(request.cluster)
        if current is None:
            raise ValueError(f"cluster {request.cluster!r} is not part of this calibration")
        if current.state != ClusterState.WAITING_FOR_DECISION:
            raise ValueError(
                f"cluster {request.cluster} is {current.state.value}, not waiting for a decision"
            )

    @workflow.update
    async def abort(self, request: AbortRequest) -> Ack:
        """Stop the run: nothing new starts, running clusters stop at their next step boundary."""
        reason = request.reason or "aborted by operator"
        self._progress = replace(self._progress, abort_reason=reason)
        self._touch()
        await self._broadcast(ClusterCommand("abort", reason))
        return Ack(
            self._phase().value, "aborting: running clusters stop at their next step boundary"
        )

    @abort.validator
    def _validate_abort(self, request: AbortRequest) -> None:
        self._require_running()
        if self._aborted:
            raise ValueError("the calibration is already aborting")

    def _require_running(self) -> None:
        if self._final_phase is not None:
            raise ValueError(f"the calibration has finished ({self._final_phase.value})")
        if self._plan is None:
            raise ValueError("the calibration is still planning; try again in a moment")

    async def _command(self, name: str, command: ClusterCommand) -> None:
        handle = workflow.get_external_workflow_handle(self._child_id(name))
        try:
            await handle.signal(ClusterUpgrade.command, command)
        except FailureError as err:  # the child finished meanwhile: nothing to tell it
            workflow.logger.info("cannot signal %s: %s", self._child_id(name), err)

    async def _broadcast(self, command: ClusterCommand) -> None:
        await asyncio.gather(*(self._command(n, command) for n in self._active()))

    # ------------------------------------------------------------------ run

    @workflow.run
    async def run(self, input: CalibrationInput) -> CalibrationProgress:
        """Plan (once), run the stages, then settle every cluster and report the outcome."""
        validate_calibration_input(input)  # started by any client: check first
        if self._plan is None:
            self._touch()
            self._plan = await self._make_plan(input)
            self._init_progress(self._plan)
            self._meter().findings(self._plan.finding_actions)
        plan = self._plan
        self._touch()
        while self._progress.stage_index < len(plan.stages) and not self._must_stop():
            index = self._progress.stage_index
            stage = plan.stages[index]
            if not await self._open_gate(index):
                break
            while self._progress.wave_index < stage.waves:
                if not await self._gate():
                    break
                await self._run_wave(index, self._progress.wave_index)
                self._progress = replace(self._progress, wave_index=self._progress.wave_index + 1)
                self._touch()
                await self._maybe_continue_as_new()
            if self._must_stop() or self._progress.wave_index < stage.waves:
                break
            await self._soak(index)
            if self._aborted:
                break
            self._set_stage(index, state=StageState.DONE)
            self._progress = replace(self._progress, stage_index=index + 1, wave_index=0)
            self._touch()
            await self._maybe_continue_as_new()
        return await self._finish()

    async def _make_plan(self, input: CalibrationInput) -> PlanSummary:
        """Inventory and plan in one activity that stores the plan and returns its summary.

        Neither the fleet nor the plan enters history (both grow with the fleet, past Temporal's
        payload limit at 10k clusters): history holds the plan's digest and bounded counts.
        """
        try:
            return await workflow.execute_activity_method(
                CalibrationActivities.plan_fleet,
                PlanInput(
                    calibration_id=workflow.info().workflow_id,
                    target=input.target,
                    snapshot=input.snapshot,
                    strategy=input.strategy,
                    selector=input.selector,
                    scope=input.scope,
                ),
                **short_options(input.options),
            )
        except ActivityError as err:
            self._final_phase = Phase.FAILED
            self._progress = replace(self._progress, message=describe_failure(err))
            self._touch()
            self._meter().ended(Phase.FAILED.value)
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else None
            raise ApplicationError(
                f"planning failed, nothing was changed: {describe_failure(err)}",
                type=kind or "PlanningFailed",
                non_retryable=True,
            ) from err

    def _init_progress(self, plan: PlanSummary) -> None:
        self._counts = dict(plan.counts)
        for cluster in plan.notable:
            self._clusters[cluster.name] = cluster
        self._stages = [
            StageProgress(
                name=s.name,
                waves=(),
                max_concurrency=s.max_concurrency,
                soak_seconds=s.soak_seconds,
                approval=s.approval,
                wave_count=s.waves,
                clusters=s.clusters,
            )
            for s in plan.stages
        ]
        self._progress = replace(
            self._progress,
            max_failures=plan.max_failures,
            unassigned=plan.unassigned,
            total_clusters=plan.clusters,
        )

    async def _open_gate(self, index: int) -> bool:
        """The stage's approval gate; False when the run was aborted while waiting."""
        assert self._plan is not None
        stage = self._plan.stages[index]
        if self._stages[index].state not in (StageState.PENDING, StageState.AWAITING_APPROVAL):
            return True  # resumed after continue-as-new inside this stage
        if stage.approval and stage.name not in self._approved:
            self._set_stage(index, state=StageState.AWAITING_APPROVAL)
            self._activity_phase = Phase.AWAITING_APPROVAL
            self._touch(f"stage {stage.name} waits for approval")
            await workflow.wait_condition(lambda: stage.name in self._approved or self._aborted)
            if self._aborted:
                return False
        self._activity_phase = Phase.RUNNING
        self._set_stage(index, state=StageState.RUNNING, started_at=workflow.now())
        self._touch(f"stage {stage.name} started")
        return True

    async def _gate(self) -> bool:
        """Before a wave: wait out pause and halt; False when the run must stop."""
        while True:
            if self._must_stop():
                return False
            if self._may_start():
                self._touch()
                return True
            self._touch()
            await workflow.wait_condition(lambda: self._may_start() or self._must_stop())

    async def _run_wave(self, stage_index: int, wave_index: int) -> None:
        """Load the wave's members from the stored plan (bounded slices), run them, settle."""
        assert self._plan is not None
        stage = self._plan.stages[stage_index]
        self._touch(f"stage {stage.name}: wave {wave_index + 1}/{stage.waves}")
        wave: list[str] = []
        offset, total = 0, 1
        while offset < total:
            part = await workflow.execute_activity_method(
                CalibrationActivities.wave,
                WaveInput(self._plan.plan, stage_index, wave_index, offset, WAVE_SLICE),
                **read_options(self._input.options),
            )
            total = part.total
            offset += max(1, len(part.members))
            for member in part.members:
                wave.append(member.name)
                self._load_member(stage.name, member)
        for name in wave:
            if self._clusters[name].state == ClusterState.PENDING and not self._started(name):
                self._tasks[name] = asyncio.create_task(self._run_cluster(stage.name, name))
        await workflow.wait_condition(lambda: all(self._settled(n) for n in wave))
        for name in wave:
            self._tasks.pop(name, None)
            self._members.pop(name, None)
        self._set_stage(stage_index, finished_at=workflow.now())
        self._prune()

    def _load_member(self, stage: str, member: WaveMember) -> None:
        """A cluster of the current wave gets its detail entry (pending, or skipped ahead)."""
        known = self._clusters.get(member.name)
        if known is not None and (known.state != ClusterState.PENDING or known.started_at):
            return  # skipped while it waited, or already started
        ids = member.step_ids or ("",) * len(member.steps)
        steps = tuple(
            StepProgress(i, sid, d)
            for i, (sid, d) in enumerate(zip(ids, member.steps, strict=True))
        )
        progress = ClusterProgress(
            name=member.name,
            stage=stage,
            from_version=member.from_version,
            target=self._progress.target,
            window="" if member.window is None else member.window.describe(),
            steps=steps,
        )
        if member.name in self._skip_ahead:  # counted as skipped when the operator asked
            reason = self._skip_ahead.pop(member.name)
            self._clusters[member.name] = replace(
                progress,
                state=ClusterState.SKIPPED,
                finished_at=workflow.now(),
                message=_skipped_message(reason),
                steps=tuple(replace(s, state=StepState.SKIPPED) for s in steps),
            )
            return
        self._clusters[member.name] = progress
        self._members[member.name] = member

    def _prune(self) -> None:
        """Keep detail for clusters in flight, failed ones and the last finished ones only."""
        finished = [
            n
            for n, c in self._clusters.items()
            if c.state in FINAL_CLUSTER_STATES and c.state not in FAILED_CLUSTER_STATES
        ]
        for name in finished[: max(0, len(finished) - SAMPLE_LIMIT)]:
            del self._clusters[name]

    async def _run_cluster(self, stage: str, name: str) -> None:
        """Start one cluster once the run may start it and its window is open; await its end."""
        member = self._members[name]
        window = member.window

        def skipped() -> bool:
            return self._clusters[name].state == ClusterState.SKIPPED

        while True:
            await workflow.wait_condition(
                lambda: self._may_start() or self._must_stop() or skipped()
            )
            if skipped():
                return
            if self._must_stop():
                self._set_cluster(
                    name,
                    state=ClusterState.NOT_STARTED,
                    finished_at=workflow.now(),
                    message="not started: "
                    + (self._progress.abort_reason or "failure budget exceeded"),
                )
                return
            now = workflow.now()
            if window is None or window.is_open(now):
                break
            opening = window.next_opening(now)
            self._set_cluster(
                name,
                state=ClusterState.WAITING_FOR_WINDOW,
                message=f"maintenance window {member.window.describe() if member.window else ''} "
                f"opens {opening:%Y-%m-%d %H:%M} UTC",
            )
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._must_stop() or skipped() or not self._may_start(),
                    timeout=max(opening - now, MIN_TIMER),
                    timeout_summary=f"window {name}",
                )
        await self._start_child(stage, member)

    async def _start_child(self, stage: str, member: WaveMember) -> None:
        assert self._plan is not None
        name = member.name
        self._set_cluster(
            name, state=ClusterState.RUNNING, started_at=workflow.now(), message="starting"
        )
        target = self._plan.target
        try:
            handle = await workflow.start_child_workflow(
                ClusterUpgrade.run,
                ClusterUpgradeInput(
                    calibration_id=workflow.info().workflow_id,
                    target=target,
                    stage=stage,
                    options=self._input.options,
                    plan_ref=self._plan.plan,
                    cluster=name,
                ),
                id=self._child_id(name),
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
                    + (
                        [f"\nMaintenance window: {member.window.describe()}"]
                        if member.window
                        else []
                    )
                ),
            )
            # A pause or abort that arrived while the child was starting did not reach it.
            if self._paused:
                await self._command(name, ClusterCommand("pause", self._pause_reason))
            if self._aborted:
                await self._command(name, ClusterCommand("abort", self._progress.abort_reason))
            final = await handle
        except ChildWorkflowError as err:
            self._set_cluster(
                name,
                state=ClusterState.FAILED,
                finished_at=workflow.now(),
                message=f"upgrade workflow failed: {describe_failure(err)}",
            )
            return
        current = self._clusters[name]
        if current.state not in FINAL_CLUSTER_STATES or current.state != final.state:
            self._put(
                replace(
                    final,
                    stage=current.stage,
                    window=current.window,
                    started_at=current.started_at,
                )
            )
            self._touch()

    async def _soak(self, index: int) -> None:
        assert self._plan is not None
        stage = self._plan.stages[index]
        if stage.soak_seconds <= 0:
            return
        progress = self._stages[index]
        until = progress.soak_until
        if until is None:
            until = workflow.now() + timedelta(seconds=stage.soak_seconds)
            self._set_stage(index, state=StageState.SOAKING, soak_until=until)
        self._activity_phase = Phase.SOAKING
        self._touch(f"stage {stage.name} soaks until {until:%Y-%m-%d %H:%M} UTC")
        remaining = until - workflow.now()
        if remaining > timedelta(0):
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._aborted,
                    timeout=max(remaining, MIN_TIMER),
                    timeout_summary=f"soak {stage.name}",
                )
        self._activity_phase = Phase.RUNNING

    async def _maybe_continue_as_new(self) -> None:
        """At a wave boundary: hand the state to a fresh run before history grows too long."""
        if self._must_stop():
            return  # the run is about to end anyway
        info = workflow.info()
        threshold = self._input.options.history_threshold
        if not (
            info.is_continue_as_new_suggested() or info.get_current_history_length() >= threshold
        ):
            return
        if self._stepping():
            return  # never while a child works: its result would be lost with this run
        await workflow.wait_condition(workflow.all_handlers_finished)
        assert self._plan is not None
        workflow.continue_as_new(
            CalibrationInput(
                target=self._input.target,
                strategy=self._input.strategy,
                selector=self._input.selector,
                options=self._input.options,
                checkpoint=CalibrationCheckpoint(
                    progress=self._snapshot(),
                    approved=tuple(sorted(self._approved)),
                    pause_reason=self._pause_reason,
                    summary=self._plan,
                    skip_ahead=tuple(sorted(self._skip_ahead.items())),
                ),
            )
        )

    async def _finish(self) -> CalibrationProgress:
        """Wait for every started cluster to settle for good, then report the outcome."""
        if self._active():
            self._activity_phase = Phase.AWAITING_DECISIONS
            self._touch("waiting for decisions on failed clusters")
            await workflow.wait_condition(lambda: not self._active())
        now = workflow.now()
        for name, cluster in list(self._clusters.items()):
            if cluster.state in (ClusterState.PENDING, ClusterState.WAITING_FOR_WINDOW):
                reason = self._progress.abort_reason or "failure budget exceeded"
                self._set_cluster(
                    name,
                    state=ClusterState.NOT_STARTED,
                    finished_at=now,
                    message=f"not started: {reason}",
                )
        # Clusters of waves that never loaded have no detail: they are counts only.
        left = self._counts.pop(ClusterState.PENDING.value, 0)
        if left:
            self._count(ClusterState.NOT_STARTED, left)
        for i, stage in enumerate(self._stages):
            if stage.state in (StageState.PENDING, StageState.AWAITING_APPROVAL):
                self._set_stage(i, state=StageState.NOT_STARTED)
        # Every child has settled for good: nothing reads the stored plan any more.
        if self._plan is not None and workflow.patched(DROP_PLAN_PATCH):
            await drop_stored(self._plan.plan.digest, self._input.options, "plan")
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._aborted:
            self._final_phase = Phase.ABORTED
        elif self._over_budget():
            self._final_phase = Phase.FAILED
        else:
            self._final_phase = Phase.COMPLETED
        failed = sorted(n for n, c in self._clusters.items() if c.state in FAILED_CLUSTER_STATES)
        self._touch(
            f"{self._final_phase.value}: {len(failed)} failed cluster(s)"
            + (f" ({', '.join(failed)})" if failed else "")
        )
        self._meter().ended(self._final_phase.value)
        result = self._snapshot()
        if self._final_phase == Phase.FAILED:
            raise ApplicationError(
                f"failure budget exceeded: {len(failed)} failed cluster(s) "
                f"({', '.join(failed)}), maxFailures {self._max_failures()}",
                result,
                type="FailureBudgetExceeded",
                non_retryable=True,
            )
        return result

    # ------------------------------------------------------------------ progress

    def _child_id(self, name: str) -> str:
        return f"{workflow.info().workflow_id}/{name}"

    def _set_cluster(self, name: str, **changes: Any) -> None:
        self._put(replace(self._clusters[name], **changes))
        self._touch()

    def _count(self, state: ClusterState, delta: int) -> None:
        value = self._counts.get(state.value, 0) + delta
        if value:
            self._counts[state.value] = value
        else:
            self._counts.pop(state.value, None)

    def _put(self, progress: ClusterProgress) -> None:
        """Store a cluster's detail and keep the per-state counts in step with it."""
        old = self._clusters.get(progress.name)
        if old is not None and old.state != progress.state:
            self._count(old.state, -1)
            self._count(progress.state, 1)
        # A cluster's count only grows: what it adds is what the run moved meanwhile.
        moved = progress.replicas_moved - (old.replicas_moved if old is not None else 0)
        forced = progress.replicas_forced - (old.replicas_forced if old is not None else 0)
        if moved > 0 or forced > 0:
            self._progress = replace(
                self._progress,
                replicas_moved=self._progress.replicas_moved + max(moved, 0),
                replicas_forced=self._progress.replicas_forced + max(forced, 0),
            )
        self._clusters[progress.name] = progress

    def _set_stage(self, index: int, **changes: Any) -> None:
        self._stages[index] = replace(self._stages[index], **changes)

    def _snapshot(self) -> CalibrationProgress:
        return replace(
            self._progress,
            phase=self._phase(),
            paused=self._paused,
            failures=self._failures(),
            stages=tuple(self._stages),
            clusters=tuple(self._clusters.values()),
            counts=dict(sorted(self._counts.items())),
        )

    def _meter(self) -> metrics.FleetMetrics:
        if self._metrics is None:
            self._metrics = metrics.FleetMetrics(
                workflow.metric_meter(),
                lambda: not workflow.unsafe.is_replaying(),
                self._counts_at_start,
            )
        return self._metrics

    def _touch(self, message: str | None = None) -> None:
        """Record a change: timestamp, phase attribute, UI details, clusters entering phases."""
        changes: dict[str, Any] = {"updated_at": workflow.now()}
        if message is not None:
            changes["message"] = message
        self._progress = replace(self._progress, **changes)
        phase = self._phase()
        if phase != self._phase_attr:
            self._phase_attr = phase
            workflow.upsert_search_attributes(
                [search_attributes.CALIBRATION_PHASE.value_set(phase.value)]
            )
        workflow.set_current_details(self._details(phase))
        self._meter().clusters(self._counts)

    def _details(self, phase: Phase) -> str:
        counts = self._counts
        stage = ""
        if self._plan is not None and self._progress.stage_index < len(self._plan.stages):
            s = self._plan.stages[self._progress.stage_index]
            stage = (
                f" · stage {s.name} ({self._progress.stage_index + 1}/{len(self._plan.stages)}), "
                f"wave {min(self._progress.wave_index + 1, s.waves)}/{s.waves}"
            )
        lines = [f"**{phase.value}** → {self._progress.target}{stage}"]
        if self._progress.message:
            lines.append(self._progress.message)
        if counts:
            lines.append(" · ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        if self._progress.replicas_moved or self._progress.replicas_forced:
            lines.append(
                f"replicas moved by placement: {self._progress.replicas_moved} "
                f"(forced off rejecting clusters: {self._progress.replicas_forced})"
            )
        lines += [
            f"- {c.name}: {c.message}"
            for c in self._clusters.values()
            if c.state == ClusterState.WAITING_FOR_DECISION
        ]
        if self._progress.failures or self._failures():
            lines.append(f"failures {self._failures()} / budget {self._max_failures()}")
        return "\n".join(lines)
