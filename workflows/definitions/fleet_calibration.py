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

The code is split by concern: this module holds the run's main loop and its wiring (planning,
the stage loop, continue-as-new, the outcome); ``fleet_control`` the operator's requests,
``fleet_waves`` which clusters start when, and ``fleet_progress`` the run's record and how its
changes are reported. The handlers stay here as thin methods because the SDK requires them on
the workflow class.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Domain types that are payloads themselves (a window is a ``MaintenanceWindow`` with its
    # ``LabelSelector``): the SDK resolves their field types through the sandbox's ``sys.modules``
    # when it decodes them, and only a module imported here by its own name is there (importing
    # workflows.model is not enough). Without these, a planned window fails the workflow task.
    from orchestrator.domain.selectors import LabelSelector, Requirement  # noqa: F401
    from orchestrator.domain.waves import MaintenanceWindow  # noqa: F401
    from workflows.activities import CalibrationActivities
    from workflows.definitions import fleet_control, fleet_waves
    from workflows.definitions.common import (
        AWAIT_CHILDREN_PATCH,
        DROP_PLAN_PATCH,
        REPORT_SIGNAL,
        describe_failure,
        drop_stored,
        short_options,
    )
    from workflows.definitions.fleet_progress import FleetRun
    from workflows.model import (
        FAILED_CLUSTER_STATES,
        AbortRequest,
        Ack,
        ApproveRequest,
        CalibrationCheckpoint,
        CalibrationInput,
        CalibrationProgress,
        ClusterReport,
        ClusterState,
        PauseRequest,
        Phase,
        PlanInput,
        PlanSummary,
        ResumeRequest,
        RetryRequest,
        SkipRequest,
        StageState,
    )
    from workflows.validation import validate_calibration_input


@workflow.defn(name="FleetCalibration")
class FleetCalibration:
    """Converge a fleet to one Kubernetes version, stage by stage, wave by wave."""

    @workflow.init
    def __init__(self, input: CalibrationInput) -> None:
        self._record = FleetRun(input)  # the run's state and its recorded changes (fleet_progress)

    # ------------------------------------------------------------------ handlers
    # The SDK wants handlers on the class: each one hands over to fleet_control or the record.

    @workflow.query
    def progress(self) -> CalibrationProgress:
        """Stages, clusters and steps with their states, times and messages."""
        return self._record.snapshot()

    @workflow.signal(name=REPORT_SIGNAL)
    def report(self, report: ClusterReport) -> None:
        """A child's progress after one of its transitions."""
        self._record.take_report(report)

    @workflow.update
    async def pause(self, request: PauseRequest) -> Ack:
        """Start no new cluster or step; running steps finish."""
        return await fleet_control.pause(self._record, request)

    @pause.validator
    def _validate_pause(self, request: PauseRequest) -> None:
        fleet_control.validate_pause(self._record, request)

    @workflow.update
    async def resume(self, request: ResumeRequest) -> Ack:
        """Undo a pause."""
        return await fleet_control.resume(self._record, request)

    @resume.validator
    def _validate_resume(self, request: ResumeRequest) -> None:
        fleet_control.validate_resume(self._record, request)

    @workflow.update
    def approve(self, request: ApproveRequest) -> Ack:
        """Open a stage's approval gate (ahead of time is fine)."""
        return fleet_control.approve(self._record, request)

    @approve.validator
    def _validate_approve(self, request: ApproveRequest) -> None:
        fleet_control.validate_approve(self._record, request)

    @workflow.update
    async def skip(self, request: SkipRequest) -> Ack:
        """Leave a cluster out: before it starts, or instead of retrying its failed step."""
        return await fleet_control.skip(self._record, request)

    @skip.validator
    def _validate_skip(self, request: SkipRequest) -> None:
        fleet_control.validate_skip(self._record, request)

    @workflow.update
    async def retry(self, request: RetryRequest) -> Ack:
        """Retry a cluster's failed step."""
        return await fleet_control.retry(self._record, request)

    @retry.validator
    def _validate_retry(self, request: RetryRequest) -> None:
        fleet_control.validate_retry(self._record, request)

    @workflow.update
    async def abort(self, request: AbortRequest) -> Ack:
        """Stop the run: nothing new starts, running clusters stop at their next step boundary."""
        return await fleet_control.abort(self._record, request)

    @abort.validator
    def _validate_abort(self, request: AbortRequest) -> None:
        fleet_control.validate_abort(self._record, request)

    # ------------------------------------------------------------------ run

    @workflow.run
    async def run(self, input: CalibrationInput) -> CalibrationProgress:
        """Plan (once), run the stages, then settle every cluster and report the outcome."""
        validate_calibration_input(input)  # started by any client: check first
        run = self._record
        if run.plan is None:
            run.touch()
            run.plan = await self._make_plan(input)
            run.init_progress(run.plan)
            run.meter().findings(run.plan.finding_actions)
        plan = run.plan
        run.touch()
        while run.progress.stage_index < len(plan.stages) and not run.must_stop():
            index = run.progress.stage_index
            stage = plan.stages[index]
            if not await fleet_waves.open_gate(run, index):
                break
            while run.progress.wave_index < stage.waves:
                if not await fleet_waves.gate(run):
                    break
                await fleet_waves.run_wave(run, index, run.progress.wave_index)
                run.progress = replace(run.progress, wave_index=run.progress.wave_index + 1)
                run.touch()
                await self._maybe_continue_as_new()
            if run.must_stop() or run.progress.wave_index < stage.waves:
                break
            await fleet_waves.soak(run, index)
            if run.aborted:
                break
            run.set_stage(index, state=StageState.DONE)
            run.progress = replace(run.progress, stage_index=index + 1, wave_index=0)
            run.touch()
            await self._maybe_continue_as_new()
        return await self._finish()

    async def _make_plan(self, input: CalibrationInput) -> PlanSummary:
        """Inventory and plan in one activity that stores the plan and returns its summary.

        Neither the fleet nor the plan enters history (both grow with the fleet, past Temporal's
        payload limit at 10k clusters): history holds the plan's digest and bounded counts.
        """
        run = self._record
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
            run.final_phase = Phase.FAILED
            run.progress = replace(run.progress, message=describe_failure(err))
            run.touch()
            run.meter().ended(Phase.FAILED.value)
            cause = err.cause
            kind = cause.type if isinstance(cause, ApplicationError) else None
            raise ApplicationError(
                f"planning failed, nothing was changed: {describe_failure(err)}",
                type=kind or "PlanningFailed",
                non_retryable=True,
            ) from err

    async def _maybe_continue_as_new(self) -> None:
        """At a wave boundary: hand the state to a fresh run before history grows too long."""
        run = self._record
        if run.must_stop():
            return  # the run is about to end anyway
        info = workflow.info()
        threshold = run.input.options.history_threshold
        if not (
            info.is_continue_as_new_suggested() or info.get_current_history_length() >= threshold
        ):
            return
        if run.stepping():
            return  # never while a child works: its result would be lost with this run
        await workflow.wait_condition(workflow.all_handlers_finished)
        assert run.plan is not None
        workflow.continue_as_new(
            CalibrationInput(
                target=run.input.target,
                strategy=run.input.strategy,
                selector=run.input.selector,
                options=run.input.options,
                checkpoint=CalibrationCheckpoint(
                    progress=run.snapshot(),
                    approved=tuple(sorted(run.approved)),
                    pause_reason=run.pause_reason,
                    summary=run.plan,
                    skip_ahead=tuple(sorted(run.skip_ahead.items())),
                ),
            )
        )

    async def _finish(self) -> CalibrationProgress:
        """Wait for every started cluster to settle for good, then report the outcome."""
        run = self._record
        if run.active():
            run.activity_phase = Phase.AWAITING_DECISIONS
            run.touch("waiting for decisions on failed clusters")
            await workflow.wait_condition(lambda: not run.active())
        now = workflow.now()
        for name, cluster in list(run.clusters.items()):
            if cluster.state in (ClusterState.PENDING, ClusterState.WAITING_FOR_WINDOW):
                reason = run.progress.abort_reason or "failure budget exceeded"
                run.set_cluster(
                    name,
                    state=ClusterState.NOT_STARTED,
                    finished_at=now,
                    message=f"not started: {reason}",
                )
        # Clusters of waves that never loaded have no detail: they are counts only.
        left = run.counts.pop(ClusterState.PENDING.value, 0)
        if left:
            run.count(ClusterState.NOT_STARTED, left)
        for i, stage in enumerate(run.stages):
            if stage.state in (StageState.PENDING, StageState.AWAITING_APPROVAL):
                run.set_stage(i, state=StageState.NOT_STARTED)
        # Every child has settled for good: nothing reads the stored plan any more.
        if run.plan is not None and workflow.patched(DROP_PLAN_PATCH):
            await drop_stored(run.plan.plan.digest, run.input.options, "plan")
        await workflow.wait_condition(workflow.all_handlers_finished)
        if workflow.patched(AWAIT_CHILDREN_PATCH):
            await fleet_waves.closing_children(run)
        if run.aborted:
            run.final_phase = Phase.ABORTED
        elif run.over_budget():
            run.final_phase = Phase.FAILED
        else:
            run.final_phase = Phase.COMPLETED
        failed = sorted(n for n, c in run.clusters.items() if c.state in FAILED_CLUSTER_STATES)
        run.touch(
            f"{run.final_phase.value}: {len(failed)} failed cluster(s)"
            + (f" ({', '.join(failed)})" if failed else "")
        )
        run.meter().ended(run.final_phase.value)
        result = run.snapshot()
        if run.final_phase == Phase.FAILED:
            raise ApplicationError(
                f"failure budget exceeded: {len(failed)} failed cluster(s) "
                f"({', '.join(failed)}), maxFailures {run.max_failures()}",
                result,
                type="FailureBudgetExceeded",
                non_retryable=True,
            )
        return result
