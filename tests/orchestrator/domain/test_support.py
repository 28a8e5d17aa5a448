from __future__ import annotations

from datetime import date

import pytest

from orchestrator.domain.support import support_status
from orchestrator.domain.versions import KubeVersion


@pytest.mark.parametrize(
    ("version", "today", "state"),
    [
        ("v1.31.1", date(2026, 12, 2), "end-of-life"),
        ("v1.34.2", date(2026, 10, 27), "ending-soon"),
        ("v1.34.2", date(2026, 10, 28), "end-of-life"),
        ("v1.35.0", date(2026, 12, 2), "ending-soon"),
        ("v1.35.0", date(2026, 6, 1), "supported"),
        ("v1.99.0", date(2026, 12, 2), "unknown"),
    ],
)
def test_support_status(version: str, today: date, state: str) -> None:
    assert support_status(KubeVersion.parse(version), today).state == state


def test_describe() -> None:
    status = support_status(KubeVersion.parse("v1.31.1"), date(2026, 12, 2))
    assert status.describe() == "end-of-life since 2025-10-28"
