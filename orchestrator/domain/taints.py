"""Cluster taints and workload tolerations (pure), with Kubernetes / Karmada semantics.

The taint contract of DESIGN.md lives here as data in, data out, so the kube adapter only moves
JSON between these functions and the API server and the placement plugin shares the exact matching
rules with the orchestrator.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.domain.documents import quote
from orchestrator.domain.errors import InputError

Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
EFFECTS: tuple[Effect, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")

TAINTS_ANNOTATION = "calibrator.dev/taints"
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


@dataclass(frozen=True, slots=True)
class Toleration:
    """Kubernetes toleration: empty key with Exists tolerates everything; empty effect any effect."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Effect | Literal[""] = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ToleratesTaint rule."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def parse_effect(raw: object, where: str) -> Effect:
    """One of the three effects, or an InputError naming the place."""
    for effect in EFFECTS:
        if raw == effect:
            return effect
    raise InputError(
        f"{where}: invalid taint effect {quote(raw)}: expected one of {', '.join(EFFECTS)}"
    )


def untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    """Taints not tolerated by any toleration, in their given order."""
    return [t for t in taints if not any(tol.tolerates(t) for tol in tolerations)]


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
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: taints annotation is not JSON: {err.msg}") from err
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
