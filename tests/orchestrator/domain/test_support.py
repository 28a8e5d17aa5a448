from __future__ import annotations

from datetime import date

import pytest

from orchestrator.domain.support import calendar, release_dates, support_status
from orchestrator.domain.versions import KubeVersion


@pytest.mark.parametrize(
    ("version", "today", "state"),
    [
        ("v1.31.1", date(2026, 12, 2), "end-of-life"),
        ("v1.34.2", date(2026, 10, 27), "ending-soon"),
        ("v1.34.2", date(2026, 10, 28), "end-of-life"),
        ("v1.35.0", date(2026, 12, 2), "ending-soon"),
        ("v1.35.0", date(2026, 6, 1), "supported"),
        ("v1.36.1", date(2026, 12, 2), "supported"),
        ("v1.37.0", date(2026, 12, 2), "supported"),
        ("v1.37.2", date(2027, 8, 1), "ending-soon"),
        ("v1.37.2", date(2027, 10, 29), "end-of-life"),
        ("v1.38.0-beta.0", date(2026, 12, 2), "unknown"),
        ("v1.99.0", date(2026, 12, 2), "unknown"),
    ],
)
def test_support_status(version: str, today: date, state: str) -> None:
    assert support_status(KubeVersion.parse(version), today).state == state


@pytest.mark.parametrize(
    ("minor", "released", "end_of_life"),
    [
        # Actual end of life from kubernetes/website data/releases/eol.yaml.
        ((1, 30), date(2024, 4, 17), date(2025, 7, 15)),
        ((1, 31), date(2024, 8, 13), date(2025, 11, 11)),
        # Planned end of life from kubernetes.io/releases/<minor>.
        ((1, 35), date(2025, 12, 17), date(2027, 2, 28)),
        ((1, 36), date(2026, 4, 22), date(2027, 6, 28)),
        ((1, 37), date(2026, 8, 26), date(2027, 10, 28)),
    ],
)
def test_calendar_rows(minor: tuple[int, int], released: date, end_of_life: date) -> None:
    assert release_dates()[minor] == released
    assert calendar()[minor] == end_of_life


def test_calendar_is_contiguous_and_ordered() -> None:
    minors = sorted(calendar())
    assert minors == [(1, m) for m in range(24, 38)]
    for minor in minors:
        assert release_dates()[minor] < calendar()[minor]
    ends = [calendar()[m] for m in minors]
    assert ends == sorted(ends)


def test_describe() -> None:
    status = support_status(KubeVersion.parse("v1.31.1"), date(2026, 12, 2))
    assert status.describe() == "end-of-life since 2025-11-11"
