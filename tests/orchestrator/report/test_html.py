"""The HTML fleet report: self-contained, escaped, complete (pure renderer, no browser)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from orchestrator.domain.snapshot import (
    Cluster,
    ControlPlaneState,
    FleetSnapshot,
    MachineDeploymentState,
)
from orchestrator.domain.snapshot_load import load_snapshot
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import load_strategy
from orchestrator.planning import plan_calibration
from orchestrator.report import render_html
from orchestrator.report.html import minor_columns
from tests.orchestrator.report.dom import parse

ROOT = Path(__file__).parents[3]
V = KubeVersion.parse
TODAY = date(2026, 12, 3)


def example_page(strategy: bool = True) -> tuple[FleetSnapshot, str]:
    snap = load_snapshot((ROOT / "examples" / "fleet.yaml").read_text())
    strat = load_strategy((ROOT / "examples" / "strategy.yaml").read_text()) if strategy else None
    plan = (
        plan_calibration(snap, V("v1.35.0"), strat)
        if strat
        else plan_calibration(snap, V("v1.35.0"))
    )
    return snap, render_html(snap, plan, TODAY, source="fleet.yaml")


def test_every_cluster_has_one_full_name_cell() -> None:
    snap, page = example_page()
    header, *names = parse(page).text[("th", "name")]
    assert header == "Cluster"
    assert sorted(names) == sorted(c.name for c in snap.clusters)


@pytest.mark.parametrize(
    "forbidden",
    ["<script", "<link", "<img", "<iframe", "@import", "@font-face", "url(", "http://", "https://"],
)
def test_page_fetches_nothing(forbidden: str) -> None:
    _, page = example_page()
    assert forbidden not in page.lower()


def test_content_security_policy_forbids_everything_but_inline_style() -> None:
    _, page = example_page()
    assert "default-src 'none'; style-src 'unsafe-inline'" in page


@pytest.mark.parametrize(
    "truncating", ["text-overflow", "overflow:hidden", "max-width", "ellipsis"]
)
def test_no_css_that_cuts_names(truncating: str) -> None:
    _, page = example_page()
    assert truncating not in page.replace(" ", "")


def test_sections_show_skew_eol_blocked_and_waves() -> None:
    _, page = example_page()
    cells = parse(page)
    assert "dev-us-2" in page and "4 minors behind" in page  # skew highlight
    assert any("end-of-life since 2025-11-11" in t for t in cells.text[("div", "eol")])
    blocked = cells.text[("td", "cn")]
    assert sorted(blocked) == ["dev-eu-2", "dev-us-2", "prod-ap-1", "staging-us-1"]
    assert "approval required before this stage starts" in page
    assert "Sat,Sun 02:00 UTC for 4h" in page
    waves = cells.text[("span", "wn")]
    assert waves == [f"W{n}" for n in range(1, len(waves) + 1)]
    assert "it lives in Temporal" in page  # the skipped per-stage progress is explained


def test_default_strategy_waves_match_plan() -> None:
    snap, page = example_page(strategy=False)
    plan = plan_calibration(snap, V("v1.35.0"))
    assert len(parse(page).text[("span", "wn")]) == len(plan.rollout.waves())


@pytest.mark.parametrize(
    ("today", "minor", "state"),
    [
        (date(2026, 12, 3), "1.31", "end-of-life"),
        (date(2026, 12, 3), "1.35", "ending-soon"),
        (date(2026, 6, 1), "1.35", "supported"),
        (date(2025, 10, 1), "1.31", "ending-soon"),
    ],
)
def test_minor_columns_are_coloured_by_support(today: date, minor: str, state: str) -> None:
    snap = load_snapshot((ROOT / "examples" / "fleet.yaml").read_text())
    page = render_html(snap, plan_calibration(snap, V("v1.35.0")), today)
    header = next(
        line for line in page.split("<th ") if f">{minor}" in line and 'scope="col"' in line
    )
    assert f"st-{state}" in header


def _cluster(name: str, cp: str, *pools: tuple[str, str], **labels: str) -> Cluster:
    return Cluster(
        name=name,
        control_plane=ControlPlaneState(V(cp), 1),
        labels=labels,
        machine_deployments=tuple(MachineDeploymentState(p, V(v), 1) for p, v in pools),
    )


@pytest.mark.parametrize(
    ("versions", "target", "columns"),
    [
        (["v1.33.1"], "v1.33.1", [(1, 33)]),
        (["v1.31.0", "v1.35.0"], "v1.35.0", [(1, m) for m in range(31, 36)]),
        (["v1.34.0"], "v1.36.0", [(1, 34), (1, 35), (1, 36)]),
    ],
)
def test_minor_columns_fill_gaps(
    versions: list[str], target: str, columns: list[tuple[int, int]]
) -> None:
    snap = FleetSnapshot(
        available_versions=(V(target),),
        clusters=tuple(_cluster(f"c{i}", v) for i, v in enumerate(versions)),
    )
    assert minor_columns(snap, V(target)) == columns


HOSTILE = '<b onmouseover="x()">&"\''


def test_user_strings_are_escaped() -> None:
    snap = FleetSnapshot(
        available_versions=(V("v1.34.2"), V("v1.35.0")),
        clusters=(
            _cluster(HOSTILE, "v1.34.2", (HOSTILE + "pool", "v1.34.2"), env=HOSTILE + "env"),
            _cluster("plain", "v1.34.2", ("md-0", "v1.30.0")),
        ),
    )
    plan = plan_calibration(snap, V("v1.35.0"))
    page = render_html(snap, plan, TODAY, source=HOSTILE)
    cells = parse(page)
    assert "onmouseover" not in " ".join(cells.attrs).replace(HOSTILE, "")
    assert "<b onmouseover" not in page
    assert HOSTILE in cells.text[("th", "name")]
    assert any(HOSTILE + "env" in t for t in cells.text[("th", "")])


def test_rows_are_grouped_by_env_label() -> None:
    snap = FleetSnapshot(
        available_versions=(V("v1.35.0"),),
        clusters=(
            _cluster("b-prod", "v1.35.0", env="prod"),
            _cluster("a-dev", "v1.35.0", env="dev"),
            _cluster("loose", "v1.35.0"),
        ),
    )
    page = render_html(snap, plan_calibration(snap, V("v1.35.0")), TODAY)
    matrix = page[page.index('<table class="matrix"') :]
    marks = ("env=dev", "a-dev", "env=prod", "b-prod", "(no env label)", "loose")
    order = [matrix.index(s) for s in marks]
    assert order == sorted(order)
