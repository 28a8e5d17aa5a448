"""``calibrator report``: the fleet report as one self-contained HTML page.

The rendering is pure (``orchestrator.report``); this module only reads the inputs, plans exactly
like ``calibrator plan`` (same strategy and selector options, so the waves match) and writes the
page to stdout or ``--output``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.live import (
    AllNamespacesOpt,
    ContextOpt,
    KubeconfigOpt,
    NamespaceOpt,
    ProbeOpt,
    SnapshotOpt,
    Source,
)
from orchestrator.cli.output import fail


class ReportFormat(StrEnum):
    """Formats ``report`` writes (HTML only for now; -o keeps the other commands' flag)."""

    html = "html"


def register(app: typer.Typer) -> None:
    """Add ``report`` to the main app."""

    @app.command()
    def report(
        target: Annotated[str, typer.Option("--target", "-t", help="Target Kubernetes version.")],
        snapshot: SnapshotOpt = None,
        strategy: Annotated[
            Path | None,
            typer.Option("--strategy", help="CalibrationStrategy YAML, as for `calibrator plan`."),
        ] = None,
        selector: Annotated[
            str | None,
            typer.Option("--selector", "-l", help="Only clusters matching this label selector."),
        ] = None,
        fmt: Annotated[
            ReportFormat, typer.Option("--format", "-o", help="Report format: html.")
        ] = ReportFormat.html,
        output: Annotated[
            Path | None,
            typer.Option("--output", help="Write the page to this file instead of stdout."),
        ] = None,
        kubeconfig: KubeconfigOpt = None,
        context: ContextOpt = None,
        namespace: NamespaceOpt = None,
        all_namespaces: AllNamespacesOpt = False,
        probe: ProbeOpt = None,
    ) -> None:
        """Write a self-contained HTML fleet report: version matrix, highlights, waves, blocks."""
        import sys

        from orchestrator.domain.errors import InputError

        try:
            source = Source(snapshot, kubeconfig, context, namespace, all_namespaces, probe)
            page, count = _render(target, source, strategy, selector)
        except InputError as err:
            fail(str(err))
        if output is None:
            sys.stdout.write(page)
            return
        try:
            output.write_text(page, encoding="utf-8")
        except OSError as err:
            fail(f"cannot write report file {str(output)!r}: {err}")
        sys.stderr.write(f"wrote {output} ({count} clusters)\n")


def _render(
    target: str, source: Source, strategy: Path | None, selector: str | None
) -> tuple[str, int]:
    """Plan like ``calibrator plan`` and render; the page and the number of clusters."""
    from orchestrator.cli import inputs, live
    from orchestrator.report import render_html

    version = inputs.target_version(target)
    inputs.checked_selector(selector)
    snap = live.load(source).snapshot
    result = inputs.plan_fleet(snap, version, strategy, selector)
    name = source.snapshot.name if source.snapshot is not None else "live fleet"
    return render_html(snap, result, inputs.today(), source=name), len(snap.clusters)
