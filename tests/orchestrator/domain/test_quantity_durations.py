from __future__ import annotations

import pytest

from orchestrator.domain.durations import format_duration, parse_duration
from orchestrator.domain.errors import InputError
from orchestrator.domain.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_milli,
    parse_memory_bytes,
)


@pytest.mark.parametrize(
    ("text", "milli"),
    [("500m", 500), ("2", 2000), ("0.25", 250), (1.5, 1500), ("1k", 1_000_000), ("1e-3", 1)],
)
def test_cpu(text: object, milli: int) -> None:
    assert parse_cpu_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "num"),
    [("1Gi", 2**30), ("256Mi", 256 * 2**20), ("1G", 10**9), ("1500", 1500), ("1.5Ki", 1536)],
)
def test_memory(text: str, num: int) -> None:
    assert parse_memory_bytes(text) == num


@pytest.mark.parametrize("bad", ["lots", "1Zi", "-1", "", True, None])
def test_bad_quantities(bad: object) -> None:
    with pytest.raises(InputError):
        parse_cpu_milli(bad)


def test_formatting() -> None:
    assert format_cpu(2000) == "2" and format_cpu(1500) == "1500m"
    assert (
        format_memory(64 * 2**30) == "64Gi"
        and format_memory(1536 * 2**20) == "1536Mi"
        and format_memory(7) == "7"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("1h30m", 5400), ("7d", 604800), ("45s", 45), (0, 0), ("0", 0), (90, 90)],
)
def test_durations(text: object, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["1x", "m30", "", "1h 30m", -5, True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(InputError, match="duration"):
        parse_duration(bad)


def test_format_duration() -> None:
    assert format_duration(5400) == "1h30m" and format_duration(0) == "0s"
