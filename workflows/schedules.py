"""Continuous calibration schedules: create, list, describe, pause, unpause, trigger, delete.

Built on Temporal Schedules, the engine's own feature, so the server keeps the timetable, pauses,
notes, missed and skipped runs, and the UI shows them. Every schedule runs
``ContinuousCalibration`` with one CalibrationPolicy, overlap policy SKIP: while the previous run
(and the calibration it awaits) is still going, a tick is skipped and counted, never queued.

The answers are plain JSON-able documents for the CLI (``-o json|yaml`` are the contract);
a schedule that does not exist, or exists already, is a ``ControlError`` with one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecution,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleListActionStartWorkflow,
    ScheduleListDescription,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.domain.durations import format_duration
from orchestrator.domain.errors import InputError
from orchestrator.domain.policy import policy_from_mapping
from workflows import task_queues
from workflows.client import ControlError
from workflows.definitions.continuous import ContinuousCalibration
from workflows.model import CalibrationOptions, ContinuousInput, ContinuousResult
from workflows.search_attribute_setup import OperatorAdmin, require_search_attributes

WORKFLOW_TYPE = "ContinuousCalibration"
MAX_POLICY_BYTES = 256 * 1024
"""The policy travels in the schedule's action (and every run's input): kept well under 2 MB."""
MIN_INTERVAL = timedelta(minutes=1)
RECENT = 10  # recent runs shown by describe
TIMETABLE_MEMO = "timetable"
_ID = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def check_schedule_id(schedule_id: str) -> str:
    """A DNS-label-like id (it prefixes every run's workflow id and every calibration's)."""
    if not _ID.match(schedule_id):
        raise InputError(
            f"invalid schedule name {schedule_id[:70]!r}: 1-63 lowercase letters, digits, '-' "
            "or '.', starting and ending with a letter or digit"
        )
    return schedule_id


def check_policy(policy: dict[str, Any]) -> str:
    """Validate the policy document and its size; its one-line description."""
    size = len(json.dumps(policy, default=str))
    if size > MAX_POLICY_BYTES:
        raise InputError(f"policy: {size:,} bytes as JSON, at most {MAX_POLICY_BYTES:,}")
    return policy_from_mapping(policy).describe()


def build_schedule(
    schedule_id: str,
    policy: dict[str, Any],
    *,
    every: timedelta | None = None,
    cron: str | None = None,
    paused: bool = False,
    note: str = "",
    task_queue: str = task_queues.CALIBRATION,
    options: CalibrationOptions | None = None,
) -> Schedule:
    """The Schedule ``create_schedule`` sends (InputError for bad input, before any call)."""
    check_schedule_id(schedule_id)
    described = check_policy(policy)
    if (every is None) == (cron is None):
        raise InputError("give exactly one of --every (an interval) or --cron (an expression)")
    if every is not None and every < MIN_INTERVAL:
        raise InputError(f"--every: at least {MIN_INTERVAL.seconds // 60} minute")
    if cron is not None and (not cron.strip() or len(cron) > 256):
        raise InputError("--cron: expected a cron expression like '0 3 * * Sat'")
    spec = (
        ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)])
        if every is not None
        else ScheduleSpec(cron_expressions=[cron or ""])
    )
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ContinuousCalibration.run,
            ContinuousInput(policy, options or CalibrationOptions()),
            id=schedule_id,
            task_queue=task_queue,
            static_summary=f"Continuous calibration: {described}",
        ),
        spec=spec,
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note=note or f"policy: {described}", paused=paused),
    )


def _missing(schedule_id: str, err: RPCError) -> ControlError:
    if err.status == RPCStatusCode.NOT_FOUND:
        return ControlError(f"schedule {schedule_id} not found")
    return ControlError(f"schedule {schedule_id}: {err.message}")


async def create(client: Client, schedule_id: str, schedule: Schedule) -> dict[str, Any]:
    """Create the schedule; an existing one with the same name is refused, never replaced.

    A namespace that lacks the calibration search attributes is refused first
    (``MissingSearchAttributes``, naming `calibrator temporal setup`).

    The timetable as given is kept in the memo: the server turns a cron expression into
    calendar ranges and does not keep its text.
    """
    # Its ticks start calibrations, which set the search attributes: a namespace without them
    # is refused now (MissingSearchAttributes), not at the first tick inside the workflow.
    await require_search_attributes(OperatorAdmin(client), client.namespace)
    try:
        await client.create_schedule(
            schedule_id, schedule, memo={TIMETABLE_MEMO: _spec(schedule.spec)}
        )
    except ScheduleAlreadyRunningError:
        raise ControlError(f"schedule {schedule_id} already exists") from None
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:  # e.g. a cron the server refuses
            raise InputError(f"schedule {schedule_id}: {err.message}") from None
        raise
    return await describe(client, schedule_id)


async def list_all(client: Client) -> list[dict[str, Any]]:
    """Every continuous-calibration schedule of the namespace, by name."""
    rows: list[dict[str, Any]] = []
    async for entry in await client.list_schedules():
        action = entry.schedule.action if entry.schedule else None
        if not (
            isinstance(action, ScheduleListActionStartWorkflow) and action.workflow == WORKFLOW_TYPE
        ):
            continue
        info = entry.info
        state = entry.schedule.state if entry.schedule else None
        rows.append(
            {
                "name": entry.id,
                "spec": await _timetable(entry),
                "paused": bool(state and state.paused),
                "note": state.note if state and state.note else "",
                "nextRun": _time(info.next_action_times[0])
                if info and info.next_action_times
                else None,
                "lastRun": info.recent_actions[-1].action.workflow_id
                if info
                and info.recent_actions
                and hasattr(info.recent_actions[-1].action, "workflow_id")
                else None,
            }
        )
    return sorted(rows, key=lambda r: str(r["name"]))


async def describe(client: Client, schedule_id: str) -> dict[str, Any]:
    """Timetable, state, counters, the policy, the recent runs and the latest run's verdict."""
    handle = client.get_schedule_handle(schedule_id)
    try:
        desc = await handle.describe()
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    action = desc.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow != WORKFLOW_TYPE:
        raise ControlError(f"schedule {schedule_id} is not a continuous calibration")
    policy = await _policy(client, action)
    info = desc.info
    recent = [
        {
            "scheduledAt": _time(r.scheduled_at),
            "startedAt": _time(r.started_at),
            "workflowId": _workflow_id(r.action),
        }
        for r in info.recent_actions[-RECENT:]
    ]
    return {
        "name": desc.id,
        "spec": await _timetable(desc),
        "overlap": desc.schedule.policy.overlap.name,
        "paused": desc.schedule.state.paused,
        "note": desc.schedule.state.note or "",
        "policy": policy_from_mapping(policy).describe() if policy is not None else "",
        "taskQueue": action.task_queue,
        "runs": info.num_actions,
        "skippedOverlap": info.num_actions_skipped_overlap,
        "missedCatchupWindow": info.num_actions_missed_catchup_window,
        "running": [_workflow_id(r) for r in info.running_actions],
        "recent": recent,
        "nextRuns": [_time(t) for t in info.next_action_times[:5]],
        "lastResult": await _last_result(client, recent[-1]["workflowId"]) if recent else None,
    }


async def _policy(client: Client, action: ScheduleActionStartWorkflow) -> dict[str, Any] | None:
    """The policy inside the schedule's action (described schedules carry raw payloads)."""
    if not action.args:
        return None
    (decoded,) = await client.data_converter.decode(list(action.args), [ContinuousInput])
    return decoded.policy if isinstance(decoded, ContinuousInput) else None


async def _last_result(client: Client, workflow_id: str) -> dict[str, Any] | None:
    """The latest run's report: its result when it ended, its live progress while it runs."""
    if not workflow_id:
        return None
    handle = client.get_workflow_handle_for(ContinuousCalibration.run, workflow_id)
    try:
        desc = await handle.describe()
        if desc.status == WorkflowExecutionStatus.RUNNING:
            result: ContinuousResult = await handle.query(ContinuousCalibration.progress)
        elif desc.status == WorkflowExecutionStatus.COMPLETED:
            result = await handle.result()
        else:
            status = desc.status.name if desc.status else "UNKNOWN"
            return {"workflowId": workflow_id, "status": status}
    except RPCError as err:
        return {"workflowId": workflow_id, "error": err.message}
    doc: dict[str, Any] = json.loads(json.dumps(asdict(result), default=str))
    return {"workflowId": workflow_id, "status": desc.status.name, **doc}


def _handle(client: Client, schedule_id: str) -> ScheduleHandle:
    return client.get_schedule_handle(schedule_id)


async def pause(client: Client, schedule_id: str, reason: str = "") -> dict[str, Any]:
    """Stop starting runs (a running one continues); the reason becomes the schedule's note."""
    try:
        await _handle(client, schedule_id).pause(note=reason or "paused by calibrator")
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    return {"name": schedule_id, "paused": True}


async def unpause(client: Client, schedule_id: str, reason: str = "") -> dict[str, Any]:
    """Start runs again at the next tick."""
    try:
        await _handle(client, schedule_id).unpause(note=reason or "unpaused by calibrator")
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    return {"name": schedule_id, "paused": False}


async def trigger(client: Client, schedule_id: str) -> dict[str, Any]:
    """Run an evaluation now (still under overlap SKIP: nothing starts while a run is going)."""
    try:
        await _handle(client, schedule_id).trigger()
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    return {"name": schedule_id, "triggered": True}


async def delete(client: Client, schedule_id: str) -> dict[str, Any]:
    """Delete the schedule; runs and calibrations already started go on."""
    try:
        await _handle(client, schedule_id).delete()
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    return {"name": schedule_id, "deleted": True}


async def _timetable(desc: ScheduleDescription | ScheduleListDescription) -> str:
    """The timetable as it was given at creation (memo), else as the server describes it."""
    text = await desc.memo_value(TIMETABLE_MEMO, default="")
    if isinstance(text, str) and text:
        return text
    spec = desc.schedule.spec if isinstance(desc, ScheduleDescription) else None
    return _spec(spec) if spec is not None else ""


def _workflow_id(execution: ScheduleActionExecution) -> str:
    if isinstance(execution, ScheduleActionExecutionStartWorkflow):
        return execution.workflow_id
    return ""


def _spec(spec: ScheduleSpec) -> str:
    parts = [f"every {_interval(i.every)}" for i in spec.intervals]
    parts += [f"cron {c}" for c in spec.cron_expressions]
    parts += [f"calendar {c.comment}".strip() for c in spec.calendars]
    return ", ".join(parts)


def _interval(every: timedelta) -> str:
    return format_duration(int(every.total_seconds()))


def _time(value: Any) -> str:
    return value.isoformat() if value is not None else ""
