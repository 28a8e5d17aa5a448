"""Continuous calibration: the workflow a Temporal Schedule starts on every tick.

``ContinuousCalibration`` evaluates a CalibrationPolicy on the live fleet (one activity: inventory,
pure evaluation, each calibration's scope stored by digest) and, only when due clusters break the
policy, runs one ``FleetCalibration`` per goal version, scoped to those clusters, one after the
other. Nothing else: compliant fleets, and violators whose maintenance window is closed, end the
run with a report and no calibration.

Why the calibrations are *child* workflows that this run awaits (rather than started through a
client and left alone): the schedule's overlap policy is SKIP, and a running scheduled workflow is
what SKIP looks at. While a calibration the schedule started is still running (rolling out,
soaking, waiting for an approval or an operator's decision), this run is running too, so later
ticks are skipped and no second calibration piles onto the same clusters; the next evaluation
happens after it ends, on the fleet it left. The child ids are deterministic,
``<this workflow id>/<target>`` (the schedule makes this run's id from the schedule id and the
tick's time), so a retried or replayed run can never start a second calibration for the same
tick, and ``calibrator status <id>`` addresses it like any calibration. The children are
``ABANDON``ed on parent close: terminating or deleting the schedule's run must never cut off a
calibration in the middle of a rollout.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows import search_attributes
    from workflows.activities import NON_RETRYABLE_ERRORS, CalibrationActivities
    from workflows.definitions.common import DROP_SCOPE_PATCH, describe_failure, drop_stored
    from workflows.definitions.fleet_calibration import FleetCalibration
    from workflows.model import (
        CalibrationInput,
        ContinuousInput,
        ContinuousResult,
        EvaluateInput,
        Phase,
        PolicyReport,
        StartedCalibration,
    )
    from workflows.validation import validate_continuous_input


def calibration_id(run_id: str, target: str) -> str:
    """The deterministic id of the calibration a continuous run starts for one goal version."""
    return f"{run_id}/{target}"


@workflow.defn(name="ContinuousCalibration")
class ContinuousCalibration:
    """Evaluate the policy; calibrate the due violators, one goal version at a time."""

    def __init__(self) -> None:
        self._result = ContinuousResult("evaluating the policy")

    @workflow.query
    def progress(self) -> ContinuousResult:
        """The report so far and the calibrations started (with their phases once they end)."""
        return self._result

    @workflow.run
    async def run(self, input: ContinuousInput) -> ContinuousResult:
        """One evaluation, and the calibrations it calls for."""
        validate_continuous_input(input)
        self._show()
        report = await self._evaluate(input)
        self._result = ContinuousResult(_verdict(report), report)
        self._show()
        for group in report.groups:
            started = StartedCalibration(
                calibration_id(workflow.info().workflow_id, group.target),
                group.target,
                group.scope.clusters,
                Phase.PLANNING.value,
            )
            self._record(
                started, f"calibrating {group.scope.clusters} cluster(s) to {group.target}"
            )
            try:
                final = await workflow.execute_child_workflow(
                    FleetCalibration.run,
                    CalibrationInput(
                        target=group.target,
                        strategy=input.policy.get("strategy"),
                        options=input.options,
                        scope=group.scope,
                    ),
                    id=started.calibration_id,
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    search_attributes=TypedSearchAttributes(
                        [
                            SearchAttributePair(search_attributes.CALIBRATION_TARGET, group.target),
                            SearchAttributePair(
                                search_attributes.CALIBRATION_PHASE, Phase.PLANNING.value
                            ),
                        ]
                    ),
                    static_summary=f"Calibrate {group.scope.clusters} cluster(s) to "
                    f"{group.target} (policy: {report.policy})",
                    static_details="\n".join(
                        [f"Started by continuous calibration `{workflow.info().workflow_id}`", ""]
                        + [f"- {name}" for name in group.sample]
                        + (
                            [f"- ... {group.scope.clusters - len(group.sample)} more"]
                            if group.scope.clusters > len(group.sample)
                            else []
                        )
                    ),
                )
            except ChildWorkflowError as err:
                # A failed calibration ends this evaluation: the next tick looks at the fleet
                # it left, instead of piling more calibrations onto a failing one.
                self._record(
                    replace(started, phase=Phase.FAILED.value, message=describe_failure(err)),
                    f"calibration {started.calibration_id} failed; the next tick re-evaluates",
                )
                await self._drop_scopes(report, input)
                return self._result
            self._record(
                replace(started, phase=final.phase.value, message=final.message),
                f"calibration {started.calibration_id}: {final.phase.value}",
            )
        await self._drop_scopes(report, input)
        return self._result

    async def _drop_scopes(self, report: PolicyReport, input: ContinuousInput) -> None:
        """Delete the scopes this evaluation stored: each calibration read its own when it planned.

        Scopes carry this run's id, so no other evaluation shares them; a group not started
        (after a failed calibration) is dropped too: the next tick stores its own.
        """
        if not workflow.patched(DROP_SCOPE_PATCH):
            return
        for group in report.groups:
            await drop_stored(group.scope.digest, input.options, "scope")

    async def _evaluate(self, input: ContinuousInput) -> PolicyReport:
        try:
            return await workflow.execute_activity_method(
                CalibrationActivities.evaluate_policy,
                EvaluateInput(input.policy, workflow.now()),
                start_to_close_timeout=timedelta(seconds=input.options.timeouts.activity_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=5,
                    non_retryable_error_types=list(NON_RETRYABLE_ERRORS),
                ),
            )
        except ActivityError as err:
            raise ApplicationError(
                f"policy evaluation failed, nothing was started: {describe_failure(err)}",
                type="EvaluationFailed",
                non_retryable=True,
            ) from err

    def _record(self, started: StartedCalibration, message: str) -> None:
        others = [
            c for c in self._result.calibrations if c.calibration_id != started.calibration_id
        ]
        self._result = replace(self._result, message=message, calibrations=(*others, started))
        self._show()

    def _show(self) -> None:
        report = self._result.report
        lines = [f"**{self._result.message}**"]
        if report is not None:
            lines.append(
                f"policy: {report.policy} · newest {report.newest} · {report.checked} checked, "
                + ", ".join(f"{n} {state}" for state, n in report.counts.items())
            )
            lines += [f"- {v.cluster} ({v.state}): {v.message}" for v in report.sample[:10]]
        lines += [
            f"- calibration `{c.calibration_id}`: {c.phase}" for c in self._result.calibrations
        ]
        workflow.set_current_details("\n".join(lines))


def _verdict(report: PolicyReport) -> str:
    """One line: compliant, or what breaks the policy and what happens about it."""
    if not report.violating:
        return f"compliant: {report.checked} cluster(s) keep the policy"
    counts = report.counts
    text = f"{report.violating} of {report.checked} cluster(s) break the policy"
    if report.groups:
        targets = ", ".join(g.target for g in report.groups)
        return f"{text}: calibrating {counts.get('due', 0)} to {targets}"
    reasons = []
    if counts.get("deferred"):
        when = report.next_opening
        reasons.append(
            f"{counts['deferred']} wait for their maintenance window"
            + (f" (next opens {when:%a %Y-%m-%d %H:%M} UTC)" if when else "")
        )
    if counts.get("busy"):
        reasons.append(f"{counts['busy']} are being upgraded by another calibration")
    if counts.get("unfixable"):
        reasons.append(f"{counts['unfixable']} cannot be fixed with the available versions")
    return f"{text}; nothing started: " + "; ".join(reasons)
