"""Durations written the way operators write them: ``30m``, ``1h30m``, ``7d`` (pure)."""

from __future__ import annotations

import re

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

MAX_DURATION_SECONDS = 366 * 86_400
"""Longest duration accepted (366 days): a workflow adds durations to its clock, and
``99999999999999999999d`` would overflow ``datetime`` there instead of failing here."""
_MAX_TEXT = 32
_PART = re.compile(r"(\d+)(d|h|m|s)")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(raw: object, where: str = "duration") -> int:
    """Seconds in ``raw``; a bare integer means seconds. Rejects anything else with one message.

    Durations are bounded by ``MAX_DURATION_SECONDS``.
    """
    total = _parse(raw, where)
    if total > MAX_DURATION_SECONDS:
        raise InputError(f"{where}: duration {quote(raw)} is longer than the limit of 366d")
    return total


def _parse(raw: object, where: str) -> int:
    if isinstance(raw, bool):
        raise InputError(f"{where}: invalid duration {quote(raw)}")
    if isinstance(raw, int):
        if raw < 0:
            raise InputError(f"{where}: duration must not be negative")
        return raw
    if not isinstance(raw, str) or not raw.strip() or len(raw) > _MAX_TEXT:
        raise InputError(f"{where}: invalid duration {quote(raw)}: expected e.g. 30m, 1h30m, 7d")
    text = raw.strip()
    if text == "0":
        return 0
    pos = 0
    total = 0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNIT[match.group(2)]
        pos = match.end()
    if pos != len(text):
        raise InputError(f"{where}: invalid duration {quote(raw)}: expected e.g. 30m, 1h30m, 7d")
    return total


def format_duration(seconds: int) -> str:
    """Inverse of ``parse_duration``: ``1h30m``; ``0s`` for zero."""
    if seconds == 0:
        return "0s"
    out = ""
    for unit, size in _UNIT.items():
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out
