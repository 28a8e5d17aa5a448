"""Kubernetes resource quantities (pure): ``500m`` CPU, ``64Gi`` memory.

Placement compares requests against free capacity in integers (millicores, bytes) so that sums are
exact and the vectorised fast path and the explanation path agree to the unit.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from orchestrator.domain.errors import InputError

_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+]?[0-9]+(?:\.[0-9]*)?|[+]?\.[0-9]+)(?:[eE]([+-]?[0-9]+))?([a-zA-Z]*)$")


def _parse(text: object, what: str) -> Decimal:
    if isinstance(text, bool):
        raise InputError(f"invalid {what} quantity {text!r}")
    if isinstance(text, int | float):
        text = str(text)
    if not isinstance(text, str):
        raise InputError(f"invalid {what} quantity {text!r}")
    match = _QUANTITY.match(text.strip())
    if not match or match.group(3) not in _SUFFIX:
        raise InputError(f"invalid {what} quantity {text!r}: expected e.g. 500m, 2, 1Gi")
    try:
        number = Decimal(match.group(1))
        if match.group(2):
            number *= Decimal(10) ** int(match.group(2))
    except InvalidOperation as err:  # pragma: no cover - regex already guards the shape
        raise InputError(f"invalid {what} quantity {text!r}") from err
    return number * _SUFFIX[match.group(3)]


def parse_cpu_milli(text: object) -> int:
    """CPU in millicores, rounded up as the kubelet does for requests."""
    return int((_parse(text, "cpu") * 1000).to_integral_value(ROUND_CEILING))


def parse_memory_bytes(text: object) -> int:
    """Memory in bytes, rounded up."""
    return int(_parse(text, "memory").to_integral_value(ROUND_CEILING))


def format_cpu(milli: int) -> str:
    """Shortest exact CPU string: ``2`` or ``1500m``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_memory(num_bytes: int) -> str:
    """Largest binary suffix that divides exactly: ``64Gi``, ``1536Mi`` or plain bytes."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIX[suffix])
        if num_bytes and num_bytes % unit == 0:
            return f"{num_bytes // unit}{suffix}"
    return str(num_bytes)
