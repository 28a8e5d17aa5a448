"""``check_cron``: the documented subset is accepted as written, everything else is one message.

Every accepted form here was also created on the real dev server (Temporal 1.32) without a
refusal; tests/workflows/test_schedules_dev_server.py creates some of them through the CLI.
"""

from __future__ import annotations

import pytest

from orchestrator.domain.cron import check_cron
from orchestrator.domain.errors import InputError


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("0 2 * * Sat", "0 2 * * Sat"),
        ("  0   2 * *  Sat ", "0 2 * * Sat"),  # blanks collapse
        ("*/15 1-5 1,15 jan-mar mon-fri", "*/15 1-5 1,15 jan-mar mon-fri"),
        ("30 4 * * sunday,7", "30 4 * * sunday,7"),
        ("5/10 * * * *", "5/10 * * * *"),
        ("0 0 1 February *", "0 0 1 February *"),
        ("0 12 * * 1-5/2", "0 12 * * 1-5/2"),
        ("59 23 31 12 0", "59 23 31 12 0"),
        ("@weekly", "@weekly"),
        ("@hourly", "@hourly"),
    ],
)
def test_accepted(given: str, kept: str) -> None:
    assert check_cron(given) == kept


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("", "--cron: expected a cron expression like '0 2 * * Sat'"),
        ("   ", "--cron: expected a cron expression"),
        ("x" * 257, "--cron: expected a cron expression"),
        ("0 2 * *", "has 4 field(s), expected 5"),
        ("0 0 2 * * Sat", "has 6 field(s), expected 5"),  # seconds / years are not offered
        ("60 * * * *", "minute '60': 60 is out of range 0-59"),
        ("0 24 * * *", "hour '24': 24 is out of range 0-23"),
        ("0 2 0 * *", "day of month '0': 0 is out of range 1-31"),
        ("0 2 * 13 *", "month '13': 13 is out of range 1-12"),
        ("0 2 * * 8", "day of week '8': 8 is out of range 0-7"),
        ("0 2 * Sat *", "month 'Sat': expected *, a number 1-12 or a name"),
        ("0 two * * *", "hour 'two': expected *, a number 0-23, a range or a step"),
        ("0 \u00b2 * * *", "hour '\u00b2'"),  # a digit to str.isdigit, not to cron
        ("5-1 * * * *", "minute '5-1': range runs backwards"),
        ("*/0 * * * *", "minute '*/0': step must be a whole number 1-59"),
        ("*/x * * * *", "step must be a whole number"),
        ("1,,2 * * * *", "minute ''"),
        ("CRON_TZ=Europe/Berlin 0 2 * * *", "give the time zone with --time-zone"),
        ("TZ=UTC 0 2 * * *", "give the time zone with --time-zone"),
        ("@every 1h", "use --every for an interval"),
        ("@often", "unknown shorthand '@often'"),
        ("@daily extra", "unknown shorthand"),
        ("0 2 * * Sat # weekly", "'#' comments are not accepted"),
    ],
)
def test_refused(given: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        check_cron(given)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_flag_is_named() -> None:
    with pytest.raises(InputError, match=r"^schedule\.cron: minute"):
        check_cron("99 * * * *", "schedule.cron")
