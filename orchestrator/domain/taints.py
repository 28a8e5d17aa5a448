"""Cluster taints and workload tolerations (pure), with Kubernetes / Karmada semantics.

The taint contract (docs/design.md, "The upgrading taint") lives here as data in, data out, so
the kube adapter only moves JSON between these functions and the API server and the placement
plugin shares the exact matching rules with the orchestrator.

Two rules need more than string equality:

* ``Lt`` / ``Gt`` (Kubernetes 1.35, feature gate TaintTolerationComparisonOperators) compare the
  taint's value with the toleration's as 64-bit integers. A toleration's value must be a canonical
  decimal integer (validated where tolerations are parsed); a taint's value is free text, and one
  that is not a canonical integer (``0950``, ``+7``) is simply not matched by a numeric
  toleration, as in Kubernetes.
* ``tolerationSeconds`` bounds how long a NoExecute taint is tolerated: until the taint's
  ``timeAdded`` plus the seconds of the toleration that matched it (Karmada's cluster taint
  manager counts from ``timeAdded`` too). There is no clock here: callers pass ``now``, and
  without it the answer says when the toleration runs out instead of whether it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
EFFECTS: tuple[Effect, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")

TAINTS_ANNOTATION = "calibrator.dev/taints"
MAX_TAINTS_ANNOTATION = 65_536
"""Longest taints annotation read (a few hundred taints; Kubernetes allows 256 KiB of annotations)."""
SCHEDULABLE_LABEL = "calibrator.dev/schedulable"
UPGRADING_TAINT_KEY = "calibrator.dev/upgrading"


@dataclass(frozen=True, slots=True)
class Taint:
    """A cluster taint; ``time_added`` is RFC 3339 text supplied by the caller (no clock here)."""

    key: str
    effect: Effect
    value: str = ""
    time_added: str | None = None

    def to_json(self) -> dict[str, str]:
        """The annotation form: ``{key, value, effect, timeAdded}`` (timeAdded only when known)."""
        out = {"key": self.key, "value": self.value, "effect": self.effect}
        if self.time_added:
            out["timeAdded"] = self.time_added
        return out


Operator = Literal["Equal", "Exists", "Lt", "Gt"]
OPERATORS: tuple[Operator, ...] = ("Equal", "Exists", "Lt", "Gt")
NUMERIC_OPERATORS: tuple[Operator, ...] = ("Lt", "Gt")
# Go's strconv.ParseInt(s, 10, 64) range, and the canonical spelling Kubernetes validation
# requires of a numeric toleration's value: no sign but "-", no leading zeros, no "-0".
_INT64 = (-(1 << 63), (1 << 63) - 1)
_CANONICAL_INT = re.compile(r"-?[1-9][0-9]*|0")


def numeric_value(text: str) -> int | None:
    """``text`` as a 64-bit integer if it is one in canonical form, else None.

    Kubernetes (1.35, ``Toleration.ToleratesTaint``) checks both values with apimachinery's
    ``IsDecimalInteger`` before comparing: ``0200`` or ``+200`` on a taint is not an integer
    there, so a ``Gt``/``Lt`` toleration does not match it, although Go's ParseInt would read
    200. Taint values stay free text; such a value is simply never matched numerically.
    """
    if not _CANONICAL_INT.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64[0] <= number <= _INT64[1] else None


def numeric_value_error(text: str) -> str | None:
    """Why ``text`` cannot be the value of a ``Lt``/``Gt`` toleration (None when it can).

    Kubernetes validation: an integer that fits in 64 bits, written canonically, so that
    ``0950`` and ``950`` never look like different thresholds.
    """
    if not _CANONICAL_INT.fullmatch(text):
        return f"value {text!r} must be a decimal integer without sign or leading zeros"
    if numeric_value(text) is None:
        return f"value {text!r} does not fit in a 64-bit integer"
    return None


@dataclass(frozen=True, slots=True)
class Toleration:
    """Kubernetes toleration: empty key with Exists tolerates everything; empty effect any effect."""

    key: str = ""
    operator: Operator = "Equal"
    value: str = ""
    effect: Effect | Literal[""] = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint rule (``tolerationSeconds`` aside: see ``tolerance``)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        mine, theirs = numeric_value(self.value), numeric_value(taint.value)
        if mine is None or theirs is None:
            return False
        return theirs < mine if self.operator == "Lt" else theirs > mine


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How a workload's tolerations treat one taint.

    ``tolerated``: at ``now`` (without ``now``: for the time being). ``seconds`` is the
    ``tolerationSeconds`` that bounds a tolerated NoExecute taint (None: tolerated for good);
    ``until`` is when that runs out, None when the taint has no ``timeAdded`` to count from.
    """

    tolerated: bool
    seconds: int | None = None
    until: datetime | None = None

    @property
    def bounded(self) -> bool:
        """A NoExecute taint tolerated only for a while."""
        return self.tolerated and self.seconds is not None


def tolerance(
    taint: Taint, tolerations: Sequence[Toleration], now: datetime | None = None
) -> Tolerance:
    """Whether ``tolerations`` tolerate ``taint`` at ``now``, and for how long.

    As Kubernetes' taint eviction does, the first toleration that matches a taint is the one
    used for it: its ``tolerationSeconds`` (NoExecute only) bound the toleration, counted from
    the taint's ``timeAdded``; 0 means evict at once. A taint without ``timeAdded`` gives no
    time to count from: it stays tolerated, with ``until`` None.
    """
    used = next((t for t in tolerations if t.tolerates(taint)), None)
    if used is None:
        return Tolerance(False)
    if taint.effect != "NoExecute" or used.toleration_seconds is None:
        return Tolerance(True)
    seconds = max(0, used.toleration_seconds)
    added = parse_time(taint.time_added) if taint.time_added else None
    if added is None:
        return Tolerance(seconds > 0, seconds)
    until = added + timedelta(seconds=seconds)
    return Tolerance(now is None or now < until, seconds, until)


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time (``2026-01-02T03:04:05Z``) as an aware datetime, None if unreadable."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, to the second (Kubernetes' metav1.Time form)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_effect(raw: object, where: str) -> Effect:
    """One of the three effects, or an InputError naming the place."""
    for effect in EFFECTS:
        if raw == effect:
            return effect
    raise InputError(
        f"{where}: invalid taint effect {quote(raw)}: expected one of {', '.join(EFFECTS)}"
    )


def untolerated(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], now: datetime | None = None
) -> list[Taint]:
    """Taints not tolerated at ``now`` (see ``tolerance``), in their given order."""
    return [t for t in taints if not tolerance(t, tolerations, now).tolerated]


def eviction_time(
    taints: Iterable[Taint], tolerations: Sequence[Toleration]
) -> tuple[datetime | None, int] | None:
    """When the first bounded NoExecute toleration runs out: (time or None if unknown, seconds).

    None when nothing bounds the workload's stay (no NoExecute taint tolerated for a while).
    Of several bounded taints the earliest known end wins; unknown ends come last.
    """
    ends = [
        (found.until, found.seconds or 0)
        for taint in taints
        if taint.effect == "NoExecute" and (found := tolerance(taint, tolerations)).bounded
    ]
    if not ends:
        return None
    return min(ends, key=lambda end: (end[0] is None, end[0] or datetime.min.replace(tzinfo=UTC)))


def blocks_scheduling(taint: Taint) -> bool:
    """NoSchedule and NoExecute keep new work off; PreferNoSchedule only lowers the score."""
    return taint.effect != "PreferNoSchedule"


def schedulable_label(taints: Iterable[Taint]) -> str:
    """Value of ``calibrator.dev/schedulable``: "false" while any hard taint is present."""
    return "false" if any(blocks_scheduling(t) for t in taints) else "true"


def encode_taints(taints: Iterable[Taint]) -> str:
    """Annotation text, sorted by (key, effect) so that rewriting the same set is a no-op patch."""
    ordered = sorted(taints, key=lambda t: (t.key, t.effect))
    return json.dumps([t.to_json() for t in ordered], separators=(",", ":"))


def decode_taints(text: str | None, where: str = TAINTS_ANNOTATION) -> tuple[Taint, ...]:
    """Parse the annotation; a malformed one is an InputError naming the object."""
    if not text:
        return ()
    if not isinstance(text, str) or len(text) > MAX_TAINTS_ANNOTATION:
        raise InputError(
            f"{where}: taints annotation is not a JSON list of at most "
            f"{MAX_TAINTS_ANNOTATION:,} characters"
        )
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: taints annotation is not JSON: {err.msg}") from err
    except RecursionError:  # a foreign annotation of 100,000 nested brackets
        raise InputError(f"{where}: taints annotation nests too deep") from None
    if not isinstance(raw, list):
        raise InputError(f"{where}: taints annotation must be a JSON list")
    return tuple(taint_from_mapping(item, f"{where}[{i}]") for i, item in enumerate(raw))


def taint_from_mapping(item: object, where: str) -> Taint:
    """A taint from ``{key, value, effect, timeAdded}``."""
    if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not item["key"]:
        raise InputError(f"{where}: a taint needs a non-empty string 'key'")
    value = item.get("value", "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InputError(f"{where}: taint value must be a string")
    added = item.get("timeAdded")
    if isinstance(added, datetime):  # YAML reads an unquoted timestamp as a datetime
        added = format_time(added if added.tzinfo else added.replace(tzinfo=UTC))
    if added and parse_time(str(added)) is None:
        raise InputError(f"{where}: timeAdded {added!r} is not an RFC 3339 time")
    return Taint(
        key=item["key"],
        value=value,
        effect=parse_effect(item.get("effect"), where),
        time_added=str(added) if added else None,
    )


def with_taint(taints: Sequence[Taint], taint: Taint) -> tuple[Taint, ...]:
    """Add or replace the taint with the same (key, effect); keeps the original timeAdded.

    Keeping the first timeAdded makes a retried "add taint" activity idempotent.
    """
    for existing in taints:
        if (existing.key, existing.effect) == (
            taint.key,
            taint.effect,
        ) and existing.value == taint.value:
            return tuple(taints)
    kept = [t for t in taints if (t.key, t.effect) != (taint.key, taint.effect)]
    return (*kept, taint)


def without_taint(
    taints: Sequence[Taint], key: str, effect: Effect | None = None
) -> tuple[Taint, ...]:
    """Remove taints with ``key`` (and ``effect`` when given)."""
    return tuple(t for t in taints if not (t.key == key and (effect is None or t.effect == effect)))
