"""The strict field checks every document parser shares (pure).

Snapshots and strategies are read with the same rules: an unknown field is an error (a misspelt
``approvel`` must not silently drop an approval gate), a boolean is a real boolean (``'false'`` is
a string and must not read as True), and an integer is a real integer inside documented bounds.
Each parser passes its own error class, so the message and the type the caller catches stay the
parser's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError


def check_fields(
    data: Mapping[str, Any], allowed: Collection[str], where: str, error: type[InputError]
) -> None:
    """``error`` naming the unknown fields of ``data`` (at most five, each cut short)."""
    if not isinstance(allowed, AbstractSet):
        allowed = frozenset(allowed)
    if data.keys() <= allowed:
        return  # the common case: one set comparison, in C for a dict and a set
    unknown = [key for key in data if key not in allowed]
    if unknown:
        names = ", ".join(key[:40] if isinstance(key, str) else quote(key) for key in unknown[:5])
        raise error(f"{where}: unknown field(s) {names} (allowed: {', '.join(sorted(allowed))})")


def boolean(raw: object, where: str, error: type[InputError]) -> bool:
    """``raw`` if it is a real boolean."""
    if not isinstance(raw, bool):
        raise error(f"{where}: must be true or false, got {quote(raw)}")
    return raw


def integer(raw: object, where: str, minimum: int, maximum: int, error: type[InputError]) -> int:
    """``raw`` if it is an integer (not a boolean) from ``minimum`` to ``maximum``."""
    if isinstance(raw, bool) or not isinstance(raw, int) or not minimum <= raw <= maximum:
        raise error(f"{where}: must be an integer from {minimum} to {maximum:,}, got {quote(raw)}")
    return raw
