"""``calibrator`` entry point: offline commands over a FleetSnapshot file.

Commands import the pure packages lazily so ``calibrator --help`` stays fast, and every
``InputError`` (or unreadable file) becomes one stderr line with exit code 2. A command whose
answer leaves clusters or workloads out (blocked, unchecked, unplaced) prints its whole document
and exits 1 (``output.EXIT_PARTIAL``), so a script never mistakes a partial answer for a clean one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer

from orchestrator.cli.files import clip_message
from orchestrator.cli.output import Format, emit, fail

if TYPE_CHECKING:
    from rich.console import Console

    from orchestrator.domain.snapshot import FleetSnapshot
    from orchestrator.domain.versions import KubeVersion
    from orchestrator.planning import CalibrationPlan

app = typer.Typer(
    name="calibrator",
    help="Converge Kubernetes version drift across a Cluster API fleet.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_subcommands() -> None:
    from orchestrator.cli import calibration, demo, report
    from orchestrator.cli.env import env_app
    from orchestrator.cli.fleet import fleet_app
    from orchestrator.cli.schedule import schedule_app

    app.add_typer(env_app, name="env")
    app.add_typer(fleet_app, name="fleet")
    app.add_typer(schedule_app, name="schedule")
    calibration.register(app)
    demo.register(app)
    report.register(app)


_register_subcommands()

P = ParamSpec("P")
R = TypeVar("R")

SnapshotOpt = Annotated[
    Path, typer.Option("--snapshot", "-s", help="FleetSnapshot YAML/JSON file.", show_default=False)
]
OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, wide, json or yaml.")]
TargetOpt = Annotated[str, typer.Option("--target", "-t", help="Target Kubernetes version.")]
StrategyOpt = Annotated[
    Path | None,
    typer.Option("--strategy", help="CalibrationStrategy YAML (default: canary + one stage)."),
]
SelectorOpt = Annotated[
    str | None, typer.Option("--selector", "-l", help="Only clusters matching this label selector.")
]


def input_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn InputError into the one-line, exit-2 contract of DESIGN.md."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from orchestrator.domain.errors import InputError

        try:
            return func(*args, **kwargs)
        except InputError as err:
            fail(clip_message(str(err)))

    return wrapper


def _read(path: Path, what: str) -> bytes:
    """The file's bytes, refusing it past ``MAX_DOCUMENT_BYTES`` without reading further."""
    from orchestrator.cli.files import read_document

    return read_document(path, what)


def _snapshot(path: Path) -> FleetSnapshot:
    from orchestrator.domain.snapshot import load_snapshot

    return load_snapshot(_read(path, "snapshot"))


def _version(text: str) -> KubeVersion:
    from orchestrator.domain.versions import KubeVersion

    return KubeVersion.parse(text)


def _plan(
    snapshot_path: Path, target: str, strategy: Path | None, selector: str | None
) -> CalibrationPlan:
    from orchestrator.domain.selectors import parse_selector_string
    from orchestrator.domain.waves import DEFAULT_STRATEGY, load_strategy
    from orchestrator.planning import plan_calibration

    version = _version(target)
    snap = _snapshot(snapshot_path)
    strat = DEFAULT_STRATEGY if strategy is None else load_strategy(_read(strategy, "strategy"))
    sel = parse_selector_string(selector) if selector else None
    return plan_calibration(snap, version, strat, sel)


def _today() -> date:
    return datetime.now(UTC).date()


@app.command()
@input_errors
def drift(
    snapshot: SnapshotOpt,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Target version.")] = None,
    output: OutputOpt = Format.table,
) -> None:
    """Show how far each cluster is from the target and the newest version."""
    from orchestrator.cli import render
    from orchestrator.domain.drift import drift_report

    version = _version(target) if target else None
    snap = _snapshot(snapshot)
    report = drift_report(snap, version, _today())
    wide = output is Format.wide
    emit(render.drift_json(report), output, lambda con: render.drift_table(con, report, wide=wide))


@app.command()
@input_errors
def plan(
    snapshot: SnapshotOpt,
    target: TargetOpt,
    strategy: StrategyOpt = None,
    selector: SelectorOpt = None,
    output: OutputOpt = Format.table,
) -> None:
    """Plan the upgrade steps per cluster and the rollout waves to reach the target.

    Exit 1 when a cluster will not reach the target (blocked, or in no stage); both are listed.
    """
    from orchestrator.cli import render
    from orchestrator.cli.output import finish
    from orchestrator.planning import plan_to_json

    result = _plan(snapshot, target, strategy, selector)
    if output is not Format.wide:
        emit(plan_to_json(result), output, lambda con: render.plan_table(con, result))
    else:
        clusters = _snapshot(snapshot).clusters  # -o wide only: labels and pools for the columns
        labels = {c.name: c.labels for c in clusters}
        pools = {c.name: [md.name for md in c.machine_deployments] for c in clusters}
        emit(
            plan_to_json(result),
            output,
            lambda con: render.plan_table(con, result, wide=True, labels=labels, pools=pools),
        )
    finish(partial=bool(result.left_behind()))


@app.command()
@input_errors
def check(
    snapshot: SnapshotOpt,
    target: TargetOpt,
    strategy: StrategyOpt = None,
    selector: SelectorOpt = None,
    output: OutputOpt = Format.table,
) -> None:
    """List workloads whose APIs a planned version no longer serves.

    Exit 1 when a cluster could not be planned and so was not checked (listed with the reason).
    With --strategy it checks the path that strategy runs (allowPrereleases changes it).
    """
    from orchestrator.cli import render
    from orchestrator.cli.output import finish
    from orchestrator.planning import findings_to_json

    result = _plan(snapshot, target, strategy, selector)
    emit(findings_to_json(result), output, lambda con: render.check_table(con, result))
    finish(partial=bool(result.unchecked))


ExplainOpt = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Also list every rejected cluster with its reasons (workloads x clusters: large).",
    ),
]
WorkloadOpt = Annotated[
    str | None,
    typer.Option(
        "--workload",
        "-w",
        help="Show only this workload's decision (namespace/name), with every cluster's reasons.",
        show_default=False,
    ),
]


@app.command()
@input_errors
def place(
    snapshot: SnapshotOpt,
    explain: ExplainOpt = False,
    workload: WorkloadOpt = None,
    output: OutputOpt = Format.table,
) -> None:
    """Place every workload on the fleet; summarise why other clusters were rejected."""
    from orchestrator.cli import render
    from orchestrator.cli.output import finish
    from orchestrator.domain.documents import quote
    from orchestrator.domain.errors import InputError
    from orchestrator.placement import PlacementResult, placement_to_json
    from orchestrator.placement import place as run_placement

    snap = _snapshot(snapshot)
    if workload is not None and all(w.key != workload for w in snap.workloads):
        raise InputError(
            f"unknown workload {quote(workload)}: expected namespace/name from the snapshot"
        )
    # The whole fleet is placed even for one workload: its decision depends on the capacity
    # the workloads placed before it took, so it is the one the full run would show.
    # The real clock ends NoExecute tolerations whose tolerationSeconds ran out (placement is
    # pure and reads none itself).
    result = run_placement(snap, now=datetime.now(UTC))
    if workload is not None:
        result = PlacementResult((result.decision(workload),))
    doc = placement_to_json(result, explain=explain or workload is not None)

    def table(con: Console) -> None:
        render.place_table(con, doc)

    emit(doc, output, table)
    finish(partial=bool(result.unschedulable))


def main() -> None:
    """Console-script entry point."""
    from orchestrator.cli.runtime import tune_gc

    tune_gc()
    app()


if __name__ == "__main__":
    main()
