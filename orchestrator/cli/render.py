"""Documents and Rich tables for the offline commands (the JSON shapes are the stable contract)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from orchestrator.domain.drift import DriftReport
from orchestrator.planning import CalibrationPlan

_STATUS_STYLE = {
    "current": "green",
    "behind": "yellow",
    "ahead": "cyan",
    "skewed": "bold red",
    "end-of-life": "red",
}


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
            }
            for d in report.clusters
        ],
        "summary": report.counts(),
    }


def drift_table(con: Console, report: DriftReport) -> None:
    """People's view of the drift report."""
    goal = f"target {report.target}" if report.target else f"newest {report.newest}"
    table = Table(title=f"Fleet drift ({goal}, as of {report.as_of.isoformat()})")
    for col in ("Cluster", "Control plane", "Workers", "Behind", "Support", "Status"):
        table.add_column(col)
    for d in report.clusters:
        workers = (
            ", ".join(f"{md.name} {md.version}" for md in d.cluster.machine_deployments) or "-"
        )
        behind = d.minors_behind_target if report.target else d.minors_behind_newest
        style = _STATUS_STYLE[d.status]
        table.add_row(
            d.cluster.name,
            str(d.cluster.control_plane.version),
            workers,
            "-" if behind is None else f"{behind} minor(s)",
            d.support.describe(),
            f"[{style}]{d.status}[/]",
        )
    con.print(table)
    for d in report.clusters:
        for v in d.skew_violations:
            con.print(f"[red]{d.cluster.name}[/]: {v}")
    counts = ", ".join(f"{k}: {v}" for k, v in report.counts().items())
    con.print(f"{len(report.clusters)} clusters ({counts})")


def plan_table(con: Console, plan: CalibrationPlan) -> None:
    """People's view of a calibration plan: steps per cluster, then the waves."""
    table = Table(title=f"Calibration plan to {plan.target}")
    for col in (
        "Cluster",
        "From (CP / workers)",
        "Control-plane steps",
        "Worker steps",
        "Stage",
        "Blocked",
    ):
        table.add_column(col)
    stage_of = {n: s.name for s in plan.rollout.stages for n in s.clusters}
    for p in plan.clusters:
        table.add_row(
            p.cluster,
            f"{p.control_plane_from} / {p.workers_from or '-'}",
            " -> ".join(str(v) for v in p.control_plane_steps) or "(at target)",
            " -> ".join(str(v) for v in p.worker_steps) or "-",
            stage_of.get(p.cluster, "-"),
            "[red]yes[/]" if p.blocked else "no",
        )
    con.print(table)
    for p in plan.clusters:
        for reason in p.reasons:
            con.print(f"[red]blocked[/] {p.cluster}: {reason}")
    for i, wave in enumerate(plan.rollout.waves(), start=1):
        con.print(f"wave {i}: {', '.join(wave)}")
    for s in plan.rollout.stages:
        gate = ", approval before start" if s.approval else ""
        con.print(
            f"stage {s.name}: maxConcurrency {s.max_concurrency}, soak {s.soak_seconds}s{gate}"
        )
    if plan.rollout.unassigned:
        con.print(f"[yellow]not selected by any stage:[/] {', '.join(plan.rollout.unassigned)}")


def check_table(con: Console, plan: CalibrationPlan) -> None:
    """People's view of the compatibility findings."""
    table = Table(title=f"Removed APIs on the way to {plan.target}")
    for col in ("Cluster", "Workload", "API", "Removed in", "Replacement", "Breaks at", "Action"):
        table.add_column(col)
    for v in plan.findings:
        f = v.finding
        action = {"block": "[red]block[/]", "none": "already broken"}.get(
            v.action, f"move to {v.destination}"
        )
        table.add_row(
            f.cluster, f.workload, f.api, f.removed_in, f.replacement or "-", str(f.version), action
        )
    con.print(table)
    if not plan.findings:
        con.print("[green]no workload uses an API that a planned version removes[/]")


# Past this many rows a Rich table costs seconds (it measures and wraps every cell: 6.5 s of CPU
# for 10,000 decisions); plain aligned lines say the same in a fraction of that.
RICH_TABLE_ROWS = 500


def place_table(con: Console, doc: dict[str, Any]) -> None:
    """People's view of a placement run: one row per workload with its summary.

    The summary (kube-scheduler style: "3/1000 clusters available: 640 labels do not match ...")
    says why the other clusters were not used; per-cluster reasons follow only when the document
    has them (``--explain``, ``--workload``).
    """
    if len(doc["decisions"]) > RICH_TABLE_ROWS:
        _place_lines(con, doc)
        return
    table = Table(title="Placement")
    for col in ("Workload", "Clusters (replicas)", "Status"):
        table.add_column(col)
    table.add_column("Summary", overflow="fold")
    for d in doc["decisions"]:
        placed = ", ".join(f"{c['name']}x{c['replicas']}" for c in d["clusters"]) or "-"
        status = "[red]unschedulable[/]" if d["unschedulable"] else "placed"
        table.add_row(d["workload"], placed, status, d["summary"])
    con.print(table)
    for d in doc["decisions"]:
        reasons = d.get("reasons")
        if reasons:
            con.print(f"[bold]{d['workload']}[/]: rejected clusters")
            for cluster, why in reasons.items():
                con.print(f"  {cluster}: {'; '.join(why)}", markup=False)


def _place_lines(con: Console, doc: dict[str, Any]) -> None:
    """``place_table`` for large runs: one plain line per decision, columns aligned."""
    rows = [
        (
            d["workload"],
            ", ".join(f"{c['name']}x{c['replicas']}" for c in d["clusters"]) or "-",
            "unschedulable" if d["unschedulable"] else "placed",
            d["summary"],
        )
        for d in doc["decisions"]
    ]
    header = ("WORKLOAD", "CLUSTERS (REPLICAS)", "STATUS", "SUMMARY")
    # Padded to the longest cell, at most 48 wide: a workload on hundreds of clusters would
    # otherwise pad every line to thousands of spaces.
    widths = [min(48, max(len(header[k]), *(len(r[k]) for r in rows))) for k in range(3)]
    lines = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)), r[3]])
        for r in (header, *rows)
    ]
    for d in doc["decisions"]:
        reasons = d.get("reasons")
        if reasons:
            lines.append(f"{d['workload']}: rejected clusters")
            lines += [f"  {cluster}: {'; '.join(why)}" for cluster, why in reasons.items()]
    con.file.write("\n".join(lines) + "\n")
