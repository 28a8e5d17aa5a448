"""PodDisruptionBudgets that allow no eviction, from the PDB object alone."""

from __future__ import annotations

import pytest

from orchestrator.domain.disruption import disruption_blocker
from orchestrator.domain.observed import DisruptionBlocker


def pdb(spec: dict[str, object], expected: object = 3) -> dict[str, object]:
    status = {} if expected is None else {"expectedPods": expected}
    return {"metadata": {"namespace": "shop", "name": "web"}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("spec", "expected", "reason"),
    [
        ({"maxUnavailable": 0}, 3, "maxUnavailable is 0"),
        ({"maxUnavailable": "0%"}, 3, "maxUnavailable is 0%"),
        ({"maxUnavailable": 1}, 3, None),
        ({"maxUnavailable": "10%"}, 3, None),  # rounds up to 1
        ({"minAvailable": 3}, 3, "minAvailable 3 covers all 3 expected pods"),
        ({"minAvailable": 5}, 3, "minAvailable 5 covers all 3 expected pods"),
        ({"minAvailable": 2}, 3, None),
        ({"minAvailable": "100%"}, 3, "minAvailable 100% covers all 3 expected pods"),
        ({"minAvailable": "90%"}, 3, "minAvailable 90% covers all 3 expected pods"),
        ({"minAvailable": "50%"}, 3, None),
        ({"minAvailable": 1}, 1, "minAvailable 1 covers all 1 expected pods"),
        # No pods counted (yet): nothing to drain, or not known.
        ({"maxUnavailable": 0}, 0, None),
        ({"maxUnavailable": 0}, None, None),
        ({"maxUnavailable": 0}, True, None),
        ({"maxUnavailable": 0}, "3", None),
        # Neither field (the API defaults minAvailable 1 only when both are absent on create).
        ({}, 3, None),
        # Wrong types are not guessed at.
        ({"maxUnavailable": "zero"}, 3, None),
        ({"maxUnavailable": False}, 3, None),
        ({"minAvailable": "1000%"}, 3, None),
    ],
)
def test_disruption_blocker(spec: dict[str, object], expected: object, reason: str | None) -> None:
    found = disruption_blocker(pdb(spec, expected))
    if reason is None:
        assert found is None
    else:
        assert found == DisruptionBlocker("shop", "web", reason, int(str(expected)))


def test_malformed_objects_are_not_blockers() -> None:
    assert disruption_blocker({}) is None
    assert disruption_blocker({"spec": "x", "status": ["y"], "metadata": 1}) is None
