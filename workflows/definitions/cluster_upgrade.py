"""The ``ClusterUpgrade`` workflow: one cluster along its plan.

The rules below are the product's safety promises, so they are spelled out here:

preflight -> taint ``calibrator.dev/upgrading`` (NoSchedule) -> re-place (as if the first step
had run, so workloads it would break move off first) -> each step in the plan's canonical order:
patch (workers: MachineDeployments with bounded concurrency), wait (heartbeating), verify,
check, re-place for the next step -> remove taint -> re-place (the cluster takes work again).
Anything that fails leaves the cluster as it is, tainted, and waits for a decision (``decide``
update or the parent's retry/skip): retry re-runs the failed part, which is safe because every
patch is idempotent by step id and from-version. Skip and abort never untaint a cluster once a
patch was attempted (``touched``): a half-upgraded cluster must not take new work. A step the
gate before its patch refused (``StepBlocked``: an API it removes still in use, a drain that could
never finish) patched nothing, so it leaves ``touched`` as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
)

with workflow.unsafe.imports_passed_through():
    # Domain types that are payloads themselves (a window is a ``MaintenanceWindow`` with its
    # ``LabelSelector``): the SDK resolves their field types through the sandbox's ``sys.modules``
    # when it decodes them, and only a module imported here by its own name is there (importing
    # workflows.model is not enough). Without these, a planned window fails the workflow task.
    from orchestrator.domain.compatibility import Finding  # noqa: F401
    from orchestrator.domain.selectors import LabelSelector, Requirement  # noqa: F401
    from orchestrator.domain.taints import UPGRADING_TAINT_KEY
    from orchestrator.domain.upgradeplan import ClusterPlan  # noqa: F401
    from orchestrator.domain.versions import KubeVersion
    from orchestrator.domain.waves import MaintenanceWindow  # noqa: F401
    from workflows import metrics, search_attributes
    from workflows.activities import CalibrationActivities
    from workflows.activities.errors import STEP_BLOCKED
    from workflows.definitions.common import (
        MIN_TIMER,
        REPORT_SIGNAL,
        describe_failure,
        placement_options,
        read_options,
        short_options,
        wait_options,
    )
    from workflows.model import (
        Ack,
        CheckInput,
        ClusterCommand,
        ClusterPlanInput,
        ClusterProgress,
        ClusterReport,
        ClusterRun,
        ClusterState,
        ClusterUpgradeInput,
        Decision,
        PatchControlPlaneInput,
        PatchWorkersInput,
        PreflightInput,
        ReplaceInput,
        RunStep,
        StepProgress,
        StepState,
        TaintEffect,
        TaintInput,
        VerifyInput,
        WaitControlPlaneInput,
        WaitWorkersInput,
    )
    from workflows.validation import validate_cluster_upgrade_input

UPGRADING_EFFECT: TaintEffect = "NoSchedule"


class _StepFailed(Exception):
    """A check inside the workflow failed (verification, compatibility, preflight, placement)."""


@workflow.defn(name="ClusterUpgrade")
class ClusterUpgrade:
    """Upgrade one cluster along its plan, tainted from first patch to last check."""

    @workflow.init
    def __init__(self, input: ClusterUpgradeInput) -> None:
        self._input = input
        # The plan arrives with the input (small runs, older parents) or is read by digest from
        # the stored plan as the first thing ``run`` does; until then progress has no steps.
        self._plan = input.plan
        self._progress = self._initial_progress()
        self._paused = False
        self._abort_reason: str | None = None
        self._waiting = False
        self._decision: Decision | None = None
        self._phase_attr = ClusterState.PENDING
        self._tainted_at: datetime | None = None  # workflow time of the first add_taint
        self._metrics: metrics.ClusterMetrics | None = None

    def _initial_progress(self) -> ClusterProgress:
        plan = self._plan
        if plan is None or len(plan.step_ids) != len(plan.plan.steps):
            # No plan yet, or one whose ids do not match its steps: ``run`` refuses that input
            # first thing; here (before ``run``) it must not fail the workflow task instead.
            return ClusterProgress(
                name=self._input.cluster, stage=self._input.stage, target=self._input.target
            )
        return ClusterProgress(
            name=plan.plan.cluster,
            stage=self._input.stage,
            state=ClusterState.PENDING,
            from_version=str(plan.plan.control_plane_from),
            target=self._input.target,
            window="" if plan.window is None else plan.window.describe(),
            steps=tuple(StepProgress(s.index, s.step_id, s.describe()) for s in plan.run_steps()),
        )

    @property
    def _run(self) -> ClusterRun:
        """The plan being run: given with the input, or read as the first thing ``run`` does."""
        if self._plan is None:
            raise ApplicationError("the cluster's plan has not been read yet", non_retryable=True)
        return self._plan

    # ------------------------------------------------------------------ handlers

    @workflow.query
    def progress(self) -> ClusterProgress:
        """Progress of this cluster, including the step that runs or failed."""
        return self._progress

    @workflow.signal
    def command(self, command: ClusterCommand) -> None:
        """Operator control forwarded by the parent (pause, resume, abort, retry, skip)."""
        if command.action == "pause":
            self._paused = True
        elif command.action == "resume":
            self._paused = False
        elif command.action == "abort":
            self._abort_reason = command.reason or "calibration aborted"
            if self._waiting:
                self._decision = Decision("abort", self._abort_reason)
        elif self._waiting and self._decision is None:
            self._decision = Decision(command.action, command.reason)

    @workflow.update
    def decide(self, decision: Decision) -> Ack:
        """Answer a failed step: ``retry`` it, ``skip`` the cluster, or ``abort`` the cluster."""
        self._decision = decision
        return Ack(ClusterState.WAITING_FOR_DECISION.value, f"{decision.action} accepted")

    @decide.validator
    def _validate_decide(self, decision: Decision) -> None:
        if decision.action not in ("retry", "skip", "abort"):
            raise ValueError(f"unknown decision {decision.action!r}: use retry, skip or abort")
        if not self._waiting:
            raise ValueError(
                f"cluster {self._progress.name} is not waiting for a decision "
                f"(state {self._progress.state.value})"
            )
        if self._decision is not None:
            raise ValueError(f"a decision ({self._decision.action}) is already being applied")

    # ------------------------------------------------------------------ run

    @workflow.run
    async def run(self, input: ClusterUpgradeInput) -> ClusterProgress:
        """Run the cluster's upgrade; returns its final progress (also reported to the parent)."""
        validate_cluster_upgrade_input(input)  # started by any client: check first
        if input.plan is None:
            if input.plan_ref is None:
                raise ApplicationError(
                    "ClusterUpgrade needs a plan or a plan reference", non_retryable=True
                )
            self._plan = await workflow.execute_activity_method(
                CalibrationActivities.cluster_plan,
                ClusterPlanInput(input.plan_ref, input.cluster),
                **read_options(input.options),
            )
            self._progress = self._initial_progress()
        plan = self._run
        await self._update(state=ClusterState.RUNNING, started_at=workflow.now(), message="")
        if not await self._guarded("preflight", self._preflight):
            return self._progress
        if not await self._boundary():
            return await self._stop_for_abort()
        if not await self._guarded("add taint", self._add_taint):
            return self._progress
        steps = plan.run_steps()
        first = str(steps[0].step.version) if steps else None
        if not await self._guarded(
            "placement", lambda: self._place("before the first step", first)
        ):
            return self._progress
        for step in steps:
            if not await self._boundary():
                return await self._stop_for_abort()
            part = functools.partial(self._run_step, step)
            if not await self._guarded(step.describe(), part, step.index):
                return self._progress
        if not await self._guarded("remove taint", self._remove_taint):
            return self._progress
        if not await self._guarded("placement", lambda: self._place("after the upgrade", None)):
            return self._progress
        await self._update(
            state=ClusterState.SUCCEEDED,
            finished_at=workflow.now(),
            message=f"at {input.target}, untainted",
        )
        return self._progress

    # ------------------------------------------------------------------ the parts

    async def _preflight(self) -> None:
        run = self._run
        result = await workflow.execute_activity_method(
            CalibrationActivities.preflight,
            PreflightInput(
                calibration_id=self._input.calibration_id,
                cluster=run.cluster,
                control_plane_from=str(run.plan.control_plane_from),
                pools=run.plan.pools_from,
                planned_versions=tuple(str(s.version) for s in run.plan.steps),
            ),
            **short_options(self._input.options),
        )
        if not result.ok:
            raise _StepFailed("preflight: " + "; ".join(result.problems))

    def _taint(self) -> TaintInput:
        return TaintInput(
            cluster=self._run.cluster,
            key=UPGRADING_TAINT_KEY,
            effect=UPGRADING_EFFECT,
            value=self._input.calibration_id,
            time_added=workflow.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

    def _meter(self) -> metrics.ClusterMetrics:
        if self._metrics is None:
            self._metrics = metrics.ClusterMetrics(workflow.metric_meter())
        return self._metrics

    async def _add_taint(self) -> None:
        # Counted as tainted before the call: if it fails we cannot know whether it was written.
        self._set(tainted=True)
        if self._tainted_at is None:
            self._tainted_at = workflow.now()
        await workflow.execute_activity_method(
            CalibrationActivities.add_taint, self._taint(), **short_options(self._input.options)
        )

    async def _remove_taint(self, outcome: str = metrics.UPGRADED) -> None:
        await workflow.execute_activity_method(
            CalibrationActivities.remove_taint, self._taint(), **short_options(self._input.options)
        )
        self._set(tainted=False)
        if self._tainted_at is not None:
            gated = workflow.now() - self._tainted_at
            self._meter().taint_removed(outcome, gated.total_seconds())
            self._tainted_at = None

    async def _place(
        self, what: str, upcoming: str | None, step_id: str = "", index: int | None = None
    ) -> None:
        name = self._run.cluster.name
        self._set(message=f"placement {what}")
        result = await workflow.execute_activity_method(
            CalibrationActivities.replace,
            ReplaceInput(
                calibration_id=self._input.calibration_id,
                cluster=self._run.cluster,
                reason=f"{name}: {what}",
                step_id=step_id,
                upcoming_version=upcoming,
                now=workflow.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            ),
            **placement_options(self._input.options),
        )
        if result.replicas_moved or result.replicas_forced:
            # Counted per step (the placement after it) and per cluster; the parent sums the run.
            moved, forced = result.replicas_moved, result.replicas_forced
            if index is not None:
                step = self._progress.steps[index]
                self._step(
                    index,
                    replicas_moved=step.replicas_moved + moved,
                    replicas_forced=step.replicas_forced + forced,
                )
            self._set(
                replicas_moved=self._progress.replicas_moved + moved,
                replicas_forced=self._progress.replicas_forced + forced,
            )
        if result.stranded and upcoming is not None:
            raise _StepFailed(
                f"{upcoming} would break {', '.join(result.stranded)} on {name} and placement "
                "cannot move them"
            )

    async def _run_step(self, planned: RunStep) -> None:
        opts = self._input.options
        ref = self._run.cluster
        index, step_id, step = planned.index, planned.step_id, planned.step
        version = str(step.version)
        self._step(index, activity="patch")
        # Touched from the first patch attempt on: from now the cluster may be mid-upgrade.
        was_touched = self._progress.touched
        self._set(touched=True)
        if step.component == "controlPlane":
            try:
                patched = await workflow.execute_activity_method(
                    CalibrationActivities.patch_control_plane,
                    PatchControlPlaneInput(
                        step_id,
                        ref,
                        str(step.from_version),
                        version,
                        observe_window_seconds=opts.timeouts.observe_window_seconds,
                        on_observed_usage=self._run.on_observed_usage,
                    ),
                    **short_options(opts),
                )
            except ActivityError as err:
                # The gate refuses before it patches: a refused step moved nothing.
                if isinstance(err.cause, ApplicationError) and err.cause.type == STEP_BLOCKED:
                    self._set(touched=was_touched)
                raise
            self._warn(index, patched.warnings)
            self._step(index, activity="wait")
            await workflow.execute_activity_method(
                CalibrationActivities.wait_control_plane,
                WaitControlPlaneInput(step_id, ref, version, opts.timeouts.poll_seconds),
                **wait_options(opts),
            )
        else:
            await self._roll_pools(planned)
        self._step(index, activity="verify")
        verified = await workflow.execute_activity_method(
            CalibrationActivities.verify,
            VerifyInput(
                step_id, ref, step.component, version, tuple(n for n, _ in step.pools_from)
            ),
            **short_options(opts),
        )
        if not verified.ok:
            raise _StepFailed("verification failed: " + "; ".join(verified.problems))
        self._step(index, activity="check")
        checked = await workflow.execute_activity_method(
            CalibrationActivities.check_compat,
            CheckInput(step_id, ref, version),
            **short_options(opts),
        )
        self._warn(index, checked.observed)
        if checked.findings:
            raise _StepFailed(
                "compatibility check failed: "
                + "; ".join(
                    f"{f.workload} uses {f.api} (removed in {f.removed_in})"
                    for f in checked.findings
                )
            )
        self._step(index, activity="place")
        steps = self._run.plan.steps
        upcoming = str(steps[index + 1].version) if index + 1 < len(steps) else None
        await self._place(
            f"after step {index + 1}/{len(steps)} ({step.describe()})", upcoming, step_id, index
        )

    async def _roll_pools(self, planned: RunStep) -> None:
        """Patch and wait pool by pool, at most ``worker_concurrency`` MachineDeployments at once."""
        opts = self._input.options
        ref = self._run.cluster
        index, step_id, version = planned.index, planned.step_id, str(planned.step.version)
        limit = asyncio.Semaphore(max(1, opts.worker_concurrency))

        async def roll(pool: tuple[str, KubeVersion]) -> None:
            async with limit:
                patched = await workflow.execute_activity_method(
                    CalibrationActivities.patch_workers,
                    PatchWorkersInput(
                        step_id,
                        ref,
                        version,
                        (pool,),
                        on_disruption_blocker=self._run.on_disruption_blocker,
                    ),
                    **short_options(opts),
                )
                self._warn(index, patched.warnings)
                await workflow.execute_activity_method(
                    CalibrationActivities.wait_workers,
                    WaitWorkersInput(step_id, ref, version, (pool[0],), opts.timeouts.poll_seconds),
                    **wait_options(opts),
                )

        self._step(index, activity="patch+wait")
        pools = planned.step.pools_from
        results = await asyncio.gather(*(roll(p) for p in pools), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    # ------------------------------------------------------------------ failure handling

    async def _guarded(
        self, label: str, part: Callable[[], Awaitable[None]], step: int | None = None
    ) -> bool:
        """Run ``part`` until it succeeds or the operator decides otherwise (False = stop).

        ``step`` is the index of the planned step ``part`` runs (None for bookkeeping parts).
        """
        while True:
            attempt_began = workflow.now()
            if step is not None:
                current = self._progress.steps[step]
                self._step(
                    step,
                    state=StepState.RUNNING,
                    attempts=current.attempts + 1,
                    started_at=current.started_at or workflow.now(),
                    message="",
                )
                await self._update(state=ClusterState.RUNNING, message=label)
            try:
                await part()
            except (ActivityError, _StepFailed) as err:
                message = f"{label}: {describe_failure(err)}"
                if step is not None:
                    self._step(step, state=StepState.FAILED, message=message)
                    self._record_step(step, metrics.FAILED, attempt_began)
                decision = await self._wait_for_decision(message)
                if decision.action == "retry":
                    continue
                await self._give_up(decision)
                return False
            if step is not None:
                self._step(step, state=StepState.SUCCEEDED, activity="", finished_at=workflow.now())
                self._record_step(step, metrics.SUCCEEDED, attempt_began)
                await self._update(message=f"{label}: done")
            return True

    def _record_step(self, index: int, outcome: str, began: datetime) -> None:
        seconds = (workflow.now() - began).total_seconds()
        self._meter().step(self._run.plan.steps[index].component, outcome, seconds)

    async def _wait_for_decision(self, message: str) -> Decision:
        self._waiting = True
        self._decision = None
        if self._abort_reason is not None:
            self._decision = Decision("abort", self._abort_reason)
        await self._update(state=ClusterState.WAITING_FOR_DECISION, message=message)
        await workflow.wait_condition(lambda: self._decision is not None)
        self._waiting = False
        decision = self._decision
        assert decision is not None
        self._decision = None
        if decision.action == "retry":
            await self._update(state=ClusterState.RUNNING, message=f"retrying ({decision.reason})")
        return decision

    async def _give_up(self, decision: Decision) -> None:
        """Skip or abort after a failure."""
        state = ClusterState.SKIPPED if decision.action == "skip" else ClusterState.FAILED
        if decision.action == "abort" and self._abort_reason is not None:
            state = ClusterState.ABORTED  # the whole calibration was aborted, not just this cluster
        await self._leave(state, f"{decision.action}: {decision.reason or decision.action}")

    async def _leave(self, state: ClusterState, note: str) -> None:
        """End without finishing the plan.

        The taint stays unless nothing was ever patched: a cluster that may be mid-upgrade must
        not take new work.
        """
        if self._progress.tainted and not self._progress.touched:
            note += await self._try_untaint()
        elif self._progress.tainted:
            note += "; left tainted: the cluster may be mid-upgrade"
        for s in self._progress.steps:
            if s.state == StepState.PENDING:
                self._step(s.index, state=StepState.SKIPPED)
        await self._update(state=state, finished_at=workflow.now(), message=note)

    async def _try_untaint(self) -> str:
        try:
            await self._remove_taint(metrics.RELEASED)
        except ActivityError as err:
            return f"; could not remove the taint ({describe_failure(err)})"
        return "; taint removed (nothing was patched)"

    async def _boundary(self) -> bool:
        """Between steps: honour pause, abort and the maintenance window. False = aborted."""
        window = self._run.window
        while True:
            if self._abort_reason is not None:
                return False
            if self._paused:
                await self._update(state=ClusterState.PAUSED, message="paused")
                await workflow.wait_condition(
                    lambda: not self._paused or self._abort_reason is not None
                )
                continue
            now = workflow.now()
            if window is not None and not window.is_open(now):
                opening = window.next_opening(now)
                when = f"{opening:%Y-%m-%d %H:%M} UTC"
                await self._update(
                    state=ClusterState.WAITING_FOR_WINDOW,
                    message=f"maintenance window {self._progress.window} opens {when}",
                )
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        lambda: self._abort_reason is not None or self._paused,
                        timeout=max(opening - now, MIN_TIMER),
                        timeout_summary="maintenance window",
                    )
                continue
            if self._progress.state != ClusterState.RUNNING:
                await self._update(state=ClusterState.RUNNING, message="")
            return True

    async def _stop_for_abort(self) -> ClusterProgress:
        await self._leave(ClusterState.ABORTED, self._abort_reason or "aborted")
        return self._progress

    # ------------------------------------------------------------------ progress

    def _set(self, **changes: Any) -> None:
        self._progress = replace(self._progress, **changes)
        workflow.set_current_details(self._details())

    def _warn(self, index: int, warnings: tuple[str, ...]) -> None:
        """Show what a gate or a re-check saw but did not stop on (``usage_gate``) on the step."""
        if warnings:
            text = "; ".join(warnings)
            self._step(index, message=text if len(text) <= 1000 else text[:999] + "…")

    def _step(self, index: int, **changes: Any) -> None:
        steps = list(self._progress.steps)
        steps[index] = replace(steps[index], **changes)
        self._set(steps=tuple(steps))

    async def _update(self, **changes: Any) -> None:
        """Change progress, upsert the phase attribute, and report to the parent."""
        self._set(**changes)
        state = self._progress.state
        if state != self._phase_attr:
            self._phase_attr = state
            workflow.upsert_search_attributes(
                [search_attributes.CALIBRATION_PHASE.value_set(state.value)]
            )
        parent = workflow.info().parent
        if parent is None:
            return
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(
                REPORT_SIGNAL, ClusterReport(self._progress)
            )
        except FailureError as err:  # parent gone (terminated): keep upgrading the cluster
            workflow.logger.warning("cannot report to %s: %s", parent.workflow_id, err)

    def _details(self) -> str:
        p = self._progress
        lines = [f"**{p.name}** {p.from_version} → {p.target}: {p.state.value}"]
        if p.message:
            lines.append(p.message)
        for s in p.steps:
            extra = f" ({s.activity})" if s.activity and s.state == StepState.RUNNING else ""
            lines.append(f"- {s.index + 1}. {s.description}: {s.state.value}{extra}")
        lines.append("tainted" if p.tainted else "not tainted")
        if p.replicas_moved or p.replicas_forced:
            lines.append(
                f"replicas moved by placement: {p.replicas_moved} "
                f"(forced off rejecting clusters: {p.replicas_forced})"
            )
        return "\n".join(lines)
