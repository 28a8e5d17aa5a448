"""Continuous calibration schedules: create, update, list, describe, pause, unpause, trigger, delete.

Built on Temporal Schedules, the engine's own feature, so the server keeps the timetable, its time
zone and jitter, pauses, notes, missed and skipped runs, and the UI shows them. Every schedule runs
``ContinuousCalibration`` with one CalibrationPolicy, overlap policy SKIP: while the previous run
(and the calibration it awaits) is still going, a tick is skipped and counted, never queued.

Everything that can be checked without the server is checked before a connection (cron syntax,
IANA time zone, jitter and catch-up window bounds, the policy); what needs the schedule's current
state (the jitter of an update against the interval it keeps) is checked inside the update
callback, before anything is sent.

The answers are plain JSON-able documents for the CLI (``-o json|yaml`` are the contract);
a schedule that does not exist, or exists already, is a ``ControlError`` with one line.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zoneinfo
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecution,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleCalendarSpec,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleListActionStartWorkflow,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from orchestrator.domain.cron import DAYS, check_cron
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
MAX_JITTER = timedelta(hours=24)
"""Jitter spreads the start of runs of many schedules; a day is more than any timetable needs."""
MIN_CATCHUP_WINDOW = timedelta(minutes=1)
MAX_CATCHUP_WINDOW = timedelta(days=365)
"""Temporal's own default (and the longest that means anything): a missed tick runs when the
server is back, however late. The server raises anything under 10 s to 10 s; we refuse under 1m."""
UTC_NAME = "UTC"
RECENT = 10  # recent runs shown by describe
MAX_NOTE = 1000
_ID = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
_ZONE_TEXT = re.compile(r"^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$")


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


def check_time_zone(name: str) -> str:
    """An IANA time zone name this machine's tz database knows (``Europe/Berlin``, ``UTC``).

    Names only: no offsets such as ``+02:00`` (a fixed offset ignores daylight saving time, which
    is exactly what a local timetable needs), no ``localtime`` or file paths.
    """
    text = name.strip() if isinstance(name, str) else ""
    if text != name or not _ZONE_TEXT.match(text) or len(text) > 64:
        raise InputError(
            f"--time-zone: expected an IANA name like Europe/Berlin, got {name[:40]!r}"
        )
    known = _known_zones() if text != UTC_NAME else {text}
    if not known:
        raise InputError(
            "--time-zone: this machine has no time zone database (install the tzdata package)"
        )
    if text not in known:
        raise InputError(
            f"--time-zone: unknown time zone {text!r} (an IANA name like Europe/Berlin or UTC)"
        )
    return text


def _known_zones() -> set[str]:
    return zoneinfo.available_timezones()


def check_jitter(jitter: timedelta) -> timedelta:
    """0 (none) up to MAX_JITTER."""
    if not timedelta(0) <= jitter <= MAX_JITTER:
        raise InputError(f"--jitter: between 0s and {_duration(MAX_JITTER)}")
    return jitter


def check_catchup_window(window: timedelta) -> timedelta:
    """MIN_CATCHUP_WINDOW up to MAX_CATCHUP_WINDOW."""
    if not MIN_CATCHUP_WINDOW <= window <= MAX_CATCHUP_WINDOW:
        raise InputError(
            f"--catchup-window: between {_duration(MIN_CATCHUP_WINDOW)} and "
            f"{_duration(MAX_CATCHUP_WINDOW)}"
        )
    return window


def check_note(note: str) -> str:
    """A note is one line of at most MAX_NOTE characters (it is shown in tables and the UI)."""
    if len(note) > MAX_NOTE or "\n" in note or "\r" in note:
        raise InputError(f"--note: one line of at most {MAX_NOTE} characters")
    return note


def _check_spec(spec: ScheduleSpec) -> None:
    """Rules that join several options: jitter under the interval, time zone with a calendar."""
    jitter = spec.jitter or timedelta(0)
    for interval in spec.intervals:
        if jitter and jitter >= interval.every:
            raise InputError(
                f"--jitter {_duration(jitter)} must be shorter than the interval "
                f"({_duration(interval.every)})"
            )
    if (
        spec.time_zone_name
        and spec.time_zone_name != UTC_NAME
        and not spec.calendars
        and not (spec.cron_expressions)
    ):
        raise InputError("--time-zone applies to --cron timetables, not to --every")


def _timetable(every: timedelta | None, cron: str | None) -> ScheduleSpec | None:
    """The spec of --every or --cron (None when neither is given; both is an error)."""
    if every is not None and cron is not None:
        raise InputError("give only one of --every (an interval) or --cron (an expression)")
    if every is not None:
        if every < MIN_INTERVAL:
            raise InputError(f"--every: at least {MIN_INTERVAL.seconds // 60} minute")
        return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)])
    if cron is not None:
        return ScheduleSpec(cron_expressions=[check_cron(cron)])
    return None


def build_schedule(
    schedule_id: str,
    policy: dict[str, Any],
    *,
    every: timedelta | None = None,
    cron: str | None = None,
    time_zone: str | None = None,
    jitter: timedelta | None = None,
    catchup_window: timedelta | None = None,
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
    spec = _timetable(every, cron)
    assert spec is not None
    spec = dataclasses.replace(
        spec,
        time_zone_name=None if time_zone is None else check_time_zone(time_zone),
        jitter=None if jitter is None else check_jitter(jitter),
    )
    _check_spec(spec)
    return Schedule(
        action=_action(schedule_id, policy, described, task_queue, options or CalibrationOptions()),
        spec=spec,
        policy=SchedulePolicy(
            overlap=ScheduleOverlapPolicy.SKIP,
            catchup_window=None if catchup_window is None else check_catchup_window(catchup_window),
        ),
        state=ScheduleState(note=check_note(note) or f"policy: {described}", paused=paused),
    )


def _action(
    workflow_id: str,
    policy: dict[str, Any],
    described: str,
    task_queue: str,
    options: CalibrationOptions,
) -> ScheduleActionStartWorkflow:
    return ScheduleActionStartWorkflow(
        ContinuousCalibration.run,
        ContinuousInput(policy, options),
        id=workflow_id,
        task_queue=task_queue,
        static_summary=f"Continuous calibration: {described}",
    )


@dataclass(frozen=True)
class ScheduleChange:
    """What ``schedule update`` changes; None keeps the schedule's current value.

    Built by ``build_change``, which checks every value on its own before any connection.
    """

    policy: dict[str, Any] | None = None
    timetable: ScheduleSpec | None = None
    time_zone: str | None = None
    jitter: timedelta | None = None
    catchup_window: timedelta | None = None
    note: str | None = None

    def apply(self, current: Schedule, options: CalibrationOptions | None) -> Schedule:
        """The schedule with this change applied (InputError if the result breaks a rule)."""
        spec = current.spec
        if self.timetable is not None:  # a new timetable keeps the zone and jitter unless given
            zone = spec.time_zone_name if self.timetable.cron_expressions else None
            spec = dataclasses.replace(self.timetable, time_zone_name=zone, jitter=spec.jitter)
        if self.time_zone is not None:
            spec = dataclasses.replace(spec, time_zone_name=self.time_zone)
        if self.jitter is not None:
            spec = dataclasses.replace(spec, jitter=self.jitter or None)
        _check_spec(spec)
        policy = current.policy
        if self.catchup_window is not None:
            policy = dataclasses.replace(policy, catchup_window=self.catchup_window)
        action = current.action
        if self.policy is not None:
            if not isinstance(action, ScheduleActionStartWorkflow):
                raise ControlError("the schedule's action is not a continuous calibration")
            action = _action(
                action.id,
                self.policy,
                check_policy(self.policy),
                action.task_queue,
                options or CalibrationOptions(),
            )
        state = current.state
        if self.note is not None:
            state = dataclasses.replace(state, note=self.note)
        return dataclasses.replace(current, action=action, spec=spec, policy=policy, state=state)


def build_change(
    *,
    policy: dict[str, Any] | None = None,
    every: timedelta | None = None,
    cron: str | None = None,
    time_zone: str | None = None,
    jitter: timedelta | None = None,
    catchup_window: timedelta | None = None,
    note: str | None = None,
) -> ScheduleChange:
    """Check each value of an update on its own (InputError), before anything connects."""
    if policy is not None:
        check_policy(policy)
    change = ScheduleChange(
        policy=policy,
        timetable=_timetable(every, cron),
        time_zone=None if time_zone is None else check_time_zone(time_zone),
        jitter=None if jitter is None else check_jitter(jitter),
        catchup_window=None if catchup_window is None else check_catchup_window(catchup_window),
        note=None if note is None else check_note(note),
    )
    if change == ScheduleChange():
        raise InputError(
            "nothing to update: give --policy, --every or --cron, --time-zone, --jitter, "
            "--catchup-window or --note"
        )
    if change.time_zone is not None and every is not None and change.time_zone != UTC_NAME:
        raise InputError("--time-zone applies to --cron timetables, not to --every")
    return change


def _missing(schedule_id: str, err: RPCError) -> ControlError:
    if err.status == RPCStatusCode.NOT_FOUND:
        return ControlError(f"schedule {schedule_id} not found")
    return ControlError(f"schedule {schedule_id}: {err.message}")


async def create(client: Client, schedule_id: str, schedule: Schedule) -> dict[str, Any]:
    """Create the schedule; an existing one with the same name is refused, never replaced.

    A namespace that lacks the calibration search attributes is refused first
    (``MissingSearchAttributes``, naming `calibrator temporal setup`).
    """
    # Its ticks start calibrations, which set the search attributes: a namespace without them
    # is refused now (MissingSearchAttributes), not at the first tick inside the workflow.
    await require_search_attributes(OperatorAdmin(client), client.namespace)
    try:
        await client.create_schedule(schedule_id, schedule)
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
                "spec": spec_text(entry.schedule.spec) if entry.schedule else "",
                "timeZone": (entry.schedule.spec.time_zone_name if entry.schedule else None)
                or UTC_NAME,
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
    spec = desc.schedule.spec
    window = desc.schedule.policy.catchup_window
    return {
        "name": desc.id,
        "spec": spec_text(spec),
        "timeZone": spec.time_zone_name or UTC_NAME,
        "jitter": _duration(spec.jitter or timedelta(0)),
        "catchupWindow": _duration(window or MAX_CATCHUP_WINDOW),
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


async def update(
    client: Client,
    schedule_id: str,
    change: ScheduleChange,
) -> dict[str, Any]:
    """Apply ``change`` to the schedule in one conflict-checked update; its new description.

    The callback runs against the schedule the server has now, so the rules that join values
    (a jitter shorter than the interval kept) are checked there; breaking one raises InputError
    from the callback, and nothing is sent. A new policy keeps the calibration options of the
    runs the schedule starts. Pause state, counters and recent runs are the server's and stay.
    """

    async def updater(given: ScheduleUpdateInput) -> ScheduleUpdate:
        current = given.description.schedule
        action = current.action
        if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow != WORKFLOW_TYPE:
            raise ControlError(f"schedule {schedule_id} is not a continuous calibration")
        options = None
        if change.policy is not None and action.args:
            (decoded,) = await client.data_converter.decode(list(action.args), [ContinuousInput])
            options = decoded.options if isinstance(decoded, ContinuousInput) else None
        return ScheduleUpdate(schedule=change.apply(current, options))

    try:
        await _handle(client, schedule_id).update(updater)
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise InputError(f"schedule {schedule_id}: {err.message}") from None
        raise _missing(schedule_id, err) from err
    return await describe(client, schedule_id)


async def pause(client: Client, schedule_id: str, note: str = "") -> dict[str, Any]:
    """Stop starting runs (a running one continues); the note becomes the schedule's note."""
    text = check_note(note) or "paused by calibrator"
    try:
        await _handle(client, schedule_id).pause(note=text)
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    return {"name": schedule_id, "paused": True, "note": text}


async def unpause(client: Client, schedule_id: str, note: str = "") -> dict[str, Any]:
    """Start runs again at the next tick; the note replaces the pause's."""
    text = check_note(note) or "unpaused by calibrator"
    try:
        await _handle(client, schedule_id).unpause(note=text)
    except RPCError as err:
        raise _missing(schedule_id, err) from err
    return {"name": schedule_id, "paused": False, "note": text}


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


def _workflow_id(execution: ScheduleActionExecution) -> str:
    if isinstance(execution, ScheduleActionExecutionStartWorkflow):
        return execution.workflow_id
    return ""


def spec_text(spec: ScheduleSpec) -> str:
    """The timetable as the server keeps it, rendered back to ``every ...`` / ``cron ...``.

    The server compiles a cron expression into calendar ranges and keeps no text; rendering the
    ranges (day names for the day of week) shows what it will run, also after an update.
    Public so that the rendering is tested on specs as the server returns them, without a
    server (``list_all`` and ``describe`` need one).
    """
    parts = [f"every {_interval(i.every)}" for i in spec.intervals]
    parts += [f"cron {c}" for c in spec.cron_expressions]
    parts += [f"cron {_calendar(c)}" for c in spec.calendars]
    return ", ".join(parts)


# The ranges a field spans when it is ``*`` (the server compiles ``*`` into them).
_FULL = {"minute": (0, 59), "hour": (0, 23), "day_of_month": (1, 31), "month": (1, 12)}


def _calendar(cal: ScheduleCalendarSpec) -> str:
    fields = [
        _field(cal.minute, *_FULL["minute"]),
        _field(cal.hour, *_FULL["hour"]),
        _field(cal.day_of_month, *_FULL["day_of_month"]),
        _field(cal.month, *_FULL["month"]),
        _field(cal.day_of_week, 0, 6, names=DAYS),
    ]
    if cal.second != (ScheduleRange(0),):
        fields.insert(0, _field(cal.second, 0, 59))
    if cal.year:
        fields.append(_field(cal.year, 0, 0))
    return " ".join(fields)


def _field(ranges: Any, low: int, high: int, names: tuple[str, ...] = ()) -> str:
    if not ranges or tuple(ranges) == (ScheduleRange(low, high),):
        return "*"

    def name(value: int) -> str:
        return names[value % 7].capitalize() if names else str(value)

    out = []
    for r in ranges:
        step = r.step if r.step > 1 else 1
        if step > 1 and (r.start, r.end) == (low, high):
            out.append(f"*/{step}")
            continue
        text = name(r.start) if r.end == r.start else f"{name(r.start)}-{name(r.end)}"
        out.append(f"{text}/{step}" if step > 1 else text)
    return ",".join(out)


def _interval(every: timedelta) -> str:
    return format_duration(int(every.total_seconds()))


def _duration(value: timedelta) -> str:
    return format_duration(int(value.total_seconds()))


def _time(value: Any) -> str:
    return value.isoformat() if value is not None else ""
