"""PodDisruptionBudgets that allow no eviction at all (pure).

A node drain evicts every pod through the Eviction API, which refuses while a PDB of the pod
allows no disruption; a drain that meets a PDB which can never allow one waits until the
rollout's drain timeout, and a worker rollout with it. This rule finds such PDBs from the PDB
object alone, before any step.

It reads ``status.expectedPods``, which the disruption controller computes (the pods its
selector matches, or the scale of their controller), rather than LISTing pods and matching
selectors again: the controller already counts, our LIST would cost a pod read per cluster, and
a second count could only disagree with the one the Eviction API enforces. What it cannot see:
a PDB whose controller has not counted yet (no status: ``expectedPods`` 0, not reported); one
that blocks only for now (``disruptionsAllowed`` 0 because pods are unhealthy, which a drain may
outwait); several PDBs on the same pods; and a drain blocked by something else (a pod without a
controller, a finalizer).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from orchestrator.domain.observed import DisruptionBlocker

_PERCENT: Final = re.compile(r"(0|[1-9][0-9]{0,2})%")


def _scaled(value: object, expected: int) -> int | None:
    """An IntOrString scaled as the disruption controller scales it (percentages round up)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _PERCENT.fullmatch(value)
        if match:
            return -(-int(match.group(1)) * expected // 100)  # ceil
    return None


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def disruption_blocker(pdb: Mapping[str, object]) -> DisruptionBlocker | None:
    """A ``DisruptionBlocker`` when ``pdb`` (a policy/v1 PodDisruptionBudget) allows no eviction.

    It does when the controller counts pods (``status.expectedPods`` > 0) and either
    ``maxUnavailable`` scales to 0 (``0`` or ``"0%"``) or ``minAvailable`` scales to at least
    the expected pods (``3`` of 3, ``"100%"``, and also ``"90%"`` of 3, which rounds up to 3).
    Anything else, or a field of a wrong type, is not a blocker: this only reports what is
    certain.
    """
    metadata, spec, status = (_mapping(pdb.get(k)) for k in ("metadata", "spec", "status"))
    expected = status.get("expectedPods")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected <= 0:
        return None
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    reason = ""
    if max_unavailable is not None:
        if _scaled(max_unavailable, expected) == 0:
            reason = f"maxUnavailable is {max_unavailable}"
    elif min_available is not None:
        wanted = _scaled(min_available, expected)
        if wanted is not None and wanted >= expected:
            reason = f"minAvailable {min_available} covers all {expected} expected pods"
    if not reason:
        return None
    return DisruptionBlocker(namespace, name, reason, expected)
