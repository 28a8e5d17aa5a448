"""Kubernetes resource quantities (pure): ``500m`` CPU, ``64Gi`` memory.

Placement compares requests against free capacity in integers (millicores, bytes) so that sums are
exact and the vectorised fast path and the explanation path agree to the unit.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation, Overflow

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

MAX_QUANTITY_LENGTH = 64
MAX_EXPONENT = 30
MAX_VALUE = 2**63 - 1
"""Largest millicores or bytes (Kubernetes' int64 bound): ``1e1000000`` is refused, not computed."""

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
        raise InputError(f"invalid {what} quantity {quote(text)}")
    if isinstance(text, float) and not math.isfinite(text):
        raise InputError(f"invalid {what} quantity {quote(text)}: not a finite number")
    if isinstance(text, int) and text.bit_length() > 64:
        raise InputError(f"{what} quantity {quote(text)} is out of range")
    if isinstance(text, int | float):
        text = str(text)
    if not isinstance(text, str):
        raise InputError(f"invalid {what} quantity {quote(text)}")
    if len(text) > MAX_QUANTITY_LENGTH:
        raise InputError(f"invalid {what} quantity {quote(text)}: too long")
    match = _QUANTITY.match(text.strip())
    if not match or match.group(3) not in _SUFFIX:
        raise InputError(f"invalid {what} quantity {quote(text)}: expected e.g. 500m, 2, 1Gi")
    # Decimal(10) ** 1000000 raises decimal.Overflow, and huge finite values would make every
    # later sum slow: bound the exponent first, the value after.
    if match.group(2) and abs(int(match.group(2))) > MAX_EXPONENT:
        raise InputError(f"{what} quantity {quote(text)} is out of range")
    try:
        number = Decimal(match.group(1))
        if match.group(2):
            number *= Decimal(10) ** int(match.group(2))
    except (InvalidOperation, Overflow) as err:  # pragma: no cover - bounds checked above
        raise InputError(f"invalid {what} quantity {quote(text)}") from err
    return number * _SUFFIX[match.group(3)]


def _bounded(value: Decimal, text: object, what: str) -> int:
    result = int(value.to_integral_value(ROUND_CEILING))
    if result > MAX_VALUE:
        raise InputError(f"{what} quantity {quote(text)} is out of range (at most 2^63-1 units)")
    return result


def parse_cpu_milli(text: object) -> int:
    """CPU in millicores, rounded up as the kubelet does for requests."""
    return _bounded(_parse(text, "cpu") * 1000, text, "cpu")


def parse_memory_bytes(text: object) -> int:
    """Memory in bytes, rounded up."""
    return _bounded(_parse(text, "memory"), text, "memory")


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
