"""``calibrator schedule``: continuous calibration on Temporal Schedules.

Thin wrappers over ``workflows.schedules``. Everything that can be checked without the server
(the name, the policy file, the timetable) is checked before connecting, so bad input is one
``error:`` line with exit 2 and nothing is created.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.files import clip_message
from orchestrator.cli.output import Format, emit, fail, new_table
from orchestrator.cli.temporal import (
    FROM_ENVIRONMENT,
    ConnectionFlags,
    connect,
    connection_options,
    resolve,
)

if TYPE_CHECKING:  # Rich only when a command prints for people
    from rich.console import Console

schedule_app = typer.Typer(
    help="Continuous calibration: evaluate a policy on a timetable, calibrate when it is broken.",
    no_args_is_help=True,
)


def _print(renderable: object) -> None:
    from rich.console import Console

    Console().print(renderable)


NameArg = Annotated[str, typer.Argument(help="Schedule name (prefixes every run's id).")]
OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, json or yaml.")]
NoteOpt = Annotated[
    str, typer.Option("--note", "--reason", help="Why (kept as the schedule's note, one line).")
]
TimeZoneOpt = Annotated[
    str | None,
    typer.Option(
        "--time-zone",
        help="IANA time zone the --cron timetable is read in, e.g. Europe/Berlin (default UTC).",
    ),
]
JitterOpt = Annotated[
    str | None,
    typer.Option(
        "--jitter", help="Start each run up to this much later, at random: 0s-24h (default 0s)."
    ),
]
CatchupOpt = Annotated[
    str | None,
    typer.Option(
        "--catchup-window",
        help="Run a tick missed (server down) only if at most this late: 1m-365d (default 365d).",
    ),
]
EveryOpt = Annotated[
    str | None, typer.Option("--every", help="Interval, e.g. 1h or 1d (at least 1m).")
]
CronOpt = Annotated[
    str | None,
    typer.Option("--cron", help="Cron expression, 5 fields, e.g. '0 2 * * Sat' (see --time-zone)."),
]


def _seconds(text: str | None, flag: str) -> timedelta | None:
    """A duration flag as a timedelta (None when not given); InputError naming the flag."""
    from orchestrator.domain.durations import parse_duration

    return None if text is None else timedelta(seconds=parse_duration(text, flag))


def _policy_document(policy: Path) -> dict[str, Any]:
    from orchestrator.cli.files import read_document
    from orchestrator.domain.documents import load_document
    from orchestrator.domain.errors import InputError

    document = load_document(read_document(policy, "policy"), "policy")
    if not isinstance(document, dict):
        raise InputError("policy: expected a mapping")
    return document


def _call(
    temporal: ConnectionFlags,
    call: Callable[[Any], Awaitable[Any]],
) -> Any:
    """Connect, run one ``workflows.schedules`` call; refusals are one line (exit 2).

    A namespace without the calibration search attributes is one line too, exit 1.
    """
    import asyncio  # here: commands without Temporal do not pay for it

    from orchestrator.domain.errors import InputError
    from workflows.client import ControlError
    from workflows.search_attribute_setup import MissingSearchAttributes

    resolve(temporal)  # bad connection settings: exit 2 before anything connects

    async def main() -> Any:
        return await call(await connect(temporal))

    try:
        return asyncio.run(main())
    except (ControlError, InputError) as err:
        fail(clip_message(str(err)))
    except MissingSearchAttributes as err:  # the namespace is not set up (environment): exit 1
        fail(str(err), code=1)


@schedule_app.command()
@connection_options
def create(
    name: NameArg,
    policy: Annotated[Path, typer.Option("--policy", "-p", help="CalibrationPolicy YAML.")],
    every: EveryOpt = None,
    cron: CronOpt = None,
    time_zone: TimeZoneOpt = None,
    jitter: JitterOpt = None,
    catchup_window: CatchupOpt = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    note: Annotated[str, typer.Option("--note", help="Note shown with the schedule.")] = "",
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Evaluate POLICY on a timetable; start a calibration when due clusters break it.

    Runs never overlap (a tick while the previous run goes on is skipped). Example: every
    Saturday 02:00 Berlin time, skipped if the server missed it by more than an hour:
    --cron '0 2 * * Sat' --time-zone Europe/Berlin --catchup-window 1h
    """
    from orchestrator.domain.errors import InputError
    from workflows import schedules

    try:
        spec = schedules.build_schedule(
            name,
            _policy_document(policy),
            every=_seconds(every, "--every"),
            cron=cron,
            time_zone=time_zone,
            jitter=_seconds(jitter, "--jitter"),
            catchup_window=_seconds(catchup_window, "--catchup-window"),
            paused=paused,
            note=note,
        )
    except InputError as err:
        fail(clip_message(str(err)))
    doc = _call(temporal, lambda client: schedules.create(client, name, spec))
    emit(doc, output, lambda con: _describe_table(con, doc))


@schedule_app.command()
@connection_options
def update(
    name: NameArg,
    policy: Annotated[
        Path | None, typer.Option("--policy", "-p", help="New CalibrationPolicy YAML.")
    ] = None,
    every: EveryOpt = None,
    cron: CronOpt = None,
    time_zone: TimeZoneOpt = None,
    jitter: JitterOpt = None,
    catchup_window: CatchupOpt = None,
    note: Annotated[
        str | None, typer.Option("--note", help="New note shown with the schedule.")
    ] = None,
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Change what is given, keep the rest (pause state, counters and recent runs stay).

    A new --every or --cron keeps the jitter, and a new --cron the time zone; --every clears the
    time zone (intervals have none). Runs already started go on with what they were given.
    """
    from orchestrator.domain.errors import InputError
    from workflows import schedules

    try:
        schedules.check_schedule_id(name)
        change = schedules.build_change(
            policy=None if policy is None else _policy_document(policy),
            every=_seconds(every, "--every"),
            cron=cron,
            time_zone=time_zone,
            jitter=_seconds(jitter, "--jitter"),
            catchup_window=_seconds(catchup_window, "--catchup-window"),
            note=note,
        )
    except InputError as err:
        fail(clip_message(str(err)))
    doc = _call(temporal, lambda client: schedules.update(client, name, change))
    emit(doc, output, lambda con: _describe_table(con, doc))


@schedule_app.command("list")
@connection_options
def list_(
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Every continuous-calibration schedule of the namespace."""
    from workflows import schedules

    rows: list[dict[str, Any]] = _call(temporal, schedules.list_all)

    def table(con: Console) -> None:
        t = new_table(
            "Continuous calibration schedules",
            ("Name", "Timetable", "Zone", "Paused", "Next run", "Last run", "Note"),
        )
        for r in rows:
            t.add_row(
                r["name"], r["spec"], r["timeZone"], "yes" if r["paused"] else "no",
                r["nextRun"] or "", r["lastRun"] or "", r["note"],
            )  # fmt: skip
        con.print(t)

    emit({"schedules": rows}, output, table)


@schedule_app.command()
@connection_options
def describe(
    name: NameArg,
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Timetable, state, policy, recent runs and the latest evaluation's verdict."""
    from workflows import schedules

    doc = _call(temporal, lambda client: schedules.describe(client, name))
    emit(doc, output, lambda con: _describe_table(con, doc))


@schedule_app.command()
@connection_options
def pause(
    name: NameArg,
    note: NoteOpt = "",
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Start no more runs (a running evaluation or calibration goes on); --note says why."""
    from workflows import schedules

    _check_note(note)
    doc = _call(temporal, lambda client: schedules.pause(client, name, note))
    emit(doc, output, lambda con: con.print(doc))


@schedule_app.command()
@connection_options
def unpause(
    name: NameArg,
    note: NoteOpt = "",
    temporal: ConnectionFlags = FROM_ENVIRONMENT,
    output: OutputOpt = Format.table,
) -> None:
    """Start runs again from the next tick (a tick missed while paused is not run)."""
    from workflows import schedules

    _check_note(note)
    doc = _call(temporal, lambda client: schedules.unpause(client, name, note))
    emit(doc, output, lambda con: con.print(doc))


def _check_note(note: str) -> None:
    """A bad note is bad input before anything connects."""
    from orchestrator.domain.errors import InputError
    from workflows import schedules

    try:
        schedules.check_note(note)
    except InputError as err:
        fail(clip_message(str(err)))


@schedule_app.command()
@connection_options
def trigger(name: NameArg, temporal: ConnectionFlags = FROM_ENVIRONMENT) -> None:
    """Evaluate now (skipped, like any tick, while the previous run still runs)."""
    from workflows import schedules

    _print(_call(temporal, lambda client: schedules.trigger(client, name)))


@schedule_app.command()
@connection_options
def delete(name: NameArg, temporal: ConnectionFlags = FROM_ENVIRONMENT) -> None:
    """Delete the schedule (calibrations it started go on)."""
    from workflows import schedules

    _print(_call(temporal, lambda client: schedules.delete(client, name)))


@schedule_app.command()
def check(
    policy: Annotated[Path, typer.Option("--policy", "-p", help="CalibrationPolicy YAML.")],
    snapshot: Annotated[Path, typer.Option("--snapshot", "-s", help="FleetSnapshot YAML/JSON.")],
    at: Annotated[
        str | None,
        typer.Option("--at", help="Evaluate at this time (ISO 8601 with zone; default now)."),
    ] = None,
    output: OutputOpt = Format.table,
) -> None:
    """Offline: what would a tick decide for this fleet? (no Temporal, nothing started)."""
    from datetime import UTC, datetime

    from orchestrator.cli.files import read_document
    from orchestrator.domain.errors import InputError
    from orchestrator.domain.policy import evaluate_policy, load_policy
    from orchestrator.domain.snapshot_load import load_snapshot

    try:
        rules = load_policy(read_document(policy, "policy"))
        fleet = load_snapshot(read_document(snapshot, "snapshot"))
        try:
            when = datetime.now(UTC) if at is None else datetime.fromisoformat(at)
        except ValueError:
            raise InputError(f"--at: expected an ISO 8601 time, got {str(at)[:40]!r}") from None
        if when.tzinfo is None:
            raise InputError("--at: give a time zone, e.g. 2026-12-05T03:00:00+00:00")
        result = evaluate_policy(fleet, rules, when)
    except InputError as err:
        fail(clip_message(str(err)))
    violations: list[dict[str, Any]] = [
        {
            "cluster": v.name,
            "state": v.state(),
            "goal": "" if v.goal is None else str(v.goal),
            "rules": [x.rule for x in v.violations],
            "reasons": [x.message for x in v.violations]
            + ([f"unfixable: {v.unfixable}"] if v.unfixable else [])
            + ([f"being upgraded by {v.busy}"] if v.busy else []),
            "opensAt": None if v.opens_at is None else v.opens_at.isoformat(),
        }
        for v in result.violating
    ]
    calibrations = [
        {"target": str(goal), "clusters": list(names)} for goal, names in result.due_groups()
    ]
    doc = {
        "policy": rules.describe(),
        "at": when.isoformat(),
        "newest": str(result.newest),
        "checked": result.checked,
        "compliant": result.compliant,
        "counts": result.counts(),
        "calibrations": calibrations,
        "violations": violations,
    }

    def table(con: Console) -> None:
        verdict = "compliant" if result.compliant else f"{len(result.violating)} violating"
        t = new_table(
            f"policy: {doc['policy']} · newest {doc['newest']} · {result.checked} checked, "
            f"{verdict}",
            ("Cluster", "State", "Goal", "Why"),
        )
        for v in violations:
            why = "; ".join(v["reasons"])
            if v["opensAt"]:
                why += f" (window opens {v['opensAt']})"
            t.add_row(v["cluster"], v["state"], v["goal"] or "-", why)
        starts = [f"{c['target']}: {len(c['clusters'])} cluster(s)" for c in calibrations]
        t.caption = "a tick starts: " + ("; ".join(starts) or "nothing")
        con.print(t)

    emit(doc, output, table)


def _describe_table(con: Console, doc: dict[str, Any]) -> None:
    title = f"schedule {doc['name']}: {doc['spec']}" + (" (paused)" if doc["paused"] else "")
    table = new_table(title, ("Field", "Value"))
    keys = ("policy", "note", "timeZone", "jitter", "catchupWindow", "overlap", "runs")
    for key in (*keys, "skippedOverlap", "missedCatchupWindow", "taskQueue"):
        table.add_row(key, str(doc.get(key, "")))
    table.add_row("running", ", ".join(doc.get("running") or ()) or "-")
    table.add_row("next runs", ", ".join(doc.get("nextRuns") or ()) or "-")
    for run in doc.get("recent") or ():
        table.add_row("run", f"{run['startedAt']}  {run['workflowId']}")
    last = doc.get("lastResult")
    if last:
        table.add_row("last result", f"{last.get('status', '')}: {last.get('message', '')}")
        report = last.get("report") or {}
        for v in report.get("sample") or ():
            table.add_row(
                f"  {v['cluster']}", f"{v['state']} -> {v['goal'] or '-'}: {v['message']}"
            )
        for c in last.get("calibrations") or ():
            table.add_row("  calibration", f"{c['calibration_id']}: {c['phase']}")
    con.print(table)
