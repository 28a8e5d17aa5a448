"""Upstream end-of-support status per Kubernetes minor (pure).

Dates are data (``data/kubernetes_support.yaml``); "today" is always a parameter because pure code
has no clock: the CLI passes the real date, tests and workflows pass a fixed one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date
from importlib import resources
from typing import Literal

import yaml

from orchestrator.domain.versions import KubeVersion

SupportState = Literal["supported", "ending-soon", "end-of-life", "unknown"]
ENDING_SOON_DAYS = 90


@dataclass(frozen=True, slots=True)
class SupportStatus:
    """Where a minor stands on the upstream support calendar on a given day."""

    state: SupportState
    end_of_life: date | None

    def describe(self) -> str:
        """``end-of-life since 2025-10-28`` and similar."""
        if self.end_of_life is None:
            return "unknown (not in the support calendar)"
        if self.state == "end-of-life":
            return f"end-of-life since {self.end_of_life.isoformat()}"
        return f"{self.state} until {self.end_of_life.isoformat()}"


@functools.cache
def calendar() -> dict[tuple[int, int], date]:
    """End-of-life date per (major, minor), parsed once from package data."""
    text = (
        resources.files("orchestrator.domain").joinpath("data/kubernetes_support.yaml").read_text()
    )
    out: dict[tuple[int, int], date] = {}
    for row in yaml.safe_load(text)["releases"]:
        major, minor = str(row["minor"]).split(".")
        out[(int(major), int(minor))] = date.fromisoformat(str(row["endOfLife"]))
    return out


@functools.cache
def release_dates() -> dict[tuple[int, int], date]:
    """Upstream release day per (major, minor); the report labels its minor columns with it."""
    text = (
        resources.files("orchestrator.domain").joinpath("data/kubernetes_support.yaml").read_text()
    )
    out: dict[tuple[int, int], date] = {}
    for row in yaml.safe_load(text)["releases"]:
        if row.get("released"):
            major, minor = str(row["minor"]).split(".")
            out[(int(major), int(minor))] = date.fromisoformat(str(row["released"]))
    return out


def support_status(version: KubeVersion, today: date) -> SupportStatus:
    """Status of ``version``'s minor on ``today``."""
    end = calendar().get(version.minor_key)
    if end is None:
        return SupportStatus("unknown", None)
    if today > end:
        return SupportStatus("end-of-life", end)
    if (end - today).days <= ENDING_SOON_DAYS:
        return SupportStatus("ending-soon", end)
    return SupportStatus("supported", end)
