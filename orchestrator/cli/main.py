"""``calibrator`` entry point: drift, plan, check, place and snapshot over a fleet.

The fleet is a FleetSnapshot file (``--snapshot``) or, without it, the live management cluster
(``orchestrator.cli.live``). Commands import the pure packages lazily so ``calibrator --help``
stays fast, and every ``InputError`` (or unreadable file) becomes one stderr line with exit code
2. A command whose answer leaves clusters or workloads out (blocked, unchecked, unplaced, or left
out of a live read) prints its whole document and exits 1 (``output.EXIT_PARTIAL``), so a script
never mistakes a partial answer for a clean one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer

from orchestrator.cli import inputs
from orchestrator.cli.files import clip_message
from orchestrator.cli.gates import CheckFailOn
from orchestrator.cli.live import (
    AllNamespacesOpt,
    ContextOpt,
    Fleet,
    KubeconfigOpt,
    NamespaceOpt,
    ProbeOpt,
    SnapshotOpt,
    Source,
)
from orchestrator.cli.output import Format, emit, fail
from orchestrator.cli.params import QuickCommand, QuickGroup
from orchestrator.cli.runtime import without_gc

if TYPE_CHECKING:
    from rich.console import Console


app = typer.Typer(
    name="calibrator",
    cls=QuickGroup,
    help="Converge Kubernetes version drift across a Cluster API fleet.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


VersionOpt = Annotated[
    bool,
    typer.Option(
        "--version",
        help="Print the version and exit; with -o json|yaml also the Kubernetes, Cluster API "
        "and etcd versions it was built against.",
        show_default=False,
    ),
]
TopOutputOpt = Annotated[
    Format | None,
    typer.Option("--output", "-o", help="With --version: json or yaml.", show_default=False),
]


@app.callback(invoke_without_command=True)
def _top(ctx: typer.Context, version: VersionOpt = False, output: TopOutputOpt = None) -> None:
    """Converge Kubernetes version drift across a Cluster API fleet."""
    if not version:
        if output is not None:
            fail("-o before the command is only for --version: give it after the command")
        if ctx.invoked_subcommand is None:  # only options, no command
            fail("a command is needed (see calibrator --help)")
        return
    from orchestrator.cli.version import version_doc, version_line

    if output in (Format.json, Format.yaml):
        emit(version_doc(), output, _none)
    else:
        print(version_line())
    raise typer.Exit(0)


def _register_subcommands() -> None:
    from orchestrator.cli import calibration, demo, report
    from orchestrator.cli.env import env_app
    from orchestrator.cli.fleet import fleet_app
    from orchestrator.cli.schedule import schedule_app
    from orchestrator.cli.temporal_setup import temporal_app

    app.add_typer(env_app, name="env")
    app.add_typer(fleet_app, name="fleet")
    app.add_typer(schedule_app, name="schedule")
    app.add_typer(temporal_app, name="temporal")
    calibration.register(app)
    demo.register(app)
    report.register(app)


_register_subcommands()

P = ParamSpec("P")
R = TypeVar("R")

OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, wide, json or yaml.")]
TargetOpt = Annotated[str, typer.Option("--target", "-t", help="Target Kubernetes version.")]
StrategyOpt = Annotated[
    Path | None,
    typer.Option("--strategy", help="CalibrationStrategy YAML (default: canary + one stage)."),
]
SelectorOpt = Annotated[
    str | None, typer.Option("--selector", "-l", help="Only clusters matching this label selector.")
]
CheckFailOnOpt = Annotated[
    CheckFailOn,
    typer.Option(
        "--fail-on",
        help="Exit 3 on a finding that blocks an upgrade (block), on any finding, warnings "
        "included (warn), or never (none).",
    ),
]
DriftFailOnOpt = Annotated[
    str | None,
    typer.Option(
        "--fail-on",
        help="Exit 3 when a cluster is eol, skew or behind (a comma list: eol,skew).",
        show_default=False,
    ),
]
LifecycleOpt = Annotated[
    Path | None,
    typer.Option(
        "--lifecycle",
        help="LifecycleOverrides YAML: API removals and end-of-life dates to add to the "
        "built-in catalog and calendar (a CRD's own versions, extended support).",
    ),
]


class SnapshotFormat(StrEnum):
    """What ``calibrator snapshot`` writes (a table is not a snapshot)."""

    yaml = "yaml"
    json = "json"


def input_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn InputError into one stderr line and exit status 2 (docs/design.md, CLI contracts)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from contextvars import copy_context

        from orchestrator.domain.errors import InputError

        try:
            # A context of its own: what the command puts in force (``--lifecycle``) ends
            # with it, also when several commands run in one process (tests, the demo).
            return copy_context().run(func, *args, **kwargs)
        except InputError as err:
            fail(clip_message(str(err)))

    return wrapper


def _read(path: Path, what: str) -> bytes:
    """The file's bytes, refusing it past ``MAX_DOCUMENT_BYTES`` without reading further."""
    from orchestrator.cli.files import read_document

    return read_document(path, what)


def _fleet(source: Source) -> Fleet:
    from orchestrator.cli import live

    return live.load(source)


def _use_lifecycle(path: Path | None) -> None:
    """Read ``--lifecycle`` before the fleet (bad input costs no read) and put it in force."""
    from orchestrator.domain.lifecycle import load_overrides, using

    using(None if path is None else load_overrides(_read(path, "lifecycle")))


@app.command(cls=QuickCommand)
@input_errors
@without_gc
def drift(
    snapshot: SnapshotOpt = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Target version.")] = None,
    selector: SelectorOpt = None,
    lifecycle: LifecycleOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    probe: ProbeOpt = None,
    output: OutputOpt = Format.table,
    fail_on: DriftFailOnOpt = None,
) -> None:
    """Show how far each cluster is from the target and the newest version.

    Exit 1 when a live read left clusters out (each named on stderr). Exit 3 when a cluster
    meets a --fail-on condition: eol (past end of life), skew (workers skewed beyond policy),
    behind (below the target, else the newest version), as a comma list.
    """
    from dataclasses import replace

    from orchestrator.cli import render
    from orchestrator.cli.gates import drift_hits, finish_gate, parse_drift_conditions
    from orchestrator.domain.calibration import select_clusters
    from orchestrator.domain.drift import drift_report
    from orchestrator.domain.selectors import parse_selector_string

    source = Source(snapshot, kubeconfig, context, namespace, all_namespaces, probe)
    version = inputs.target_version(target) if target else None
    inputs.checked_selector(selector)
    conditions = parse_drift_conditions(fail_on)
    _use_lifecycle(lifecycle)
    fleet = _fleet(source)
    snap = fleet.snapshot
    if selector:
        snap = replace(snap, clusters=select_clusters(snap, parse_selector_string(selector)))
    report = drift_report(snap, version, inputs.today())
    wide = output is Format.wide
    doc = render.drift_json(report)

    def table(con: Console) -> None:
        render.drift_table(con, report, wide=wide)
        render.unreachable_lines(con, snap)

    emit(doc, output, table)
    hits = drift_hits(report, conditions)
    flag = f"--fail-on {','.join(conditions)}"
    finish_gate(hits, "cluster", flag, partial=bool(fleet.left_out))


@app.command(cls=QuickCommand)
@input_errors
@without_gc
def plan(
    target: TargetOpt,
    snapshot: SnapshotOpt = None,
    strategy: StrategyOpt = None,
    selector: SelectorOpt = None,
    lifecycle: LifecycleOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    probe: ProbeOpt = None,
    output: OutputOpt = Format.table,
) -> None:
    """Plan the upgrade steps per cluster and the rollout waves to reach the target.

    Exit 1 when a cluster will not reach the target (blocked, or in no stage; both are listed)
    or a live read left clusters out.
    """
    from orchestrator.cli import render
    from orchestrator.cli.output import finish
    from orchestrator.planning import plan_to_json

    source = Source(snapshot, kubeconfig, context, namespace, all_namespaces, probe)
    version = inputs.target_version(target)
    inputs.checked_selector(selector)
    _use_lifecycle(lifecycle)
    fleet = _fleet(source)
    snap = fleet.snapshot
    result = inputs.plan_fleet(snap, version, strategy, selector)
    doc = plan_to_json(result) | {"unreachable": render.unreachable_json(snap)}
    wide = output is Format.wide
    labels = {c.name: c.labels for c in snap.clusters} if wide else None
    pools = (
        {c.name: [md.name for md in c.machine_deployments] for c in snap.clusters} if wide else None
    )

    def table(con: Console) -> None:
        render.plan_table(con, result, wide=wide, labels=labels, pools=pools)
        render.unreachable_lines(con, snap)

    emit(doc, output, table)
    finish(partial=bool(result.left_behind()) or bool(fleet.left_out))


@app.command(cls=QuickCommand)
@input_errors
@without_gc
def check(
    target: TargetOpt,
    snapshot: SnapshotOpt = None,
    strategy: StrategyOpt = None,
    selector: SelectorOpt = None,
    lifecycle: LifecycleOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    probe: ProbeOpt = None,
    output: OutputOpt = Format.table,
    fail_on: CheckFailOnOpt = CheckFailOn.none,
) -> None:
    """List workloads whose APIs a planned version no longer serves.

    Declared APIs (FleetWorkload apis) and usage observed on the clusters (apiserver metrics,
    stored objects, PodDisruptionBudgets that allow no eviction) are checked together. Exit 1
    when a cluster could not be planned and so was not checked (listed with the reason), was
    observed only in part, or a live read left clusters out. Exit 3 with --fail-on block when a
    finding blocks its cluster's upgrade, with --fail-on warn on any finding (warnings too).
    With --strategy it checks the path that strategy runs (allowPrereleases changes it) and
    applies its observedUsage and unsatisfiableDisruptionBudgets (block or warn).
    """
    from orchestrator.cli import render
    from orchestrator.cli.gates import check_hits, finish_gate
    from orchestrator.planning import findings_to_json

    source = Source(snapshot, kubeconfig, context, namespace, all_namespaces, probe)
    version = inputs.target_version(target)
    inputs.checked_selector(selector)
    _use_lifecycle(lifecycle)
    fleet = _fleet(source)
    snap = fleet.snapshot
    result = inputs.plan_fleet(snap, version, strategy, selector)
    doc = findings_to_json(result) | {"unreachable": render.unreachable_json(snap)}

    def table(con: Console) -> None:
        render.check_table(con, result)
        render.unreachable_lines(con, snap)

    emit(doc, output, table)
    hits = check_hits(result, fail_on)
    partial = bool(result.unchecked) or bool(result.partially_observed) or bool(fleet.left_out)
    finish_gate(hits, "finding", f"--fail-on {fail_on}", partial=partial)


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


@app.command(cls=QuickCommand)
@input_errors
@without_gc
def place(
    snapshot: SnapshotOpt = None,
    explain: ExplainOpt = False,
    workload: WorkloadOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    probe: ProbeOpt = None,
    output: OutputOpt = Format.table,
) -> None:
    """Place every workload on the fleet; summarise why other clusters were rejected.

    Exit 1 when a workload is unschedulable or a live read left clusters out.
    """
    from orchestrator.cli import render
    from orchestrator.cli.output import Items, finish
    from orchestrator.domain.documents import quote
    from orchestrator.domain.errors import InputError
    from orchestrator.placement import (
        PlacementResult,
        WorkloadDecision,
        decide,
        decision_to_json,
        placement_to_json,
    )

    source = Source(snapshot, kubeconfig, context, namespace, all_namespaces, probe)
    fleet = _fleet(source)
    snap = fleet.snapshot
    if workload is not None and all(w.key != workload for w in snap.workloads):
        raise InputError(
            f"unknown workload {quote(workload)}: expected namespace/name from the "
            + ("snapshot" if snapshot is not None else "fleet's FleetWorkloads")
        )
    # The whole fleet is placed even for one workload: its decision depends on the capacity
    # the workloads placed before it took, so it is the one the full run would show.
    # The real clock ends NoExecute tolerations whose tolerationSeconds ran out (placement is
    # pure and reads none itself).
    made = decide(snap, now=datetime.now(UTC))
    explained = explain or workload is not None
    if output is Format.json and workload is None:
        # Each decision is turned into its JSON as it is written, a batch at a time, after
        # placement (``output.Items``): the 10,000 decision dicts of a 1k x 10k run, or the
        # --explain text that grows with workloads x clusters, are never held whole.
        decisions: list[WorkloadDecision] = list(made)
        to_json = functools.partial(decision_to_json, explain=explained)
        items = Items(decisions, to_json)
        emit({"decisions": items, "unreachable": render.unreachable_json(snap)}, output, _none)
        finish(partial=any(d.unschedulable for d in decisions) or bool(fleet.left_out))
        return
    result = PlacementResult(tuple(made))
    if workload is not None:
        result = PlacementResult((result.decision(workload),))
    doc = placement_to_json(result, explain=explained)
    doc["unreachable"] = render.unreachable_json(snap)

    def table(con: Console) -> None:
        render.place_table(con, doc)
        render.unreachable_lines(con, snap)

    emit(doc, output, table)
    finish(partial=bool(result.unschedulable) or bool(fleet.left_out))


def _none(con: Console) -> None:
    """No table: for output that is never one."""


@app.command("snapshot")
def write_snapshot(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    all_namespaces: AllNamespacesOpt = False,
    probe: ProbeOpt = None,
    output: Annotated[
        SnapshotFormat, typer.Option("--output", "-o", help="yaml or json.")
    ] = SnapshotFormat.yaml,
) -> None:
    """Write the live fleet as a FleetSnapshot (for --snapshot, exports and tests).

    Exit 1 when the read left clusters out (each named on stderr; the file holds the rest).
    """
    from orchestrator.cli.output import finish
    from orchestrator.domain.snapshot_dump import snapshot_to_mapping

    fleet = _fleet(Source(None, kubeconfig, context, namespace, all_namespaces, probe))
    emit(snapshot_to_mapping(fleet.snapshot), Format(output.value), lambda _: None)
    finish(partial=bool(fleet.left_out))


# The Temporal SDK's native runtime: once loaded, its threads may call into Python while the
# interpreter finalizes ("PyGILState_Release ... must be current"), turning the command's exit
# status into 134 (seen on `status`, `calibrate` and `temporal setup`, about 1 run in 8).
_TEMPORAL_RUNTIME = "temporalio.bridge.temporal_sdk_bridge"


def main() -> None:
    """Console-script entry point.

    A command that loaded the Temporal SDK ends without finalizing the interpreter, after its
    own clean-up (``finally`` blocks, telemetry shutdown) has run: its exit status is the one it
    chose, never the SDK's abort at finalization.
    """
    import sys

    from orchestrator.cli.runtime import allow_quick_exit, quick_exit, tune_gc

    tune_gc()
    allow_quick_exit()
    try:
        app(prog_name="calibrator")
    except SystemExit as done:
        code = 0 if done.code is None else done.code
        if isinstance(code, int) and _TEMPORAL_RUNTIME in sys.modules:
            quick_exit(code)
        raise


if __name__ == "__main__":
    main()
