"""Documents and Rich tables for the offline commands (the JSON shapes are the stable contract)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.cli.output import new_table

if TYPE_CHECKING:  # annotations only: ``place`` need not import planning, drift or Rich
    from rich.console import Console

    from orchestrator.domain.calibration import CalibrationPlan
    from orchestrator.domain.compatibility import Finding
    from orchestrator.domain.drift import DriftReport
    from orchestrator.domain.snapshot import FleetSnapshot

_STATUS_STYLE = {
    "current": "green",
    "behind": "yellow",
    "ahead": "cyan",
    "skewed": "bold red",
    "end-of-life": "red",
}


def _labels(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def drift_json(report: DriftReport) -> dict[str, object]:
    """The ``calibrator drift -o json`` document."""
    return {
        "target": None if report.target is None else str(report.target),
        "newest": None if report.newest is None else str(report.newest),
        "asOf": report.as_of.isoformat(),
        "clusters": [
            {
                "name": d.cluster.name,
                "labels": dict(d.cluster.labels),
                "controlPlane": str(d.cluster.control_plane.version),
                "workers": [
                    {"name": md.name, "version": str(md.version)}
                    for md in d.cluster.machine_deployments
                ],
                "minorsBehindTarget": d.minors_behind_target,
                "minorsBehindNewest": d.minors_behind_newest,
                "workerLag": d.worker_lag,
                "skewViolations": list(d.skew_violations),
                "support": {
                    "state": d.support.state,
                    "endOfLife": None
                    if d.support.end_of_life is None
                    else d.support.end_of_life.isoformat(),
                },
                "status": d.status,
                "workloadCluster": None
                if d.cluster.workload_cluster is None
                else d.cluster.workload_cluster.to_json(),
            }
            for d in report.clusters
        ],
        "summary": report.counts(),
        "unreachable": [
            {"cluster": d.cluster.name, "reason": d.cluster.workload_cluster.reason}
            for d in report.clusters
            if d.cluster.workload_cluster is not None and not d.cluster.workload_cluster.reachable
        ],
    }


def unreachable_json(snapshot: FleetSnapshot) -> list[dict[str, str]]:
    """``unreachable``: clusters a live read could not reach, with the reason (snapshot order)."""
    return [
        {"cluster": c.name, "reason": c.workload_cluster.reason}
        for c in snapshot.clusters
        if c.workload_cluster is not None and not c.workload_cluster.reachable
    ]


def unreachable_lines(con: Console, snapshot: FleetSnapshot) -> None:
    """One line per unreachable workload cluster: its versions are declared, not observed."""
    for item in unreachable_json(snapshot):
        con.print(f"[yellow]unreachable[/] {item['cluster']}: {item['reason']}", highlight=False)


def drift_table(con: Console, report: DriftReport, *, wide: bool = False) -> None:
    """People's view of the drift report; ``wide`` adds labels, worker lag, minors behind newest."""
    goal = f"target {report.target}" if report.target else f"newest {report.newest}"
    columns = ["Cluster", "Control plane", "Workers", "Behind", "Support", "Status"]
    if wide:
        columns += ["Labels", "Worker lag", "Behind newest", "Workload cluster"]
    table = new_table(f"Fleet drift ({goal}, as of {report.as_of.isoformat()})", columns)
    for d in report.clusters:
        workers = (
            ", ".join(f"{md.name} {md.version}" for md in d.cluster.machine_deployments) or "-"
        )
        behind = d.minors_behind_target if report.target else d.minors_behind_newest
        style = _STATUS_STYLE[d.status]
        row = [
            d.cluster.name,
            str(d.cluster.control_plane.version),
            workers,
            "-" if behind is None else f"{behind} minor(s)",
            d.support.describe(),
            f"[{style}]{d.status}[/]",
        ]
        if wide:
            newest = d.minors_behind_newest
            row += [
                _labels(d.cluster.labels),
                f"{d.worker_lag} minor(s)",
                "-" if newest is None else f"{newest} minor(s)",
                "-"
                if d.cluster.workload_cluster is None
                else d.cluster.workload_cluster.describe(),
            ]
        table.add_row(*row)
    con.print(table)
    for d in report.clusters:
        for v in d.skew_violations:
            con.print(f"[red]{d.cluster.name}[/]: {v}")
    counts = ", ".join(f"{k}: {v}" for k, v in report.counts().items())
    con.print(f"{len(report.clusters)} clusters ({counts})")


def plan_table(
    con: Console,
    plan: CalibrationPlan,
    *,
    wide: bool = False,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    pools: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """People's view of a calibration plan: steps per cluster, then the waves.

    ``wide`` adds the wave number, the maintenance window (when the cluster may start) and,
    from the snapshot, the cluster's labels and worker pools.
    """
    columns = [
        "Cluster",
        "From (CP / workers)",
        "Control-plane steps",
        "Worker steps",
        "Stage",
        "Blocked",
    ]
    if wide:
        columns += ["Wave", "Maintenance window", "Labels", "Pools"]
    table = new_table(f"Calibration plan to {plan.target}", columns)
    stage_of = {n: s.name for s in plan.rollout.stages for n in s.clusters}
    wave_of = {n: i for i, wave in enumerate(plan.rollout.waves(), start=1) for n in wave}
    for p in plan.clusters:
        row = [
            p.cluster,
            f"{p.control_plane_from} / {p.workers_from or '-'}",
            # A blocked cluster without steps is not "at target": it has no path.
            " -> ".join(str(v) for v in p.control_plane_steps)
            or ("(no path)" if p.blocked else "(at target)"),
            " -> ".join(str(v) for v in p.worker_steps) or "-",
            stage_of.get(p.cluster, "-"),
            "[red]yes[/]" if p.blocked else "no",
        ]
        if wide:
            window = plan.window_for(p.cluster)
            row += [
                str(wave_of.get(p.cluster, "-")),
                "any time" if window is None else window.describe(),
                _labels((labels or {}).get(p.cluster, {})),
                ",".join((pools or {}).get(p.cluster, ())) or "-",
            ]
        table.add_row(*row)
    con.print(table)
    for p in plan.clusters:
        for reason in p.reasons:
            con.print(f"[red]blocked[/] {p.cluster}: {reason}")
    # Observed findings that do not block (an early warning, a quiet usage, or the strategy's
    # warn) are still said: the next calibration, or the client's owner, has to act on them.
    for v in plan.findings:
        if v.action == "warn":
            con.print(f"[yellow]warning[/] {v.finding.cluster}: {_warning(v.finding)}")
    for i, wave in enumerate(plan.rollout.waves(), start=1):
        con.print(f"wave {i}: {', '.join(wave)}")
    from orchestrator.domain.durations import format_duration

    for s in plan.rollout.stages:
        gate = ", approval before start" if s.approval else ""
        con.print(
            f"stage {s.name}: maxConcurrency {s.max_concurrency}, "
            f"soak {format_duration(s.soak_seconds)}{gate}"
        )
    gates = [s.name for s in plan.rollout.stages if s.approval]
    if gates:
        # The same gates the workflow enforces (Stage.approval from build_rollout).
        con.print(
            f"approval gates: {', '.join(gates)} (each waits for `calibrator approve ID --stage S`)"
        )
    if plan.rollout.stages:
        con.print(
            f"failure budget: {plan.rollout.max_failures} cluster(s) may fail before the run halts"
        )
    if plan.rollout.unassigned:
        con.print(f"[yellow]not selected by any stage:[/] {', '.join(plan.rollout.unassigned)}")
    behind = plan.left_behind()
    if behind:
        con.print(
            f"[yellow]partial plan:[/] {len(behind)} of {len(plan.clusters)} clusters will not "
            f"reach {plan.target}: {', '.join(behind)}"
        )


def _warning(finding: Finding) -> str:
    """A warning's line: what was seen, and when the API goes when that is after the path."""
    text = finding.describe()
    if finding.early_warning:
        return f"{text} (after {finding.version}: act before that release)"
    return text


def _observed_action(action: str) -> str:
    return {"block": "[red]block[/]", "warn": "[yellow]warn[/]", "none": "already broken"}.get(
        action, action
    )


def check_table(con: Console, plan: CalibrationPlan) -> None:
    """People's view of the compatibility findings.

    Declared findings keep their table (and its exact output when nothing was observed);
    observed ones get their own, naming the source, because they have no workload to move and
    what was seen (requests since when, stored objects, a PodDisruptionBudget) is the evidence
    an operator needs before overriding a block.
    """
    declared = [v for v in plan.findings if not v.finding.observed]
    observed = [v for v in plan.findings if v.finding.observed]
    table = new_table(
        f"Removed APIs on the way to {plan.target}",
        ("Cluster", "Workload", "API", "Removed in", "Replacement", "Breaks at", "Action"),
        names=2,
    )
    for v in declared if observed else plan.findings:
        f = v.finding
        action = {"block": "[red]block[/]", "none": "already broken"}.get(
            v.action, f"move to {v.destination}"
        )
        table.add_row(
            f.cluster, f.workload, f.api, f.removed_in, f.replacement or "-", str(f.version), action
        )
    if declared or not observed:
        con.print(table)
    if observed:
        seen = new_table(
            f"Observed on the clusters on the way to {plan.target}",
            (
                "Cluster",
                "Source",
                "API",
                "Seen",
                "Removed in",
                "Replacement",
                "Breaks at",
                "Action",
            ),
        )
        for v in observed:
            f = v.finding
            # An early warning's "Breaks at" is the path's last version, which still serves it.
            breaks = f"after {f.version}" if f.early_warning else str(f.version)
            seen.add_row(
                f.cluster,
                f.source,
                f.api or "-",
                f.detail,
                f.removed_in or "-",
                f.replacement or "-",
                breaks,
                _observed_action(v.action),
            )
        con.print(seen)
    if plan.unchecked:
        # A cluster without a plan was not checked: list it with the reason, never call it clean.
        skipped = new_table("Not checked: no plan for these clusters", ("Cluster", "Reason"))
        for name in plan.unchecked:
            skipped.add_row(name, "; ".join(plan.plan_for(name).reasons))
        con.print(skipped)
    if plan.partially_observed:
        # An incomplete look may have missed a client: named, never presented as clean.
        partly = new_table("Observed only in part", ("Cluster", "Reason"))
        for name, reason in plan.partially_observed:
            partly.add_row(name, reason)
        con.print(partly)
    checked = len(plan.clusters) - len(plan.unchecked)
    if not plan.findings and not plan.unchecked and not plan.partially_observed:
        con.print("[green]no workload uses an API that a planned version removes[/]")
    elif plan.unchecked:
        con.print(
            f"[yellow]partial result:[/] {checked} of {len(plan.clusters)} clusters checked; "
            f"{len(plan.unchecked)} not checked (above)"
        )
    if plan.partially_observed:
        con.print(
            f"[yellow]partial result:[/] {len(plan.partially_observed)} cluster(s) observed "
            "only in part (above)"
        )


# Past this many rows a Rich table costs seconds (it measures and wraps every cell: 6.5 s of CPU
# for 10,000 decisions); plain aligned lines say the same in a fraction of that.
RICH_TABLE_ROWS = 500


def place_table(con: Console, doc: dict[str, Any]) -> None:
    """People's view of a placement run: one row per workload with its summary.

    The summary (kube-scheduler style: "3/1000 clusters available: 640 labels do not match ...")
    says why the other clusters were not used; per-cluster reasons and every feasible cluster's
    scores follow only when the document has them (``--explain``, ``--workload``).
    """
    if len(doc["decisions"]) > RICH_TABLE_ROWS:
        _place_lines(con, doc)
        return
    from rich.table import Table

    table = Table(title="Placement")
    for col in ("Workload", "Clusters (replicas)", "Status", "Moved"):
        table.add_column(col)
    table.add_column("Summary", overflow="fold")
    for d in doc["decisions"]:
        placed = ", ".join(f"{c['name']}x{c['replicas']}" for c in d["clusters"]) or "-"
        status = "[red]unschedulable[/]" if d["unschedulable"] else "placed"
        table.add_row(d["workload"], placed, status, moved_text(d), d["summary"])
    table.caption = moved_caption(doc)
    con.print(table)
    for d in doc["decisions"]:
        reasons = d.get("reasons")
        if reasons:
            con.print(f"[bold]{d['workload']}[/]: rejected clusters")
            for cluster, why in reasons.items():
                con.print(f"  {cluster}: {'; '.join(why)}", markup=False)
        if d.get("scores"):
            con.print(f"[bold]{d['workload']}[/]: scores, best first (* chosen)")
            con.print("\n".join(score_lines(d)), markup=False, highlight=False)


def moved_text(decision: dict[str, Any]) -> str:
    """The Moved cell: replicas relocated, then each cluster's change (``2 (a-2 b+1 c+1)``).

    ``~`` marks counts estimated from a current placement that named clusters only.
    """
    moved = decision.get("moved") or {}
    changes = sorted(
        [f"{n}+{r}" for n, r in (moved.get("added") or {}).items()]
        + [f"{n}-{r}" for n, r in (moved.get("removed") or {}).items()]
    )
    if not changes:
        return "0"
    mark = "~" if moved.get("estimated") else ""
    return f"{mark}{moved.get('replicas', 0)} ({' '.join(changes)})"


def moved_caption(doc: dict[str, Any]) -> str:
    """``replicas moved: 12 (in 5 decisions)``: the run's churn at a glance."""
    moving = [int((d.get("moved") or {}).get("replicas") or 0) for d in doc["decisions"]]
    return f"replicas moved: {sum(moving)} (in {sum(1 for m in moving if m)} decisions)"


def _place_lines(con: Console, doc: dict[str, Any]) -> None:
    """``place_table`` for large runs: one plain line per decision, columns aligned."""
    rows = [
        (
            d["workload"],
            ", ".join(f"{c['name']}x{c['replicas']}" for c in d["clusters"]) or "-",
            "unschedulable" if d["unschedulable"] else "placed",
            moved_text(d),
            d["summary"],
        )
        for d in doc["decisions"]
    ]
    header = ("WORKLOAD", "CLUSTERS (REPLICAS)", "STATUS", "MOVED", "SUMMARY")
    # Padded to the longest cell, at most 48 wide: a workload on hundreds of clusters would
    # otherwise pad every line to thousands of spaces.
    widths = [min(48, max(len(header[k]), *(len(r[k]) for r in rows))) for k in range(4)]
    lines = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(r[:4], widths, strict=True)), r[4]])
        for r in (header, *rows)
    ]
    lines.append(moved_caption(doc))
    for d in doc["decisions"]:
        reasons = d.get("reasons")
        if reasons:
            lines.append(f"{d['workload']}: rejected clusters")
            lines += [f"  {cluster}: {'; '.join(why)}" for cluster, why in reasons.items()]
        if d.get("scores"):
            lines.append(f"{d['workload']}: scores, best first (* chosen)")
            lines += score_lines(d)
    con.file.write("\n".join(lines) + "\n")


def score_lines(decision: dict[str, Any]) -> list[str]:
    """A decision's ``scores`` as aligned lines: a column per plugin (with its weight), a total.

    The order is the scheduler's ranking (total, then name), so equal totals decided by name
    and the plugin that made the difference can be read off directly.
    """
    weights: dict[str, int] = decision["scoreWeights"]
    chosen = {c["name"] for c in decision["clusters"]}
    header = ["  CLUSTER", *(f"{name} x{w}" for name, w in weights.items()), "TOTAL"]
    rows = [
        [
            ("* " if s["cluster"] in chosen else "  ") + s["cluster"],
            *(str(s["plugins"][name]) for name in weights),
            str(s["total"]),
        ]
        for s in decision["scores"]
    ]
    widths = [max(len(r[k]) for r in (header, *rows)) for k in range(len(header))]
    return [
        "  ".join(
            cell.ljust(w) if k == 0 else cell.rjust(w)
            for k, (cell, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in (header, *rows)
    ]
