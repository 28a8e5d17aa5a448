"""Cron expressions as ``calibrator schedule --cron`` takes them, checked before any server call.

Temporal compiles a cron string into calendar ranges on the server; a malformed one would only
be refused there, as a gRPC error, after a connection. This module accepts the subset the CLI
documents and refuses everything else with one line, so bad input never reaches the server:

- five fields, ``minute hour day-of-month month day-of-week``, separated by blanks;
- in each field ``*``, a value, a range ``a-b``, a step ``*/n``, ``a/n`` or ``a-b/n``, and
  comma lists of those;
- month names (``jan`` .. ``dec``, or whole names) and day names (``sun`` .. ``sat``, or whole
  names), any case; day of week 0-7, where 0 and 7 are Sunday (as Temporal reads them);
- the shorthands ``@yearly``, ``@monthly``, ``@weekly``, ``@daily`` and ``@hourly``.

Not accepted, each with its own message: seconds and year fields (a calibration timetable needs
neither), ``CRON_TZ=``/``TZ=`` prefixes (``--time-zone`` says it, once), ``@every`` (that is
``--every``) and ``#`` comments (``--note`` is the schedule's note).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.domain.errors import InputError

MAX_LENGTH = 256
SHORTHANDS = ("@yearly", "@monthly", "@weekly", "@daily", "@hourly")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
EXAMPLE = "'0 2 * * Sat'"
_NUMBER = re.compile(r"[0-9]{1,4}")


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


def _names(short: tuple[str, ...], long: tuple[str, ...], first: int) -> dict[str, int]:
    return {n: i + first for names in (short, long) for i, n in enumerate(names)}


FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day of month", 1, 31, {}),
    _Field("month", 1, 12, _names(MONTHS, MONTH_NAMES, 1)),
    _Field("day of week", 0, 7, _names(DAYS, DAY_NAMES, 0)),
)


def check_cron(text: str, where: str = "--cron") -> str:
    """The expression, stripped, when it is one Temporal reads as this module documents.

    Raises InputError naming ``where`` and the offending field otherwise.
    """
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_LENGTH:
        raise InputError(f"{where}: expected a cron expression like {EXAMPLE}")
    expr = " ".join(text.split())
    head = expr.split(" ", 1)[0]
    if head.upper().startswith(("CRON_TZ=", "TZ=")):
        raise InputError(f"{where}: give the time zone with --time-zone, not {head!r}")
    if "#" in expr:
        raise InputError(f"{where}: '#' comments are not accepted (use --note)")
    if head.startswith("@"):
        if head == "@every":
            raise InputError(f"{where}: use --every for an interval, not @every")
        if expr not in SHORTHANDS:
            raise InputError(
                f"{where}: unknown shorthand {expr[:40]!r} (known: {', '.join(SHORTHANDS)})"
            )
        return expr
    parts = expr.split(" ")
    if len(parts) != len(FIELDS):
        raise InputError(
            f"{where}: {expr[:60]!r} has {len(parts)} field(s), expected 5 "
            f"(minute hour day-of-month month day-of-week), e.g. {EXAMPLE}"
        )
    for field, part in zip(FIELDS, parts, strict=True):
        for item in part.split(","):
            _check_item(field, item, where)
    return expr


def _check_item(field: _Field, item: str, where: str) -> None:
    def bad(why: str) -> InputError:
        return InputError(f"{where}: {field.name} {item[:30]!r}: {why}")

    base, slash, step_text = item.partition("/")
    if slash and not (_NUMBER.fullmatch(step_text) and 1 <= int(step_text) <= field.high):
        raise bad(f"step must be a whole number 1-{field.high}")
    if base == "*":
        return
    low_text, dash, high_text = base.partition("-")
    low = _value(field, low_text, bad)
    if dash:
        high = _value(field, high_text, bad)
        if high < low:
            raise bad("range runs backwards")


def _value(field: _Field, text: str, bad: Callable[[str], InputError]) -> int:
    name = text.lower()
    if name in field.names:
        return field.names[name]
    if not _NUMBER.fullmatch(text):
        hint = " or a name" if field.names else ""
        raise bad(f"expected *, a number {field.low}-{field.high}{hint}, a range or a step")
    value = int(text)
    if not field.low <= value <= field.high:
        raise bad(f"{value} is out of range {field.low}-{field.high}")
    return value
