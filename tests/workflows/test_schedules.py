"""``workflows.schedules`` offline: what a create sends, what an update changes, how a timetable reads.

No server: the Schedule objects are the SDK's, built and changed as the client would send them.
tests/workflows/test_schedules_dev_server.py sends them to the real dev server through the CLI.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    ScheduleRange,
    ScheduleSpec,
)

from orchestrator.domain.errors import InputError
from workflows import schedules
from workflows.model import ContinuousInput

POLICY = {"kind": "CalibrationPolicy", "rules": {"channel": "stable"}}
OTHER = {"kind": "CalibrationPolicy", "rules": {"maxMinorsBehind": 1}}


def weekly() -> Schedule:
    return schedules.build_schedule(
        "weekly",
        POLICY,
        cron="0 2 * * Sat",
        time_zone="Europe/Berlin",
        jitter=timedelta(minutes=5),
        catchup_window=timedelta(hours=1),
        note="weekend",
    )


def test_create_sends_zone_jitter_catchup_and_skip() -> None:
    sent = weekly()
    assert sent.spec.cron_expressions == ["0 2 * * Sat"]
    assert sent.spec.time_zone_name == "Europe/Berlin"
    assert sent.spec.jitter == timedelta(minutes=5)
    assert sent.policy.catchup_window == timedelta(hours=1)
    assert sent.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert (sent.state.note, sent.state.paused) == ("weekend", False)


def test_defaults_leave_the_server_defaults() -> None:
    sent = schedules.build_schedule("p", POLICY, every=timedelta(hours=1))
    assert (sent.spec.time_zone_name, sent.spec.jitter, sent.policy.catchup_window) == (
        None,
        None,
        None,
    )
    assert sent.state.note == "policy: channel stable"


def test_an_update_changes_only_what_it_names() -> None:
    current = weekly()
    change = schedules.build_change(jitter=timedelta(0), note="frozen")
    after = change.apply(current, None)
    assert after.spec.cron_expressions == ["0 2 * * Sat"]
    assert after.spec.time_zone_name == "Europe/Berlin"
    assert after.spec.jitter is None
    assert after.policy.catchup_window == timedelta(hours=1)
    assert after.state.note == "frozen"
    assert after.action is current.action


def test_a_new_cron_keeps_zone_and_jitter_a_new_interval_clears_the_zone() -> None:
    current = weekly()
    cron = schedules.build_change(cron="0 3 * * Sun").apply(current, None)
    assert (cron.spec.cron_expressions, cron.spec.time_zone_name, cron.spec.jitter) == (
        ["0 3 * * Sun"],
        "Europe/Berlin",
        timedelta(minutes=5),
    )
    every = schedules.build_change(every=timedelta(hours=6)).apply(current, None)
    assert every.spec.intervals == [ScheduleIntervalSpec(every=timedelta(hours=6))]
    assert (every.spec.cron_expressions, every.spec.time_zone_name) == ([], None)
    assert every.spec.jitter == timedelta(minutes=5)


def test_a_jitter_that_the_kept_interval_cannot_hold_is_refused() -> None:
    current = schedules.build_schedule("p", POLICY, every=timedelta(minutes=10))
    with pytest.raises(InputError, match=r"--jitter 10m must be shorter than the interval \(10m\)"):
        schedules.build_change(jitter=timedelta(minutes=10)).apply(current, None)


def test_a_new_policy_replaces_the_action_and_keeps_its_id_and_queue() -> None:
    current = weekly()
    after = schedules.build_change(policy=OTHER).apply(current, None)
    action = after.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert isinstance(current.action, ScheduleActionStartWorkflow)
    assert (action.id, action.task_queue) == (current.action.id, current.action.task_queue)
    assert action.static_summary == "Continuous calibration: within 1 minor(s) of newest"
    (given,) = action.args
    assert isinstance(given, ContinuousInput) and given.policy == OTHER


def _calendar(**fields: tuple[ScheduleRange, ...]) -> ScheduleSpec:
    """A calendar as the server describes a compiled cron string (``*`` as full ranges)."""

    def get(name: str, default: tuple[ScheduleRange, ...]) -> tuple[ScheduleRange, ...]:
        return fields.get(name, default)

    calendar = ScheduleCalendarSpec(
        second=get("second", (ScheduleRange(0),)),
        minute=get("minute", (ScheduleRange(0, 59),)),
        hour=get("hour", (ScheduleRange(0, 23),)),
        day_of_month=get("day_of_month", (ScheduleRange(1, 31),)),
        month=get("month", (ScheduleRange(1, 12),)),
        year=get("year", ()),
        day_of_week=get("day_of_week", (ScheduleRange(0, 6),)),
    )
    return ScheduleSpec(calendars=[calendar])


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))]), "every 1d"),
        (
            _calendar(minute=(ScheduleRange(0),), hour=(ScheduleRange(2),),
                      day_of_week=(ScheduleRange(6),)),
            "cron 0 2 * * Sat",
        ),
        (
            _calendar(minute=(ScheduleRange(0, 59, 15),), hour=(ScheduleRange(1, 5),),
                      day_of_month=(ScheduleRange(1), ScheduleRange(15)),
                      month=(ScheduleRange(1, 3),), day_of_week=(ScheduleRange(1, 5, 2),)),
            "cron */15 1-5 1,15 1-3 Mon-Fri/2",
        ),
        (_calendar(second=(ScheduleRange(30),)), "cron 30 * * * * *"),
        (_calendar(year=(ScheduleRange(2027),)), "cron * * * * * 2027"),
    ],
)  # fmt: skip
def test_timetables_read_back_from_the_servers_spec(spec: ScheduleSpec, text: str) -> None:
    assert schedules.spec_text(spec) == text


def test_a_machine_without_a_tz_database_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedules, "_known_zones", set)
    with pytest.raises(InputError, match="no time zone database"):
        schedules.check_time_zone("Europe/Berlin")
    assert schedules.check_time_zone("UTC") == "UTC"  # needs no database
