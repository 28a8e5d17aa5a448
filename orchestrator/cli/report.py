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

from orchestrator.cli.output import fail


class ReportFormat(StrEnum):
    """Formats ``report`` writes (HTML only for now; -o keeps the other commands' flag)."""

    html = "html"


def register(app: typer.Typer) -> None:
    """Add ``report`` to the main app."""

    @app.command()
    def report(
        target: Annotated[str, typer.Option("--target", "-t", help="Target Kubernetes version.")],
        snapshot: Annotated[
            Path | None,
            typer.Option(
                "--snapshot", "-s", help="FleetSnapshot YAML/JSON file (required for now)."
            ),
        ] = None,
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
    ) -> None:
        """Write a self-contained HTML fleet report: version matrix, highlights, waves, blocks."""
        import sys

        from orchestrator.domain.errors import InputError

        try:
            page, count = _render(target, snapshot, strategy, selector)
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
    target: str, snapshot: Path | None, strategy: Path | None, selector: str | None
) -> tuple[str, int]:
    """Plan like ``calibrator plan`` and render; the page and the number of clusters."""
    from orchestrator.cli.main import _read, _snapshot, _today, _version
    from orchestrator.domain.selectors import parse_selector_string
    from orchestrator.domain.waves import DEFAULT_STRATEGY, load_strategy
    from orchestrator.planning import plan_calibration
    from orchestrator.report import render_html

    if snapshot is None:
        fail(
            "calibrator report needs --snapshot FILE for now; a report of the live fleet "
            "(no --snapshot) is not available yet"
        )
    version = _version(target)
    snap = _snapshot(snapshot)
    strat = DEFAULT_STRATEGY if strategy is None else load_strategy(_read(strategy, "strategy"))
    sel = parse_selector_string(selector) if selector else None
    result = plan_calibration(snap, version, strat, sel)
    return render_html(snap, result, _today(), source=snapshot.name), len(snap.clusters)
