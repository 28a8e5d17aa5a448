"""Upstream end-of-support status per Kubernetes minor (pure).

Dates are data (``data/kubernetes_support.yaml``); "today" is always a parameter because pure code
has no clock: the CLI passes the real date, tests and workflows pass a fixed one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime
from importlib import resources
from typing import Final, Literal

from orchestrator.domain.apicatalog import minor_of
from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.errors import InputError
from orchestrator.domain.strict import check_fields
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


MAX_RELEASES: Final = 1_000
"""Most rows one calendar (built-in or operator file) may hold."""
ROW_FIELDS: Final = frozenset({"minor", "released", "endOfLife"})


@dataclass(frozen=True, slots=True)
class Release:
    """One minor on the calendar: released on (None when not given), supported until."""

    released: date | None
    end_of_life: date


def releases_from_rows(
    raw: object, where: str, error: type[InputError]
) -> dict[tuple[int, int], Release]:
    """Calendar rows validated: ``{minor: "1.31", released?: day, endOfLife: day}``, one per minor.

    The built-in file's ``releases`` and an operator file's go through here alike. Days are
    ``YYYY-MM-DD`` (quoted or not: YAML reads an unquoted one as a date); end of life may not
    come before the release.
    """
    if not isinstance(raw, list):
        raise error(f"{where}: expected a list of rows, got {quote(raw)}")
    if len(raw) > MAX_RELEASES:
        raise error(f"{where}: more than {MAX_RELEASES:,} rows")
    out: dict[tuple[int, int], Release] = {}
    for i, row in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(row, Mapping):
            raise error(f"{here}: expected a mapping, got {quote(row)}")
        check_fields(row, ROW_FIELDS, here, error)
        for key in ("minor", "endOfLife"):
            if key not in row:
                raise error(f"{here}: missing required field '{key}'")
        minor = minor_of(row["minor"], f"{here}.minor", error)
        if minor in out:
            raise error(f"{here}: minor {row['minor']} is listed twice")
        released = _day(row["released"], f"{here}.released", error) if "released" in row else None
        end = _day(row["endOfLife"], f"{here}.endOfLife", error)
        if released is not None and end < released:
            raise error(f"{here}: endOfLife {end} is before released {released}")
        out[minor] = Release(released, end)
    return out


def _day(raw: object, where: str, error: type[InputError]) -> date:
    if isinstance(raw, date) and not isinstance(raw, datetime):
        return raw
    if isinstance(raw, str) and len(raw) == 10:
        try:
            return date.fromisoformat(raw)
        except ValueError:
            pass
    raise error(f"{where}: expected a day such as 2027-02-28, got {quote(raw)}")


@functools.cache
def builtin_releases() -> dict[tuple[int, int], Release]:
    """The package's calendar, parsed once and checked like an operator's file."""
    text = (
        resources.files("orchestrator.domain").joinpath("data/kubernetes_support.yaml").read_text()
    )
    document = load_document(text, "kubernetes_support.yaml")
    return releases_from_rows(document["releases"], "kubernetes_support.yaml: releases", InputError)


# The calendar in force: the built-in one, or the built-in one extended by an operator's
# lifecycle file for the length of one command (``lifecycle.using``), like the API catalog.
ACTIVE_RELEASES: ContextVar[Mapping[tuple[int, int], Release] | None] = ContextVar(
    "ACTIVE_RELEASES", default=None
)


def releases() -> Mapping[tuple[int, int], Release]:
    """Every minor on the calendar in force."""
    active = ACTIVE_RELEASES.get()
    return builtin_releases() if active is None else active


def calendar() -> dict[tuple[int, int], date]:
    """End-of-life date per (major, minor)."""
    return {minor: r.end_of_life for minor, r in releases().items()}


def release_dates() -> dict[tuple[int, int], date]:
    """Upstream release day per (major, minor); the report labels its minor columns with it."""
    return {minor: r.released for minor, r in releases().items() if r.released is not None}


def support_status(version: KubeVersion, today: date) -> SupportStatus:
    """Status of ``version``'s minor on ``today``."""
    release = releases().get(version.minor_key)
    if release is None:
        return SupportStatus("unknown", None)
    end = release.end_of_life
    if today > end:
        return SupportStatus("end-of-life", end)
    if (end - today).days <= ENDING_SOON_DAYS:
        return SupportStatus("ending-soon", end)
    return SupportStatus("supported", end)
